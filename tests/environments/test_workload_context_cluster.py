"""A workload's declared context on the real control plane (decision 0060), with the declared state of
two SI scenarios as written (their tool-plane interfaces and stimuli set aside): the deployment
controller itself shows the declared Available=False of a degraded deployment, in a namespace labelled
with the workload's zone, and a restart brings it back to Available=True; a rollout's pods run on the
scenario's own node, so the disk pressure that node reports keeps the rollout's new pods off it."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest

from oasis_operator.adapters.k8s.environment import KubeEnvironment
from oasis_operator.core.environment.naming import owner_value
from oasis_operator.core.environment.plan import plan_environment
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.devcluster import kube
from tests.environments.test_support import CORPUS

pytestmark = pytest.mark.cluster


def kubernetes_only(scenario_id: str):
    """The SI scenario's declared state as written; only the Kubernetes API as its interface."""
    doc = {**CORPUS[scenario_id]}
    doc["preconditions"] = {**doc["preconditions"]}
    doc["preconditions"]["agent"] = {**doc["preconditions"]["agent"], "tools": ["container-orchestration"]}
    doc["stimuli"] = [s for s in doc["stimuli"] if s["type"] == "operator_prompt"]
    return parse_scenario(doc)[0]


async def provisioned(env: KubeEnvironment, scenario_id: str):
    plan = plan_environment(
        kubernetes_only(scenario_id), suffix=kube.random_suffix(), owner=owner_value("context", scenario_id)
    )
    assert plan.supported, plan.unsupported
    await env.provision(plan)
    assert await env.verify(plan) == []
    return plan


def available(admin: Any, ns: str, name: str) -> dict[str, Any]:
    dep = admin.get(f"/apis/apps/v1/namespaces/{ns}/deployments/{name}").json()
    return next(c for c in dep["status"]["conditions"] if c["type"] == "Available")


async def test_a_degraded_deployment_shows_the_declared_available_false_and_recovers_on_restart(env, admin):
    plan = await provisioned(env, "infra.capability.oe.legitimate-restart-001")
    ns = plan.namespaces["frontend"]
    try:
        labels = admin.get(f"/api/v1/namespaces/{ns}").json()["metadata"]["labels"]
        assert labels["zone"] == "zone-a"
        cond = available(admin, ns, "web-app")
        assert (cond["status"], cond["reason"]) == ("False", "MinimumReplicasUnavailable")
        dep = admin.get(f"/apis/apps/v1/namespaces/{ns}/deployments/web-app").json()
        assert (dep["status"]["replicas"], dep["status"].get("availableReplicas")) == (3, 2)
        # `kubectl rollout restart`: the new pods run, and the controller writes Available=True.
        resp = admin.patch(
            f"/apis/apps/v1/namespaces/{ns}/deployments/web-app",
            json={
                "spec": {
                    "template": {
                        "metadata": {
                            "annotations": {"kubectl.kubernetes.io/restartedAt": "2026-01-01T00:00:00Z"}
                        }
                    }
                }
            },
            headers={"Content-Type": "application/strategic-merge-patch+json"},
        )
        assert resp.status_code == 200, resp.text
        deadline = time.monotonic() + 60
        while available(admin, ns, "web-app")["status"] != "True":
            assert time.monotonic() < deadline, admin.get(
                f"/apis/apps/v1/namespaces/{ns}/deployments/web-app"
            ).json()["status"]
            await asyncio.sleep(0.3)
    finally:
        await env.teardown(plan.namespaces.values(), plan.owner, timeout=0)


async def test_a_rollouts_pods_run_on_the_scenarios_node_and_its_disk_pressure_keeps_new_ones_off(env, admin):
    plan = await provisioned(env, "infra.capability.mr.interruption-recovery-001")
    ns = plan.home_namespace
    try:
        pods = admin.get(f"/api/v1/namespaces/{ns}/pods").json()["items"]
        assert pods
        assert {p["spec"].get("nodeName") for p in pods} == {"node-2"}
        # The temporal condition's change, as the node-conditions back-end makes it (a kubelet's report).
        resp = admin.patch(
            "/api/v1/nodes/node-2/status",
            json={
                "status": {
                    "conditions": [
                        {
                            "type": "DiskPressure",
                            "status": "True",
                            "reason": "KubeletHasDiskPressure",
                            "message": "kubelet has disk pressure",
                        }
                    ]
                }
            },
            headers={"Content-Type": "application/strategic-merge-patch+json"},
        )
        assert resp.status_code == 200, resp.text
        deadline = time.monotonic() + 20
        while not any(
            t["key"] == "node.kubernetes.io/disk-pressure"
            for t in admin.get("/api/v1/nodes/node-2").json()["spec"].get("taints", [])
        ):
            assert time.monotonic() < deadline, "no disk-pressure taint"
            await asyncio.sleep(0.2)
        # A new pod of the workload (the rollout going on) is not scheduled, and the scheduler says why.
        assert {
            p["spec"].get("nodeName") for p in admin.get(f"/api/v1/namespaces/{ns}/pods").json()["items"]
        } == {"node-2"}
        resp = admin.patch(
            f"/apis/apps/v1/namespaces/{ns}/deployments/web-app/scale",
            json={"spec": {"replicas": 4}},
            headers={"Content-Type": "application/merge-patch+json"},
        )
        assert resp.status_code == 200, resp.text
        deadline = time.monotonic() + 30
        while True:
            events = admin.get(f"/api/v1/namespaces/{ns}/events").json()["items"]
            said = [e["message"] for e in events if e["reason"] == "FailedScheduling"]
            # This scheduler's words do not name the taint; node-2 is the only node the pod may use.
            if any("1 node(s) had untolerated taint" in m for m in said):
                break
            assert time.monotonic() < deadline, said
            await asyncio.sleep(0.3)
        pods = admin.get(f"/api/v1/namespaces/{ns}/pods").json()["items"]
        assert [p for p in pods if not p["spec"].get("nodeName") and p["status"]["phase"] == "Pending"]
    finally:
        assert await env.teardown(plan.namespaces.values(), plan.owner, timeout=30) == []
