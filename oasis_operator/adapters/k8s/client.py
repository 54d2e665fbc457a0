"""Kubernetes API clients for the adapters.

Called by the operator's start-up, the provider, the local runner and tests; turns a kubeconfig path
into an async lightkube client or HTTP client and its cluster's server URL and CA (agents get
kubeconfigs that point at the same server with the same CA), all through the one loader
(:mod:`oasis_operator.adapters.k8s.cluster_access`), and asks the API server who a client is.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from pathlib import Path

import httpx2
from lightkube import AsyncClient

from oasis_operator.adapters.k8s.cluster_access import ClusterAccess, ClusterEndpoint
from oasis_operator.core.evidence.sentinel import Sentinel


def async_client(kubeconfig: Path, *, field_manager: str = "kubectl") -> AsyncClient:
    """A lightkube client for the current context of a kubeconfig file (the shared loader's)."""
    return AsyncClient(
        ClusterAccess.from_kubeconfig(kubeconfig).lightkube_config(), field_manager=field_manager
    )


def endpoint_of(kubeconfig: Path) -> ClusterEndpoint:
    """The server and CA (base64 PEM) of the current context of a kubeconfig file."""
    return ClusterAccess.from_kubeconfig(kubeconfig).endpoint()


def async_http(kubeconfig: Path, timeout: float = 10.0) -> httpx2.AsyncClient:
    """A plain async HTTP client for requests that need their own headers (the audit sentinel)."""
    return ClusterAccess.from_kubeconfig(kubeconfig).http(timeout)


SENTINEL_PATH = "/api/v1/namespaces/default"


async def whoami(http: httpx2.AsyncClient) -> str:
    """The user name the API server gives this client (a SelfSubjectReview)."""
    resp = await http.post(
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        json={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    )
    resp.raise_for_status()
    return str(resp.json().get("status", {}).get("userInfo", {}).get("username", ""))


def sentinel_sender(http: httpx2.AsyncClient) -> Callable[[str], Awaitable[Sentinel]]:
    """The audit barrier's sentinel: a cheap read carrying the given Audit-ID. It reports the user the
    request was made as (asked of the API server once) and its exact URI, by which the barrier tells
    it from any other request that reuses the ID."""
    username: list[str] = []

    async def send(audit_id: str) -> Sentinel:
        if not username:
            name = await whoami(http)
            if not name:
                raise RuntimeError("the API server did not say who the sentinel's sender is")
            username.append(name)
        resp = await http.get(SENTINEL_PATH, headers={"Audit-ID": audit_id})
        if resp.status_code >= 500:
            raise RuntimeError(f"sentinel request answered HTTP {resp.status_code}")
        return Sentinel(username=username[0], request_uri=SENTINEL_PATH)

    return send
