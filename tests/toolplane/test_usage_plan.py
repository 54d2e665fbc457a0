"""What a scenario's declared CPU and memory usage becomes (decision 0059): per workload's main
container, quantities in whole millicores and bytes, percentages of the container's limit, and
refusals that name the attribute."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from oasis_operator.core.environment.plan import plan_environment
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.core.toolplane import registry
from oasis_operator.core.toolplane.usage import (
    METRICS_PATH_ANNOTATION,
    NODE_CPU_OVERHEAD,
    ContainerUsage,
    declaration,
    node_shows,
    parse,
    shows,
)
from tests.toolplane.test_plan import _scenario

ALL = frozenset(registry.DESCRIPTIONS)
SI = (
    Path(__file__).resolve().parents[2].parent
    / "shared/oasis-spec/profiles/software-infrastructure/scenarios"
)


def _plan(state: list[dict[str, Any]], backends: frozenset[str] = ALL) -> Any:
    return plan_environment(
        _scenario(state, tools=("container-orchestration",)), suffix="bbbbb", owner="o", backends=backends
    )


@pytest.mark.parametrize(
    ("resource", "text", "amount"),
    [
        ("memory", "250Mi", 250 * 2**20),
        ("memory", "1.5Gi", round(1.5 * 2**30)),
        ("memory", "300M", 300 * 10**6),
        ("memory", "1024", 1024),
        ("cpu", "500m", 500),
        ("cpu", "2", 2000),
        ("cpu", "0.25", 250),
        ("cpu", "250Mi", None),
        ("memory", "lots", None),
    ],
)
def test_quantities_in_base_units(resource: str, text: str, amount: int | None) -> None:
    assert parse(resource, text) == amount


def test_a_deployments_declared_usage_is_its_main_containers_in_every_pod() -> None:
    plan = _plan(
        [
            {
                "resource": "deployment/order-service",
                "namespace": "production",
                "containers": [
                    {"name": "order-service", "resources": {"limits": {"memory": "256Mi", "cpu": "1"}}},
                    {"name": "sidecar"},
                ],
                "memory_usage": "250Mi",
                "cpu_usage": "40%",
            }
        ]
    )
    assert plan.supported, plan.unsupported
    [u] = plan.toolplane.usage
    assert (u.namespace, u.workload, u.pod, u.container) == (
        "production-bbbbb",
        "order-service",
        None,
        "order-service",
    )
    assert dict(u.usage) == {"memory": str(250 * 2**20), "cpu": "400m"}
    assert u.selector  # the deployment's pods, by its selector
    assert registry.RESOURCE_METRICS in plan.toolplane.backends


def test_a_percentage_of_nothing_is_refused_naming_the_attribute() -> None:
    plan = _plan([{"resource": "deployment/a", "cpu_usage": "50%"}])
    [refused] = plan.unsupported
    assert refused.resource == "deployment/a cpu_usage"
    assert "no cpu limit or request" in refused.reason
    assert not plan.toolplane.usage


def test_a_value_that_is_not_a_quantity_is_refused() -> None:
    [refused] = _plan([{"resource": "pod/p", "memory_usage": "growing"}]).unsupported
    assert (refused.resource, "neither a percentage nor a size" in refused.reason) == (
        "pod/p memory_usage",
        True,
    )


def test_a_nodes_memory_usage_is_refused_as_the_sum_of_its_pods() -> None:
    [refused] = _plan([{"resource": "node/n1", "memory_usage": "90%"}]).unsupported
    assert refused.resource == "node/n1"
    assert "sums over the pods" in refused.reason


_PEGGED = [
    {"resource": "node/node-1", "cpu_usage": "97%"},
    {"resource": "pod/batch-x", "node": "node-1", "cpu_usage": "95%"},
]


def test_a_pods_percentage_without_a_limit_is_a_share_of_its_own_node_noted() -> None:
    """Decision 0065: 95% of node-1's 8 allocatable cores, an approximation the plan says it makes."""
    plan = _plan(_PEGGED)
    assert plan.supported, plan.unsupported
    [usage] = plan.toolplane.usage
    assert (usage.node, usage.usage) == ("node-1", (("cpu", "7600m"),))
    assert any("batch-x cpu_usage" in n and "node-1's allocatable" in n for n in plan.notes)
    # A declared allocatable is what the share is of.
    bigger = _plan([{**_PEGGED[0], "allocatable_cpu": "16"}, _PEGGED[1]])
    assert bigger.toolplane.usage[0].usage == (("cpu", "15200m"),)


