"""The recording gateway's MCP endpoint (decision 0112): ``<gateway>/<route>/mcp``, Streamable HTTP,
served with the official ``mcp`` SDK (stateless, JSON answers) inside the gateway's own aiohttp server.

The gateway authenticates the HTTP request first (the scenario's token as the bearer, the same
isolation and revocation as its other routes), then hands it to the SDK through a small ASGI bridge
with the route attached. The SDK answers the protocol (malformed JSON-RPC gets a JSON-RPC error);
the tools (:mod:`oasis_operator.core.gateway.mcp_tools`) are one per interface the route fronts, and
an admitted call is forwarded through the gateway's own route for that interface by the host
(:class:`McpHost`), so it is bounded, injected, withheld and recorded as the same HTTP call would be,
its record carrying ``request.mcp`` (tool, arguments, result digest, ``observed_by: harness``).
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from typing import Any, Protocol

import mcp_types as types
from aiohttp import web
from mcp.server.lowlevel import Server
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager

from oasis_operator.core.gateway.mcp_tools import McpCall, McpRefusal, admitted_call, tool_definitions

__all__ = ["SCOPE_ROUTE", "McpHost", "McpService"]

#: The ASGI scope key the gateway's authenticated route travels under to the tool handlers.
SCOPE_ROUTE = "oasis.route"


class McpHost(Protocol):
    """What the MCP service needs of the gateway."""

    def interfaces_of(self, route: Any) -> tuple[str, ...]: ...

    async def forward_mcp(
        self, route: Any, call: McpCall, arguments: Mapping[str, Any]
    ) -> tuple[int, bytes]: ...

    def record_mcp_refusal(self, route: Any, refusal: McpRefusal, arguments: Mapping[str, Any]) -> None: ...


def _route_of(ctx: Any) -> Any:
    request = getattr(ctx, "request", None)
    scope = getattr(request, "scope", None) or {}
    route = scope.get(SCOPE_ROUTE)
    if route is None:  # only the gateway hands requests to the SDK, always with the route
        raise RuntimeError("an MCP request reached the tools without its route")
    return route


class McpService:
    """The SDK server and its session manager, run in a task of their own between ``start`` and ``stop``."""

    def __init__(self, host: McpHost, max_request_bytes: int) -> None:
        self._host = host
        self._server: Server[Any] = Server(
            "oasis-operator-tools", on_list_tools=self._list_tools, on_call_tool=self._call_tool
        )
        self._manager = StreamableHTTPSessionManager(
            self._server, json_response=True, stateless=True, max_request_body_size=max_request_bytes
        )
        self._stop = asyncio.Event()
        self._ready = asyncio.Event()
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self._task = asyncio.create_task(self._run())
        ready = asyncio.create_task(self._ready.wait())
        await asyncio.wait({ready, self._task}, return_when=asyncio.FIRST_COMPLETED)
        if not ready.done():  # the SDK's run context ended before it was ready: its error, not a hang
            ready.cancel()
            self._task.result()
            raise RuntimeError("the MCP session manager stopped before it started")

    async def _run(self) -> None:
        async with self._manager.run():
            self._ready.set()
            await self._stop.wait()

    async def stop(self) -> None:
        self._stop.set()
        if self._task is not None:
            with contextlib.suppress(asyncio.CancelledError):
                await self._task

    async def _list_tools(self, ctx: Any, params: Any) -> types.ListToolsResult:
        route = _route_of(ctx)
        tools = [
            types.Tool(name=d["name"], description=d["description"], input_schema=d["inputSchema"])
            for d in tool_definitions(self._host.interfaces_of(route))
        ]
        return types.ListToolsResult(tools=tools)

    async def _call_tool(self, ctx: Any, params: types.CallToolRequestParams) -> types.CallToolResult:
        route = _route_of(ctx)
        arguments = dict(params.arguments or {})
        call = admitted_call(params.name, arguments, self._host.interfaces_of(route))
        if isinstance(call, McpRefusal):
            self._host.record_mcp_refusal(route, call, arguments)
            return types.CallToolResult(content=[types.TextContent(text=call.reason)], is_error=True)
        status, payload = await self._host.forward_mcp(route, call, arguments)
        text = payload.decode("utf-8", errors="replace")
        return types.CallToolResult(content=[types.TextContent(text=text)], is_error=not 200 <= status < 300)

    async def handle(
        self, route: Any, request: web.Request, body: bytes, timeout: float
    ) -> tuple[int, bytes, dict[str, str]]:
        """The answer (status, body, headers) to one authenticated HTTP request of the MCP transport,
        through the ASGI bridge; the gateway sends it."""
        scope: dict[str, Any] = {
            "type": "http",
            "asgi": {"version": "3.0"},
            "http_version": "1.1",
            "method": request.method,
            "scheme": "http",
            "path": request.path,
            "raw_path": request.path.encode(),
            "query_string": request.query_string.encode(),
            "root_path": "",
            "headers": [
                (k.lower().encode("latin-1"), v.encode("latin-1")) for k, v in request.headers.items()
            ],
            "client": None,
            "server": None,
            SCOPE_ROUTE: route,
        }
        sent = False
        status = 500
        headers: list[tuple[str, str]] = []
        chunks: list[bytes] = []

        async def receive() -> dict[str, Any]:
            nonlocal sent
            if not sent:
                sent = True
                return {"type": "http.request", "body": body, "more_body": False}
            await asyncio.Event().wait()  # the client never disconnects mid-answer here
            return {"type": "http.disconnect"}

        async def send(message: Mapping[str, Any]) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                headers.extend(
                    (k.decode("latin-1"), v.decode("latin-1")) for k, v in message.get("headers", ())
                )
            elif message["type"] == "http.response.body":
                chunks.append(bytes(message.get("body", b"")))

        try:
            async with asyncio.timeout(timeout):
                await self._manager.handle_request(scope, receive, send)
        except TimeoutError:  # a tool call waits at most for its back-end (and answers 504 past it)
            return 504, b"MCP request timed out\n", {"Content-Type": "text/plain"}
        kept = {k: v for k, v in headers if k.lower() in {"content-type", "mcp-session-id", "allow"}}
        return status, b"".join(chunks), kept
