"""The recording gateway's server: every non-Kubernetes tool call of an agent passes through it.

One :class:`ToolGateway` per operator process (or local run) listens on one port. Each scenario gets a
:class:`Route` (``open``): an opaque route id in the URL path, a scenario-scoped token, and the scenario's
upstream per interface; the agent is given ``<gateway>/<route>/<interface>/`` and the token. A call:

1. is matched to its route by the path and to its caller by the token (``Authorization: Bearer`` or the
   password of HTTP Basic, which git clients send); a token of another scenario gets 403, recorded in the
   evidence of the scenario the token belongs to; no token, a wrong one, or a closed route gets 401;
2. is bounded: a request body over the limit gets 413, a caller over its rate 429, a call past the
   route's record store 429 (never forwarded unrecorded); refused calls are recorded up to a small
   number per route and counted past it, and never fault the route (decision 0096);
3. is forwarded with the allowed request headers and the scenario's back-end credential (the agent's own
   Authorization never leaves), with a timeout (504) and a response size bound (502: the agent is never
   given an answer the evidence holds only in part);
4. gets the declared text of the ``tool_output_injection`` stimuli that name it; one with no place in
   this answer (a ``HEAD``, an error without a carrier) is a recorded non-delivery of this call;
5. is recorded (:class:`~oasis_operator.core.evidence.tool_records.ToolRecord`: request, response as
   the agent received it, status, time, duration) **before** the answer is sent. If recording fails the
   agent gets 502 and the route carries a fault, which the workflow turns into a fault of the tool
   records (decision 0095). So does a back-end that does not answer or times out (M-7). Bodies are
   kept whole while the route's and the gateway's byte budgets last, then as size and digest.

Answers carry only allowed headers: nothing names the back-end or the harness (no ``Server``).
Classification, bodies, headers, rates and injection are decided by the pure core
(:mod:`oasis_operator.core.gateway.calls`, :mod:`oasis_operator.core.stimuli.injection`).
"""

from __future__ import annotations

import datetime as dt
import hmac
import logging
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from typing import Any
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web
from yarl import URL

from oasis_operator.adapters.gateway.mcp_endpoint import McpService
from oasis_operator.adapters.gateway.route import Route
from oasis_operator.adapters.gateway.wire import Plain, bounded, iso, jsonrpc_method, read_bounded, token_of
from oasis_operator.core.evidence.tool_records import MCP_PROTOCOL, ToolRecord
from oasis_operator.core.gateway.calls import (
    Bucket,
    agent_response_headers,
    body_evidence,
    classify,
    forwarded_path,
    forwarded_request_headers,
    withheld,
)
from oasis_operator.core.gateway.mcp_tools import (
    MCP_INTERFACE,
    McpCall,
    McpRefusal,
    mcp_block,
    refusal_record,
)
from oasis_operator.core.gateway.port import GatewayLimits, Upstream
from oasis_operator.core.stimuli.injection import OutputInjection, applies, inject

log = logging.getLogger(__name__)

__all__ = ["DEFAULT_BODY_BUDGET", "Route", "ToolGateway"]

#: Body bytes all routes of one gateway keep together (each route within its own
#: :attr:`GatewayLimits.max_body_bytes`); past it bodies are kept as size and digest (decision 0096).
DEFAULT_BODY_BUDGET = 128 << 20
#: A forwarded MCP tool call's one-time key to its arguments (not an allowed header: never forwarded).
MCP_CALL_HEADER = "X-Oasis-Mcp-Call"


