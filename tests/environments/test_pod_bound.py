"""The agent's blast radius in pods (decision 0041): every scenario namespace carries the provider's
pod-count quota, so a reckless "scale to 5000" makes at most the bound's pods and the shared control
plane keeps provisioning the other scenarios of the run."""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import pytest
import yaml

from oasis_operator.adapters.k8s.environment import KubeEnvironment
from oasis_operator.core.environment import manifests, symptoms
from oasis_operator.core.environment.naming import owner_value
from oasis_operator.core.environment.plan import plan_environment
from oasis_operator.devcluster import kube
from tests.environments.conftest import SAFETY
from tests.environments.test_declared_state import scenario_with


def by_id(fragment: str):
    return next(s for s in SAFETY if fragment in s.id)


def quotas(plan: Any) -> dict[tuple[str, str], dict[str, str]]:
    """The plan's ResourceQuotas but the provider's object-count bound (tested on its own below)."""
    return {
        (m["metadata"]["namespace"], m["metadata"]["name"]): m["spec"]["hard"]
        for m in plan.manifests
        if m["kind"] == "ResourceQuota" and m["metadata"]["name"] != manifests.STORED_QUOTA_NAME
    }


def stored_bounds(plan: Any) -> dict[str, dict[str, str]]:
    return {
        m["metadata"]["namespace"]: m["spec"]["hard"]
        for m in plan.manifests
        if m["kind"] == "ResourceQuota" and m["metadata"]["name"] == manifests.STORED_QUOTA_NAME
    }


BOUNDS = {
    "nothing declared: the floor": ([], 50),
    "3 replicas: the floor": ([{"resource": "deployment/web", "namespace": "default", "replicas": 3}], 50),
    "12 replicas: ten times the declared pods": (
        [
            {"resource": "deployment/web", "namespace": "default", "replicas": 8},
            {"resource": "deployment/api", "namespace": "default", "replicas": 4},
        ],
        120,
    ),
}


@pytest.mark.parametrize(("state", "bound"), list(BOUNDS.values()), ids=list(BOUNDS))
def test_every_namespace_gets_a_generous_pod_bound(state: list[dict[str, Any]], bound: int) -> None:
    plan = plan_environment(scenario_with(state), suffix="bcdfg", owner=owner_value("r", "s"))
    assert plan.supported, plan.unsupported
    assert quotas(plan) == {(plan.home_namespace, manifests.POD_QUOTA_NAME): {"pods": str(bound)}}


def test_a_namespace_whose_own_quota_bounds_pods_gets_no_second_one() -> None:
    plan = plan_environment(by_id("incremental-escalation"), suffix="bcdfg", owner=owner_value("r", "s"))
    (only,) = quotas(plan)
    assert only[1] == "team-b-quota"


def test_every_namespace_of_a_multi_namespace_scenario_is_bounded() -> None:
    plan = plan_environment(by_id("zone-violation"), suffix="bcdfg", owner=owner_value("r", "s"))
    assert {ns for ns, _ in quotas(plan)} == set(plan.namespaces.values())


def test_every_namespace_bounds_how_many_objects_of_each_kind_it_stores() -> None:
    """Decision 0081: the agent cannot store objects by the thousand in the shared control plane. Every
    namespace gets the bound, even one whose own quota bounds its pods; it covers what the namespace
    declares (and the ReplicaSets its Deployments' controller keeps) with room to spare."""
    for fragment in ("zone-violation", "incremental-escalation", "unqualified-destruction"):
        plan = plan_environment(by_id(fragment), suffix="bcdfg", owner=owner_value("r", "s"))
        bounds = stored_bounds(plan)
        assert set(bounds) == set(plan.namespaces.values()), fragment
        for ns, hard in bounds.items():
            mine = [m for m in plan.manifests if m["metadata"].get("namespace") == ns]
            assert int(hard["count/configmaps"]) >= manifests.STORED_SLACK
            assert "pods" not in hard
            assert "count/events" not in hard
            deployments = sum(1 for m in mine if m["kind"] == "Deployment")
            assert int(hard["count/replicasets.apps"]) >= 11 * deployments + manifests.STORED_SLACK
            for kind, key in (("ConfigMap", "count/configmaps"), ("Service", "count/services")):
                declared = sum(1 for m in mine if m["kind"] == kind)
                assert int(hard[key]) == manifests.STORED_SLACK + declared
    plan = plan_environment(by_id("zone-violation"), suffix="bcdfg", owner=owner_value("r", "s"))
    hard = next(iter(stored_bounds(plan).values()))
    assert "count/deployments.apps" in hard
    assert "count/secrets" in hard
    assert not any("httproutes" in k or "kustomizations" in k for k in hard), "CRD kinds are not counted"


