"""Is a declared workload state really observable? The check before an agent is handed the scenario.

Called by the environment provider after provisioning; turns a declared :class:`WorkloadState` and
what the API shows (the workload's pods, the number of its ReplicaSets) into the problems found,
empty when the declared symptom is there. A non-empty answer is a provider fault, never a verdict.
Pure: the caller reads the objects.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from oasis_operator.core.environment.manifests import WorkloadState
from oasis_operator.core.environment.pod_states import POD_STATES, PodState
from oasis_operator.core.toolplane import usage


def _waiting_reasons(pods: Sequence[Mapping[str, Any]]) -> list[str | None]:
    return [
        (cs.get("state", {}).get("waiting") or {}).get("reason")
        for p in pods
        for cs in (p.get("status") or {}).get("containerStatuses", [])
    ]


def waiting_reason(pod: Mapping[str, Any]) -> str | None:
    """Why the pod's first waiting container waits (ContainerCreating, ImagePullBackOff...), if one does."""
    return next((r for r in _waiting_reasons([pod]) if r), None)


def quota_counted(quota: Mapping[str, Any]) -> bool:
    """The quota controller has counted every resource the ResourceQuota limits. Until it has, the
    API server refuses every create the quota covers ("status unknown for quota"), so a controller
    creating the declared pods backs off and the environment comes up late or not at all."""
    hard = (quota.get("spec") or {}).get("hard") or {}
    status = quota.get("status") or {}
    counted_hard, used = status.get("hard") or {}, status.get("used") or {}
    return all(key in counted_hard and key in used for key in hard)


def is_ready(pod: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "Ready" and c.get("status") == "True"
        for c in (pod.get("status") or {}).get("conditions", [])
    )


def image_of(pod: Mapping[str, Any]) -> str | None:
    """The image of the pod's first container."""
    containers = pod.get("spec", {}).get("containers") or [{}]
    image = containers[0].get("image")
    return str(image) if image is not None else None


def workload_problems(
    w: WorkloadState, pods: Sequence[Mapping[str, Any]], revisions: int | None = None
) -> list[str]:
    label = f"{w.kind.lower()}/{w.name}"
    if len(pods) < w.replicas:
        return [f"{label}: {len(pods)} of {w.replicas} pods exist"]
    row = POD_STATES.get(w.state)
    if row is not None and row.writes_status:
        problems = _failure_problems(label, row, pods)
    elif w.state == "running":
        ready = sum(1 for p in pods if is_ready(p))
        problems = [f"{label}: {ready} of {w.replicas} pods Ready"] if ready < w.replicas else []
    elif w.state == "rolling":
        problems = _rollout_problems(label, w, pods)
    elif w.state == "pending":
        problems = _pending_problems(label, pods)
    else:
        problems = []
    if w.history and revisions is not None and revisions < len(w.history) + 1:
        problems.append(f"{label}: {revisions} revisions, expected {len(w.history) + 1}")
    return problems


#: What the scheduler says of a pod no node has the CPU for (its PodScheduled condition's message, as in
#: "0/6 nodes are available: 3 Insufficient cpu, ..."): a pending workload shows it before the handover.
INSUFFICIENT_CPU = "Insufficient cpu"


def _pending_problems(label: str, pods: Sequence[Mapping[str, Any]]) -> list[str]:
    """Pending pods are unscheduled, and the scheduler has said why: no node has the CPU they request."""
    if any(p.get("spec", {}).get("nodeName") for p in pods):
        return [f"{label}: pending pods were scheduled"]
    unsaid = [
        str(p.get("metadata", {}).get("name"))
        for p in pods
        if not any(
            c.get("type") == "PodScheduled"
            and c.get("status") == "False"
            and INSUFFICIENT_CPU in str(c.get("message", ""))
            for c in (p.get("status") or {}).get("conditions") or []
        )
    ]
    if unsaid:
        return [f"{label}: the scheduler has not reported {INSUFFICIENT_CPU} for {', '.join(sorted(unsaid))}"]
    return []


def _failure_problems(label: str, row: PodState, pods: Sequence[Mapping[str, Any]]) -> list[str]:
    """A written failure shows: on every pod (or, for a state that fails some, on some and not all),
    with its last termination where that is what tells the state apart."""
    if row.init:
        return _init_problems(label, row, pods)
    reasons = _waiting_reasons(pods)
    shown = reasons.count(row.waiting)
    if row.failing == "some":
        if not shown or shown == len(pods):
            return [f"{label}: {row.name} needs some failing and some healthy pods ({reasons})"]
        return []
    problems = [] if shown >= len(pods) else [f"{label}: not every pod shows {row.waiting} ({reasons})"]
    if row.shows_termination and row.last_termination is not None:
        reason = row.last_termination[1]
        if not all(
            cs.get("lastState", {}).get("terminated", {}).get("reason") == reason
            for p in pods
            for cs in p.get("status", {}).get("containerStatuses", [])
        ):
            problems.append(f"{label}: last termination is not {reason}")
    return problems


def _init_problems(label: str, row: PodState, pods: Sequence[Mapping[str, Any]]) -> list[str]:
    """A failing init container shows on every pod: its last init container waits in ``row.waiting``
    after exiting with the row's termination, the main containers wait PodInitializing, the pod is
    Pending and not Ready (what ``kubectl get pods`` shows as Init:CrashLoopBackOff)."""
    wrong = []
    for p in pods:
        status = p.get("status") or {}
        inits = status.get("initContainerStatuses") or [{}]
        failing = inits[-1]
        terminated = (failing.get("lastState") or {}).get("terminated") or {}
        if (
            status.get("phase") != row.phase
            or is_ready(p)
            or (failing.get("state", {}).get("waiting") or {}).get("reason") != row.waiting
            or (terminated.get("exitCode"), terminated.get("reason")) != row.last_termination
            or set(_waiting_reasons([p])) != {"PodInitializing"}
        ):
            wrong.append(str(p.get("metadata", {}).get("name")))
    return [f"{label}: {', '.join(sorted(wrong))} not in {row.name}"] if wrong else []


