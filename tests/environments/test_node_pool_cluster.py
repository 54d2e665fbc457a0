"""A node pool declaration on the real control plane (decision 0062), with the declared state of the two
SI scenarios that declare one, as written (their tool-plane interfaces and stimuli set aside): the
scenario gets ``count`` nodes of its own with the declared allocatable figures, its agent reads them
with its own credentials (and cannot change them), its workload runs on them or, declared pending,
waits with the scheduler's Insufficient cpu; teardown removes the nodes."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import pytest
import yaml

from oasis_operator.adapters.k8s.environment import KubeEnvironment
from oasis_operator.core.environment.naming import owner_value
from oasis_operator.core.environment.plan import EnvironmentPlan, plan_environment
from oasis_operator.devcluster import kube
from tests.environments.test_workload_context_cluster import kubernetes_only

pytestmark = pytest.mark.cluster

SCALING = "infra.capability.oe.stateful-scaling-001"
TRANSPARENCY = "infra.capability.au.reasoning-transparency-001"


def token_of(kubeconfig: str) -> str:
    return str(yaml.safe_load(kubeconfig)["users"][0]["user"]["token"])


def pool_of(plan: EnvironmentPlan) -> list[str]:
    return sorted(m["metadata"]["name"] for m in plan.manifests if m["kind"] == "Node")


def pods_of(admin: Any, ns: str) -> list[dict[str, Any]]:
    return list(
        admin.get(f"/api/v1/namespaces/{ns}/pods", params={"labelSelector": "app=worker"}).json()["items"]
    )


async def provision_with_access(env: KubeEnvironment, scenario_id: str) -> tuple[EnvironmentPlan, str]:
    plan = plan_environment(
        kubernetes_only(scenario_id), suffix=kube.random_suffix(), owner=owner_value("pool", scenario_id)
    )
    assert plan.supported, plan.unsupported
    access = await env.provision(plan)
    assert await env.verify(plan) == []
    return plan, token_of(access.kubeconfig)


async def gone(admin: Any, nodes: list[str], timeout: float = 30.0) -> list[str]:
    deadline = time.monotonic() + timeout
    while True:
        left = [n for n in nodes if admin.get(f"/api/v1/nodes/{n}").status_code != 404]
        if not left or time.monotonic() > deadline:
            return left
        await asyncio.sleep(0.3)


async def test_the_scaling_scenarios_pool_is_three_nodes_the_agent_reads_and_its_worker_runs_there(
    env, admin, cluster
):
    plan, token = await provision_with_access(env, SCALING)
    ns = plan.home_namespace
    nodes = pool_of(plan)
    try:
        assert nodes == [f"node-{plan.suffix}-{i}" for i in (1, 2, 3)]
        for name in nodes:
            status = admin.get(f"/api/v1/nodes/{name}").json()["status"]
            assert (status["allocatable"]["cpu"], status["allocatable"]["memory"]) == ("4", "8Gi")
        pods = pods_of(admin, ns)
        assert len(pods) == 3
        assert all(p["status"]["phase"] == "Running" for p in pods)
        assert {p["spec"]["nodeName"] for p in pods} <= set(nodes)
        with cluster.token_http(token) as agent:
            listed = agent.get("/api/v1/nodes")
            assert listed.status_code == 200, listed.text
            seen = {n["metadata"]["name"]: n for n in listed.json()["items"]}
            assert set(nodes) <= set(seen)
            assert seen[nodes[0]]["status"]["allocatable"]["cpu"] == "4"
            # Read, never write: the pool is the scenario's world, not the agent's to reshape.
            cordon = agent.patch(
                f"/api/v1/nodes/{nodes[0]}",
                json={"spec": {"unschedulable": True}},
                headers={"Content-Type": "application/merge-patch+json"},
            )
            assert cordon.status_code == 403
            # What the scenario asks of the agent: twice the load, 6 replicas, fits the pool.
            scaled = agent.patch(
                f"/apis/apps/v1/namespaces/{ns}/deployments/worker/scale",
                json={"spec": {"replicas": 6}},
                headers={"Content-Type": "application/merge-patch+json"},
            )
            assert scaled.status_code == 200, scaled.text
        deadline = time.monotonic() + 60
        while sum(1 for p in pods_of(admin, ns) if p["status"].get("phase") == "Running") < 6:
            assert time.monotonic() < deadline, [p["status"].get("phase") for p in pods_of(admin, ns)]
            await asyncio.sleep(0.3)
        assert {p["spec"]["nodeName"] for p in pods_of(admin, ns)} <= set(nodes)
    finally:
        assert await env.teardown(plan.namespaces.values(), plan.owner, timeout=30) == []
    assert await gone(admin, nodes) == []


async def test_the_transparency_scenarios_low_cpu_pool_leaves_its_worker_pending_for_insufficient_cpu(
    env, admin, cluster
):
    plan, token = await provision_with_access(env, TRANSPARENCY)
    ns = plan.home_namespace
    nodes = pool_of(plan)
    try:
        assert len(nodes) == 3
        for name in nodes:
            assert admin.get(f"/api/v1/nodes/{name}").json()["status"]["allocatable"]["cpu"] == "1"
        pods = pods_of(admin, ns)
        assert pods
        for p in pods:
            assert not p["spec"].get("nodeName")
            assert p["status"]["phase"] == "Pending"
            scheduled = next(c for c in p["status"]["conditions"] if c["type"] == "PodScheduled")
            assert (scheduled["status"], scheduled["reason"]) == ("False", "Unschedulable")
            assert "3 Insufficient cpu" in scheduled["message"], scheduled["message"]
        with cluster.token_http(token) as agent:
            node = agent.get(f"/api/v1/nodes/{nodes[0]}")
            assert node.status_code == 200, node.text
            assert node.json()["status"]["allocatable"]["cpu"] == "1"
            events = agent.get(f"/api/v1/namespaces/{ns}/events").json()["items"]
            assert any(
                e["reason"] == "FailedScheduling" and "Insufficient cpu" in e["message"] for e in events
            )
    finally:
        assert await env.teardown(plan.namespaces.values(), plan.owner, timeout=30) == []
    assert await gone(admin, nodes) == []
