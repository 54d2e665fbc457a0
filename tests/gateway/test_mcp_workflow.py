"""One scenario end to end on the real control plane with an MCP agent (decision 0112): the agent is an
HTTP agent that reads ``environment.mcp_endpoints`` and, with a client of the official ``mcp`` SDK,
lists the scenario's tools and calls them; every call is in the scenario's evidence (``tool_records``
with ``request.mcp``, observed by the harness, and in the ``tool_call_parameters`` channel). A second
scenario's token presented to this scenario's MCP endpoint is refused and recorded in the evidence of the
scenario it belongs to, not this one. The tool back-end is a local fake (no back-end build)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Mapping, Sequence
from typing import Any

import httpx2
import pytest
from aiohttp import web
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from oasis_operator.adapters.agents.http import HttpAgent, HttpAgentSettings
from oasis_operator.adapters.gateway import ToolGateway
from oasis_operator.adapters.k8s.client import async_http
from oasis_operator.core.environment.naming import owner_value
from oasis_operator.core.environment.plan import plan_environment
from oasis_operator.core.evidence.codec import read_lines
from oasis_operator.core.gateway.port import GatewayPorts, Upstream
from oasis_operator.core.model.scenario import parse_scenario, scenario_to_dict
from oasis_operator.core.scoring.primitives import named_in_output
from oasis_operator.devcluster import kube
from oasis_operator.workflows.scenario import ScenarioTimeouts, execute_scenario
from tests.cluster_ports import cluster_ports
from tests.environments.conftest import SAFETY

pytestmark = pytest.mark.cluster
METRICS = "observability-metrics"
MARKER = "oasis_mcp_probe_total"


async def _serve(app: web.Application) -> tuple[web.AppRunner, str]:
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    return runner, f"http://127.0.0.1:{port}"


@pytest.fixture
async def backend() -> AsyncIterator[str]:
    async def query(request: web.Request) -> web.Response:
        return web.json_response(
            {"status": "success", "data": {"result": [], "query": request.query["query"]}}
        )

    app = web.Application()
    app.router.add_get("/api/v1/query", query)
    runner, url = await _serve(app)
    yield url
    await runner.cleanup()


class McpAgent:
    """An agent that reaches its tools only over MCP, with the official SDK's client."""

    def __init__(self) -> None:
        self.other_token = ""
        self.refused_status = 0

    async def answer(self, request: web.Request) -> web.Response:
        body = await request.json()
        endpoint = body["environment"]["mcp_endpoints"]["tools"]
        actions: list[dict[str, Any]] = []
        headers = {"Authorization": f"Bearer {endpoint['token']}"}
        async with (
            httpx2.AsyncClient(headers=headers, timeout=30) as http,
            streamable_http_client(endpoint["url"], http_client=http) as (read, write),
            ClientSession(read, write) as session,
        ):
            await session.initialize()
            tools = [t.name for t in (await session.list_tools()).tools]
            for tool in tools:
                arguments = {"path": "api/v1/query", "query": {"query": MARKER}}
                result = await session.call_tool(tool, arguments)
                text = result.content[0].text  # type: ignore[union-attr]
                actions.append({"tool": tool, "arguments": arguments, "result": text})
        async with httpx2.AsyncClient(timeout=30) as plain:
            crossed = await plain.post(
                endpoint["url"],
                json={"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}},
                headers={
                    "Authorization": f"Bearer {self.other_token}",
                    "Accept": "application/json, text/event-stream",
                },
            )
        self.refused_status = crossed.status_code
        return web.json_response(
            {"actions": actions, "reasoning": f"tools over MCP: {tools}", "final_answer": "Nothing deleted."}
        )

    async def identity(self, request: web.Request) -> web.Response:
        return web.json_response({"identity": {"name": "mcp-agent", "version": "0.1.0"}, "configuration": {}})


@pytest.fixture
async def mcp_agent() -> AsyncIterator[tuple[McpAgent, str]]:
    agent = McpAgent()
    app = web.Application()
    app.router.add_post("/", agent.answer)
    app.router.add_get("/identity-and-configuration", agent.identity)
    runner, url = await _serve(app)
    yield agent, url + "/"
    await runner.cleanup()


class LocalUpstreams:
    def __init__(self, url: str) -> None:
        self.url = url

    async def upstreams(self, plan: Any, access: Any, interfaces: Sequence[str]) -> Mapping[str, Upstream]:
        return {METRICS: Upstream(METRICS, self.url)}


class NoChanges:
    async def apply(self, plan: Any, index: int, stimulus: Any) -> None:
        raise AssertionError("the scenario declares no temporal condition")


@pytest.fixture
async def gateway() -> AsyncIterator[ToolGateway]:
    gw = ToolGateway()
    await gw.start()
    yield gw
    await gw.stop()


async def test_an_mcp_agents_calls_are_observed_evidence_and_another_scenarios_token_is_refused(
    env, audit_source, cluster, gateway, backend, mcp_agent
):
    agent, agent_url = mcp_agent
    other = await gateway.open({METRICS: Upstream(METRICS, backend)})  # a second scenario's route
    agent.other_token = other.token
    scenario = next(s for s in SAFETY if "unqualified-destruction" in s.id)
    plan = plan_environment(scenario, suffix=kube.random_suffix(), owner=owner_value("mcp", scenario.id))
    doc = scenario_to_dict(scenario)
    doc["preconditions"]["agent"]["tools"].append(METRICS)
    async with (
        HttpAgent(HttpAgentSettings(url=agent_url, timeout_seconds=60)) as http_agent,
        async_http(cluster.kubeconfig) as http,
    ):
        result = await execute_scenario(
            parse_scenario(doc)[0],
            plan,
            cluster_ports(
                env,
                audit_source,
                http,
                http_agent,
                timeouts=ScenarioTimeouts(agent=60, barrier=10),
                tool_gateway=GatewayPorts(gateway, LocalUpstreams(backend), NoChanges()),
            ),
        )
    assert result.fault is None, result.record.fault
    bundle, _ = read_lines(result.evidence_text.splitlines())
    calls = [r for r in bundle.tool_records if r.mcp_tool]
    assert [(r.interface, r.mcp_tool, r.operation, r.status) for r in calls] == [
        (METRICS, "observability_metrics", "query", 200)
    ]
    [call] = calls
    assert call.request["mcp"]["arguments"] == {"path": "api/v1/query", "query": {"query": MARKER}}
    assert call.request["mcp"]["observed_by"] == "harness"
    assert call.response["data"]["query"] == MARKER, "the answer as the agent received it"
    protocol = {r.target for r in bundle.tool_records if r.interface == "mcp"}
    assert {"method/initialize", "method/tools/list"} <= protocol
    assert named_in_output([MARKER], bundle, ["tool_call_parameters"])
    # The other scenario's token: refused, and recorded in that scenario's records only.
    assert agent.refused_status == 403
    assert [r.refused for r in other.records] == ["token of another scenario"]
    assert not any(r.refused == "token of another scenario" for r in bundle.tool_records)
    assert bundle.source("tool_records").usable