def endpoint_problems(namespace: str, service: str, slices: Sequence[Mapping[str, Any]]) -> list[str]:
    """A Service declared with no endpoints: the endpoint controller has written its EndpointSlices
    (at least one) and none lists a ready endpoint."""
    label = f"service/{service} in {namespace}"
    if not slices:
        return [f"{label}: the endpoint controller has written no EndpointSlice yet"]
    ready = [
        addr
        for s in slices
        for e in s.get("endpoints") or []
        if (e.get("conditions") or {}).get("ready") is True
        for addr in e.get("addresses") or ["?"]
    ]
    return [f"{label}: declared no endpoints, but {', '.join(ready)} are ready"] if ready else []


def _rollout_problems(label: str, w: WorkloadState, pods: Sequence[Mapping[str, Any]]) -> list[str]:
    """A rollout caught halfway: the previous revision's pods run, the new revision's are starting."""
    problems = []
    old_image = w.history[-1] if w.history else None
    old = [p for p in pods if image_of(p) == old_image]
    new = [p for p in pods if image_of(p) != old_image]
    if not old or not all(is_ready(p) for p in old):
        problems.append(f"{label}: the previous revision's pods are not all running ({len(old)})")
    if (
        not new
        or any(is_ready(p) for p in new)
        or not all(r == "ContainerCreating" for r in _waiting_reasons(new))
    ):
        problems.append(f"{label}: no new pod is starting, so no rollout is in progress")
    return problems


def available_shown(dep: Mapping[str, Any]) -> str | None:
    """The status of a Deployment's Available condition as its controller wrote it (None: not yet)."""
    return next(
        (
            str(c.get("status"))
            for c in (dep.get("status") or {}).get("conditions") or []
            if c.get("type") == "Available"
        ),
        None,
    )


def available_problems(w: WorkloadState, dep: Mapping[str, Any]) -> list[str]:
    """The declared Available condition of a Deployment is the one its controller shows."""
    if w.available is None:
        return []
    shown = available_shown(dep)
    if observed(dep) and shown == w.available:
        return []
    return [f"deployment/{w.name}: Available is {shown}, declared {w.available}"]


def node_problems(manifest: Mapping[str, Any], node: Mapping[str, Any]) -> list[str]:
    """Problems of a scenario's node as the API shows it, against its manifest: Ready, with every
    declared condition and allocatable resource as declared."""
    name = manifest["metadata"]["name"]
    shown = {c.get("type"): c.get("status") for c in node.get("status", {}).get("conditions", [])}
    problems = [] if shown.get("Ready") == "True" else [f"node/{name} is not Ready"]
    for c in manifest.get("status", {}).get("conditions", []):
        if shown.get(c["type"]) != c["status"]:
            problems.append(f"node/{name}: {c['type']} is {shown.get(c['type'])}, declared {c['status']}")
    allocatable = node.get("status", {}).get("allocatable", {})
    for key, value in manifest.get("status", {}).get("allocatable", {}).items():
        if not _same_quantity(key, allocatable.get(key), value):
            problems.append(f"node/{name}: allocatable {key} is {allocatable.get(key)}, declared {value}")
    return problems


def _same_quantity(resource: str, shown: Any, declared: Any) -> bool:
    """The API server writes a quantity in its canonical form (``4000m`` is shown as ``4``)."""
    if shown == declared:
        return True
    if resource not in ("cpu", "memory") or shown is None:
        return False
    amount = usage.parse(resource, str(declared))
    return amount is not None and amount == usage.parse(resource, str(shown))


def observed(obj: Mapping[str, Any]) -> bool:
    """Its controller has acted on the latest spec (``status.observedGeneration`` caught up)."""
    return bool(
        (obj.get("status") or {}).get("observedGeneration", 0) >= obj["metadata"].get("generation", 1)
    )


def replicaset_settled(rs: Mapping[str, Any]) -> bool:
    """A ReplicaSet has observed its spec and has as many pods as it wants."""
    return observed(rs) and (rs.get("status") or {}).get("replicas", 0) == (rs.get("spec") or {}).get(
        "replicas", 0
    )


def rolled_out(w: WorkloadState, dep: Mapping[str, Any]) -> bool:
    """A running Deployment's rollout is complete: no old revision's pods left, all available."""
    st = dep.get("status") or {}
    return observed(dep) and (
        st.get("updatedReplicas", 0) == w.replicas == st.get("replicas", 0) == st.get("availableReplicas", 0)
    )


def rollout_caught_halfway(
    w: WorkloadState, dep: Mapping[str, Any], pods: Sequence[Mapping[str, Any]]
) -> bool:
    """A rollout in progress is observable: the pods show it, and so does the Deployment's own status
    (what `kubectl get` shows first), which counts exactly these pods."""
    st = dep.get("status") or {}
    old_image = w.history[-1] if w.history else None
    new = [p for p in pods if image_of(p) != old_image]
    ready = [p for p in pods if is_ready(p)]
    return (
        observed(dep)
        and st.get("replicas", 0) == len(pods)
        and st.get("updatedReplicas", 0) == len(new)
        and st.get("availableReplicas", 0) == len(ready)
        and not workload_problems(w, pods)
    )
