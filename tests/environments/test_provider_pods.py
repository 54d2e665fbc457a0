"""Pods whose status the provisioner writes: whose they are and what each needs next (pure)."""

from __future__ import annotations

import datetime as dt
from typing import Any

import pytest

from oasis_operator.core.environment.manifests import WorkloadState
from oasis_operator.core.environment.naming import STATUS_BY_PROVIDER_ANNOTATION, status_marker
from oasis_operator.core.environment.provider_pods import handover_status, step_after_handover, workload_of

OWNER = "0123456789ab"
FAILING = WorkloadState(
    "Deployment", "ns", "svc", "running", 2, {"app": "svc"}, on_restart="ImagePullBackOff"
)
ROLLING = WorkloadState(
    "Deployment",
    "ns",
    "web",
    "rolling",
    3,
    {"app": "web"},
    history=("web:1",),
    on_restart="running",
    start_seconds=4.0,
)
PLAIN = WorkloadState("Deployment", "ns", "db", "running", 1, {"app": "db"})
NOW = dt.datetime(2026, 11, 30, 12, 0, tzinfo=dt.UTC)
WHERE = {
    "hostIP": "10.89.0.11",
    "hostIPs": [{"ip": "10.89.0.11"}],
    "podIP": "10.244.200.7",
    "podIPs": [{"ip": "10.244.200.7"}],
}


def pod(
    app: str = "svc",
    *,
    owner: str | None = OWNER,
    node: str | None = "worker-1",
    image: str = "web:2",
    waiting: str | None = None,
    running: bool = False,
    deleting: bool = False,
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": f"{app}-x", "namespace": "ns", "uid": "u1", "labels": {"app": app}}
    if owner is not None:
        meta["annotations"] = {STATUS_BY_PROVIDER_ANNOTATION: status_marker(owner)}
    if deleting:
        meta["deletionTimestamp"] = "2026-11-30T12:00:00Z"
    status: dict[str, Any] = {}
    if waiting or running:
        status["containerStatuses"] = [
            {"name": "c", "state": {"waiting": {"reason": waiting}} if waiting else {"running": {}}}
        ]
    return {
        "metadata": meta,
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": image}]},
        "status": status,
    }


def test_a_pod_belongs_to_the_workload_its_labels_and_the_owner_annotation_name() -> None:
    workloads = [FAILING, ROLLING, PLAIN]
    assert workload_of(pod("svc"), workloads, OWNER) is FAILING
    assert workload_of(pod("web"), workloads, OWNER) is ROLLING
    assert workload_of(pod("svc", owner="ffffffffffff"), workloads, OWNER) is None  # another scenario's
    assert workload_of(pod("svc", owner=None), workloads, OWNER) is None  # the simulator runs it
    assert workload_of(pod("db"), workloads, OWNER) is None  # not a workload the provisioner runs


STEPS = {
    "a pod that just started gets the injected failure": (FAILING, pod(), "fail"),
    "a pod that already shows its failure needs nothing": (FAILING, pod(waiting="ImagePullBackOff"), None),
    "a pod that runs (started before the handover) needs nothing": (FAILING, pod(running=True), None),
    "an unscheduled pod needs nothing yet": (FAILING, pod(node=None), None),
    "a pod being deleted needs nothing": (FAILING, pod(deleting=True), None),
    "a rollout pod that just started is started": (ROLLING, pod("web"), "start"),
    "a rollout pod still starting from the handover is started": (
        ROLLING,
        pod("web", waiting="ContainerCreating"),
        "start",
    ),
    "a rollout pod that runs needs nothing": (ROLLING, pod("web", running=True), None),
    "a workload without an injected behaviour needs nothing": (PLAIN, pod("db"), None),
}


@pytest.mark.parametrize(("w", "p", "step"), list(STEPS.values()), ids=list(STEPS))
def test_the_step_after_the_handover(w: WorkloadState, p: dict[str, Any], step: str | None) -> None:
    assert step_after_handover(w, p) == step


def test_at_the_handover_a_rollouts_new_pods_are_starting_and_every_other_pod_runs() -> None:
    new = handover_status(ROLLING, pod("web", image="web:2"), NOW, WHERE)
    assert (new["phase"], new["containerStatuses"][0]["state"]) == (
        "Pending",
        {"waiting": {"reason": "ContainerCreating"}},
    )
    assert "podIP" not in new  # no sandbox yet
    old = handover_status(ROLLING, pod("web", image="web:1"), NOW, WHERE)
    assert (old["phase"], old["podIP"]) == ("Running", "10.244.200.7")
    assert handover_status(FAILING, pod(), NOW, WHERE)["phase"] == "Running"