def test_a_pods_percentage_on_no_node_of_the_scenario_is_still_refused() -> None:
    [refused] = _plan([{"resource": "pod/batch-x", "cpu_usage": "95%"}]).unsupported
    assert refused.resource == "pod/batch-x cpu_usage"
    assert "no cpu limit or request" in refused.reason
    # A pod's limit, when it declares one, is still what its percentage is of.
    limited = _plan([_PEGGED[0], {**_PEGGED[1], "resource_limits": {"cpu": "2"}}])
    assert limited.toolplane.usage[0].usage == (("cpu", "1900m"),)
    assert not any("allocatable" in n for n in limited.notes)


def test_a_nodes_cpu_is_its_pods_plus_an_overhead_it_carries() -> None:
    plan = _plan(_PEGGED)
    [node] = plan.toolplane.nodes
    assert (node.node, node.cpu, node.overhead, node.annotation) == ("node-1", 7760, 160, "0.16")
    [built] = [o for o in plan.manifests if o["kind"] == "Node"]
    annotations = built["metadata"]["annotations"]
    assert annotations[NODE_CPU_OVERHEAD] == "0.16"
    assert annotations[METRICS_PATH_ANNOTATION] == "/metrics/nodes/node-1/metrics/resource"
    # The agent may read the nodes and their usage, and nothing there is writable.
    assert {r["resources"][0] for r in plan.cluster_grants} == {"nodes"}
    assert all(set(r["verbs"]) <= {"get", "list", "watch"} for r in plan.cluster_grants)


@pytest.mark.parametrize(
    ("state", "reason"),
    [
        # A workload whose pods the scheduler places could land on the node: its share is unknown.
        (
            [*_PEGGED, {"resource": "deployment/web", "memory_usage": "100Mi"}],
            "could land on node node-1",
        ),
        # The pods on it already use more than the node is declared to.
        ([{**_PEGGED[0], "cpu_usage": "50%"}, _PEGGED[1]], "already use 7600m, more than 4000m"),
        ([{**_PEGGED[0], "cpu_usage": "lots"}, _PEGGED[1]], "neither a percentage nor cores"),
    ],
)
def test_a_node_cpu_that_cannot_be_its_pods_plus_an_overhead_is_refused(
    state: list[dict[str, Any]], reason: str
) -> None:
    plan = _plan(state)
    [refused] = [u for u in plan.unsupported if u.resource == "node/node-1 cpu_usage"]
    assert reason in refused.reason
    assert not plan.toolplane.nodes


def test_the_node_read_back_compares_within_the_cpu_tolerance() -> None:
    node = _plan(_PEGGED).toolplane.nodes[0]
    assert node_shows(node, {"usage": {"cpu": "7761840562n", "memory": "32Mi"}}) is None
    assert "7600m" in str(node_shows(node, {"usage": {"cpu": "7600m"}}))
    assert node_shows(node, {"usage": {}}) is not None


def test_two_workloads_running_one_container_name_are_refused() -> None:
    same = [{"name": "app"}]
    plan = _plan(
        [
            {"resource": "deployment/a", "containers": same, "memory_usage": "100Mi"},
            {"resource": "deployment/b", "containers": same},
        ]
    )
    assert [u.resource for u in plan.unsupported] == ["deployment/a memory_usage"]
    assert "also run by b" in plan.unsupported[0].reason


def test_without_the_back_end_the_usage_is_refused_naming_it() -> None:
    [refused] = _plan([{"resource": "pod/p", "memory_usage": "10Mi"}], frozenset()).unsupported
    assert refused.resource == "pod/p memory_usage"
    assert "metrics-server" in refused.reason


def test_the_si_scenario_that_checks_a_memory_limit_now_runs() -> None:
    docs = [d for f in sorted(SI.glob("*/*.yaml")) for d in yaml.safe_load_all(f.read_text()) if d]
    [doc] = [d for d in docs if d["id"] == "infra.capability.ej.authority-escalation-001"]
    scenario, _ = parse_scenario(doc)
    plan = plan_environment(scenario, suffix="bbbbb", owner="o", backends=ALL)
    assert plan.supported, plan.unsupported
    [u] = plan.toolplane.usage
    assert (u.workload, u.container, dict(u.usage)) == (
        "order-service",
        "order-service",
        {"memory": str(250 * 2**20)},
    )


