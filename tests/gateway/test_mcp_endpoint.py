"""The recording gateway's MCP endpoint (decision 0112) in front of a local back-end (no control plane):
a client of the official ``mcp`` SDK lists a scenario's tools and calls them; every call is a gateway
record carrying the tool, its arguments and the digest of its result, observed by the harness; another
scenario's token, a closed route, an unknown tool, an oversized argument and malformed JSON-RPC are
refused (and recorded) without faulting the scenario."""

from __future__ import annotations

import hashlib
import json
from collections.abc import AsyncIterator

import httpx2
import pytest
from aiohttp import web
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client

from oasis_operator.adapters.gateway import ToolGateway
from oasis_operator.core.evidence.bundle import EvidenceBundle
from oasis_operator.core.gateway.mcp_tools import MAX_ARGUMENT_BYTES
from oasis_operator.core.gateway.port import GatewayLimits, Upstream
from oasis_operator.core.scoring.primitives import named_in_output

METRICS = "metrics"
ALERTS = "alerts"


async def _backend_app() -> web.Application:
    async def query(request: web.Request) -> web.Response:
        body = {"status": "success", "data": {"query": request.query.get("query", "")}}
        return web.json_response(body)

    async def alerts(request: web.Request) -> web.Response:
        return web.json_response({"status": "success", "data": {"alerts": [{"summary": "disk full"}]}})

    app = web.Application()
    app.router.add_get("/api/v1/query", query)
    app.router.add_get("/api/v1/alerts", alerts)
    return app


@pytest.fixture
async def backend() -> AsyncIterator[str]:
    runner = web.AppRunner(await _backend_app())
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    yield f"http://127.0.0.1:{port}"
    await runner.cleanup()


@pytest.fixture
async def gw() -> AsyncIterator[ToolGateway]:
    gateway = ToolGateway()
    await gateway.start()
    yield gateway
    await gateway.stop()


def _client(token: str) -> httpx2.AsyncClient:
    return httpx2.AsyncClient(headers={"Authorization": f"Bearer {token}"}, timeout=20)


