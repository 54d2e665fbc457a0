"""Small synchronous Kubernetes helpers over plain HTTP for the embedded control plane.

Called by the test fixtures, the audit-recording script and ``oasis dev-cluster status``; turns a few
common requests (namespaces, service accounts with a Role, TokenRequest, the audit barrier) into one
call each. The operator itself uses the asynchronous adapters; this module exists so tests and tools
talk to the API server exactly as any client would, with nothing mocked.
"""

from __future__ import annotations

import secrets
import uuid
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2

from oasis_operator.adapters.audit.file_tail import AuditEvent, AuditFileTail, is_complete
from oasis_operator.adapters.k8s.cluster_access import ClusterAccess


class KubeError(Exception):
    def __init__(self, what: str, response: httpx2.Response) -> None:
        super().__init__(f"{what}: HTTP {response.status_code}: {response.text[:500]}")
        self.status_code = response.status_code


def expect(response: httpx2.Response, what: str, *codes: int) -> dict[str, Any]:
    if response.status_code not in (codes or (200, 201)):
        raise KubeError(what, response)
    body: dict[str, Any] = response.json() if response.content else {}
    return body


def random_suffix(n: int = 5) -> str:
    alphabet = "bcdfghjklmnpqrstvwxz2456789"
    return "".join(secrets.choice(alphabet) for _ in range(n))


def create_namespace(http: httpx2.Client, name: str, labels: dict[str, str] | None = None) -> None:
    body = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels or {}}}
    expect(http.post("/api/v1/namespaces", json=body), f"create namespace {name}", 201)


def delete_namespace(http: httpx2.Client, name: str) -> None:
    expect(http.delete(f"/api/v1/namespaces/{name}"), f"delete namespace {name}", 200, 202, 404)


@dataclass(frozen=True)
class Principal:
    """A service account with a token: who an agent (or a test) acts as."""

    namespace: str
    name: str
    token: str

    @property
    def username(self) -> str:
        return f"system:serviceaccount:{self.namespace}:{self.name}"


def create_service_account(
    http: httpx2.Client,
    namespace: str,
    name: str,
    rules: list[dict[str, Any]],
    *,
    expiration_seconds: int = 3600,
) -> Principal:
    """A ServiceAccount bound to a namespaced Role with ``rules``, and a TokenRequest token for it."""
    base = f"/api/v1/namespaces/{namespace}"
    expect(
        http.post(f"{base}/serviceaccounts", json={"metadata": {"name": name}}), "create serviceaccount", 201
    )
    rbac = f"/apis/rbac.authorization.k8s.io/v1/namespaces/{namespace}"
    expect(http.post(f"{rbac}/roles", json={"metadata": {"name": name}, "rules": rules}), "create role", 201)
    binding = {
        "metadata": {"name": name},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
        "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
    }
    expect(http.post(f"{rbac}/rolebindings", json=binding), "create rolebinding", 201)
    return Principal(namespace, name, request_token(http, namespace, name, expiration_seconds))


def request_token(http: httpx2.Client, namespace: str, name: str, expiration_seconds: int = 3600) -> str:
    body = {
        "apiVersion": "authentication.k8s.io/v1",
        "kind": "TokenRequest",
        "spec": {"expirationSeconds": expiration_seconds},
    }
    out = expect(
        http.post(f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}/token", json=body),
        f"token request for {namespace}/{name}",
        201,
    )
    token: str = out["status"]["token"]
    return token


def audit_barrier(
    http: httpx2.Client, tail: AuditFileTail, timeout: float = 10.0, sink: list[AuditEvent] | None = None
) -> str | None:
    """Make a sentinel request with our own ``Audit-ID`` and read the log until it has arrived.

    Every event read on the way is appended to ``sink``. Returns the sentinel's audit ID, or ``None``
    when it did not arrive in time (the caller must then treat the evidence as incomplete).
    """
    audit_id = f"barrier-{uuid.uuid4()}"
    http.get("/api/v1/namespaces/default", headers={"Audit-ID": audit_id})
    found = tail.wait_for(lambda e: is_complete(e, audit_id), timeout, sink=sink)
    return audit_id if found is not None else None


def http_from_kubeconfig(path: Path, timeout: float = 10.0) -> httpx2.Client:
    """A synchronous HTTP client for the current context of a kubeconfig (the shared loader's)."""
    return ClusterAccess.from_kubeconfig(path).sync_http(timeout)
