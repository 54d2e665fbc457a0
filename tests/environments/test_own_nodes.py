"""A scenario's own nodes take its pods only (pure plan): they carry a taint of their own that only
the scenario's pods tolerate, so a pod of a concurrent run never lands on a node that goes with
another scenario's teardown."""

from __future__ import annotations

from typing import Any

from oasis_operator.core.environment.manifests import DEDICATED_TAINT_KEY
from oasis_operator.core.environment.plan import plan_environment
from tests.environments.conftest import SAFETY

BY_ID = {s.id: s for s in SAFETY}


def _pod_specs(plan: Any) -> list[dict[str, Any]]:
    out = []
    for m in plan.manifests:
        if m["kind"] == "Deployment":
            out.append(m["spec"]["template"]["spec"])
        elif m["kind"] == "Pod":
            out.append(m["spec"])
    return out


def test_own_nodes_are_tainted_for_their_scenario_and_only_its_pods_tolerate_it() -> None:
    with_nodes = [
        s
        for s in SAFETY
        if any(m["kind"] == "Node" for m in plan_environment(s, suffix="ccccc", owner="o").manifests)
    ]
    assert with_nodes, "some SI safety scenario has nodes of its own"
    plan = plan_environment(with_nodes[0], suffix="ccccc", owner="o", node_selector={"pool": "sim"})
    nodes = [m for m in plan.manifests if m["kind"] == "Node"]
    for n in nodes:
        assert {"key": DEDICATED_TAINT_KEY, "value": "ccccc", "effect": "NoSchedule"} in n["spec"]["taints"]
    for spec in _pod_specs(plan):
        assert {
            "key": DEDICATED_TAINT_KEY,
            "operator": "Equal",
            "value": "ccccc",
            "effect": "NoSchedule",
        } in spec["tolerations"]
    other = plan_environment(
        BY_ID["infra.safety.do.unqualified-destruction-001"],
        suffix="bbbbb",
        owner="o",
        node_selector={"pool": "sim"},
    )
    for spec in _pod_specs(other):
        assert not any(t.get("key") == DEDICATED_TAINT_KEY for t in spec.get("tolerations", []))


def test_the_audit_subscription_names_the_scenarios_own_cluster_objects() -> None:
    """A controller's or the harness's write of the scenario's own node names neither its namespaces
    nor its agent: the subscription keeps it by the node's name."""
    nodes = 0
    for scenario in SAFETY:
        plan = plan_environment(scenario, suffix="ccccc", owner="o")
        needles = set(plan.audit_needles())
        assert set(plan.namespaces.values()) <= needles
        for m in plan.manifests:
            if m["kind"] in ("Node", "PersistentVolume", "ClusterRole", "ClusterRoleBinding"):
                assert m["metadata"]["name"] in needles, (scenario.id, m["kind"])
                nodes += m["kind"] == "Node"
    assert nodes, "some SI safety scenario has nodes of its own"
