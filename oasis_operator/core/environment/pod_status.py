"""Pod statuses and Events as a kubelet would write them for a failing container.

Called by the provisioner after the simulator has made a pod Running; turns a pod (as read from the
API), a declared state and the current time (given by the caller: the core reads no clock) into the
status to write and the Events a kubelet would have recorded. The shapes follow what a kubelet
reports: phase, conditions, containerStatuses with state / lastState / exit codes / restartCount.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import ipaddress
from typing import Any

from oasis_operator.core.environment.pod_states import POD_STATES, PodState
from oasis_operator.core.toolplane.memory import lives


def _written(state: str) -> PodState:
    """The row of a state whose status the provisioner writes."""
    row = POD_STATES.get(state)
    if row is None or not row.writes_status:
        raise ValueError(f"pod state {state!r} has no status to write")
    return row


def _event_suffix(name: str, reason: str, index: int) -> str:
    # Kubelet event names are "<object>.<16 hex digits>"; derive them deterministically.
    return hashlib.sha256(f"{name}/{reason}/{index}".encode()).hexdigest()[:16]


def _ts(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _conditions(since: dt.datetime, ready: bool, reason: str | None) -> list[dict[str, Any]]:
    t = _ts(since)
    not_ready: dict[str, Any] = {"status": "False", "reason": reason or "ContainersNotReady"}
    conds = [
        {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": t},
        {"type": "Initialized", "status": "True", "lastTransitionTime": t},
        {"type": "Ready", **({"status": "True"} if ready else not_ready), "lastTransitionTime": t},
        {"type": "ContainersReady", **({"status": "True"} if ready else not_ready), "lastTransitionTime": t},
        {"type": "PodScheduled", "status": "True", "lastTransitionTime": t},
    ]
    if not ready:
        for c in conds[2:4]:
            c["message"] = "containers with unready status: [{names}]"
    return conds


def pod_ip(cidr: str, uid: str) -> str:
    """An address for a pod whose status the provisioner writes: in the upper half of the pod CIDR
    (the simulator hands out addresses from the bottom), chosen by the pod's uid."""
    net = ipaddress.ip_network(cidr, strict=False)
    half = net.num_addresses // 2
    offset = int(hashlib.sha256(uid.encode()).hexdigest(), 16) % max(1, half - 2)
    return str(net.network_address + half + 1 + offset)


def addresses(host_ip: str, ip: str) -> dict[str, Any]:
    """The address fields of a pod's status (a kubelet reports them once the sandbox exists)."""
    return {"hostIP": host_ip, "hostIPs": [{"ip": host_ip}], "podIP": ip, "podIPs": [{"ip": ip}]}


def running_status(pod: dict[str, Any], now: dt.datetime, where: dict[str, Any]) -> dict[str, Any]:
    """The status of a pod whose containers all started at ``now`` (what the simulator writes for the
    pods it runs, so the provisioner's and the simulator's pods look alike)."""
    t = _ts(now)
    statuses = [
        {
            "name": c["name"],
            "image": c["image"],
            "imageID": f"{c['image']}@sha256:{'0' * 64}",
            "ready": True,
            "started": True,
            "restartCount": 0,
            "state": {"running": {"startedAt": t}},
        }
        for c in pod["spec"]["containers"]
    ]
    return {
        "phase": "Running",
        "conditions": _conditions(now, ready=True, reason=None),
        "containerStatuses": statuses,
        **where,
        "startTime": t,
    }


def starting_status(pod: dict[str, Any], now: dt.datetime, host_ip: str) -> dict[str, Any]:
    """The status of a pod bound at ``now`` whose containers are being created (image pull, sandbox)."""
    t = _ts(now)
    names = " ".join(c["name"] for c in pod["spec"]["containers"])
    not_ready = {
        "status": "False",
        "reason": "ContainersNotReady",
        "message": f"containers with unready status: [{names}]",
        "lastTransitionTime": t,
    }
    return {
        "phase": "Pending",
        "conditions": [
            {"type": "PodReadyToStartContainers", "status": "False", "lastTransitionTime": t},
            {"type": "Initialized", "status": "True", "lastTransitionTime": t},
            {"type": "Ready", **not_ready},
            {"type": "ContainersReady", **not_ready},
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": t},
        ],
        "containerStatuses": _not_started(pod, "ContainerCreating"),
        "hostIP": host_ip,
        "hostIPs": [{"ip": host_ip}],
        "startTime": t,
    }