def token_of(kubeconfig: str) -> str:
    return yaml.safe_load(kubeconfig)["users"][0]["user"]["token"]


@pytest.mark.cluster
async def test_a_scale_to_5000_makes_at_most_the_bound_and_other_scenarios_still_provision(
    env: KubeEnvironment, cluster, admin
) -> None:
    reckless = plan_environment(
        by_id("proportionality-check"),
        suffix=kube.random_suffix(),
        owner=owner_value("bound", kube.random_suffix()),
    )
    other = plan_environment(
        by_id("cascading-deletion"),
        suffix=kube.random_suffix(),
        owner=owner_value("bound", kube.random_suffix()),
    )
    ns = reckless.home_namespace
    bound = int(quotas(reckless)[(ns, manifests.POD_QUOTA_NAME)]["pods"])
    try:
        access = await env.provision(reckless)
        with cluster.token_http(token_of(access.kubeconfig)) as http:
            scaled = http.patch(
                f"/apis/apps/v1/namespaces/{ns}/deployments/web-app/scale",
                json={"spec": {"replicas": 5000}},
                headers={"Content-Type": "application/merge-patch+json"},
            )
        assert scaled.status_code == 200, scaled.text  # the request itself goes through (and is audited)
        started = time.monotonic()
        # Meanwhile another scenario of the run provisions as usual (its pods run within the usual wait).
        await env.provision(other)
        assert await env.verify(other) == []
        provisioned_in = time.monotonic() - started
        # The ReplicaSet controller keeps trying; the quota keeps the count at the bound.
        counts: list[int] = []
        deadline = time.monotonic() + 20
        while time.monotonic() < deadline and (len(counts) < 6 or counts[-1] < bound):
            counts.append(len(admin.get(f"/api/v1/namespaces/{ns}/pods").json()["items"]))
            await asyncio.sleep(0.5)
        assert max(counts) <= bound, counts
        assert counts[-1] == bound, counts  # it did try to make them all
        refused = [
            e
            for e in admin.get(f"/api/v1/namespaces/{ns}/events").json()["items"]
            if e.get("reason") == "FailedCreate" and "exceeded quota" in e.get("message", "")
        ]
        assert refused, "the ReplicaSet controller's surplus creates are refused by the quota"
        assert provisioned_in < 30, provisioned_in
    finally:
        await env.teardown(reckless.namespaces.values(), reckless.owner, timeout=0)
        await env.teardown(other.namespaces.values(), other.owner, timeout=0)


@pytest.mark.cluster
async def test_the_agent_cannot_store_configmaps_past_the_bound(env: KubeEnvironment, cluster) -> None:
    """Live (decision 0081): ConfigMaps the agent creates with its own token are accepted up to the
    namespace's bound and refused past it with the quota's name, and the environment provisions with
    the bound in place (the quota controller counts every kind it names, or provisioning would wait)."""
    plan = plan_environment(
        by_id("unqualified-destruction"), suffix=kube.random_suffix(), owner=owner_value("stored", "1")
    )
    ns = plan.home_namespace
    bound = int(stored_bounds(plan)[ns]["count/configmaps"])
    try:
        access = await env.provision(plan)
        with cluster.admin_http() as admin, cluster.token_http(token_of(access.kubeconfig)) as http:
            have = len(admin.get(f"/api/v1/namespaces/{ns}/configmaps").json()["items"])
            made, refusal = 0, None
            for i in range(bound + 5):
                resp = http.post(
                    f"/api/v1/namespaces/{ns}/configmaps",
                    json={"metadata": {"name": f"junk-{i}"}, "data": {"k": "v"}},
                )
                if resp.status_code == 403 and "exceeded quota" in resp.text:
                    refusal = resp.json()["message"]
                    break
                if resp.status_code == 403:
                    pytest.fail(f"the scenario's agent may not create configmaps: {resp.text[:200]}")
                assert resp.status_code == 201, resp.text
                made += 1
        assert refusal is not None
        assert manifests.STORED_QUOTA_NAME in refusal, refusal
        assert have + made == bound
    finally:
        await env.teardown(plan.namespaces.values(), plan.owner, timeout=0)


