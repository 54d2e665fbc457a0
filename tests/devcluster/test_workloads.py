"""Simulated nodes run real workloads: the scheduler binds pods to them and they report Running."""

from __future__ import annotations

import json
import time
from typing import Any

import pytest

from oasis_operator.core.environment.manifests import POOL_TAINT
from oasis_operator.devcluster import kube
from tests.devcluster.test_audit_trail import deployment

pytestmark = pytest.mark.cluster


def wait_for(predicate, timeout: float, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    return predicate()


def test_simulated_nodes_are_ready_with_capacity(cluster, admin):
    nodes = admin.get("/api/v1/nodes").json()["items"]
    assert len(nodes) >= 3
    for node in nodes:
        conditions = {c["type"]: c["status"] for c in node["status"]["conditions"]}
        assert conditions["Ready"] == "True", node["metadata"]["name"]
        assert node["status"]["allocatable"]["pods"] == "110"
        # A Ready node sheds the controller's not-ready taint; the pool's stays, keeping other pods off it.
        name = node["metadata"]["name"]
        taints = wait_for(
            lambda n=name: (
                (t := admin.get(f"/api/v1/nodes/{n}").json()["spec"].get("taints")) == [POOL_TAINT] and t
            ),
            timeout=30,
        )
        assert taints == [POOL_TAINT], admin.get(f"/api/v1/nodes/{name}").json()["spec"].get("taints")


def test_deployment_pods_are_bound_to_nodes_and_running(cluster, admin, namespace):
    kube.expect(
        admin.post(f"/apis/apps/v1/namespaces/{namespace}/deployments", json=deployment("shop", 3)),
        "create deployment",
        201,
    )

    def running_pods() -> list[dict[str, Any]]:
        pods = admin.get(f"/api/v1/namespaces/{namespace}/pods").json()["items"]
        ok = [p for p in pods if p["status"].get("phase") == "Running" and p["spec"].get("nodeName")]
        return ok if len(ok) == 3 else []

    pods = wait_for(running_pods, timeout=30)
    assert len(pods) == 3
    node_names = {n["metadata"]["name"] for n in admin.get("/api/v1/nodes").json()["items"]}
    for pod in pods:
        assert pod["spec"]["nodeName"] in node_names
        statuses = pod["status"]["containerStatuses"]
        assert statuses[0]["ready"] is True
        assert "running" in statuses[0]["state"]
        assert pod["status"]["podIP"]

    def available() -> bool:
        d = admin.get(f"/apis/apps/v1/namespaces/{namespace}/deployments/shop").json()
        return d.get("status", {}).get("availableReplicas") == 3

    assert wait_for(available, timeout=30), "the deployment controller sees the simulated pods as available"


def test_deleting_a_namespace_with_workloads_completes(cluster, admin):
    name = f"ns-{kube.random_suffix(6)}"
    kube.create_namespace(admin, name)
    kube.expect(
        admin.post(f"/apis/apps/v1/namespaces/{name}/deployments", json=deployment("cart", 2)),
        "create deployment",
        201,
    )
    assert wait_for(lambda: len(admin.get(f"/api/v1/namespaces/{name}/pods").json()["items"]) == 2, 30)
    started = time.monotonic()
    kube.delete_namespace(admin, name)
    gone = wait_for(
        lambda: admin.get(f"/api/v1/namespaces/{name}").status_code == 404, timeout=60, interval=0.2
    )
    assert gone, "namespace stuck in Terminating"
    assert time.monotonic() - started < 60


def test_nothing_an_agent_reads_of_nodes_and_pods_names_the_simulator(cluster, admin, namespace):
    kube.expect(
        admin.post(f"/apis/apps/v1/namespaces/{namespace}/deployments", json=deployment("ui", 1)),
        "create deployment",
        201,
    )

    def running() -> list[dict[str, Any]]:
        pods = admin.get(f"/api/v1/namespaces/{namespace}/pods").json()["items"]
        return [p for p in pods if p["status"].get("phase") == "Running"]

    pods = wait_for(running, timeout=30)
    assert pods
    nodes = admin.get("/api/v1/nodes").json()["items"]
    leases = admin.get("/apis/coordination.k8s.io/v1/namespaces/kube-node-lease/leases").json()["items"]
    text = json.dumps([pods, nodes, leases]).lower()
    for word in ("kwok", "fake", "simulat", "oasis"):
        assert word not in text, f"{word!r} is visible in pods, nodes or node leases"
    managers = {m["manager"] for p in pods for m in p["metadata"]["managedFields"]}
    assert "kubelet" in managers, managers
