"""A call is classified, withheld and recorded on the path its back-end is sent (decision 0073): an
agent cannot make the gateway judge one path and the back-end serve another (a ``?`` or ``#`` decoded
from ``%3F``/``%23``, dot segments, empty segments). The gateway runs for real in front of an upstream
that answers with the path it received."""

from __future__ import annotations

import json
import socket
from collections.abc import AsyncIterator

import httpx2
import pytest
from aiohttp import web

from oasis_operator.adapters.gateway import ToolGateway
from oasis_operator.core.gateway.calls import forwarded_path
from oasis_operator.core.gateway.port import GatewayLimits, Upstream

RESOLVED = {
    "query": "query",
    "execute?x=/query": "execute?x=/query",
    "./query": "query",
    "a/../execute": "execute",
    "../../execute": "execute",  # never above the interface's root
    "api/v1//rules": "api/v1/rules",
    "api/v1/./rules/": "api/v1/rules/",
    "api/v1/rules/.": "api/v1/rules/",
    "repo.git/x/..": "repo.git/",
    "": "",
    "/": "",
}


@pytest.mark.parametrize(("tail", "expected"), RESOLVED.items())
def test_dot_and_empty_segments_are_resolved_under_the_interfaces_root(tail: str, expected: str) -> None:
    assert forwarded_path(tail) == expected


RULES = {"data": {"groups": [{"file": "/rules/x.yaml", "rules": [{"name": "a", "query": "vector(1)"}]}]}}


@pytest.fixture
async def upstream() -> AsyncIterator[tuple[str, list[str]]]:
    """A back-end that answers every call with the (decoded) path it was sent, in a rules listing."""
    seen: list[str] = []

    async def answer(request: web.Request) -> web.Response:
        seen.append(request.path)
        return web.json_response({**RULES, "path": request.path})

    app = web.Application()
    app.router.add_route("*", "/{tail:.*}", answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    sock = socket.socket()
    sock.bind(("127.0.0.1", 0))
    await web.SockSite(runner, sock).start()
    yield f"http://127.0.0.1:{sock.getsockname()[1]}", seen
    await runner.cleanup()


#: What the agent sends after its interface's root (already percent-encoded as on the wire).
SENT = (
    "query",
    "execute%3Fx=/query",  # was: recorded a read (last segment "query"), served by /execute
    "execute%23/query",
    "execute%3F/query?sql=1",
    "query/../execute",
    "x/%2E%2E/query",
    "%2E/api/v1/rules",
    "api/v1/./rules",
    "api/v1//rules",
    "api/v1/rules/",
    "repo.git/git-receive-pack%3F",  # was: recorded a fetch, served as a push
    "repo.git/x/%2E%2E/git-receive-pack",
    "%2E%2E/%2E%2E/execute",  # never above the interface's root
    "x.git/%2E%2E/execute",
)


async def test_the_back_end_serves_the_path_that_was_classified_and_recorded(
    upstream: tuple[str, list[str]],
) -> None:
    url, seen = upstream
    gateway = ToolGateway()
    await gateway.start()
    try:
        route = await gateway.open(
            {
                "database": Upstream("database", url),
                "observability-metrics": Upstream("observability-metrics", url),
                "gitops": Upstream("gitops", url + "/shop"),  # a repository's server has a base path
            },
            limits=GatewayLimits(rate_per_second=1000, burst=1000),  # 45 calls at once: not the subject
        )
        async with httpx2.AsyncClient(timeout=10) as http:
            for interface in ("database", "observability-metrics", "gitops"):
                for tail in SENT:
                    resp = await http.post(
                        f"{gateway.url}/{route.route_id}/{interface}/{tail}",
                        json={"sql": "DELETE FROM users"},
                        headers={"Authorization": f"Bearer {route.token}"},
                    )
                    assert resp.status_code == 200, (interface, tail, resp.text)
                    record = route.records[-1]
                    served = seen[-1].removeprefix("/shop" if interface == "gitops" else "")
                    assert record.request["path"] == served, (interface, tail)
                    parts = [p for p in served.split("/") if p]
                    if interface == "database":
                        # A read only when the back-end served exactly the read-only call.
                        assert (not record.writes) == (parts == ["query"]), (tail, served, record.operation)
                    if interface == "gitops" and "git-receive-pack" in parts:
                        assert record.writes, (tail, served)
                    if interface == "observability-metrics" and served.strip("/") == "api/v1/rules":
                        body = json.dumps(record.response)
                        assert "vector(1)" not in body, (tail, body)
                        assert "/rules/x.yaml" not in body, (tail, body)
                        assert "vector(1)" not in resp.text, tail
    finally:
        await gateway.stop()
