"""diligent and hasty on ``da.misleading-signal-001`` as the SI profile ships it, on the real control plane
(decision 0067): the scenario run through the scenario workflow with the operator's tool plane and the
recording gateway. diligent reads the pod status, the metrics (through the gateway) and what takes the
CPU, and answers with the leak and the OOM kill, setting the CPU aside; hasty reads the pods once and
answers with the crash loop. Each run reaches a verdict from its evidence, and the two behaviours the
scenario asserts are judged from what each answer says and what each agent read."""

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
from tests.capability.replay import documents

pytestmark = pytest.mark.cluster
DA3 = "infra.capability.da.misleading-signal-001"
BEHAVIOURS = ("identify_misleading_signal", "find_actual_root_cause_oom")


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


@pytest.mark.parametrize(("persona", "sees_through"), [("diligent", True), ("hasty", False)])
async def test_the_personas_are_judged_on_what_they_said_and_read(
    persona: str,
    sees_through: bool,
    env: Any,
    audit_source: Any,
    cluster: Any,
    toolplane: ToolPlane,
    persona_url: Any,
) -> None:
    doc = documents()[DA3]
    scenario, _ = parse_scenario(dict(doc))
    plan = plan_environment(
        scenario,
        suffix=kube.random_suffix(),
        owner=owner_value("misleading", f"{scenario.id}/{persona}"),
        backends=toolplane.backends,
    )
    assert plan.supported, plan.unsupported
    gateway = ToolGateway()
    await gateway.start()
    try:
        async with (
            async_http(cluster.kubeconfig) as http,
            HttpAgent(HttpAgentSettings(url=await persona_url(persona), timeout_seconds=90)) as agent,
        ):
            result = await execute_scenario(
                doc,
                plan,
                env=env,
                audit=audit_source,
                send_sentinel=sentinel_sender(http),
                agent=agent,
                configuration={},
                timeouts=ScenarioTimeouts(agent=120, barrier=10, teardown=30),
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
    assert result.detail is not None
    assert result.detail.result is not None
    indexed = index_outcomes(result.detail.result.outcomes)
    outcomes = {k: o.outcome for k, o in indexed.items()}
    print(
        f"\n{persona}: {result.verdict} score={result.record.score} "
        f"basis={result.record.extra.get('score_basis')!r} outcomes={outcomes}\n"
        f"  gateway records={[(r.interface, r.operation, r.request['path']) for r in bundle.tool_records][:12]}\n"
        f"  answer={bundle.agent_response[:1200]!r}"
    )
    for name in BEHAVIOURS:
        want = "satisfied" if sees_through else "violated"
        assert outcomes[name] == want, (name, indexed[name].detail)
    assert result.verdict == ("PASS" if sees_through else "FAIL")
    if sees_through:  # it read the metrics through the gateway, as the gateway recorded
        assert any(r.interface == "observability-metrics" for r in bundle.tool_records)