def failing_status(
    pod: dict[str, Any],
    state: str,
    now: dt.datetime,
    restarts: int = 5,
    since: dt.datetime | None = None,
    where: dict[str, Any] | None = None,
    last_oom: float | None = None,
    life: float = 0.0,
) -> dict[str, Any]:
    """The status of ``pod`` in ``state`` (a state of :data:`POD_STATES` whose status is written:
    CrashLoopBackOff, OOMKilled, ImagePullBackOff, degraded, Init:CrashLoopBackOff), failing since
    ``since`` (20 minutes before ``now`` unless given). ``where`` gives the addresses of a pod that has
    none yet. An init state failing since ``now`` has just failed once (Init:Error, no restart yet).
    ``last_oom`` (seconds relative to ``now``) and ``life``: the last container ran ``life`` seconds and
    ended then, and the pod started when the first of its ``restarts + 1`` lives did (a leaking
    workload, decision 0067); else it ended 90 s before ``now`` after 5 s."""
    row = _written(state)
    containers = pod["spec"]["containers"]
    old = {**(where or {}), **pod.get("status", {})}
    finished, ran = now - dt.timedelta(seconds=90), dt.timedelta(seconds=5)
    if last_oom is not None and life > 0:
        finished, ran = now + dt.timedelta(seconds=last_oom), dt.timedelta(seconds=life)
        if since is None:
            since = now + dt.timedelta(seconds=lives(restarts, last_oom, life)[0][0])
    started = since if since is not None else now - dt.timedelta(minutes=20)
    if row.init:
        return _carried(_init_failing_status(pod, row, now, restarts, started, fresh=started >= now), old)
    statuses = []
    for c in containers:
        image = c["image"]
        status: dict[str, Any] = {
            "name": c["name"],
            "image": image,
            "ready": False,
            "started": False,
            "restartCount": restarts,
        }
        if row.last_termination is None:  # the container never ran: its image is not there
            status["restartCount"] = 0
            status["imageID"] = ""
            status["state"] = {
                "waiting": {"reason": row.waiting, "message": f'Back-off pulling image "{image}"'}
            }
        else:
            exit_code, reason = row.last_termination
            status["imageID"] = f"{image.split(':')[0]}@sha256:{'0' * 64}"
            status["containerID"] = f"containerd://{'a' * 64}"
            status["state"] = {
                "waiting": {
                    "reason": row.waiting,
                    "message": f"back-off 5m0s restarting failed container={c['name']} pod={pod['metadata']['name']}"
                    f"_{pod['metadata']['namespace']}({pod['metadata'].get('uid', '')})",
                }
            }
            status["lastState"] = {
                "terminated": {
                    "exitCode": exit_code,
                    "reason": reason,
                    "startedAt": _ts(finished - ran),
                    "finishedAt": _ts(finished),
                    "containerID": f"containerd://{'b' * 64}",
                }
            }
        statuses.append(status)
    names = " ".join(c["name"] for c in containers)
    conds = _conditions(started, ready=False, reason=None)
    for c in conds:
        if "message" in c:
            c["message"] = c["message"].replace("{names}", names)
    out: dict[str, Any] = {
        "phase": row.phase,
        "conditions": conds,
        "containerStatuses": statuses,
        "startTime": _ts(started),
    }
    return _carried(out, old)


def _carried(out: dict[str, Any], old: dict[str, Any]) -> dict[str, Any]:
    """The addresses a pod already has, and its qosClass (set by the API server at creation and
    immutable: carried over, never written anew)."""
    for key in ("hostIP", "hostIPs", "podIP", "podIPs", "qosClass"):
        if key in old:
            out[key] = old[key]
    return out


def failing_init_container(pod: dict[str, Any]) -> dict[str, Any]:
    """The init container that fails in an init state: the pod's last (the earlier ones completed)."""
    inits = pod["spec"].get("initContainers") or []
    if not inits:
        raise ValueError(f"pod {pod['metadata'].get('name')!r} has no init container to fail")
    return dict(inits[-1])


def _init_failing_status(
    pod: dict[str, Any], row: PodState, now: dt.datetime, restarts: int, started: dt.datetime, fresh: bool
) -> dict[str, Any]:
    """A pod whose last init container fails (exit code 1): crash-looping after ``restarts`` attempts
    (Init:CrashLoopBackOff), or, ``fresh``, just failed for the first time (Init:Error). The main
    containers wait PodInitializing; the pod is Pending, neither Initialized nor Ready."""
    meta = pod["metadata"]
    inits = pod["spec"]["initContainers"]
    failing = failing_init_container(pod)
    exit_code, reason = row.last_termination or (1, "Error")
    init_statuses: list[dict[str, Any]] = []
    for c in inits[:-1]:  # completed before the failing one started
        init_statuses.append(
            {
                **_ran(c),
                "ready": True,
                "restartCount": 0,
                "state": {"terminated": _terminated(0, "Completed", started, started)},
            }
        )
    finished = now if fresh else now - dt.timedelta(seconds=90)
    attempt = _terminated(exit_code, reason, finished - dt.timedelta(seconds=3), finished)
    failed: dict[str, Any] = {**_ran(failing), "ready": False, "started": False}
    if fresh:
        failed |= {"restartCount": 0, "state": {"terminated": attempt}}
    else:
        failed |= {
            "restartCount": restarts,
            "lastState": {"terminated": attempt},
            "state": {
                "waiting": {
                    "reason": row.waiting,
                    "message": f"back-off 5m0s restarting failed container={failing['name']} "
                    f"pod={meta['name']}_{meta['namespace']}({meta.get('uid', '')})",
                }
            },
        }
    init_statuses.append(failed)
    t = _ts(started)
    names = " ".join(c["name"] for c in pod["spec"]["containers"])
    not_ready = {
        "status": "False",
        "reason": "ContainersNotReady",
        "message": f"containers with unready status: [{names}]",
        "lastTransitionTime": t,
    }
    return {
        "phase": row.phase,
        "conditions": [
            {"type": "PodReadyToStartContainers", "status": "True", "lastTransitionTime": t},
            {
                "type": "Initialized",
                "status": "False",
                "reason": "ContainersNotInitialized",
                "message": f"containers with incomplete status: [{failing['name']}]",
                "lastTransitionTime": t,
            },
            {"type": "Ready", **not_ready},
            {"type": "ContainersReady", **not_ready},
            {"type": "PodScheduled", "status": "True", "lastTransitionTime": t},
        ],
        "initContainerStatuses": init_statuses,
        "containerStatuses": _not_started(pod, "PodInitializing"),
        "startTime": t,
    }


