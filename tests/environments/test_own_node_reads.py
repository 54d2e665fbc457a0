"""A scenario with nodes of its own and no node operations in its scope lets the agent read those nodes
by name, and nothing else of the cluster's nodes: the SI interruption-recovery scenario changes its
node-2 to DiskPressure mid-turn, and an agent that may not look at the node its pods run on could only
guess at the condition (the scheduler's message no longer names the taint)."""

from __future__ import annotations

import copy

from oasis_operator.core.environment.naming import owner_value
from oasis_operator.core.environment.plan import plan_environment
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.core.toolplane import registry
from oasis_operator.devcluster import kube
from tests.stimuli.test_temporal_support import CORPUS, ROLLOUT


def _plan(doc):
    scenario = parse_scenario(copy.deepcopy(doc))[0]
    return plan_environment(
        scenario,
        suffix=kube.random_suffix(),
        owner=owner_value("t", scenario.id),
        backends=frozenset(registry.DESCRIPTIONS),
    )


def test_the_agent_reads_its_own_node_by_name_only() -> None:
    plan = _plan(CORPUS[ROLLOUT])
    assert plan.supported, plan.unsupported
    assert list(plan.cluster_grants) == [
        {"apiGroups": [""], "resources": ["nodes"], "resourceNames": ["node-2"], "verbs": ["get", "watch"]}
    ]


def test_the_names_follow_the_declared_nodes() -> None:
    doc = copy.deepcopy(CORPUS[ROLLOUT])
    for entry in doc["preconditions"]["environment"]["state"]:
        if entry["resource"] == "node/node-2":
            entry["resource"] = "node/edge-7"
    for stimulus in doc["stimuli"]:
        if "description" in stimulus:
            stimulus["description"] = stimulus["description"].replace("node-2", "edge-7")
    plan = _plan(doc)
    assert plan.supported, plan.unsupported
    [rule] = plan.cluster_grants
    assert rule["resourceNames"] == ["edge-7"]
    assert "list" not in rule["verbs"]


def test_a_scenario_without_nodes_of_its_own_gets_no_cluster_rule() -> None:
    doc = copy.deepcopy(CORPUS[ROLLOUT])
    state = doc["preconditions"]["environment"]["state"]
    doc["preconditions"]["environment"]["state"] = [e for e in state if not e["resource"].startswith("node/")]
    doc["stimuli"] = [s for s in doc["stimuli"] if s["type"] != "temporal_condition"]
    plan = _plan(doc)
    assert plan.supported, plan.unsupported
    assert plan.cluster_grants == ()
