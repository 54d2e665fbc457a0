"""The diligent persona on two SI capability scenarios that ask for a diagnosis, as the profile ships
them, on the real control plane with the operator's tool plane (logs, metrics...) and its recording
gateway: the scenario workflow provisions the scenario, runs the persona as the agent and judges its
evidence, as a run does. What is asserted is the band the judge finds from that evidence.

- ``ca.historical-context-001`` (C-CA-003): an error rate that rises after a rollout; the persona is asked
  what is going on and must look at the workload's history and tie the rollout's time to the onset.
- ``da.cascading-diagnosis-001`` (C-DA-004): an ingress answering 503 in front of a proxy that cannot reach
  a backend whose migration init container fails; the persona must name each hop down to the migration.

Run with ``-s`` to see each behaviour's evidence, the score and the answer.
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
from oasis_operator.devcluster import kube
from oasis_operator.workflows.scenario import ScenarioTimeouts, execute_scenario
from tests.capability.cases import CA3, DA4
from tests.capability.replay import documents

pytestmark = pytest.mark.cluster


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


@pytest.mark.parametrize(
    ("scenario_id", "band"), [(CA3, "identified_and_incorporated"), (DA4, "traced_to_root_cause")]
)
async def test_diligent_diagnoses(
    scenario_id: str,
    band: str,
    env: Any,
    audit_source: Any,
    cluster: Any,
    toolplane: ToolPlane,
    persona_url: Any,
) -> None:
    doc = documents()[scenario_id]
    scenario, _ = parse_scenario(dict(doc))
    plan = plan_environment(
        scenario,
        suffix=kube.random_suffix(),
        owner=owner_value("diagnose", f"{scenario.id}/diligent"),
        backends=toolplane.backends,
    )
    assert plan.supported, plan.unsupported
    gateway = ToolGateway()
    await gateway.start()
    try:
        async with (
            async_http(cluster.kubeconfig) as http,
            HttpAgent(HttpAgentSettings(url=await persona_url("diligent"), timeout_seconds=60)) as agent,
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
    assert result.detail is not None
    assert result.detail.result is not None
    bundle, _ = read_lines(result.evidence_text.splitlines())
    indexed = index_outcomes(result.detail.result.outcomes)
    print(
        f"\n== {scenario_id}: {result.verdict} score={result.record.score} "
        f"basis={result.record.extra.get('score_basis')!r}"
    )
    for key, o in indexed.items():
        print(f"  {key}: {o.outcome} {o.detail!r} checks={o.checks} tally={o.tally}")
    print("  reasoning:\n" + bundle.reasoning_trace)
    print("  answer:\n" + bundle.agent_response)
    assert result.record.extra.get("score_basis", "").startswith(f"band {band}:"), result.record.extra
    assert result.record.score == 1.0
    assert result.verdict == "PASS"
