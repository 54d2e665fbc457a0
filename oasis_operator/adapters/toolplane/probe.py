"""The tool-plane back-ends' self-tests (the run's preflight, decision 0057): the checks they share.

Called by each back-end adapter's ``probe``; asks the API server's discovery whether a resource is
served (no RBAC beyond being authenticated, nothing created). Raises
:class:`~oasis_operator.core.errors.ToolPlaneError` when it is not.
"""

from __future__ import annotations

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