class ToolGateway:
    """The gateway (see the module docstring). ``start`` before ``open``; ``stop`` at shutdown."""

    def __init__(
        self,
        host: str = "127.0.0.1",
        port: int = 0,
        *,
        advertise: str | None = None,
        clock: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
        body_budget: int | None = None,
    ) -> None:
        self._host, self._port, self._advertise = host, port, advertise
        #: Body bytes every open route together keeps (every run of this process): H-2's bound.
        self.body_budget = DEFAULT_BODY_BUDGET if body_budget is None else body_budget
        self.body_bytes = 0
        self._clock = clock
        self._routes: dict[str, Route] = {}
        self._by_token: dict[str, Route] = {}
        self._runner: web.AppRunner | None = None
        self._session: aiohttp.ClientSession | None = None
        self.url = ""
        self._local = ""
        self._mcp = McpService(self, GatewayLimits().max_request_bytes)
        #: MCP tool calls being forwarded, by their one-time key: (tool, arguments).
        self._mcp_pending: dict[str, tuple[str, dict[str, Any]]] = {}

    async def start(self) -> str:
        app = web.Application(client_max_size=1 << 30)  # bounded per route, below
        app.router.add_route("*", "/{route}/mcp", self._handle_mcp)
        app.router.add_route("*", "/{route}/{interface}/{tail:.*}", self._handle)
        app.router.add_route("*", "/{route}/{interface}", self._handle)
        self._runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self._host, self._port)
        await site.start()
        sockets = getattr(site._server, "sockets", None) or ()
        if not sockets:
            raise RuntimeError("the tool gateway did not bind a socket")
        port = sockets[0].getsockname()[1]
        self.url = self._advertise or f"http://{self._host}:{port}"
        local = (
            "127.0.0.1" if self._host in ("", "0.0.0.0") else ("::1" if self._host == "::" else self._host)
        )
        self._local = f"http://{'[' + local + ']' if ':' in local else local}:{port}"
        self._session = aiohttp.ClientSession(auto_decompress=True, cookie_jar=aiohttp.DummyCookieJar())
        await self._mcp.start()
        return self.url

    async def stop(self) -> None:
        await self._mcp.stop()
        if self._session is not None:
            await self._session.close()
        if self._runner is not None:
            await self._runner.cleanup()

    async def open(
        self,
        upstreams: Mapping[str, Upstream],
        injections: Sequence[OutputInjection] = (),
        limits: GatewayLimits | None = None,
    ) -> Route:
        limits = limits or GatewayLimits()
        if not self.url:
            raise RuntimeError("the tool gateway is not started")
        route = Route(
            secrets.token_urlsafe(12),
            secrets.token_urlsafe(32),
            self.url,
            dict(upstreams),
            tuple(injections),
            limits,
            time.monotonic(),
        )
        route.bucket = Bucket.full(limits.burst, route.opened)
        self._routes[route.route_id] = route
        self._by_token[route.token] = route
        return route

    async def close(self, route: Any) -> None:
        assert isinstance(route, Route)
        route.closed = True
        self._by_token.pop(route.token, None)

    async def release(self, route: Any) -> None:
        """Drop a closed route once its records are read (later calls to it answer 404)."""
        assert isinstance(route, Route)
        await self.close(route)
        if self._routes.pop(route.route_id, None) is not None:
            self.body_bytes -= route.body_bytes

    # -- one call ------------------------------------------------------------------------------------
    async def _handle(self, request: web.Request) -> web.StreamResponse:
        received = self._clock()
        started = time.monotonic()
        route = self._routes.get(request.match_info["route"])
        if route is None:
            return Plain(status=404, text="not found\n")
        interface = request.match_info["interface"]
        # Classified, withheld, injected, recorded and forwarded on one path (decision 0073).
        tail = forwarded_path(request.match_info.get("tail", ""))
        record_in, refusal, status = self._admission(route, interface, token_of(request), started)
        body = b""
        if not refusal:
            body = await read_bounded(request.content, route.limits.max_request_bytes)
            if len(body) > route.limits.max_request_bytes:
                refusal, status = f"request body over {route.limits.max_request_bytes} bytes", 413
                body = body[:0]
        if not refusal:
            route.admitted += 1
            route.note_call(started)
            return await self._forward(route, interface, tail, request, body, received, started)
        headers = {"WWW-Authenticate": 'Basic realm="tools"'} if status == 401 else {}
        answer = Plain(status=status, text=f"{refusal}\n", headers=headers)
        return self._recorded(
            record_in, interface, tail, request, body, answer, received, started, refused=refusal
        )

    def _admission(
        self, route: Route, interface: str, token: str | None, started: float
    ) -> tuple[Route, str, int]:
        """The route a call is recorded in, and why it is refused (with its status), or ``""``."""
        caller = self._caller(token)
        if caller is None:
            return route, ("route closed" if route.closed else "no valid token"), 401
        if caller is not route:
            return caller, "token of another scenario", 403
        if interface not in route.upstreams:
            return route, "interface not served for this scenario", 404
        refusal, status = bounded(route, started)
        return route, refusal, status

    def _caller(self, token: str | None) -> Route | None:
        if token is None:
            return None
        return next((r for t, r in self._by_token.items() if hmac.compare_digest(t, token)), None)

    # -- MCP (decision 0112) -------------------------------------------------------------------------
    async def _handle_mcp(self, request: web.Request) -> web.StreamResponse:
        """One HTTP request of a route's MCP endpoint: authenticated and bounded as every call, then
        answered by the SDK; recorded here unless it is a tool call (recorded as the call it forwards)."""
        received = self._clock()
        started = time.monotonic()
        route = self._routes.get(request.match_info["route"])
        if route is None:
            return Plain(status=404, text="not found\n")
        caller = self._caller(token_of(request))
        refusal, status, record_in = "", 0, route
        if caller is None:
            refusal, status = ("route closed" if route.closed else "no valid token"), 401
        elif caller is not route:
            refusal, status, record_in = "token of another scenario", 403, caller
        body = b""
        if not refusal:
            body = await read_bounded(request.content, route.limits.max_request_bytes)
            if len(body) > route.limits.max_request_bytes:
                refusal, status, body = f"request body over {route.limits.max_request_bytes} bytes", 413, b""
        method = jsonrpc_method(body)
        if not refusal and method != "tools/call":
            # A protocol message is bounded and counted here; a tool call where it is forwarded.
            refusal, status = bounded(route, started)
            route.admitted += 0 if refusal else 1
        if refusal:
            headers = {"WWW-Authenticate": 'Bearer realm="tools"'} if status == 401 else {}
            answer = Plain(status=status, text=f"{refusal}\n", headers=headers)
            return self._recorded(
                record_in, MCP_INTERFACE, "", request, body, answer, received, started, refused=refusal
            )
        # Stateless: no stream to GET, no session to DELETE (the transport's 405).
        if request.method != "POST":
            status, payload, headers, method = 405, b"POST only\n", {"Allow": "POST"}, request.method
        else:
            timeout = route.limits.upstream_timeout + 20
            status, payload, headers = await self._mcp.handle(route, request, body, timeout)
        reply = Plain(status=status, body=payload, headers=headers)
        if method == "tools/call" and 200 <= status < 300:
            return reply  # recorded as the call it forwarded, or as its refusal
        return self._recorded(
            route, MCP_INTERFACE, method, request, body, reply, received, started, upstream_status=status
        )

    def interfaces_of(self, route: Any) -> tuple[str, ...]:
        assert isinstance(route, Route)
        return tuple(sorted(route.upstreams))

    async def forward_mcp(self, route: Any, call: McpCall, arguments: Mapping[str, Any]) -> tuple[int, bytes]:
        """Forward an admitted MCP tool call through the route of its interface, with the scenario's
        token: admitted, bounded, injected and recorded there like any call, with its MCP arguments."""
        assert isinstance(route, Route)
        assert self._session is not None
        key = secrets.token_urlsafe(24)
        self._mcp_pending[key] = (call.tool, dict(arguments))
        url = URL(f"{self._local}/{route.route_id}/{call.interface}/").with_path(
            f"/{route.route_id}/{call.interface}/{call.path}", encoded=False
        )
        try:
            async with self._session.request(
                call.method,
                url,
                params=dict(call.query),
                data=call.body.encode() if call.body else None,
                headers={"Authorization": f"Bearer {route.token}", MCP_CALL_HEADER: key},
                allow_redirects=False,
                # The route answers within its back-end's timeout (504 past it); this only guards the hop.
                timeout=aiohttp.ClientTimeout(total=route.limits.upstream_timeout + 10),
            ) as resp:
                return resp.status, await resp.read()
        finally:
            self._mcp_pending.pop(key, None)

    def record_mcp_refusal(self, route: Any, refusal: McpRefusal, arguments: Mapping[str, Any]) -> None:
        """An MCP tool call refused before any back-end (unknown tool, arguments over the limit)."""
        assert isinstance(route, Route)
        if not route.refused_kept():
            return
        route.add(refusal_record(refusal, arguments, iso(self._clock())))

    async def _forward(
        self,
        route: Route,
        interface: str,
        tail: str,
        request: web.Request,
        body: bytes,
        received: dt.datetime,
        started: float,
    ) -> web.StreamResponse:
        upstream = route.upstreams[interface]
        # The path is set, not parsed: a "?" or "#" of the agent's path stays a path character.
        base = URL(upstream.url)
        url = base.with_path(base.path.rstrip("/") + "/" + tail).with_query(base.query)
        headers = forwarded_request_headers(request.headers.items(), upstream.headers)
        assert self._session is not None
        limit = route.limits.max_response_bytes
        try:
            async with self._session.request(
                request.method,
                url,
                params=request.rel_url.query,
                data=body or None,
                headers=headers,
                allow_redirects=False,
                timeout=aiohttp.ClientTimeout(total=route.limits.upstream_timeout),
            ) as resp:
                payload = await read_bounded(resp.content, limit)
                status = resp.status
                passed = agent_response_headers(resp.headers.items())
                content_type = resp.headers.get("Content-Type", "")
        except TimeoutError:
            # A back-end of the provider's that does not answer in time: what the agent could see through
            # this tool is not known, a fault of the tool records (M-7, decision 0096), never a silent
            # non-delivery.
            route.set_fault(
                f"tool back-end for {interface} timed out after {route.limits.upstream_timeout:g}s"
            )
            answer = Plain(status=504, text="tool back-end timed out\n")
            return self._recorded(
                route,
                interface,
                tail,
                request,
                body,
                answer,
                received,
                started,
                refused="back-end timed out",
                upstream_status=0,
            )
        except aiohttp.ClientError as exc:
            # A back-end the provider started does not answer: not the agent's doing.
            route.set_fault(f"tool back-end for {interface} did not answer: {type(exc).__name__}")
            answer = Plain(status=502, text="tool back-end unavailable\n")
            return self._recorded(
                route,
                interface,
                tail,
                request,
                body,
                answer,
                received,
                started,
                refused="back-end unavailable",
                upstream_status=0,
            )
        if len(payload) > limit:
            answer = Plain(status=502, text=f"tool answer over {limit} bytes\n")
            return self._recorded(
                route,
                interface,
                tail,
                request,
                body,
                answer,
                received,
                started,
                refused=f"answer over {limit} bytes",
                upstream_status=status,
            )
        payload = withheld(interface, tail, payload)
        injected: list[int] = []
        undelivered: list[int] = []
        for injection in route.injections:
            if not applies(injection, interface, tail):
                continue
            altered = inject(payload, content_type, injection.text)
            if altered is None:
                # No place in this answer (a HEAD, an error without a carrier): a non-delivery of
                # this call, recorded; the scenario faults only if no call ever got it (decision 0096).
                undelivered.append(injection.index)
                continue
            payload = altered
            injected.append(injection.index)
        answer = Plain(status=status, body=payload, headers=dict(passed))
        return self._recorded(
            route,
            interface,
            tail,
            request,
            body,
            answer,
            received,
            started,
            injected=tuple(injected),
            undelivered=tuple(undelivered),
            upstream_status=status,
        )

    def _kept(self, route: Route, size: int) -> bool:
        """Whether a call's bodies (``size`` bytes) are kept whole: within the route's budget and the
        gateway's; else they are kept as size and digest, and the route counts it (decision 0096)."""
        if route.body_bytes + size > route.limits.max_body_bytes or self.body_bytes + size > self.body_budget:
            route.digested()
            return False
        route.body_bytes += size
        self.body_bytes += size
        return True

    def _recorded(
        self,
        route: Route,
        interface: str,
        tail: str,
        request: web.Request,
        body: bytes,
        answer: web.Response,
        received: dt.datetime,
        started: float,
        *,
        refused: str = "",
        injected: tuple[int, ...] = (),
        undelivered: tuple[int, ...] = (),
        upstream_status: int | None = None,
    ) -> web.StreamResponse:
        """Record the call, then hand back the answer; a call that cannot be recorded is not answered.
        A refused call past the route's number of refused records is answered and only counted."""
        if refused and upstream_status is None and not route.refused_kept():
            return answer
        try:
            # Classified on the path the back-end sees: an upstream may be a repository's own URL
            # (gitops), whose name is then in the upstream's path, not in the agent's.
            upstream = route.upstreams.get(interface)
            base = urlsplit(upstream.url).path.rstrip("/") if upstream is not None else ""
            if interface == MCP_INTERFACE:  # the MCP transport itself: no tool, nothing read or written
                operation, target, tail = MCP_PROTOCOL, (f"method/{tail}" if tail else ""), "mcp"
            else:
                operation, target = classify(
                    interface, request.method, f"{base}/{tail}", request.rel_url.query_string
                )
            payload = answer.body if isinstance(answer.body, bytes) else b""
            keep = self._kept(route, len(body) + len(payload))
            sent = body_evidence(
                body,
                request.headers.get("Content-Type", ""),
                request.headers.get("Content-Encoding", ""),
                route.limits.max_request_bytes,
                keep=keep,
            )
            got = body_evidence(
                payload,
                answer.headers.get("Content-Type", ""),
                "",
                route.limits.max_response_bytes,
                keep=keep,
            )
            query: dict[str, list[str]] = {}
            for k, v in request.rel_url.query.items():
                query.setdefault(k, []).append(v)
            meta = {k: v for k, v in got.items() if k != "body"}
            via_mcp = self._mcp_pending.get(request.headers.get(MCP_CALL_HEADER, ""))
            if answer.content_type:
                meta["content_type"] = answer.content_type
            route.add(
                ToolRecord(
                    interface=interface,
                    operation=operation,
                    target=target,
                    time=iso(received),
                    request={
                        "method": request.method,
                        "path": "/" + tail,
                        **(
                            {"path_as_sent": "/" + sent_tail}
                            if (sent_tail := request.match_info.get("tail", tail)) != tail
                            else {}
                        ),
                        "query": query,
                        **{f"body_{k}" if k != "body" else "body": v for k, v in sent.items()},
                        **({"mcp": mcp_block(*via_mcp, payload)} if via_mcp is not None else {}),
                    },
                    response=got.get("body"),
                    status=answer.status if upstream_status is None or upstream_status else 0,
                    duration_ms=round((time.monotonic() - started) * 1000, 3),
                    response_meta=meta,
                    injected=injected,
                    refused=refused,
                    undelivered=undelivered,
                )
            )
        except Exception as exc:  # the evidence would be incomplete: say so, and do not answer
            log.exception("tool gateway: a call could not be recorded")
            route.set_fault(f"a tool call could not be recorded: {type(exc).__name__}: {exc}")
            return Plain(status=502, text="tool call not recorded\n")
        return answer
