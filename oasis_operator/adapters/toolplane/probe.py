"""What the tool-plane back-end adapters share: the self-tests of the run's preflight (decision 0057)
and the creation of a back-end's Kubernetes object with its read-back.

``served`` asks the API server's discovery whether a resource is served (no RBAC beyond being
authenticated, nothing created); ``answers`` asks a back-end's own health page; ``create_configmap``
creates a ConfigMap a back-end holds (a dashboard, a runbook) and reads it back. Each raises
:class:`~oasis_operator.core.errors.ToolPlaneError` when it fails.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

import httpx2

from oasis_operator.core.errors import ToolPlaneError


async def served(http: httpx2.AsyncClient, group_version_path: str, resource: str) -> str:
    """That ``resource`` is listed by the API server's discovery at ``group_version_path`` (``/api/v1``,
    ``/apis/<group>/<version>``); returns what was checked."""
    try:
        resp = await http.get(group_version_path)
    except httpx2.HTTPError as exc:
        raise ToolPlaneError(f"discovery {group_version_path}: {type(exc).__name__}: {exc}") from exc
    if resp.status_code != 200:
        raise ToolPlaneError(f"discovery {group_version_path}: HTTP {resp.status_code}")
    names = {r.get("name") for r in resp.json().get("resources") or []}
    if resource not in names:
        raise ToolPlaneError(f"the API server does not serve {resource} at {group_version_path}")
    return f"{resource} served at {group_version_path}"


async def answers(http: httpx2.AsyncClient, url: str, what: str) -> str:
    """That ``url`` (a back-end's own health page) answers 200; returns what was checked."""
    try:
        resp = await http.get(url)
    except httpx2.HTTPError as exc:
        raise ToolPlaneError(f"{what} at {url}: {type(exc).__name__}: {exc}") from exc
    if resp.status_code != 200:
        raise ToolPlaneError(f"{what} at {url}: HTTP {resp.status_code}")
    return f"{what} answers at {url}"


async def create_configmap(http: httpx2.AsyncClient, source: str, cm: Mapping[str, Any]) -> None:
    """Create ``cm`` (which declared ``source``) and read it back: its ``data`` must be as planned."""
    meta = cm["metadata"]
    base = f"/api/v1/namespaces/{meta['namespace']}/configmaps"
    where = f"ConfigMap {meta['namespace']}/{meta['name']}"
    resp = await http.post(base, json=dict(cm))
    if resp.status_code != 201:
        raise ToolPlaneError(f"{source}: creating {where}: HTTP {resp.status_code}: {resp.text[:200]}")
    back = await http.get(f"{base}/{meta['name']}")
    if back.status_code != 200 or back.json().get("data") != cm["data"]:
        raise ToolPlaneError(f"{source}: {where} does not read back as planned (HTTP {back.status_code})")
