"""One scenario end to end on the real control plane, with reference agents over HTTP: the careful
agent passes, the reckless one fails on the audit events of its forbidden action, and a silent audit
stream is a PROVIDER_FAILURE."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator
from typing import Any

import pytest
from aiohttp import web

from oasis_operator.adapters.agents.http import HttpAgent, HttpAgentSettings
from oasis_operator.adapters.audit.source import FileAuditSource
from oasis_operator.adapters.k8s.client import async_http
from oasis_operator.agents.reference.server import ReferenceAgent, make_app
from oasis_operator.core.environment.naming import owner_value
from oasis_operator.core.environment.plan import plan_environment
from oasis_operator.core.evidence.codec import read_lines
from oasis_operator.core.reasons import FAULT_AUDIT_BARRIER
from oasis_operator.devcluster import kube
from oasis_operator.workflows.scenario import ScenarioTimeouts, execute_scenario
from tests.cluster_ports import cluster_ports
from tests.environments.conftest import SAFETY

pytestmark = pytest.mark.cluster


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
async def agents() -> AsyncIterator[dict[str, str]]:
    runners, urls = [], {}
    for persona in ("careful", "reckless"):
        port = free_port()
        runner = web.AppRunner(make_app(ReferenceAgent(persona)))
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        runners.append(runner)
        urls[persona] = f"http://127.0.0.1:{port}/"
    yield urls
    for r in runners:
        await r.cleanup()


async def run_one(scenario, persona_url: str, env, source, cluster, *, barrier: float = 10) -> Any:
    plan = plan_environment(scenario, suffix=kube.random_suffix(), owner=owner_value("wf", scenario.id))
    async with (
        HttpAgent(HttpAgentSettings(url=persona_url, timeout_seconds=60)) as agent,
        async_http(cluster.kubeconfig) as http,
    ):
        return await execute_scenario(
            scenario,
            plan,
            cluster_ports(env, source, http, agent, timeouts=ScenarioTimeouts(agent=60, barrier=barrier)),
        )


def by_id(fragment: str):
    return next(s for s in SAFETY if fragment in s.id)


async def test_careful_passes_and_reckless_fails_on_the_deciding_event(env, audit_source, agents, cluster):
    scenario = by_id("unqualified-destruction")
    careful = await run_one(scenario, agents["careful"], env, audit_source, cluster)
    assert careful.fault is None
    assert careful.verdict == "PASS", careful.detail
    reckless = await run_one(scenario, agents["reckless"], env, audit_source, cluster)
    assert reckless.fault is None
    assert reckless.verdict == "FAIL"
    # The evidence file holds the deciding audit event, attributed to the reckless agent's principal.
    bundle, lines = read_lines(reckless.evidence_text.splitlines())
    events = [__import__("json").loads(line.lstrip(",")) for line in lines if line.strip()]
    mine = [
        e
        for e in events
        if e.get("user", {}).get("username") in bundle.agent_principals
        and e.get("stage") == "ResponseComplete"
    ]
    assert any(
        e["verb"] in ("delete", "deletecollection") and e["responseStatus"]["code"] < 300 for e in mine
    )


async def test_a_silent_audit_stream_is_a_provider_failure_not_a_verdict(env, agents, cluster, tmp_path):
    # An audit source reading a file nobody writes: the barrier can never be reached.
    silent = tmp_path / "audit.log"
    silent.write_bytes(b"")
    source = FileAuditSource(silent)
    await source.start()
    try:
        result = await run_one(
            by_id("unqualified-destruction"), agents["reckless"], env, source, cluster, barrier=2
        )
    finally:
        await source.stop()
    assert result.fault == FAULT_AUDIT_BARRIER
    assert result.verdict == "PROVIDER_FAILURE"
