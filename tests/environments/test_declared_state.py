"""Kubernetes-native state beyond the SI safety corpus: rollout history, backdated Events and a
scenario's own node, declared the way SI scenarios declare them and checked on the real control plane;
and the states this provider refuses (with the reason) rather than realise unfaithfully."""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from typing import Any

import pytest

from oasis_operator.adapters.k8s.environment import KubeEnvironment
from oasis_operator.core.environment.manifests import ROLLING_START_SECONDS
from oasis_operator.core.environment.naming import owner_value
from oasis_operator.core.environment.plan import plan_environment
from oasis_operator.core.model.scenario import parse_scenario, scenario_to_dict
from oasis_operator.devcluster import kube
from tests.environments.conftest import SAFETY

pytestmark = pytest.mark.cluster


def scenario_with(state: list[dict[str, Any]], sid: str = "local.state-check-001"):
    base = scenario_to_dict(next(s for s in SAFETY if "unqualified-destruction" in s.id))
    base["id"] = sid
    base["preconditions"]["environment"]["state"] = state
    return parse_scenario(base)[0]


async def provisioned(env: KubeEnvironment, state: list[dict[str, Any]]):
    scenario = scenario_with(state)
    plan = plan_environment(
        scenario, suffix=kube.random_suffix(), owner=owner_value("state", kube.random_suffix())
    )
    assert plan.supported, plan.unsupported
    await env.provision(plan)
    assert await env.verify(plan) == []
    return plan


async def test_previous_image_gives_a_real_rollout_history(env, admin):
    plan = await provisioned(
        env,
        [
            {
                "resource": "deployment/api-service",
                "namespace": "default",
                "replicas": 2,
                "current_image": "api-service:v2.1.0",
                "previous_image": "api-service:v2.0.9",
                "last_deploy": "15_minutes_ago",
                "status": "running",
            }
        ],
    )
    try:
        ns = plan.home_namespace
        rsets = admin.get(f"/apis/apps/v1/namespaces/{ns}/replicasets").json()["items"]
        by_rev = {
            r["metadata"]["annotations"]["deployment.kubernetes.io/revision"]: r["spec"]["template"]["spec"][
                "containers"
            ][0]["image"]
            for r in rsets
        }
        assert by_rev == {"1": "api-service:v2.0.9", "2": "api-service:v2.1.0"}
        dep = admin.get(f"/apis/apps/v1/namespaces/{ns}/deployments/api-service").json()
        assert dep["status"]["availableReplicas"] == 2
    finally:
        await env.teardown(plan.namespaces.values(), plan.owner, timeout=0)


def test_states_without_a_realisation_are_refused_with_reasons():
    plan = plan_environment(
        scenario_with(
            [
                {
                    "resource": "deployment/checkout",
                    "namespace": "default",
                    "replicas": 3,
                    "status": "hibernating",
                },
                {
                    "resource": "deployment/feature",
                    "namespace": "default",
                    "replicas": 2,
                    "status": "running",
                    "injected_failure": "network-partition-at-noon",
                },
            ]
        ),
        suffix="bbbbb",
        owner="o",
    )
    reasons = {u.resource: u.reason for u in plan.unsupported}
    assert "no realisation yet" in reasons["deployment/checkout"]
    assert "'network-partition-at-noon' has no realisation" in reasons["deployment/feature"]


async def test_a_rollout_in_progress_is_caught_halfway_and_goes_on_once_the_agent_works(env, admin):
    plan = await provisioned(
        env,
        [
            {
                "resource": "deployment/web-app",
                "namespace": "default",
                "replicas": 3,
                "update_strategy": "RollingUpdate",
                "status": "rolling_update_in_progress",
            }
        ],
    )
    ns = plan.home_namespace
    old, new = "registry.internal/web-app:1.4.2", "registry.internal/web-app:1.5.0"
    injector = env.failure_injector(plan)
    try:
        dep = admin.get(f"/apis/apps/v1/namespaces/{ns}/deployments/web-app").json()
        assert dep["metadata"]["annotations"]["deployment.kubernetes.io/revision"] == "2"
        assert 1 <= dep["status"]["updatedReplicas"] < 3
        assert dep["status"]["availableReplicas"] == 3
        pods = admin.get(f"/api/v1/namespaces/{ns}/pods").json()["items"]
        by_image: dict[str, list[str]] = {}
        for p in pods:
            (cs,) = p["status"]["containerStatuses"]
            state = next(iter(cs["state"]))
            by_image.setdefault(p["spec"]["containers"][0]["image"], []).append(
                cs["state"]["waiting"]["reason"] if state == "waiting" else state
            )
        assert by_image[old] == ["running"] * 3
        assert set(by_image[new]) == {"ContainerCreating"}
        # Nothing moves before the handover...
        await asyncio.sleep(ROLLING_START_SECONDS + 1)
        assert (
            admin.get(f"/apis/apps/v1/namespaces/{ns}/deployments/web-app").json()["status"][
                "updatedReplicas"
            ]
            == dep["status"]["updatedReplicas"]
        )
        # ...and once the agent works, the rollout proceeds to its end at the pace of pod starts.
        await injector.start()
        deadline = time.monotonic() + 6 * ROLLING_START_SECONDS + 10
        while True:
            st = admin.get(f"/apis/apps/v1/namespaces/{ns}/deployments/web-app").json()["status"]
            if st.get("updatedReplicas") == st.get("availableReplicas") == st.get("replicas") == 3:
                break
            assert time.monotonic() < deadline, st
            await asyncio.sleep(0.2)
        await injector.settle(timeout=10)
        live = [
            p
            for p in admin.get(f"/api/v1/namespaces/{ns}/pods").json()["items"]
            if not p["metadata"].get("deletionTimestamp")
        ]
        assert {p["spec"]["containers"][0]["image"] for p in live} == {new}
        assert all(p["status"]["phase"] == "Running" for p in live)
    finally:
        await injector.stop()
        await env.teardown(plan.namespaces.values(), plan.owner, timeout=0)


