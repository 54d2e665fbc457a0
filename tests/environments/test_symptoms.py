"""The declared-symptom check, one case per sentence (pure: pods as the API returns them)."""

from __future__ import annotations

from typing import Any

import pytest

from oasis_operator.core.environment.manifests import WorkloadState
from oasis_operator.core.environment.symptoms import workload_problems


def pod(ready: bool = True, waiting: str | None = None, last: str | None = None, node: str = "worker-1",
        image: str = "web:1") -> dict[str, Any]:
    cs: dict[str, Any] = {"name": "c", "state": {"waiting": {"reason": waiting}} if waiting else {"running": {}}}
    if last:
        cs["lastState"] = {"terminated": {"reason": last}}
    return {"spec": {"nodeName": node, "containers": [{"name": "c", "image": image}]}, "status": {"conditions": [{"type": "Ready", "status": str(ready)}],
                                                   "containerStatuses": [cs]}}


def w(state: str, replicas: int = 2, history: tuple[str, ...] = ()) -> WorkloadState:
    return WorkloadState("Deployment", "ns", "web", state, replicas, {"app": "web"}, 5, history)


CASES = {
    "running pods that are all Ready show the declared state": (w("running"), [pod(), pod()], None, 0),
    "a running workload with an unready pod is a problem": (w("running"), [pod(), pod(False)], None, 1),
    "fewer pods than replicas is a problem": (w("running"), [pod()], None, 1),
    "every pod in CrashLoopBackOff shows CrashLoopBackOff": (w("CrashLoopBackOff"), [pod(False, "CrashLoopBackOff")] * 2, None, 0),
    "one pod still running is not CrashLoopBackOff": (w("CrashLoopBackOff"), [pod(False, "CrashLoopBackOff"), pod()], None, 1),
    "OOMKilled needs OOMKilled as the last termination": (w("OOMKilled"), [pod(False, "CrashLoopBackOff", "Error")] * 2, None, 1),
    "OOMKilled with that last termination is fine": (w("OOMKilled"), [pod(False, "CrashLoopBackOff", "OOMKilled")] * 2, None, 0),
    "ImagePullBackOff on every pod": (w("ImagePullBackOff"), [pod(False, "ImagePullBackOff")] * 2, None, 0),
    "degraded needs some failing and some healthy": (w("degraded"), [pod(False, "CrashLoopBackOff"), pod()], None, 0),
    "degraded with every pod failing is not degraded": (w("degraded"), [pod(False, "CrashLoopBackOff")] * 2, None, 1),
    "pending pods must not be scheduled": (w("pending"), [pod(False, node="")] * 2, None, 0),
    "a scheduled pending pod is a problem": (w("pending"), [pod(False), pod(False, node="")], None, 1),
    "a rollout history needs one revision per image": (w("running", history=("v1",)), [pod(), pod()], 1, 1),
    "two revisions for one earlier image is the history": (w("running", history=("v1",)), [pod(), pod()], 2, 0),
    "a rollout in progress: old pods running, a new one starting": (
        w("rolling", history=("web:1",)), [pod(), pod(), pod(False, "ContainerCreating", image="web:2")], 2, 0),
    "a rollout whose new pod already runs is not in progress": (
        w("rolling", history=("web:1",)), [pod(), pod(), pod(image="web:2")], 2, 1),
    "a rollout without a new pod is not in progress": (w("rolling", history=("web:1",)), [pod(), pod()], 2, 1),
    "a rollout whose old pods do not run is not the declared state": (
        w("rolling", history=("web:1",)), [pod(False, "ContainerCreating"), pod(),
                                          pod(False, "ContainerCreating", image="web:2")], 2, 1),
}


@pytest.mark.parametrize(("workload", "pods", "revisions", "problems"), list(CASES.values()), ids=list(CASES))
def test_declared_symptom(workload, pods, revisions, problems):
    assert len(workload_problems(workload, pods, revisions)) == problems
