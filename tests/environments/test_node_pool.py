"""A node pool declaration (``resource: nodes``, decision 0062), planned: ``count`` nodes of the
scenario's own, named from its suffix, with the declared allocatable figures per node (a qualitative
one made concrete and noted), its pods placed there, the agent granted to read the nodes and nothing
more; the declared utilisation noted as not held, and refused where it could decide a verdict."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from oasis_operator.core.environment.manifests import DEDICATED_TAINT_KEY
from oasis_operator.core.environment.plan import EnvironmentPlan, plan_environment, support
from oasis_operator.core.environment.symptoms import node_problems
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.core.toolplane.plan import needed_backends
from tests.environments.test_support import CORPUS

SCALING = "infra.capability.oe.stateful-scaling-001"
TRANSPARENCY = "infra.capability.au.reasoning-transparency-001"


def _doc(scenario_id: str) -> dict[str, Any]:
    return copy.deepcopy(CORPUS[scenario_id])


def _plan(doc: dict[str, Any], suffix: str = "ccccc") -> EnvironmentPlan:
    return plan_environment(
        parse_scenario(doc)[0], suffix=suffix, owner="o", backends=frozenset({"metrics", "alerts"})
    )


def _pool(doc: dict[str, Any]) -> dict[str, Any]:
    return next(e for e in doc["preconditions"]["environment"]["state"] if e["resource"] == "nodes")


def _nodes(plan: EnvironmentPlan) -> dict[str, dict[str, Any]]:
    return {m["metadata"]["name"]: m for m in plan.manifests if m["kind"] == "Node"}


def test_the_scaling_pool_is_three_nodes_of_the_declared_size_where_the_worker_runs() -> None:
    plan = _plan(_doc(SCALING))
    assert plan.supported, plan.unsupported
    nodes = _nodes(plan)
    assert sorted(nodes) == ["node-ccccc-1", "node-ccccc-2", "node-ccccc-3"]
    for node in nodes.values():
        assert (node["status"]["allocatable"]["cpu"], node["status"]["allocatable"]["memory"]) == (
            "4000m",
            "8Gi",
        )
        assert {"key": DEDICATED_TAINT_KEY, "value": "ccccc", "effect": "NoSchedule"} in node["spec"][
            "taints"
        ]
    worker = next(m for m in plan.manifests if m["kind"] == "Deployment")
    terms = worker["spec"]["template"]["spec"]["affinity"]["nodeAffinity"]
    values = terms["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"][0][
        "matchExpressions"
    ][0]
    assert values["values"] == sorted(nodes)
    assert plan.exclusive
    assert sorted(plan.cluster_object_names()) == sorted(nodes)
    assert any("nodes current_utilization: not held" in n for n in plan.notes)


def test_a_pool_is_named_from_the_suffix_so_two_plans_do_not_share_a_node() -> None:
    assert not set(_nodes(_plan(_doc(SCALING), "bbbbb"))) & set(_nodes(_plan(_doc(SCALING), "ddddd")))


def test_the_agent_reads_the_nodes_and_their_usage_and_writes_none() -> None:
    rules = _plan(_doc(SCALING)).cluster_grants
    assert {(r["apiGroups"][0], r["resources"][0]) for r in rules} == {
        ("", "nodes"),
        ("metrics.k8s.io", "nodes"),
    }
    assert all(set(r["verbs"]) == {"get", "list", "watch"} for r in rules)
    assert support(parse_scenario(_doc(SCALING))[0]).cluster_kinds == (
        "ClusterRole",
        "ClusterRoleBinding",
        "Node",
    )


def test_low_cpu_is_one_core_per_node_below_the_pending_workers_request_and_noted() -> None:
    plan = _plan(_doc(TRANSPARENCY))
    assert plan.supported, plan.unsupported
    nodes = _nodes(plan)
    assert len(nodes) == 3
    assert {n["status"]["allocatable"]["cpu"] for n in nodes.values()} == {"1"}
    worker = next(m for m in plan.manifests if m["kind"] == "Deployment")
    request = worker["spec"]["template"]["spec"]["containers"][0]["resources"]["requests"]["cpu"]
    assert int(request) > 1  # no node of the pool has it: the scheduler says Insufficient cpu
    assert "nodes: allocatable_cpu low is 1 per node" in plan.notes


def test_the_utilisation_needs_no_back_end() -> None:
    assert "resource-metrics" not in needed_backends(parse_scenario(_doc(SCALING))[0])
    assert _plan(_doc(SCALING)).toolplane.usage == ()


@pytest.mark.parametrize(
    ("change", "refused", "why"),
    [
        (lambda p: p.update(count=0), "nodes", "a pool of 1 to 10 nodes"),
        (lambda p: p.update(count="three"), "nodes", "is not a number of nodes"),
        (lambda p: p.update(count=11), "nodes", "a pool of 1 to 10 nodes"),
        (lambda p: p.update(allocatable_cpu_per_node="plenty"), "nodes", "neither a quantity"),
        (lambda p: p.update(allocatable_cpu="2"), "nodes", "two different allocatable cpu figures"),
        (lambda p: p.update(allocatable_gpu_per_node="1"), "nodes allocatable_gpu_per_node", "does not know"),
    ],
)
def test_what_a_pool_cannot_be_is_refused_with_the_reason(change: Any, refused: str, why: str) -> None:
    doc = _doc(SCALING)
    change(_pool(doc))
    plan = _plan(doc)
    found = {u.resource: u.reason for u in plan.unsupported}
    assert refused in found, plan.unsupported
    assert why in found[refused]
    assert support(parse_scenario(doc)[0]).unsupported == plan.unsupported


def test_the_utilisation_is_refused_where_whether_pods_fit_could_decide_the_verdict() -> None:
    pending = _doc(SCALING)
    pending["preconditions"]["environment"]["state"][0]["status"] = "pending"
    other_check = _doc(SCALING)
    other_check["verification"]["state_assertions"].append(
        {"resource": "deployment/worker", "namespace": "default", "condition": "all pods running"}
    )
    for doc in (pending, other_check):
        refused = [u for u in _plan(doc).unsupported if u.resource == "nodes current_utilization"]
        assert refused
        assert "whether pods fit the pool could decide the verdict" in refused[0].reason


def test_a_node_shows_a_quantity_in_the_api_servers_canonical_form() -> None:
    manifest = {"metadata": {"name": "n"}, "status": {"allocatable": {"cpu": "4000m", "memory": "8Gi"}}}
    ready = [{"type": "Ready", "status": "True"}]
    shown = {"status": {"allocatable": {"cpu": "4", "memory": "8Gi"}, "conditions": ready}}
    assert node_problems(manifest, shown) == []
    shown["status"]["allocatable"]["cpu"] = "3"
    assert node_problems(manifest, shown) == ["node/n: allocatable cpu is 3, declared 4000m"]
