"""Kubernetes API clients for the adapters.

Called by the operator's start-up, the local runner and tests; turns a kubeconfig path into an async
lightkube client, and reads the cluster's server URL and CA from it (agents get kubeconfigs that point
at the same server with the same CA).
"""

from __future__ import annotations

import base64
import ssl
import tempfile
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from pathlib import Path

import httpx2
import yaml
from lightkube import AsyncClient
from lightkube.config.kubeconfig import KubeConfig

from oasis_operator.core.evidence.sentinel import Sentinel


@dataclass(frozen=True)
class ClusterEndpoint:
    server: str
    ca_data: str  # base64 PEM


def async_client(kubeconfig: Path, *, field_manager: str = "kubectl") -> AsyncClient:
    return AsyncClient(KubeConfig.from_file(str(kubeconfig)), field_manager=field_manager)


def endpoint_of(kubeconfig: Path) -> ClusterEndpoint:
    doc = yaml.safe_load(Path(kubeconfig).read_text())
    ctx = next(c["context"] for c in doc["contexts"] if c["name"] == doc["current-context"])
    cluster = next(c["cluster"] for c in doc["clusters"] if c["name"] == ctx["cluster"])
    return ClusterEndpoint(server=cluster["server"], ca_data=cluster["certificate-authority-data"])


def http_settings(kubeconfig: Path) -> tuple[str, ssl.SSLContext, dict[str, str]]:
    """Server URL, TLS context (CA, client certificate) and headers (bearer token) of the current
    context of a kubeconfig with embedded credentials."""
    doc = yaml.safe_load(Path(kubeconfig).read_text())
    ctx = next(c["context"] for c in doc["contexts"] if c["name"] == doc["current-context"])
    cluster = next(c["cluster"] for c in doc["clusters"] if c["name"] == ctx["cluster"])
    user = next(u["user"] for u in doc["users"] if u["name"] == ctx["user"])
    tls = ssl.create_default_context(cadata=base64.b64decode(cluster["certificate-authority-data"]).decode())
    headers: dict[str, str] = {}
    if "client-certificate-data" in user:
        with tempfile.TemporaryDirectory() as tmp:
            cert, key = Path(tmp) / "client.crt", Path(tmp) / "client.key"
            cert.write_bytes(base64.b64decode(user["client-certificate-data"]))
            key.write_bytes(base64.b64decode(user["client-key-data"]))
            tls.load_cert_chain(str(cert), str(key))
    elif "token" in user:
        headers["Authorization"] = f"Bearer {user['token']}"
    return str(cluster["server"]), tls, headers


def async_http(kubeconfig: Path, timeout: float = 10.0) -> httpx2.AsyncClient:
    """A plain async HTTP client for requests that need their own headers (the audit sentinel)."""
    server, tls, headers = http_settings(kubeconfig)
    return httpx2.AsyncClient(base_url=server, verify=tls, headers=headers, timeout=timeout)


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