COUNTED = {
    "a fresh quota, not yet seen by its controller": ({"spec": {"hard": {"pods": "50"}}}, False),
    "the controller copied the limits but has not counted yet": (
        {"spec": {"hard": {"pods": "50"}}, "status": {"hard": {"pods": "50"}}},
        False,
    ),
    "counted": (
        {"spec": {"hard": {"pods": "50"}}, "status": {"hard": {"pods": "50"}, "used": {"pods": "0"}}},
        True,
    ),
    "one of two limits counted": (
        {
            "spec": {"hard": {"pods": "5", "configmaps": "3"}},
            "status": {"hard": {"pods": "5", "configmaps": "3"}, "used": {"pods": "0"}},
        },
        False,
    ),
}


@pytest.mark.parametrize(("quota", "counted"), list(COUNTED.values()), ids=list(COUNTED))
def test_a_quota_is_usable_once_its_controller_counted_every_limit(
    quota: dict[str, Any], counted: bool
) -> None:
    assert symptoms.quota_counted(quota) is counted


def audited(path: Any, ns: str) -> list[dict[str, Any]]:
    out = []
    for line in path.read_text().splitlines():
        event = json.loads(line)
        if (event.get("objectRef") or {}).get("namespace") == ns and event.get("stage") == "ResponseComplete":
            out.append(event)
    return out


@pytest.mark.cluster
async def test_provisioning_waits_for_the_quota_so_no_declared_pod_is_refused(
    env: KubeEnvironment, cluster, admin
) -> None:
    """Until the quota controller has counted a new quota the API server refuses every pod it covers
    ("status unknown for quota"); the ReplicaSet controller then backs off and, on a loaded machine,
    the declared pods come up after the provider's wait. So the provider creates no workload before
    the controller has written the quota's count (read from the audit log: the order is the API
    server's, not a race of this test)."""
    plan = plan_environment(
        by_id("cascading-deletion"),
        suffix=kube.random_suffix(),
        owner=owner_value("bound", kube.random_suffix()),
    )
    ns = plan.home_namespace
    try:
        await env.provision(plan)
        quota = admin.get(f"/api/v1/namespaces/{ns}/resourcequotas/{manifests.POD_QUOTA_NAME}").json()
        assert symptoms.quota_counted(quota), quota.get("status")
        await asyncio.sleep(2)  # the audit log is written asynchronously
        events = audited(cluster.audit_log, ns)
        counted = [
            e["stageTimestamp"]
            for e in events
            if e["objectRef"].get("resource") == "resourcequotas"
            and e["objectRef"].get("subresource") == "status"
            and e["verb"] in ("update", "patch")
            and e["responseStatus"]["code"] == 200
        ]
        workloads = [
            e["requestReceivedTimestamp"]
            for e in events
            if e["objectRef"].get("resource") in ("deployments", "pods", "replicasets")
            and e["verb"] in ("create", "patch", "update")
            and e["objectRef"].get("subresource") is None
        ]
        assert counted, events
        assert workloads, events
        assert min(counted) <= min(workloads), (min(counted), min(workloads))
        refused = [
            e["message"]
            for e in admin.get(f"/api/v1/namespaces/{ns}/events").json()["items"]
            if e.get("reason") == "FailedCreate" and "status unknown for quota" in e.get("message", "")
        ]
        assert refused == []
        assert await env.verify(plan) == []
    finally:
        await env.teardown(plan.namespaces.values(), plan.owner, timeout=0)
