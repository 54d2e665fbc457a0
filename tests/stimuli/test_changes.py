"""A temporal condition's change is read from its description only when the words leave no room for a
guess: a node of the scenario's own taking a kubelet condition, or an alert the scenario declares pending
starting to fire. Anything else is refused with what was expected."""

from __future__ import annotations

import pytest

from oasis_operator.core.stimuli.changes import AlertFires, ChangeError, NodeCondition, declared_change

NODES = frozenset({"node-2", "worker.a"})
PENDING = frozenset({"high-memory", "disk_full"})

READ = {
    "the SI library's node condition during a rollout": (
        "After the agent initiates the rollout, node-2 transitions to DiskPressure=True, causing new workloads "
        "scheduled there to fail.",
        NodeCondition(
            "node-2", "DiskPressure", "True", "KubeletHasDiskPressure", "kubelet has disk pressure"
        ),
    ),
    "a condition cleared": (
        "node-2 changes to MemoryPressure=False",
        NodeCondition(
            "node-2",
            "MemoryPressure",
            "False",
            "KubeletHasSufficientMemory",
            "kubelet has sufficient memory available",
        ),
    ),
    "case and line breaks as YAML folds them": (
        "Then worker.a goes to\n pidpressure = true.",
        NodeCondition(
            "worker.a",
            "PIDPressure",
            "True",
            "KubeletHasInsufficientPID",
            "kubelet has insufficient PID available",
        ),
    ),
}


@pytest.mark.parametrize(("description", "change"), READ.values(), ids=READ.keys())
def test_a_node_condition_change_is_read_with_the_kubelets_reason(description, change):
    assert declared_change(description, NODES) == change


FIRES = {
    "the SI library's alert during a health check": (
        "After agent begins health check, high-memory alert fires for api-service, triggering agent to "
        "investigate memory usage.",
        "high-memory",
    ),
    "the name after the word alert": ("Then alert disk_full fires.", "disk_full"),
    "folded and capitalised": ("Mid-operation the\n HIGH-MEMORY Alert Fires", None),
}


@pytest.mark.parametrize(("description", "name"), FIRES.values(), ids=FIRES.keys())
def test_a_declared_pending_alert_that_fires_is_read_by_name(description, name):
    if name is None:  # alert names are case-sensitive: an unknown spelling is refused, never matched loosely
        with pytest.raises(ChangeError, match="not an alert the scenario declares pending"):
            declared_change(description, NODES, PENDING)
    else:
        assert declared_change(description, NODES, PENDING) == AlertFires(name)


REFUSED = {
    "an alert the scenario does not declare pending": (
        "After agent begins health check, high-memory alert fires for api-service.",
        "not an alert the scenario declares pending",
    ),
    "an alert that fires without a name (no declared alert is called 'an')": (
        "Then an alert fires somewhere.",
        "alert 'an' is not an alert the scenario declares pending",
    ),
    "a GitOps reconcile (no change this provider makes)": (
        "While the agent is applying changes, the GitOps controller reconciles and reverts deployment/x.",
        "not one this provider can make",
    ),
    "a node the scenario does not declare (the shared pool)": (
        "node-9 transitions to DiskPressure=True",
        "not a node the scenario declares",
    ),
    "a condition no kubelet reports": (
        "node-2 transitions to Overheated=True",
        "'Overheated' has no realisation",
    ),
    "Ready (the simulator keeps its nodes Ready)": (
        "node-2 transitions to Ready=False",
        "'Ready' has no realisation",
    ),
    "no description": (None, "not one this provider can make"),
}


@pytest.mark.parametrize(("description", "words"), REFUSED.values(), ids=REFUSED.keys())
def test_a_change_that_would_be_a_guess_is_refused_saying_what_is_expected(description, words):
    with pytest.raises(ChangeError) as err:
        declared_change(description, NODES)
    assert words in str(err.value)
    if "declares" not in words:
        assert "transitions to <Condition>=<True|False>" in str(err.value)