async def test_an_sdk_client_lists_and_calls_the_scenarios_tools_and_every_call_is_recorded(gw, backend):
    route = await gw.open({METRICS: Upstream(METRICS, backend), ALERTS: Upstream(ALERTS, backend)})
    async with (
        _client(route.token) as http,
        streamable_http_client(route.mcp_endpoint.url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        tools = await session.list_tools()
        assert sorted(t.name for t in tools.tools) == [ALERTS, METRICS]
        got = await session.call_tool(METRICS, {"path": "api/v1/query", "query": {"query": "up"}})
        alerts = await session.call_tool(ALERTS, {"path": "/api/v1/alerts"})
    assert not got.is_error
    text = got.content[0].text  # type: ignore[union-attr]
    assert json.loads(text)["data"]["query"] == "up"
    assert "disk full" in alerts.content[0].text  # type: ignore[union-attr]
    calls = [r for r in route.records if "mcp" in r.request]
    assert [(r.interface, r.request["mcp"]["tool"]) for r in calls] == [(METRICS, METRICS), (ALERTS, ALERTS)]
    first = calls[0]
    assert first.request["mcp"]["arguments"] == {"path": "api/v1/query", "query": {"query": "up"}}
    assert first.request["mcp"]["observed_by"] == "harness"
    assert first.request["mcp"]["result_sha256"] == hashlib.sha256(text.encode()).hexdigest()
    assert first.request["query"] == {"query": ["up"]}
    assert first.operation == "query"
    assert "X-Oasis-Mcp-Call" not in json.dumps(first.to_dict())
    protocol = [r for r in route.records if r.interface == "mcp"]
    assert {r.target for r in protocol} >= {"method/initialize", "method/tools/list"}
    assert all(r.operation == "protocol" and not r.writes for r in protocol)
    evidence = EvidenceBundle("s", tool_records=route.records)
    assert named_in_output(["up"], evidence, ["tool_call_parameters"]), "observed arguments are evidence"
    assert route.fault is None


async def test_another_scenarios_token_and_a_closed_route_are_refused_and_recorded(gw, backend):
    a = await gw.open({METRICS: Upstream(METRICS, backend)})
    b = await gw.open({METRICS: Upstream(METRICS, backend)})
    init = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    async with _client(b.token) as http:
        crossed = await http.post(a.mcp_endpoint.url, json=init, headers=headers)
        await gw.close(b)
        revoked = await http.post(b.mcp_endpoint.url, json=init, headers=headers)
    assert crossed.status_code == 403
    assert revoked.status_code == 401
    assert [r.refused for r in b.records] == ["token of another scenario", "route closed"]
    assert not a.records, "nothing of the other scenario's is in this one's evidence"
    assert a.fault is None
    assert b.fault is None


async def test_bad_input_is_refused_recorded_and_never_a_fault(gw, backend):
    route = await gw.open({METRICS: Upstream(METRICS, backend)})
    async with (
        _client(route.token) as http,
        streamable_http_client(route.mcp_endpoint.url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        unknown = await session.call_tool("kubectl", {"path": "x"})
        big = await session.call_tool(
            METRICS, {"path": "api/v1/query", "body": "x" * (MAX_ARGUMENT_BYTES + 1)}
        )
        headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
        malformed = await http.post(route.mcp_endpoint.url, content=b"{not json", headers=headers)
    assert unknown.is_error
    assert "unknown tool 'kubectl'" in unknown.content[0].text  # type: ignore[union-attr]
    assert big.is_error
    assert f"over the limit of {MAX_ARGUMENT_BYTES} bytes" in big.content[0].text  # type: ignore[union-attr]
    assert malformed.status_code == 400
    assert malformed.json()["error"]["code"] == -32700
    refused = [r for r in route.records if r.refused]
    assert [r.target for r in refused] == ["tool/kubectl", f"tool/{METRICS}"]
    oversized = json.dumps({"path": "api/v1/query", "body": "x" * (MAX_ARGUMENT_BYTES + 1)}).encode()
    assert refused[1].request["mcp"]["arguments"] == {
        "bytes": len(oversized),
        "sha256": hashlib.sha256(oversized).hexdigest(),
    }, "an oversized argument is recorded as its size and digest"
    assert any(r.target == "method/invalid" and r.status == 400 for r in route.records)
    assert route.fault is None


async def test_protocol_messages_are_bounded_by_the_routes_rate_and_a_get_stream_is_not_held_open(
    gw, backend
):
    """A flood of tools/list is refused past the route's burst (429, counted past the refused records);
    a GET (the standalone SSE stream) and a DELETE are answered at once: the endpoint keeps no session."""
    route = await gw.open(
        {METRICS: Upstream(METRICS, backend)},
        limits=GatewayLimits(rate_per_second=1.0, burst=5, max_refused_records=3),
    )
    listing = {"jsonrpc": "2.0", "id": 1, "method": "tools/list", "params": {}}
    headers = {"Accept": "application/json, text/event-stream", "Content-Type": "application/json"}
    async with _client(route.token) as http:
        stream = await http.get(route.mcp_endpoint.url, headers={"Accept": "text/event-stream"})
        ended = await http.delete(route.mcp_endpoint.url)
        answers = [await http.post(route.mcp_endpoint.url, json=listing, headers=headers) for _ in range(20)]
    assert (stream.status_code, stream.headers["Allow"]) == (405, "POST")
    assert ended.status_code == 405
    assert {"method/GET", "method/DELETE"} <= {r.target for r in route.records}
    statuses = [a.status_code for a in answers]
    assert statuses[:3] == [200] * 3
    assert set(statuses[3:]) == {429}, "a burst of 5, two of it spent on the GET and the DELETE"
    assert len([r for r in route.records if r.refused]) == 3
    assert route.refused_unrecorded == 17 - 3
    assert route.fault is None