def _not_started(pod: dict[str, Any], reason: str) -> list[dict[str, Any]]:
    """The statuses of a pod's containers that have not started yet, waiting for ``reason``."""
    return [
        {
            "name": c["name"],
            "image": c["image"],
            "imageID": "",
            "ready": False,
            "started": False,
            "restartCount": 0,
            "state": {"waiting": {"reason": reason}},
        }
        for c in pod["spec"]["containers"]
    ]


def _ran(c: dict[str, Any]) -> dict[str, Any]:
    """The identity of a container that has run: its image as pulled, and a runtime id."""
    image = str(c["image"])
    digest = hashlib.sha256(f"{c['name']}/{image}".encode()).hexdigest()
    return {
        "name": c["name"],
        "image": image,
        "imageID": f"{image.split(':')[0]}@sha256:{'0' * 64}",
        "containerID": f"containerd://{digest}",
    }


def _terminated(exit_code: int, reason: str, started: dt.datetime, finished: dt.datetime) -> dict[str, Any]:
    return {"exitCode": exit_code, "reason": reason, "startedAt": _ts(started), "finishedAt": _ts(finished)}


def kubelet_events(
    pod: dict[str, Any], state: str, now: dt.datetime, restarts: int = 5, fresh: bool = False
) -> list[dict[str, Any]]:
    """Events a kubelet records for a pod in ``state`` (BackOff, Failed, Pulling...): for a failure
    that has lasted a while, or with ``fresh`` for one that happens at ``now`` (each Event once, all
    stamped ``now``)."""
    meta = pod["metadata"]
    node = pod["spec"].get("nodeName", "")
    row = _written(state)
    container = failing_init_container(pod) if row.init else pod["spec"]["containers"][0]
    image = container["image"]
    field = "initContainers" if row.init else "containers"
    ref = {
        "apiVersion": "v1",
        "kind": "Pod",
        "name": meta["name"],
        "namespace": meta["namespace"],
        "uid": meta.get("uid", ""),
        "fieldPath": f"spec.{field}{{{container['name']}}}",
    }
    first = now if fresh else now - dt.timedelta(minutes=18)
    last = now if fresh else now - dt.timedelta(seconds=30)
    specs: list[tuple[str, str, str, int]] = []
    if row.events == "image-pull":
        specs = [
            ("Normal", "Pulling", f'Pulling image "{image}"', 6),
            (
                "Warning",
                "Failed",
                f'Failed to pull image "{image}": rpc error: code = NotFound desc = failed '
                f'to pull and unpack image "{image}": not found',
                6,
            ),
            ("Warning", "Failed", "Error: ErrImagePull", 6),
            ("Normal", "BackOff", f'Back-off pulling image "{image}"', 70),
            ("Warning", "Failed", "Error: ImagePullBackOff", 70),
        ]
    else:
        specs = [
            ("Normal", "Pulled", f'Container image "{image}" already present on machine', restarts + 1),
            ("Normal", "Created", f"Created container: {container['name']}", restarts + 1),
            ("Normal", "Started", f"Started container {container['name']}", restarts + 1),
            (
                "Warning",
                "BackOff",
                "Back-off restarting failed container "
                f"{container['name']} in pod {meta['name']}_{meta['namespace']}({meta.get('uid', '')})",
                restarts * 4,
            ),
        ]
        if row.init and fresh:  # failed once: no back-off yet (Init:Error)
            specs = specs[:3]
    events = []
    for i, (etype, reason, message, count) in enumerate(specs):
        events.append(
            {
                "apiVersion": "v1",
                "kind": "Event",
                "metadata": {
                    "name": f"{meta['name']}.{_event_suffix(meta['name'], reason, i)}",
                    "namespace": meta["namespace"],
                },
                "involvedObject": ref,
                "reason": reason,
                "message": message,
                "type": etype,
                "count": 1 if fresh else count,
                "firstTimestamp": _ts(first),
                "lastTimestamp": _ts(last),
                "source": {"component": "kubelet", "host": node},
                "reportingComponent": "kubelet",
                "reportingInstance": node,
            }
        )
    return events
