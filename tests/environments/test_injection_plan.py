"""Planning state injected into an environment already provisioned (the provider API's inject-state):
the same names and builders as provisioning, nothing outside the environment, and a pod bound that only
grows."""

from __future__ import annotations

from oasis_operator.core.environment import manifests
from oasis_operator.core.environment.naming import owner_value, suffix_for
from oasis_operator.core.environment.plan import EnvironmentPlan, plan_environment, plan_injection
from tests.environments.conftest import SAFETY

SCENARIO = next(s for s in SAFETY if "unqualified-destruction" in s.id)
OWNER = owner_value("provider-api", f"{SCENARIO.id}#0123456789abcdef")


def provisioned() -> EnvironmentPlan:
    plan = plan_environment(SCENARIO, suffix=suffix_for(OWNER), owner=OWNER)
    assert plan.supported
    return plan


def pod_bound(plan: EnvironmentPlan, ns: str) -> int:
    (quota,) = [
        m for m in plan.manifests if manifests.bounds_pods(m) and m["metadata"].get("namespace") == ns
    ]
    return int(quota["spec"]["hard"]["pods"])


def test_entries_are_built_in_the_environments_names_with_its_owner() -> None:
    plan = provisioned()
    home = plan.namespaces["default"]
    got = plan_injection(
        plan,
        [
            {"resource": "configmap/late-config", "namespace": "default", "data": {"LEVEL": "debug"}},
            # the physical name is accepted too, and an entry without a namespace lands in the home one
            {"resource": "deployment/late", "namespace": home, "status": "CrashLoopBackOff", "replicas": 2},
            {"resource": "secret/late-secret", "type": "Opaque", "data": {"K": "dg=="}},
        ],
    )
    assert got.supported, got.unsupported
    assert {(m["kind"], m["metadata"]["namespace"], m["metadata"]["name"]) for m in got.manifests} >= {
        ("ConfigMap", home, "late-config"),
        ("Deployment", home, "late"),
        ("Secret", home, "late-secret"),
    }
    assert [(w.name, w.namespace, w.state, w.replicas) for w in got.workloads] == [
        ("late", home, "CrashLoopBackOff", 2)
    ]
    (dep,) = [m for m in got.manifests if m["kind"] == "Deployment"]
    # scheduled where the environment's pods run (the simulated pool)
    assert manifests.toleration(manifests.POOL_TAINT) in dep["spec"]["template"]["spec"]["tolerations"]
    # the plan after the injection holds the entries; the one before is untouched
    assert ("Deployment", home, "late") in {
        (m["kind"], m["metadata"].get("namespace"), m["metadata"]["name"]) for m in got.plan.manifests
    }
    assert "late" not in {w.name for w in plan.workloads}
    assert got.plan.owner == plan.owner
    assert got.plan.namespaces == plan.namespaces


def test_the_pod_bound_only_grows() -> None:
    plan = provisioned()
    home = plan.namespaces["default"]
    before = pod_bound(plan, home)
    small = plan_injection(plan, [{"resource": "configmap/c", "namespace": "default", "data": {"a": "b"}}])
    assert not [m for m in small.manifests if m["kind"] == "ResourceQuota"]  # no pod added: left alone
    assert pod_bound(small.plan, home) == before
    big = plan_injection(
        plan, [{"resource": "deployment/wide", "namespace": "default", "status": "running", "replicas": 9}]
    )
    assert big.supported, big.unsupported
    declared = manifests.declared_pods(list(big.plan.manifests), home)
    assert pod_bound(big.plan, home) == manifests.POD_BOUND_FACTOR * declared > before
    assert big.manifests[0]["kind"] == "ResourceQuota"  # raised before the pods it covers come
    # a second injection is planned against the first's result, and never lowers it
    again = plan_injection(big.plan, [{"resource": "configmap/d", "namespace": "default", "data": {}}])
    assert pod_bound(again.plan, home) == pod_bound(big.plan, home)


def test_anything_outside_the_environment_or_cluster_scoped_or_tool_held_is_refused() -> None:
    plan = provisioned()
    got = plan_injection(
        plan,
        [
            {"resource": "configmap/fine", "namespace": "default", "data": {}},
            {"resource": "configmap/elsewhere", "namespace": "kube-system", "data": {}},
            {"resource": "namespace/extra", "zone": "zone-a"},
            {"resource": "node/worker-x"},
            {"resource": "pvc/data", "namespace": "default", "storage": "1Gi", "bound": True},
            {"resource": "logs/service-a", "lines": ["x"]},
            {"resource": "no-such-kind/x", "namespace": "default"},
        ],
    )
    assert not got.supported
    why = {u.resource: u.reason for u in got.unsupported}
    assert "configmap/fine" not in why
    assert "not one of the environment's (default)" in why["configmap/elsewhere"]
    assert why["namespace/extra"].startswith("Namespace is cluster-scoped")
    assert why["node/worker-x"].startswith("Node is cluster-scoped")
    assert "PersistentVolume" in why["pvc/data"]
    assert "cluster-scoped" in why["pvc/data"]
    assert "log back-end" in why["logs/service-a"]
    assert "no-such-kind" in why["no-such-kind/x"]
    # nothing to apply, and the environment's plan as it was
    assert got.manifests == ()
    assert got.workloads == ()
    assert got.plan is plan


def test_a_tool_held_kind_is_refused_even_when_its_back_end_is_there() -> None:
    got = plan_injection(
        provisioned(), [{"resource": "logs/service-a", "lines": ["x"]}], backends=frozenset({"logs"})
    )
    assert [u.reason for u in got.unsupported] == [
        "held by the tool-plane back-end logs: inject-state writes Kubernetes objects only"
    ]


def test_what_is_checked_against_the_whole_request_path_or_a_log_is_refused() -> None:
    failing = {
        "resource": "deployment/api-backend",
        "namespace": "default",
        "status": "CrashLoopBackOff",
        "init_containers": [{"name": "db-migrate", "status": "error", "logs": "ERROR: migration failed"}],
    }
    got = plan_injection(
        provisioned(),
        [
            failing,
            {"resource": "service/api-backend", "namespace": "default", "endpoints": []},
            {"resource": "ingress/public", "namespace": "default", "status": "returning_503"},
        ],
        backends=frozenset({"logs"}),
    )
    why = {u.resource: u.reason for u in got.unsupported}
    assert sorted(why) == [
        "deployment/api-backend init_containers[0] logs",
        "ingress/public",
        "service/api-backend",
    ]
    assert (
        "inject-state writes Kubernetes objects only" in why["deployment/api-backend init_containers[0] logs"]
    )
    assert "checked against every workload" in why["service/api-backend"]
    # Without its log line, the failing init container itself is injected like any workload.
    without_log = {**failing, "init_containers": [{"name": "db-migrate", "status": "error"}]}
    got = plan_injection(provisioned(), [without_log])
    assert got.supported, got.unsupported
    assert [w.state for w in got.workloads] == ["Init:CrashLoopBackOff"]
