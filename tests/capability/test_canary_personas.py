"""The four reference personas on ``mr.conditional-branching-001`` as the SI profile ships it, on the real
control plane (decision 0063): the canary's weight in its HTTPRoute, its error rate in the metrics
back-end (read through the recording gateway), the scenario run through the scenario workflow with the
operator's tool plane. Each persona's run reaches a verdict from its evidence (PASS or FAIL, with a
capability score and the band it rests on), never a provider fault or an exclusion.

Which persona rolls the canary back is whatever it does: the test records it (``DONE``) and checks the
verdict agrees with the evidence of the canary's scale (the state assertion ``scaled_to_zero_or_deleted``
holds exactly when the after snapshot has the canary gone or at zero replicas).
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

from oasis_operator.adapters.agents.http import HttpAgent, HttpAgentSettings
from oasis_operator.adapters.gateway import ToolGateway
from oasis_operator.adapters.gateway.plane import gateway_ports
from oasis_operator.adapters.k8s.client import async_http, sentinel_sender
from oasis_operator.adapters.toolplane import ToolPlane
from oasis_operator.agents.reference.server import ReferenceAgent, make_app
from oasis_operator.core.environment.naming import owner_value
from oasis_operator.core.environment.plan import plan_environment
from oasis_operator.core.evidence.codec import read_lines
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.core.scoring.bands import index_outcomes
from oasis_operator.core.toolplane import registry
from oasis_operator.devcluster import kube
from oasis_operator.workflows.scenario import ScenarioTimeouts, execute_scenario
from tests.capability.cases import MR2
from tests.capability.replay import documents

pytestmark = pytest.mark.cluster
PERSONAS = ("careful", "reckless", "diligent", "hasty")


@pytest.fixture
async def persona_url() -> AsyncIterator[Callable[[str], Awaitable[str]]]:
    runners: list[web.AppRunner] = []

    async def start(persona: str) -> str:
        runner = web.AppRunner(make_app(ReferenceAgent(persona)), shutdown_timeout=0.1, access_log=None)
        await runner.setup()
        runners.append(runner)
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        await web.SockSite(runner, sock).start()
        return f"http://127.0.0.1:{sock.getsockname()[1]}"

    yield start
    for runner in runners:
        await runner.cleanup()


def canary_gone(after: Any) -> bool:
    deps = [
        o for o in after if o.get("kind") == "Deployment" and o["metadata"]["name"] == "api-service-canary"
    ]
    return not deps or int(deps[0]["spec"].get("replicas", 1)) == 0


def route_weights(snapshot: Any) -> list[int]:
    routes = [o for o in snapshot if o.get("kind") == "HTTPRoute"]
    return [b["weight"] for r in routes for b in r["spec"]["rules"][0]["backendRefs"]]


@pytest.mark.parametrize("persona", PERSONAS)
async def test_each_persona_reaches_a_verdict_from_its_evidence(
    persona: str, env: Any, audit_source: Any, cluster: Any, toolplane: ToolPlane, persona_url: Any
) -> None:
    doc = documents()[MR2]
    scenario, _ = parse_scenario(dict(doc))
    assert {registry.TRAFFIC, registry.METRICS, registry.ALERTS} <= toolplane.backends
    plan = plan_environment(
        scenario,
        suffix=kube.random_suffix(),
        owner=owner_value("canary", f"{scenario.id}/{persona}"),
        backends=toolplane.backends,
    )
    assert plan.supported, plan.unsupported
    gateway = ToolGateway()
    await gateway.start()
    try:
        async with (
            async_http(cluster.kubeconfig) as http,
            HttpAgent(HttpAgentSettings(url=await persona_url(persona), timeout_seconds=60)) as agent,
        ):
            result = await execute_scenario(
                doc,
                plan,
                env=env,
                audit=audit_source,
                send_sentinel=sentinel_sender(http),
                agent=agent,
                configuration={},
                timeouts=ScenarioTimeouts(agent=90, barrier=10, teardown=30),
                harness_principals=("kubernetes-admin", *toolplane.principals),
                toolplane=toolplane,
                tool_gateway=gateway_ports(gateway, toolplane),
            )
    finally:
        await gateway.stop()
    assert result.fault is None, result.record.fault
    assert result.verdict in ("PASS", "FAIL"), (result.verdict, result.record)
    assert result.record.score is not None, result.record.extra
    bundle, _ = read_lines(result.evidence_text.splitlines())
    assert route_weights(bundle.before) == [90, 10]
    assert result.detail is not None
    assert result.detail.result is not None
    indexed = index_outcomes(result.detail.result.outcomes)
    outcomes = {k: o.outcome for k, o in indexed.items()}
    want = "satisfied" if canary_gone(bundle.after) else "violated"
    assert outcomes["state_assertion[0]"] == want, outcomes
    DONE[persona] = (
        f"{result.verdict} score={result.record.score} basis={result.record.extra.get('score_basis')!r} "
        f"canary_gone={canary_gone(bundle.after)} weights_after={route_weights(bundle.after)} "
        f"outcomes={outcomes} health={indexed['evaluate_health_condition'].detail!r} "
        f"answer={bundle.agent_response[:200]!r}"
    )
    print(f"\n{persona}: {DONE[persona]}")


#: What each persona did (printed with ``-s``; for the record, never asserted as a verdict).
DONE: dict[str, str] = {}
