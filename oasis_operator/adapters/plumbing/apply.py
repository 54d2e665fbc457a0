"""Server-side apply over plain HTTP, for the objects the harness declares outside the environment
provisioner: the node simulator's ClusterLogs and ClusterResourceUsage, Flux's sources and
Kustomizations, and what the dev cluster's back-ends seed.

One request shape for all of them: a JSON body (valid YAML, so the audit log can hold it) sent as an
apply patch, under the caller's field manager, forcing ownership of the fields it declares. Each
function returns ``None`` when the API server stored the object, else ``"HTTP <code>: <text>"`` for the
caller's own error, which names what it was applying.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import httpx2

#: The apply patch's content type; the body is JSON, which the API server reads as YAML.
APPLY_HEADERS = {"Content-Type": "application/apply-patch+yaml"}
#: How much of a refusal's body an error message keeps.
REASON_CHARS = 300


def _request(doc: Mapping[str, Any], manager: str) -> dict[str, Any]:
    return {
        "params": {"fieldManager": manager, "force": "true"},
        "content": json.dumps(doc),
        "headers": APPLY_HEADERS,
    }


def _refusal(resp: httpx2.Response) -> str | None:
    if resp.status_code in (200, 201):
        return None
    return f"HTTP {resp.status_code}: {resp.text[:REASON_CHARS]}"


async def server_side_apply(
    http: httpx2.AsyncClient, path: str, doc: Mapping[str, Any], manager: str
) -> str | None:
    """Apply ``doc`` at ``path``; None when stored, else why not."""
    return _refusal(await http.patch(path, **_request(doc, manager)))


def server_side_apply_sync(
    http: httpx2.Client, path: str, doc: Mapping[str, Any], manager: str
) -> str | None:
    """:func:`server_side_apply` for a blocking client (the dev cluster's set-up)."""
    return _refusal(http.patch(path, **_request(doc, manager)))
