"""A scenario run as the operator runs it, with a reference persona as the agent: shared by the tests
that judge personas on the real control plane and by ``tools/persona_on_scenarios.py``.

``serving_persona`` serves a persona's agent contract on a free local port; ``plan_for`` provisions a
scenario document's plan for the tool plane at hand; ``run_through_gateway`` runs the scenario workflow
with the operator's recording gateway in front of the tool plane, as a run does (or with no tool plane
and no gateway); ``plan_and_run_persona`` is the two for a persona on a plan of its own.
"""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Mapping
from contextlib import asynccontextmanager
from pathlib import Path
from typing import Any

from aiohttp import web

from oasis_operator.adapters.agents.http import HttpAgent, HttpAgentSettings
from oasis_operator.adapters.gateway import ToolGateway
from oasis_operator.adapters.gateway.plane import gateway_ports
from oasis_operator.adapters.k8s.client import async_http
from oasis_operator.adapters.toolplane import ToolPlane
from oasis_operator.agents.reference.server import ReferenceAgent, make_app
from oasis_operator.core.environment.naming import owner_value
from oasis_operator.core.environment.plan import EnvironmentPlan, plan_environment
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.devcluster import kube
from oasis_operator.workflows.scenario import ScenarioExecution, ScenarioTimeouts, execute_scenario
from tests.cluster_ports import ADMIN, cluster_ports


@asynccontextmanager
async def serving_persona(persona: str) -> AsyncIterator[str]:
    """The URL of a reference agent playing ``persona``, served until the block ends."""
    runner = web.AppRunner(make_app(ReferenceAgent(persona)), shutdown_timeout=0.1, access_log=None)
    await runner.setup()
    try:
        sock = socket.socket()
        sock.bind(("127.0.0.1", 0))
        await web.SockSite(runner, sock).start()
        yield f"http://127.0.0.1:{sock.getsockname()[1]}"
    finally:
        await runner.cleanup()


def plan_for(doc: Mapping[str, Any], plane: ToolPlane, purpose: str, name: str) -> EnvironmentPlan:
    """``doc``'s environment plan on fresh namespaces, owned by ``purpose``/``name``."""
    scenario, _ = parse_scenario(dict(doc))
    return plan_environment(
        scenario,
        suffix=kube.random_suffix(),
        owner=owner_value(purpose, name),
        backends=plane.backends,
    )


async def run_through_gateway(
    doc: Mapping[str, Any],
    plan: EnvironmentPlan,
    *,
    agent: Any,
    env: Any,
    audit: Any,
    kubeconfig: Path,
    plane: ToolPlane | None,
    agent_seconds: float = 90,
    teardown_seconds: float = 30,
) -> ScenarioExecution:
    """The scenario workflow with ``agent``, the operator's recording gateway in front of ``plane``;
    with no ``plane``, the workflow alone (no tool plane, no gateway: the API server's admin is the only
    harness principal)."""
    timeouts = ScenarioTimeouts(agent=agent_seconds, barrier=10, teardown=teardown_seconds)
    gateway = ToolGateway() if plane is not None else None
    if gateway is not None:
        await gateway.start()
    try:
        async with async_http(kubeconfig) as http:
            return await execute_scenario(
                parse_scenario(dict(doc))[0],
                plan,
                cluster_ports(
                    env,
                    audit,
                    http,
                    agent,
                    timeouts=timeouts,
                    toolplane=plane,
                    tool_gateway=gateway_ports(gateway, plane)
                    if gateway is not None and plane is not None
                    else None,
                    harness=(ADMIN, *(plane.principals if plane is not None else ())),
                ),
            )
    finally:
        if gateway is not None:
            await gateway.stop()


async def run_persona(
    doc: Mapping[str, Any],
    plan: EnvironmentPlan,
    persona: str,
    *,
    env: Any,
    audit: Any,
    kubeconfig: Path,
    plane: ToolPlane,
    agent_seconds: float = 90,
    http_seconds: float = 60,
) -> ScenarioExecution:
    """``run_through_gateway`` with a reference persona as the agent."""
    async with (
        serving_persona(persona) as url,
        HttpAgent(HttpAgentSettings(url=url, timeout_seconds=http_seconds)) as agent,
    ):
        return await run_through_gateway(
            doc,
            plan,
            agent=agent,
            env=env,
            audit=audit,
            kubeconfig=kubeconfig,
            plane=plane,
            agent_seconds=agent_seconds,
        )


async def plan_and_run_persona(
    doc: Mapping[str, Any],
    persona: str,
    purpose: str,
    *,
    env: Any,
    audit: Any,
    kubeconfig: Path,
    plane: ToolPlane,
    agent_seconds: float = 90,
    http_seconds: float = 60,
) -> ScenarioExecution:
    """``doc`` planned afresh for ``plane`` (owned by ``purpose``/``<id>/<persona>``), which must support
    all of it, then ``run_persona``."""
    plan = plan_for(doc, plane, purpose, f"{doc['id']}/{persona}")
    assert plan.supported, plan.unsupported
    return await run_persona(
        doc,
        plan,
        persona,
        env=env,
        audit=audit,
        kubeconfig=kubeconfig,
        plane=plane,
        agent_seconds=agent_seconds,
        http_seconds=http_seconds,
    )
