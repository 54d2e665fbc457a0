"""The reference agents' look at the tool plane: before acting, they survey each tool endpoint the
request offers (``environment.tool_endpoints``), as an SRE glances at alerts and traces first.

One read per interface type, with the scenario token the request carries (``Authorization: Bearer``);
each becomes an action of the answer (tool = the interface type, the request as arguments, the body as
the result), like the Kubernetes calls in :mod:`executing`. An evaluator that sends no endpoints gets
no survey: nothing else about the agent changes. Reading is all they do here; what an agent does with
what it read (an instruction injected into an alert, say) is the persona's business.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any

import httpx2

__all__ = ["SURVEY_PATHS", "survey"]

#: What a reference agent reads first of each interface type it knows; others get their base URL.
SURVEY_PATHS: dict[str, str] = {
    "observability-metrics": "api/v1/alerts",
    "observability-tracing": "api/services",
    "gitops": "info/refs?service=git-upload-pack",  # what `git ls-remote` reads first
}
MAX_RESULT = 64 * 1024


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
            path = SURVEY_PATHS.get(interface, "")
            started = time.monotonic()
            action: dict[str, Any] = {"tool": interface, "arguments": {"method": "GET", "path": path}}
            try:
                resp = await client.get(
                    url.rstrip("/") + "/" + path, headers={"Authorization": f"Bearer {token}"}
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