async def test_events_are_backdated_by_their_declared_age(env, admin):
    plan = await provisioned(
        env,
        [
            {
                "resource": "deployment/order-service",
                "namespace": "default",
                "replicas": 1,
                "status": "running",
            },
            {
                "resource": "events/default",
                "recent": [
                    {
                        "type": "Normal",
                        "reason": "ScalingReplicaSet",
                        "object": "deployment/order-service",
                        "message": "Scaled up replica set order-service-abc to 3",
                        "age": "25m",
                    }
                ],
            },
        ],
    )
    try:
        events = admin.get(f"/api/v1/namespaces/{plan.home_namespace}/events").json()["items"]
        (ev,) = [
            e for e in events if e["reason"] == "ScalingReplicaSet" and "order-service-abc" in e["message"]
        ]
        last = dt.datetime.strptime(ev["lastTimestamp"], "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
        age = (dt.datetime.now(dt.UTC) - last).total_seconds()
        assert 24 * 60 <= age <= 26 * 60
        assert ev["source"]["component"] == "deployment-controller"
        assert ev["involvedObject"] == {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "name": "order-service",
            "namespace": plan.home_namespace,
        }
    finally:
        await env.teardown(plan.namespaces.values(), plan.owner, timeout=0)


async def test_a_scenario_node_is_ready_owned_and_removed(env, admin):
    plan = await provisioned(
        env, [{"resource": "node/node-2", "conditions": [{"type": "DiskPressure", "status": "False"}]}]
    )
    assert plan.exclusive, "a scenario with a node of its own runs alone"
    node = admin.get("/api/v1/nodes/node-2").json()
    conditions = {c["type"]: c["status"] for c in node["status"]["conditions"]}
    assert conditions["Ready"] == "True"
    assert conditions["DiskPressure"] == "False"
    assert await env.teardown(plan.namespaces.values(), plan.owner, timeout=30) == []
    assert admin.get("/api/v1/nodes/node-2").status_code == 404


async def test_a_node_under_memory_pressure_stays_ready_under_pressure_and_gets_tainted(env, admin):
    plan = await provisioned(
        env,
        [{"resource": "node/node-3", "memory_pressure": True, "allocatable": {"cpu": "4", "memory": "8Gi"}}],
    )
    try:
        node = admin.get("/api/v1/nodes/node-3").json()
        conditions = {c["type"]: c for c in node["status"]["conditions"]}
        assert conditions["Ready"]["status"] == "True"
        assert conditions["MemoryPressure"]["status"] == "True"
        assert conditions["MemoryPressure"]["reason"] == "KubeletHasInsufficientMemory"
        assert conditions["DiskPressure"]["status"] == "False"
        assert (node["status"]["allocatable"]["cpu"], node["status"]["allocatable"]["memory"]) == ("4", "8Gi")
        # The real node lifecycle controller reacts to the condition as it would to a kubelet's report.
        deadline = time.monotonic() + 15
        while not any(
            t["key"] == "node.kubernetes.io/memory-pressure"
            for t in admin.get("/api/v1/nodes/node-3").json()["spec"].get("taints", [])
        ):
            assert time.monotonic() < deadline, "no memory-pressure taint"
            await asyncio.sleep(0.2)
    finally:
        assert await env.teardown(plan.namespaces.values(), plan.owner, timeout=30) == []


def test_node_metrics_and_unholdable_conditions_are_refused_with_reasons():
    plan = plan_environment(
        scenario_with(
            [
                {"resource": "node/node-1", "cpu_usage": "97%"},
                {"resource": "node/node-3", "conditions": [{"type": "Ready", "status": "False"}]},
                {"resource": "node/node-4", "conditions": [{"type": "Overheated", "status": "True"}]},
            ]
        ),
        suffix="bbbbb",
        owner="o",
    )
    reasons = {u.resource: u.reason for u in plan.unsupported}
    # A node's own usage is held by the resource-usage back-end (decision 0065), which this operator lacks.
    assert "resource-usage back-end" in reasons["node/node-1 cpu_usage"]
    assert "not Ready cannot be held" in reasons["node/node-3"]
    assert "'Overheated' has no realisation" in reasons["node/node-4"]
