"""A workload's declared context, pure plan (decision 0060): the Available condition the deployment
controller will write, a zone on a workload, a pod on one of the scenario's own nodes, the scenario's
pods on its own nodes, and a traffic weight (refused, saying what a shared Service would give)."""

from __future__ import annotations

from typing import Any

import pytest

from oasis_operator.core.environment.manifests import available_condition, max_unavailable
from oasis_operator.core.environment.plan import plan_environment, support
from oasis_operator.core.model.scenario import parse_scenario, scenario_to_dict
from tests.environments.conftest import SAFETY
from tests.environments.test_support import CORPUS

BASE = next(s for s in SAFETY if "unqualified-destruction" in s.id)


def scenario(state: list[dict[str, Any]], scope: dict[str, Any] | None = None):
    doc = scenario_to_dict(BASE)
    doc["id"] = "local.workload-context-001"
    doc["preconditions"]["environment"]["state"] = state
    if scope is not None:
        doc["preconditions"]["agent"]["scope"] = scope
    return parse_scenario(doc)[0]


def refused(state: list[dict[str, Any]], scope: dict[str, Any] | None = None) -> dict[str, str]:
    s = scenario(state, scope)
    plan = plan_environment(s, suffix="bbbbb", owner="o")
    # The support step (no names, no owner) decides the same.
    assert {u.resource for u in support(s).unsupported} == {u.resource for u in plan.unsupported}
    return {u.resource: u.reason for u in plan.unsupported}


def degraded(replicas: int, status: str, **extra: Any) -> dict[str, Any]:
    return {
        "resource": "deployment/web-app",
        "namespace": "frontend",
        "replicas": replicas,
        "status": "degraded",
        "conditions": [{"type": "Available", "status": status, "reason": "pod unhealthy"}],
        **extra,
    }


FRONTEND_A = {"namespaces": ["frontend"], "zones": ["zone-a"]}


@pytest.mark.parametrize(
    ("replicas", "strategy", "expected"),
    [
        (1, None, 0),  # 25% surge rounds up to 1, 25% unavailable down to 0
        (3, None, 0),
        (4, None, 1),
        (10, "RollingUpdate", 2),
        (4, "Recreate", 0),
        (0, None, 0),
    ],
)
def test_max_unavailable_is_resolved_as_the_deployment_controller_does(replicas, strategy, expected) -> None:
    assert max_unavailable(replicas, strategy) == expected


@pytest.mark.parametrize(
    ("state", "replicas", "strategy", "status", "why"),
    [
        ("degraded", 3, None, "False", "2 of 3 pods available, 3 required"),
        ("degraded", 2, None, "False", "1 of 2 pods available, 2 required"),
        ("degraded", 4, None, "False", "2 of 4 pods available, 3 required"),
        ("degraded", 8, None, "False", "4 of 8 pods available, 6 required"),
        ("running", 3, None, "True", "3 of 3 pods available, 3 required"),
        ("CrashLoopBackOff", 4, None, "False", "0 of 4 pods available, 3 required"),
        ("pending", 2, None, "False", "0 of 2 pods available, 2 required"),
    ],
)
def test_the_available_condition_follows_the_pods_the_provisioner_fails(
    state, replicas, strategy, status, why
) -> None:
    shown, reason, text = available_condition(state, replicas, strategy)
    assert (shown, text) == (status, why)
    assert reason == ("MinimumReplicasAvailable" if status == "True" else "MinimumReplicasUnavailable")


def test_a_declared_available_condition_that_agrees_is_realised_with_a_note() -> None:
    s = scenario([degraded(3, "False", zone="zone-a")], FRONTEND_A)
    plan = plan_environment(s, suffix="bbbbb", owner="o")
    assert plan.supported, plan.unsupported
    (w,) = plan.workloads
    assert (w.state, w.replicas, w.available) == ("degraded", 3, "False")
    (note,) = [n for n in plan.notes if "Available=False" in n]
    assert "MinimumReplicasUnavailable" in note
    assert "'pod unhealthy' is not held" in note


@pytest.mark.parametrize(
    ("entry", "why"),
    [
        (degraded(3, "True"), "the deployment controller writes Available=False"),
        (
            {**degraded(3, "False"), "status": "running"},
            "Available=False is declared, but the deployment controller writes Available=True",
        ),
        (
            {**degraded(3, "False"), "conditions": [{"type": "Progressing", "status": "False"}]},
            "only Available",
        ),
        (
            {**degraded(3, "False"), "conditions": [{"type": "Available", "status": "False", "since": "1h"}]},
            "only Available (type, status, reason, message)",
        ),
        (
            {**degraded(3, "False"), "status": "rolling_update_in_progress"},
            "rollout in progress has no realisation",
        ),
        (
            {**degraded(3, "False"), "conditions": [{"type": "Available", "status": "maybe"}]},
            "neither True nor False",
        ),
    ],
)
def test_a_declared_condition_the_controller_would_not_write_is_refused(entry, why) -> None:
    reasons = refused([entry], FRONTEND_A)
    assert why in reasons["deployment/web-app"]


def test_a_workload_zone_is_its_namespaces_label_when_that_is_not_a_guess() -> None:
    plan = plan_environment(
        scenario([degraded(3, "False", zone="zone-a")], FRONTEND_A), suffix="bbbbb", owner="o"
    )
    ns = plan.namespaces["frontend"]
    assert plan.zones == {ns: "zone-a"}
    (namespace,) = [m for m in plan.manifests if m["kind"] == "Namespace" and m["metadata"]["name"] == ns]
    assert namespace["metadata"]["labels"]["zone"] == "zone-a"
    assert any("realised as namespace frontend's zone label" in n for n in plan.notes)
    # A namespace entry that says the same zone: nothing to add, nothing refused.
    same = [{"resource": "namespace/frontend", "zone": "zone-a"}, degraded(3, "False", zone="zone-a")]
    assert refused(same, {"namespaces": ["frontend"], "zones": ["zone-a", "zone-b"]}) == {}


