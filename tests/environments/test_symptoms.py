"""The declared-symptom check, one case per sentence (pure: pods as the API returns them)."""

from __future__ import annotations

from typing import Any

import pytest

from oasis_operator.core.environment.manifests import WorkloadState
from oasis_operator.core.environment.symptoms import (
    observed,
    replicaset_settled,
    rolled_out,
    rollout_caught_halfway,
    workload_problems,
)


def pod(
    ready: bool = True,
    waiting: str | None = None,
    last: str | None = None,
    node: str = "worker-1",
    image: str = "web:1",
) -> dict[str, Any]:
    cs: dict[str, Any] = {
        "name": "c",
        "state": {"waiting": {"reason": waiting}} if waiting else {"running": {}},
    }
    if last:
        cs["lastState"] = {"terminated": {"reason": last}}
    return {
        "spec": {"nodeName": node, "containers": [{"name": "c", "image": image}]},
        "status": {"conditions": [{"type": "Ready", "status": str(ready)}], "containerStatuses": [cs]},
    }


INSUFFICIENT = (
    "0/6 nodes are available: 3 Insufficient cpu, 3 node(s) didn't match Pod's node affinity/selector."
)


def unschedulable(message: str) -> dict[str, Any]:
    """A pod the scheduler could not place, with its PodScheduled condition as the scheduler writes it."""
    out = pod(False, node="")
    out["status"]["conditions"].append(
        {"type": "PodScheduled", "status": "False", "reason": "Unschedulable", "message": message}
    )
    return out


def w(state: str, replicas: int = 2, history: tuple[str, ...] = ()) -> WorkloadState:
    return WorkloadState("Deployment", "ns", "web", state, replicas, {"app": "web"}, 5, history)


CASES = {
    "running pods that are all Ready show the declared state": (w("running"), [pod(), pod()], None, 0),
    "a running workload with an unready pod is a problem": (w("running"), [pod(), pod(False)], None, 1),
    "fewer pods than replicas is a problem": (w("running"), [pod()], None, 1),
    "every pod in CrashLoopBackOff shows CrashLoopBackOff": (
        w("CrashLoopBackOff"),
        [pod(False, "CrashLoopBackOff")] * 2,
        None,
        0,
    ),
    "one pod still running is not CrashLoopBackOff": (
        w("CrashLoopBackOff"),
        [pod(False, "CrashLoopBackOff"), pod()],
        None,
        1,
    ),
    "OOMKilled needs OOMKilled as the last termination": (
        w("OOMKilled"),
        [pod(False, "CrashLoopBackOff", "Error")] * 2,
        None,
        1,
    ),
    "OOMKilled with that last termination is fine": (
        w("OOMKilled"),
        [pod(False, "CrashLoopBackOff", "OOMKilled")] * 2,
        None,
        0,
    ),
    "ImagePullBackOff on every pod": (w("ImagePullBackOff"), [pod(False, "ImagePullBackOff")] * 2, None, 0),
    "degraded needs some failing and some healthy": (
        w("degraded"),
        [pod(False, "CrashLoopBackOff"), pod()],
        None,
        0,
    ),
    "degraded with every pod failing is not degraded": (
        w("degraded"),
        [pod(False, "CrashLoopBackOff")] * 2,
        None,
        1,
    ),
    "pending pods must not be scheduled": (w("pending"), [unschedulable(INSUFFICIENT)] * 2, None, 0),
    "a pending pod the scheduler has not judged yet is not pending yet": (
        w("pending"),
        [unschedulable(INSUFFICIENT), pod(False, node="")],
        None,
        1,
    ),
    "a pending pod kept off for another reason than CPU is not the declared one": (
        w("pending"),
        [unschedulable("0/3 nodes are available: 3 node(s) had untolerated taint(s).")] * 2,
        None,
        1,
    ),
    "a scheduled pending pod is a problem": (w("pending"), [pod(False), pod(False, node="")], None, 1),
    "a rollout history needs one revision per image": (w("running", history=("v1",)), [pod(), pod()], 1, 1),
    "two revisions for one earlier image is the history": (
        w("running", history=("v1",)),
        [pod(), pod()],
        2,
        0,
    ),
    "a rollout in progress: old pods running, a new one starting": (
        w("rolling", history=("web:1",)),
        [pod(), pod(), pod(False, "ContainerCreating", image="web:2")],
        2,
        0,
    ),
    "a rollout whose new pod already runs is not in progress": (
        w("rolling", history=("web:1",)),
        [pod(), pod(), pod(image="web:2")],
        2,
        1,
    ),
    "a rollout without a new pod is not in progress": (
        w("rolling", history=("web:1",)),
        [pod(), pod()],
        2,
        1,
    ),
    "a rollout whose old pods do not run is not the declared state": (
        w("rolling", history=("web:1",)),
        [pod(False, "ContainerCreating"), pod(), pod(False, "ContainerCreating", image="web:2")],
        2,
        1,
    ),
}


@pytest.mark.parametrize(("workload", "pods", "revisions", "problems"), list(CASES.values()), ids=list(CASES))
def test_declared_symptom(workload, pods, revisions, problems):
    assert len(workload_problems(workload, pods, revisions)) == problems


def _obj(generation: int, observed_generation: int, **status: int) -> dict[str, Any]:
    return {
        "metadata": {"generation": generation},
        "status": {"observedGeneration": observed_generation, **status},
    }


def test_controllers_caught_up() -> None:
    assert observed(_obj(2, 2))
    assert not observed(_obj(3, 2))
    assert replicaset_settled({**_obj(1, 1, replicas=2), "spec": {"replicas": 2}})
    assert not replicaset_settled({**_obj(1, 1, replicas=1), "spec": {"replicas": 2}})


def test_a_rollout_is_complete_when_every_replica_is_updated_and_available() -> None:
    assert rolled_out(w("running"), _obj(2, 2, replicas=2, updatedReplicas=2, availableReplicas=2))
    assert not rolled_out(w("running"), _obj(2, 2, replicas=3, updatedReplicas=2, availableReplicas=2))
    assert not rolled_out(w("running"), _obj(2, 1, replicas=2, updatedReplicas=2, availableReplicas=2))


def test_a_rollout_is_caught_halfway_only_once_the_deployment_status_counts_the_same_pods() -> None:
    rolling = w("rolling", history=("web:1",))
    pods = [pod(), pod(), pod(False, "ContainerCreating", image="web:2")]
    assert rollout_caught_halfway(
        rolling, _obj(2, 2, replicas=3, updatedReplicas=1, availableReplicas=2), pods
    )
    assert not rollout_caught_halfway(
        rolling, _obj(2, 2, replicas=3, updatedReplicas=1, availableReplicas=1), pods
    )
    assert not rollout_caught_halfway(
        rolling, _obj(2, 1, replicas=3, updatedReplicas=1, availableReplicas=2), pods
    )
