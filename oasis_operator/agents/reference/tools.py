"""The reference agents' look at the tool plane: before acting, they survey each tool endpoint the
request offers (``environment.tool_endpoints``), as an SRE glances at alerts and traces first.

One read per interface type, with the scenario token the request carries (``Authorization: Bearer``);
each becomes an action of the answer (tool = the interface type, the request as arguments, the body as
the result), like the Kubernetes calls in :mod:`executing`. An evaluator that sends no endpoints gets
no survey: nothing else about the agent changes. Reading is all they do here; what an agent does with
what it read (an instruction injected into an alert, say) is the persona's business.
"""

from __future__ import annotations

import json
import time
from collections.abc import Mapping
from typing import Any

import httpx2

__all__ = ["MAX_BODY", "SURVEY_PATHS", "ToolReader", "survey"]

#: What a reference agent reads first of each interface type it knows; others get their base URL.
SURVEY_PATHS: dict[str, str] = {
    "observability-metrics": "api/v1/alerts",
    "observability-tracing": "api/services",
    "gitops": "info/refs?service=git-upload-pack",  # what `git ls-remote` reads first
}
#: Interfaces read with a POST of a JSON body (a database endpoint's read-only query): what is sent.
SURVEY_POSTS: dict[str, tuple[str, dict[str, Any]]] = {
    "database": (
        "query",
        {
            "sql": "SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() ORDER BY 1"
        },
    ),
}
MAX_RESULT = 64 * 1024
#: A read whose body is larger than this is cut off and not decoded (it is reported as an error).
MAX_BODY = 4 * 1024 * 1024


def _endpoints(environment: object) -> list[tuple[str, str, str]]:
    """(interface, url, token) of every well-formed endpoint in the request, sorted by interface."""
    given = environment.get("tool_endpoints") if isinstance(environment, Mapping) else None
    out = []
    for name, value in sorted((given or {}).items()) if isinstance(given, Mapping) else ():
        if (
            isinstance(value, Mapping)
            and isinstance(value.get("url"), str)
            and isinstance(value.get("token"), str)
        ):
            out.append((str(name), value["url"], value["token"]))
    return out


async def survey(environment: object, timeout_seconds: float = 10.0) -> list[dict[str, Any]]:
    """One read per offered tool endpoint, as actions of the contract's answer."""
    actions: list[dict[str, Any]] = []
    endpoints = _endpoints(environment)
    if not endpoints:
        return actions
    async with httpx2.AsyncClient(timeout=timeout_seconds, trust_env=False) as client:
        for interface, url, token in endpoints:
            path, body = SURVEY_POSTS.get(interface, (SURVEY_PATHS.get(interface, ""), None))
            started = time.monotonic()
            method = "GET" if body is None else "POST"
            action: dict[str, Any] = {"tool": interface, "arguments": {"method": method, "path": path}}
            if body is not None:
                action["arguments"]["body"] = body
            try:
                resp = await client.request(
                    method,
                    url.rstrip("/") + "/" + path,
                    json=body,
                    headers={"Authorization": f"Bearer {token}"},
                )
                action["result"] = resp.text[:MAX_RESULT]
                if resp.status_code >= 400:
                    action["error"] = f"HTTP {resp.status_code}"
            except httpx2.HTTPError as exc:
                action["result"] = ""
                action["error"] = f"{type(exc).__name__}: {exc}"
            action["duration_ms"] = round((time.monotonic() - started) * 1000)
            actions.append(action)
    return actions


class ToolReader:
    """Bounded GETs to the request's tool endpoints, each recorded as an action of the answer.

    ``get`` returns the decoded JSON body, or None when the interface is not offered, the call
    failed, or the body is not JSON (the action says which). Use as ``async with``.
    """

    def __init__(self, environment: object, timeout_seconds: float = 10.0, max_body: int = MAX_BODY) -> None:
        self.endpoints = {name: (url, token) for name, url, token in _endpoints(environment)}
        self.timeout_seconds = timeout_seconds
        self.max_body = max_body
        self.actions: list[dict[str, Any]] = []
        self._client: httpx2.AsyncClient | None = None

    async def __aenter__(self) -> ToolReader:
        if self.endpoints:
            self._client = httpx2.AsyncClient(timeout=self.timeout_seconds, trust_env=False)
        return self

    async def __aexit__(self, *exc: object) -> None:
        if self._client is not None:
            await self._client.aclose()
            self._client = None

    def offers(self, interface: str) -> bool:
        return interface in self.endpoints and self._client is not None

    async def get(self, interface: str, path: str, params: Mapping[str, str] | None = None) -> Any:
        return await self._call("GET", interface, path, params, None)

    async def post(self, interface: str, path: str, body: Mapping[str, Any]) -> Any:
        """A POST of a JSON body (a database endpoint's query); the answer's JSON even when it is an
        error status (a SQL error is an answer the agent reads), the action saying the status."""
        return await self._call("POST", interface, path, None, body)

    async def _call(
        self,
        method: str,
        interface: str,
        path: str,
        params: Mapping[str, str] | None,
        body: Mapping[str, Any] | None,
    ) -> Any:
        if not self.offers(interface):
            return None
        assert self._client is not None
        url, token = self.endpoints[interface]
        arguments: dict[str, Any] = {"method": method, "path": path}
        if params:
            arguments["params"] = dict(params)
        if body is not None:
            arguments["body"] = dict(body)
        action: dict[str, Any] = {"tool": interface, "arguments": arguments}
        started = time.monotonic()
        received = b""
        try:
            async with self._client.stream(
                method,
                url.rstrip("/") + "/" + path.lstrip("/"),
                params=dict(params or {}),
                json=dict(body) if body is not None else None,
                headers={"Authorization": f"Bearer {token}"},
            ) as resp:
                async for chunk in resp.aiter_bytes():
                    received += chunk
                    if len(received) > self.max_body:
                        break
                status = resp.status_code
        except httpx2.HTTPError as exc:
            action.update(result="", error=f"{type(exc).__name__}: {exc}")
            return self._done(action, started, None)
        text = received[: self.max_body].decode("utf-8", errors="replace")
        action["result"] = text[:MAX_RESULT]
        if len(received) > self.max_body:
            action["error"] = f"answer over {self.max_body} bytes, not read"
            return self._done(action, started, None)
        try:
            decoded = json.loads(text)
        except ValueError:
            decoded = None
        if status >= 400:
            action["error"] = f"HTTP {status}"
            return self._done(action, started, decoded if body is not None else None)
        return self._done(action, started, decoded)

    def _done(self, action: dict[str, Any], started: float, value: Any) -> Any:
        action["duration_ms"] = round((time.monotonic() - started) * 1000)
        self.actions.append(action)
        return value
