"""Pods whose status the provisioner writes instead of the node simulator: which workload they belong
to, and what each one needs next.

Called by the provisioner (before the handover) and by the failure injector (while the agent works);
turns a pod as the API returns it and the plan's :class:`WorkloadState` into a decision: the status a
pod gets at the handover (running, or still starting for the new revision of a rollout in progress),
and the step it needs once the agent works (``"fail"``: the injected failure; ``"start"``: a rollout
pod that runs after a while; ``None``: nothing). Pure: the callers read the pods, keep track of what
they have already scheduled, and write.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping
from typing import Any, Literal

from oasis_operator.core.environment import pod_status
from oasis_operator.core.environment.manifests import WorkloadState
from oasis_operator.core.environment.naming import STATUS_BY_PROVIDER_ANNOTATION, status_marker
from oasis_operator.core.environment.pod_states import POD_STATES
from oasis_operator.core.environment.symptoms import image_of, waiting_reason

Step = Literal["fail", "start"]


def workload_of(
    pod: Mapping[str, Any], workloads: Iterable[WorkloadState], owner: str
) -> WorkloadState | None:
    """The workload a pod belongs to, if it is one whose status the provisioner writes for ``owner``."""
    meta = pod.get("metadata", {})
    if (meta.get("annotations") or {}).get(STATUS_BY_PROVIDER_ANNOTATION) != status_marker(owner):
        return None
    labels = meta.get("labels") or {}
    for w in workloads:
        if (
            w.status_by_provider
            and w.namespace == meta.get("namespace")
            and all(labels.get(k) == v for k, v in w.selector.items())
        ):
            return w
    return None


def is_live(pod: Mapping[str, Any]) -> bool:
    """Bound to a node and not being deleted: a pod a kubelet would be reporting on."""
    return bool(pod.get("spec", {}).get("nodeName")) and not pod.get("metadata", {}).get("deletionTimestamp")


def has_status(pod: Mapping[str, Any]) -> bool:
    return bool((pod.get("status") or {}).get("containerStatuses"))


def is_new_revision(w: WorkloadState, pod: Mapping[str, Any]) -> bool:
    """In a rollout in progress: the pod runs the image being rolled out (not the previous one)."""
    return w.state == "rolling" and bool(w.history) and image_of(pod) != w.history[-1]


def handover_status(
    w: WorkloadState, pod: dict[str, Any], now: dt.datetime, where: dict[str, Any]
) -> dict[str, Any]:
    """The first status of a pod before the handover: running, starting for a rollout's new pods, or
    for a failing init container its failure at once (the main containers never run, so the pod is never
    Ready, not even for a moment the endpoint controller could see)."""
    if POD_STATES[w.state].init:
        return pod_status.failing_status(pod, w.state, now, w.restarts, where=where)
    if is_new_revision(w, pod):
        return pod_status.starting_status(pod, now, str(where["hostIP"]))
    return pod_status.running_status(pod, now, where)


def started(w: WorkloadState, pod: Mapping[str, Any]) -> bool:
    """A bound pod a kubelet reports on as the workload's state has it: Running, or (a failing init
    container) Pending with its init containers' statuses."""
    status = pod.get("status") or {}
    if POD_STATES[w.state].init:
        return is_live(pod) and bool(status.get("initContainerStatuses"))
    return bool(pod.get("spec", {}).get("nodeName")) and status.get("phase") == "Running"


def step_after_handover(w: WorkloadState, pod: Mapping[str, Any]) -> Step | None:
    """What a live pod needs once the agent works: its injected failure when it has just started, or
    (a rollout going on) to run when it has just started or is still starting."""
    if not is_live(pod):
        return None
    if w.on_restart == "running":
        if not has_status(pod) or waiting_reason(pod) == "ContainerCreating":
            return "start"
        return None
    if w.on_restart is not None and not has_status(pod):
        return "fail"
    return None