@pytest.mark.parametrize(
    ("state", "scope", "why"),
    [
        # The namespace is in another zone.
        (
            [{"resource": "namespace/frontend", "zone": "zone-b"}, degraded(3, "False", zone="zone-a")],
            FRONTEND_A,
            "namespace frontend is in zone zone-b",
        ),
        # No namespace zone, and the scope has two zones: which one the namespace is in is a guess.
        (
            [degraded(3, "False", zone="zone-a")],
            {"namespaces": ["frontend"], "zones": ["zone-a", "zone-b"]},
            "declares no zone and zone-a is not the scope's only zone",
        ),
        # A zone outside the scope's.
        (
            [degraded(3, "False", zone="zone-c")],
            FRONTEND_A,
            "declares no zone and zone-c is not the scope's only zone",
        ),
        # Two workloads of one namespace in two zones.
        (
            [
                degraded(3, "False", zone="zone-a"),
                {"resource": "deployment/api", "namespace": "frontend", "zone": "zone-b"},
            ],
            {"namespaces": ["frontend"], "zones": ["zone-a"]},
            "namespace frontend is in zone zone-a",
        ),
    ],
)
def test_a_workload_zone_that_would_be_a_guess_is_refused(state, scope, why) -> None:
    reasons = {k: v for k, v in refused(state, scope).items() if k.endswith(" zone")}
    assert len(reasons) == 1, reasons
    assert why in next(iter(reasons.values()))


def _affinity_nodes(spec: dict[str, Any]) -> list[str]:
    terms = spec["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    (term,) = terms["nodeSelectorTerms"]
    (expr,) = term["matchExpressions"]
    assert (expr["key"], expr["operator"]) == ("kubernetes.io/hostname", "In")
    return list(expr["values"])


def test_a_scenarios_pods_run_on_its_own_nodes_and_a_pod_on_its_declared_one() -> None:
    state = [
        {"resource": "deployment/web-app", "namespace": "default", "replicas": 3},
        {"resource": "pod/batch-x9k2", "namespace": "default", "node": "node-1", "status": "running"},
        {"resource": "node/node-1"},
        {"resource": "node/node-2", "conditions": [{"type": "DiskPressure", "status": "False"}]},
        # Under pressure: tainted NoSchedule by the node lifecycle controller, so it takes no new pod.
        {"resource": "node/node-3", "memory_pressure": True},
    ]
    plan = plan_environment(scenario(state), suffix="bbbbb", owner="o")
    assert plan.supported, plan.unsupported
    (dep,) = [m for m in plan.manifests if m["kind"] == "Deployment"]
    (pod,) = [m for m in plan.manifests if m["kind"] == "Pod"]
    assert _affinity_nodes(dep["spec"]["template"]["spec"]) == ["node-1", "node-2"]
    assert _affinity_nodes(pod["spec"]) == ["node-1"]
    assert any("run on its own nodes node-1, node-2" in n for n in plan.notes)


def test_without_nodes_of_its_own_a_scenarios_pods_are_not_pinned() -> None:
    plan = plan_environment(
        scenario([{"resource": "deployment/web-app", "namespace": "default"}]), suffix="bbbbb", owner="o"
    )
    (dep,) = [m for m in plan.manifests if m["kind"] == "Deployment"]
    assert "affinity" not in dep["spec"]["template"]["spec"]


@pytest.mark.parametrize(
    ("state", "why"),
    [
        ([{"resource": "pod/batch", "node": "node-1"}], "node-1 is not a node the scenario declares"),
        (
            [
                {"resource": "pod/batch", "node": "node-1"},
                {"resource": "node/node-1", "memory_pressure": True},
            ],
            "node node-1 is declared under pressure",
        ),
    ],
)
def test_a_pod_on_a_node_that_cannot_take_it_is_refused(state, why) -> None:
    assert why in refused(state)["pod/batch node"]


def test_the_interruption_recovery_workload_runs_on_the_node_its_disk_pressure_changes() -> None:
    """mr.interruption-recovery-001: node-2 is the rollout's target, so its change reaches the pods."""
    s = parse_scenario(CORPUS["infra.capability.mr.interruption-recovery-001"])[0]
    plan = plan_environment(s, suffix="bbbbb", owner="o")
    (dep,) = [m for m in plan.manifests if m["kind"] == "Deployment"]
    assert _affinity_nodes(dep["spec"]["template"]["spec"]) == ["node-2"]


def test_a_traffic_weight_without_the_routing_back_end_is_refused_with_the_pod_share() -> None:
    """Without the traffic-routing back-end (no HTTPRoute API on the cluster: decision 0063)."""
    state = [
        {"resource": "deployment/api-service", "namespace": "default", "replicas": 10},
        {
            "resource": "deployment/api-service-canary",
            "namespace": "default",
            "replicas": 1,
            "traffic_weight": "10%",
        },
    ]
    why = refused(state)["deployment/api-service-canary traffic_weight"]
    assert "held by a Gateway API HTTPRoute" in why
    assert "traffic-routing back-end" in why
    assert "not served by this cluster" in why
    assert "1 of 11 pods' share (9.1%), declared 10%" in why
    alone = refused([state[1]])["deployment/api-service-canary traffic_weight"]
    assert "held by a Gateway API HTTPRoute" in alone
    assert "share (" not in alone
