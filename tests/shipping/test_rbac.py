"""The chart's ClusterRole on the real API server: the operator's ServiceAccount, bound by the chart,
can do what provisioning a scenario needs (a namespace, the agent's Role granting every resource,
its binding and token; cluster-scoped scenario RBAC only with the opt-in), and cannot do what nothing in
the operator does.

The chart's RBAC objects are applied for real under a release name of their own, used through a token
of the chart's ServiceAccount, and deleted afterwards.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml

from oasis_operator.core.environment.naming import OWNER_LABEL, owner_value
from oasis_operator.devcluster import kube
from tests.conftest import ClusterHandle
from tests.shipping.conftest import Tools, helm_template
from tests.shipping.test_chart import server_side_apply

RBAC_KINDS = ("ServiceAccount", "ClusterRole", "ClusterRoleBinding")
EVERYTHING = [{"apiGroups": ["*"], "resources": ["*"], "verbs": ["*"]}]


def rbac_docs(tools: Tools, tmp: Path, release: str, namespace: str, **values: Any) -> list[dict[str, Any]]:
    done = helm_template(tools, tmp, {"rbac": values} if values else None, release=release)
    assert done.returncode == 0, done.stderr
    docs = [d for d in yaml.safe_load_all(done.stdout) if d and d["kind"] in RBAC_KINDS]
    for d in docs:
        if d["kind"] == "ServiceAccount":
            d["metadata"]["namespace"] = namespace
        for subject in d.get("subjects", []):
            subject["namespace"] = namespace
    # Only the operator's own objects (the node simulator's are not under test here).
    return [d for d in docs if d["metadata"]["name"] == f"{release}-oasis-operator"]


def eventually(call: Any, want: int, timeout: float = 5.0) -> httpx2.Response:
    """RBAC changes reach the authorizer through a watch: retry a refused call for a moment."""
    deadline = time.monotonic() + timeout
    while True:
        resp: httpx2.Response = call()
        if resp.status_code == want or time.monotonic() > deadline:
            return resp
        time.sleep(0.1)


class Operator:
    """The chart's RBAC applied under ``release``, and a client authenticated as its ServiceAccount."""

    def __init__(self, cluster: ClusterHandle, tools: Tools, tmp: Path) -> None:
        self.cluster = cluster
        self.tools = tools
        self.tmp = tmp
        suffix = kube.random_suffix()
        self.release = f"rbac-{suffix}"
        self.name = f"{self.release}-oasis-operator"  # the chart's full name for this release
        self.home = f"rbac-home-{suffix}"
        self.scenario_ns = f"shop-{suffix}"
        self.cluster_roles: list[str] = []
        self.nodes: list[str] = []
        self.admin = cluster.admin_http()
        kube.create_namespace(self.admin, self.home)
        self.apply()
        token = kube.request_token(self.admin, self.home, self.name, 600)
        self.http = cluster.token_http(token)

    def apply(self, **values: Any) -> None:
        for doc in rbac_docs(self.tools, self.tmp, self.release, self.home, **values):
            resp = server_side_apply(self.admin, doc, dry_run=False)
            assert resp.status_code in (200, 201), resp.text

    def close(self) -> None:
        self.http.close()
        for name in [*self.cluster_roles, self.name]:
            self.admin.delete(f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}")
            self.admin.delete(f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{name}")
        for node in self.nodes:
            self.admin.delete(f"/api/v1/nodes/{node}")
        for ns in (self.scenario_ns, self.home):
            self.admin.delete(f"/api/v1/namespaces/{ns}")
        self.admin.close()


@pytest.fixture
def operator(cluster: ClusterHandle, tools: Tools, tmp_path: Path) -> Iterator[Operator]:
    op = Operator(cluster, tools, tmp_path)
    try:
        yield op
    finally:
        op.close()


RBAC = "/apis/rbac.authorization.k8s.io/v1"


@pytest.mark.cluster
def test_the_operator_can_provision_an_agent_with_every_right_in_its_namespace(operator: Operator) -> None:
    http, ns = operator.http, operator.scenario_ns
    created = eventually(lambda: http.post("/api/v1/namespaces", json={"metadata": {"name": ns}}), 201)
    assert created.status_code == 201, created.text
    sa = http.post(f"/api/v1/namespaces/{ns}/serviceaccounts", json={"metadata": {"name": "agent"}})
    assert sa.status_code == 201, sa.text
    # The Role grants what the operator itself does not hold (for example `*` on secrets' subresources,
    # any verb on any group): allowed by `escalate`, and bound thanks to `bind`.
    role = http.post(
        f"{RBAC}/namespaces/{ns}/roles", json={"metadata": {"name": "agent"}, "rules": EVERYTHING}
    )
    assert role.status_code == 201, role.text
    binding = {
        "metadata": {"name": "agent"},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "agent"},
        "subjects": [{"kind": "ServiceAccount", "name": "agent", "namespace": ns}],
    }
    assert http.post(f"{RBAC}/namespaces/{ns}/rolebindings", json=binding).status_code == 201
    token = http.post(
        f"/api/v1/namespaces/{ns}/serviceaccounts/agent/token",
        json={
            "apiVersion": "authentication.k8s.io/v1",
            "kind": "TokenRequest",
            "spec": {"expirationSeconds": 600},
        },
    )
    assert token.status_code == 201, token.text
    for path, body in [
        (f"/api/v1/namespaces/{ns}/configmaps", {"metadata": {"name": "report"}, "data": {"a": "b"}}),
        (f"/api/v1/namespaces/{ns}/limitranges", {"metadata": {"name": "l"}, "spec": {"limits": []}}),
    ]:
        assert http.post(path, json=body).status_code == 201, path
    # Cluster-scoped scenario RBAC: only with the opt-in rbac.clusterScopedScenarios.
    operator.apply(create=True, clusterScopedScenarios=True)
    operator.cluster_roles.append(f"{ns}-reader")
    cr = eventually(
        lambda: http.post(
            f"{RBAC}/clusterroles",
            json={
                "metadata": {"name": f"{ns}-reader", "labels": {OWNER_LABEL: owner_value(ns, ns)}},
                "rules": EVERYTHING,
            },
        ),
        201,
    )
    assert cr.status_code == 201, cr.text
    # A scenario's own node, created and removed with the scenario.
    node_name = f"{ns}-node"
    operator.nodes.append(node_name)
    created_node = http.post("/api/v1/nodes", json={"metadata": {"name": node_name}})
    assert created_node.status_code == 201, created_node.text
    assert http.delete(f"/api/v1/nodes/{node_name}").status_code == 200


