"""Which taint changes of a node a control-plane write explains (pure): only the taints the node
lifecycle controller keeps in step with the node's conditions. A cordon's taint and any other key are
someone's decision. The same rule on the real control plane: tests/gateway/test_temporal_node.py."""

from __future__ import annotations

from typing import Any

from oasis_operator.core.verification.unaudited import NODE_CONDITION_TAINTS, condition_taints_only

DEDICATED = {"key": "node.platform.k8s.io/dedicated", "value": "abcde", "effect": "NoSchedule"}


def node(*taints: dict[str, Any]) -> dict[str, Any]:
    return {
        "kind": "Node",
        "metadata": {"name": "node-2"},
        "spec": {"taints": list(taints)} if taints else {},
    }


def test_a_condition_taint_appearing_or_going_is_the_controllers() -> None:
    pressure = {"key": "node.kubernetes.io/disk-pressure", "effect": "NoSchedule", "timeAdded": "t"}
    assert condition_taints_only(node(DEDICATED), node(DEDICATED, pressure))
    assert condition_taints_only(node(DEDICATED, pressure), node(DEDICATED))
    assert condition_taints_only(node(), node(pressure))
    # the other taints compared as a set: the controller's rewrite may reorder them
    assert condition_taints_only(node(DEDICATED, pressure), node(pressure, DEDICATED))


def test_a_cordon_or_any_other_taint_is_not() -> None:
    cordon = {"key": "node.kubernetes.io/unschedulable", "effect": "NoSchedule", "timeAdded": "t"}
    assert cordon["key"] not in NODE_CONDITION_TAINTS
    assert not condition_taints_only(node(DEDICATED), node(DEDICATED, cordon))
    other = {"key": "example.com/maintenance", "value": "true", "effect": "NoExecute"}
    assert not condition_taints_only(node(DEDICATED), node(DEDICATED, other))
    assert not condition_taints_only(node(DEDICATED), node())  # the harness's own taint removed
    changed = {**DEDICATED, "effect": "NoExecute"}
    assert not condition_taints_only(node(DEDICATED), node(changed))


def test_a_taint_list_that_is_not_a_list_is_never_taken_for_the_controllers() -> None:
    weird = {"kind": "Node", "spec": {"taints": {"key": "node.kubernetes.io/disk-pressure"}}}
    assert not condition_taints_only(node(), weird)
