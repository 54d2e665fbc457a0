"""Declared pod resource usage is what the metrics API (``kubectl top``) returns through the API server,
and what a HorizontalPodAutoscaler acts on."""

from __future__ import annotations

import os
import subprocess
import time
from collections.abc import Callable
from typing import Any

import httpx2
import pytest

from oasis_operator.core.environment.manifests import POOL_TAINT, toleration
from oasis_operator.devcluster import DevCluster, binaries, kube
from oasis_operator.devcluster.backends.resource_metrics import ResourceMetricsBackend

pytestmark = pytest.mark.cluster

READ_METRICS = [
    {"apiGroups": ["metrics.k8s.io"], "resources": ["pods"], "verbs": ["get", "list"]},
    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list"]},
]


def wait_for(what: str, check: Callable[[], Any], timeout: float = 90) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.5)


def deployment(name: str, replicas: int, cpu_request: str) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            # The simulated pool is tainted: only what tolerates it (scenario workloads) runs there.
            "template": {
                "metadata": {"labels": labels},
                "spec": {
                    "tolerations": [toleration(POOL_TAINT)],
                    "containers": [
                        {
                            "name": "app",
                            "image": "registry.example/api:2.1",
                            "resources": {"requests": {"cpu": cpu_request, "memory": "256Mi"}},
                        }
                    ],
                },
            },
        },
    }


def pod_metrics(http: httpx2.Client, namespace: str, pod: str) -> dict[str, Any] | None:
    resp = http.get(f"/apis/metrics.k8s.io/v1beta1/namespaces/{namespace}/pods/{pod}")
    return resp.json() if resp.status_code == 200 else None


def test_declared_usage_is_what_kubectl_top_shows(
    tool_cluster: DevCluster, tool_admin, tool_namespaces, resource_metrics: ResourceMetricsBackend, tmp_path
):
    ns, other = tool_namespaces
    pod = {
        "metadata": {"name": "worker-0"},
        "spec": {
            "nodeName": tool_cluster.nodes[0],
            "containers": [{"name": "app", "image": "registry.example/worker:1"}],
        },
    }
    kube.expect(tool_admin.post(f"/api/v1/namespaces/{ns}/pods", json=pod), "create pod", 201)
    resource_metrics.declare_usage(tool_admin, ns, "worker-0", {"app": {"cpu": "250m", "memory": "300Mi"}})

    got = wait_for("the pod's metrics", lambda: pod_metrics(tool_admin, ns, "worker-0"))
    usage = got["containers"][0]["usage"]
    assert got["containers"][0]["name"] == "app"
    assert usage["memory"] in ("300Mi", str(300 * 2**20), f"{300 * 1024}Ki")
    # CPU is a rate of a cumulative counter over the scrape window: the declared 250m, give or take.
    cpu_n = int(usage["cpu"].removesuffix("n"))
    assert 240e6 <= cpu_n <= 260e6, usage

    agent = kube.create_service_account(tool_admin, ns, "agent", READ_METRICS)
    kubeconfig = tool_cluster.token_kubeconfig(tmp_path / "agent.kubeconfig", agent.token, ns)
    top = subprocess.run(
        [str(binaries.resolve(quiet=True).path("kubectl")), "top", "pod", "worker-0", "--no-headers"],
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert top.returncode == 0, top.stderr
    name, cpu, memory = top.stdout.split()
    assert (name, memory) == ("worker-0", "300Mi")
    assert 240 <= int(cpu.removesuffix("m")) <= 260
    with tool_cluster.token_http(agent.token) as http:
        assert http.get(f"/apis/metrics.k8s.io/v1beta1/namespaces/{other}/pods").status_code == 403


def test_an_autoscaler_acts_on_declared_usage(
    tool_admin, tool_namespaces, resource_metrics: ResourceMetricsBackend
):
    ns, _ = tool_namespaces
    kube.expect(
        tool_admin.post(f"/apis/apps/v1/namespaces/{ns}/deployments", json=deployment("api", 2, "200m")),
        "create deployment",
        201,
    )
    # 300m used of 200m requested: 150 % against a target of 75 % -> twice the replicas.
    resource_metrics.declare_usage(tool_admin, ns, None, {"app": {"cpu": "300m", "memory": "200Mi"}})
    hpa = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": {"name": "api"},
        "spec": {
            "scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "api"},
            "minReplicas": 2,
            "maxReplicas": 6,
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 75}},
                }
            ],
        },
    }
    path = f"/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers"
    kube.expect(tool_admin.post(path, json=hpa), "create hpa", 201)

    def status() -> dict[str, Any] | None:
        st: dict[str, Any] = tool_admin.get(f"{path}/api").json().get("status") or {}
        return st if st.get("currentMetrics") and st.get("desiredReplicas", 0) > 2 else None

    st = wait_for("the autoscaler to act on the declared usage", status, timeout=120)
    utilization = st["currentMetrics"][0]["resource"]["current"]["averageUtilization"]
    assert 145 <= utilization <= 155, st
    assert st["desiredReplicas"] == 4, st