@pytest.mark.cluster
def test_the_operator_cannot_do_what_it_never_does(operator: Operator) -> None:
    http = operator.http
    assert eventually(lambda: http.get("/api/v1/nodes"), 200).status_code == 200  # it may read nodes...
    node = http.get("/api/v1/nodes").json()["items"][0]["metadata"]["name"]
    # ... but not play their kubelet (the node simulator's job), nor touch the cluster's admission
    # or storage configuration.
    patch = http.patch(
        f"/api/v1/nodes/{node}/status",
        json={"status": {"conditions": [{"type": "Ready", "status": "False"}]}},
        headers={"Content-Type": "application/strategic-merge-patch+json"},
    )
    assert patch.status_code == 403
    assert (
        http.get("/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations").status_code == 403
    )
    assert http.get("/apis/storage.k8s.io/v1/storageclasses").status_code == 403
    assert (
        http.delete(
            "/apis/apiextensions.k8s.io/v1/customresourcedefinitions/evaluationruns.oasis.dev"
        ).status_code
        == 403
    )


@pytest.mark.cluster
def test_by_default_the_operator_cannot_write_cluster_rbac_nor_grant_any_right(operator: Operator) -> None:
    """rbac.clusterScopedScenarios is off by default: no escalate/bind on ClusterRoles (which would
    let the operator grant any right), no PersistentVolumes, no nodes."""
    name = f"{operator.scenario_ns}-reader"
    operator.cluster_roles.append(name)

    def create() -> httpx2.Response:
        return operator.http.post(
            f"{RBAC}/clusterroles", json={"metadata": {"name": name}, "rules": EVERYTHING}
        )

    # The narrower ClusterRole reaches the authorizer through a watch: wait for the refusal.
    assert eventually(create, 403).status_code == 403
    assert operator.http.get("/api/v1/persistentvolumes").status_code == 403
    operator.nodes.append(f"{operator.scenario_ns}-node")
    node = operator.http.post("/api/v1/nodes", json={"metadata": {"name": operator.nodes[-1]}})
    assert node.status_code == 403