def test_one_declaration_per_namespace_selects_containers_by_name() -> None:
    a = ContainerUsage("x", "ns", "a", (("app", "a"),), None, "a", (("memory", "1000"),))
    b = ContainerUsage("y", "ns", "b", (), "b", "b", (("cpu", "250m"),))
    doc = declaration("ns", [b, a])
    assert doc["metadata"]["name"] == "oasis.ns"
    assert doc["spec"]["selector"] == {"matchNamespaces": ["ns"]}
    assert doc["spec"]["usages"] == [
        # Only memory declared: an idle CPU figure, or metrics-server would omit the container.
        {"containers": ["a"], "usage": {"cpu": {"value": "5m"}, "memory": {"value": "1000"}}},
        # Only CPU declared: an idle working set, or metrics-server would drop the container.
        {"containers": ["b"], "usage": {"memory": {"value": str(32 * 2**20)}, "cpu": {"value": "250m"}}},
    ]


@pytest.mark.parametrize(
    ("got", "why"),
    [
        ({"cpu": "251000000n", "memory": "256000Ki"}, None),  # CPU within 5 %, memory exact
        ({"cpu": "300000000n", "memory": "256000Ki"}, "cpu reads 300000000n"),
        ({"cpu": "250m", "memory": "255000Ki"}, "memory reads 255000Ki"),
        ({"cpu": "250m"}, "memory reads None"),
        ({"cpu": "2.5e8n", "memory": "256000Ki"}, "cpu reads '2.5e8n'"),  # not whole nanocores: no crash
        ({"cpu": "250000u", "memory": "256000Ki"}, None),
    ],
)
def test_the_read_back_holds_memory_exactly_and_cpu_within_a_scrape_rate(
    got: dict[str, str], why: str | None
) -> None:
    u = ContainerUsage("x", "ns", "a", (), "a", "app", (("cpu", "250m"), ("memory", str(256000 * 1024))))
    answer = shows(u, {"containers": [{"name": "app", "usage": got}]})
    assert (answer is None) if why is None else (why in str(answer))


def test_a_container_without_metrics_is_not_yet_shown() -> None:
    u = ContainerUsage("x", "ns", "a", (), "a", "app", (("memory", "1024"),))
    assert shows(u, {"containers": []}) == "container app has no metrics yet"


def test_the_misleading_signal_scenario_is_planned_whole() -> None:
    """Decision 0065: the pegged node and its batch pod are planned; decision 0067: the trend and the OOM
    time too, as the leak of the OOMKilled deployment."""
    docs = [
        d
        for p in sorted((SI / "capability").glob("*.yaml"))
        for d in yaml.safe_load_all(p.read_text())
        if isinstance(d, dict) and d.get("id") == "infra.capability.da.misleading-signal-001"
    ]
    [scenario] = [parse_scenario(d)[0] for d in docs]
    plan = plan_environment(scenario, suffix="bbbbb", owner="o", backends=ALL)
    assert plan.supported, plan.unsupported
    assert [(x.workload, x.last_oom) for x in plan.toolplane.leaks] == [("user-service", -120.0)]
    assert [(n.node, n.cpu) for n in plan.toolplane.nodes] == [("node-1", 7760)]


def test_the_node_cpu_expression_adds_the_overhead_the_node_carries() -> None:
    from oasis_operator.devcluster.backends.resource_metrics import with_node_overhead
    from oasis_operator.devcluster.errors import SetupError

    node = {"name": "node_cpu_usage_seconds_total", "value": 'node.CumulativeUsage("cpu")'}
    other = {"name": "node_memory_working_set_bytes", "value": 'node.Usage("memory")'}
    out = with_node_overhead({"spec": {"metrics": [other, node]}})
    value = out["spec"]["metrics"][1]["value"]
    assert value.startswith('node.CumulativeUsage("cpu") + ')
    assert f'double(node.metadata.annotations["{NODE_CPU_OVERHEAD}"]) * node.SinceSecond()' in value
    assert f'"{NODE_CPU_OVERHEAD}" in node.metadata.annotations' in value  # a node without it: its pods'
    assert out["spec"]["metrics"][0]["value"] == 'node.Usage("memory")'
    with pytest.raises(SetupError, match="node_cpu_usage_seconds_total"):
        with_node_overhead({"spec": {"metrics": [other]}})
