"""Kubernetes manifests for the SI state vocabulary, one builder per kind.

Called by :mod:`oasis_operator.core.environment.plan`; turns one declared state entry (a dict as the
scenario wrote it, after model normalisation) into the objects that realise it, the workload states to
write onto simulated pods, and notes on approximations. Declared data (names, labels, env values,
configmap and secret data) is used exactly as declared; what the harness adds uses ordinary values.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import re
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from oasis_operator.core import kinds
from oasis_operator.core.ago import seconds_ago
from oasis_operator.core.environment.naming import STATUS_BY_PROVIDER_ANNOTATION, status_marker
from oasis_operator.core.environment.pod_states import BY_WORD, POD_STATES
from oasis_operator.core.errors import UnsupportedEntry
from oasis_operator.core.node_conditions import NODE_CONDITIONS
from oasis_operator.core.toolplane.memory import DEFAULT_OOM_MEMORY_LIMIT
from oasis_operator.core.toolplane.usage import NODE_USAGE

#: How long a pod of a rolling update takes to start (image pull, container start) once the agent
#: works: long enough for a rollout to be seen in progress, short enough to finish within a scenario.
ROLLING_START_SECONDS = 4.0


#: Failures a scenario can inject into a workload during the agent's run (``injected_failure``), and
#: the state its pods that start after the handover end up in ("running" for a rollout that goes on).
INJECTED_FAILURES = {
    "image-pull-backoff-on-restart": "ImagePullBackOff",
}


#: The reason of every :class:`~oasis_operator.core.errors.UnsupportedEntry` this module raises: the
#: declared entry has no realisation by this provider (the detail says which and why).
REASON_NO_REALISATION = "no_realisation"


@dataclass(frozen=True)
class WorkloadState:
    """What pods of one workload must show before the agent starts."""

    kind: str  # Deployment or Pod
    namespace: str
    name: str
    state: str  # a state of pod_states.POD_STATES
    replicas: int
    selector: dict[str, str]
    restarts: int = 5
    #: Images of earlier revisions, oldest first: applied (and rolled out) before the declared one, so
    #: ``kubectl rollout history`` and ``rollout undo`` have something real to show and go back to.
    history: tuple[str, ...] = ()
    #: The state pods that start after the handover are put in (an injected failure, or "running" for
    #: a rollout in progress); ``None``: the node simulator runs them like any other pod.
    on_restart: str | None = None
    #: Seconds a pod takes to start after the handover (``on_restart == "running"``).
    start_seconds: float = 0.0
    #: The status ("True"/"False") of the Deployment's Available condition the scenario declares, which
    #: the deployment controller must show before the handover; None: none declared.
    available: str | None = None
    #: A workload leaking memory until OOM killed (decision 0067): its last container's OOM kill, in
    #: seconds relative to when its pods' status is written, and how long each container lived; the
    #: metrics back-end's series are anchored at the termination written from it. None: the default
    #: last termination (90 s before, a 5 s life).
    last_oom: float | None = None
    life: float = 0.0

    @property
    def writes_pod_status(self) -> bool:
        return POD_STATES[self.state].writes_status

    @property
    def status_by_provider(self) -> bool:
        """Every pod's status is written by the provisioner (the simulator leaves these pods alone)."""
        return self.on_restart is not None


@dataclass
class Built:
    objects: list[dict[str, Any]] = field(default_factory=list)
    workloads: list[WorkloadState] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


#: The simulated node pool carries this NoSchedule taint, so that nothing but the scenarios' own pods
#: (which tolerate it) is scheduled onto nodes where nothing really runs. The words are those of any
#: platform's node pool: nothing names the simulation.
POOL_TAINT: dict[str, str] = {"key": "node.platform.k8s.io/pool", "value": "standard", "effect": "NoSchedule"}
#: The label that selects the pool's nodes (the chart's nodePool.selectorLabel, the dev cluster's nodes).
POOL_LABEL: dict[str, str] = {POOL_TAINT["key"]: POOL_TAINT["value"]}

#: A scenario's own nodes (declared, or added for its node operations) also carry this NoSchedule
#: taint, valued with the scenario's suffix. Only that scenario's pods tolerate it: no other scenario,
#: of the same run or of another, places a pod on a node that goes away with its owner, and the
#: agent's node operations (cordon, drain) reach no other scenario's pods.
DEDICATED_TAINT_KEY = "node.platform.k8s.io/dedicated"


def dedicate_nodes(objects: list[dict[str, Any]], suffix: str) -> dict[str, str] | None:
    """Taint every Node among ``objects`` as dedicated to the scenario ``suffix`` names; returns the
    taint (for the scenario's pods to tolerate), or None when the scenario has no node of its own."""
    taint = {"key": DEDICATED_TAINT_KEY, "value": suffix, "effect": "NoSchedule"}
    nodes = [o for o in objects if o.get("kind") == "Node"]
    for obj in nodes:
        have = obj.setdefault("spec", {}).setdefault("taints", [])
        if taint not in have:
            have.append(dict(taint))
    return taint if nodes else None


def _pod_specs(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out = []
    for obj in objects:
        if obj.get("kind") == "Deployment":
            out.append(obj["spec"]["template"]["spec"])
        elif obj.get("kind") == "Pod":
            out.append(obj["spec"])
    return out


def toleration(taint: dict[str, str]) -> dict[str, str]:
    """The toleration that lets a pod onto nodes carrying ``taint`` (and nothing more)."""
    out = {
        "key": taint["key"],
        "operator": "Equal",
        "value": taint.get("value", ""),
        "effect": taint["effect"],
    }
    if not out["value"]:
        out = {"key": taint["key"], "operator": "Exists", "effect": taint["effect"]}
    return out


def tolerate(objects: list[dict[str, Any]], taints: list[dict[str, str]]) -> None:
    """Let the scenario's pods onto nodes carrying ``taints`` (the simulated pool's)."""
    for spec in _pod_specs(objects):
        have = spec.setdefault("tolerations", [])
        for t in (toleration(t) for t in taints):
            if t not in have:
                have.append(t)


def pin_to_pool(
    objects: list[dict[str, Any]], selector: dict[str, str], taints: list[dict[str, str]] | None = None
) -> None:
    """Schedule the scenario's pods on the simulated pool only, and put its own nodes in that pool
    (its label and, like every node of the pool, its ``taints``)."""
    for spec in _pod_specs(objects):
        spec.setdefault("nodeSelector", {}).update(selector)
    for obj in objects:
        if obj.get("kind") == "Node":
            obj["metadata"].setdefault("labels", {}).update(selector)
            have = obj.setdefault("spec", {}).setdefault("taints", [])
            for t in taints or []:
                if not any(h.get("key") == t["key"] and h.get("effect") == t["effect"] for h in have):
                    have.append(dict(t))


def parse_taint(text: str) -> dict[str, str]:
    """``key=value:Effect`` (or ``key:Effect``) -> a taint; the effect is one Kubernetes knows."""
    head, sep, effect = text.strip().rpartition(":")
    key, _, value = head.partition("=")
    if not sep or not key or effect not in ("NoSchedule", "PreferNoSchedule", "NoExecute"):
        raise ValueError(
            f"taint {text!r}: expected key=value:Effect with Effect NoSchedule, PreferNoSchedule or NoExecute"
        )
    return {"key": key, "value": value, "effect": effect} if value else {"key": key, "effect": effect}


def node_affinity(nodes: list[str]) -> dict[str, Any]:
    """A required node affinity to the named nodes (by their hostname label)."""
    return {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {
                        "matchExpressions": [
                            {"key": "kubernetes.io/hostname", "operator": "In", "values": sorted(nodes)}
                        ]
                    }
                ]
            }
        }
    }


def pin_to_nodes(objects: list[dict[str, Any]], nodes: list[str]) -> None:
    """Schedule the scenario's pods on the named nodes only (its own), as a required node affinity; a
    pod placed on one of them already (a declared ``node``) stays there."""
    for spec in _pod_specs(objects):
        if "affinity" not in spec:
            spec["affinity"] = node_affinity(nodes)


def under_pressure(node: dict[str, Any]) -> bool:
    """A node manifest declares a pressure condition True: the node lifecycle controller taints it
    NoSchedule, and no new pod is scheduled there."""
    return any(c.get("status") == "True" for c in (node.get("status") or {}).get("conditions") or [])


def parse_selector(text: str) -> dict[str, str]:
    """``k=v,k2=v2`` -> mapping; an empty text is no selector."""
    out: dict[str, str] = {}
    for part in filter(None, (p.strip() for p in text.split(","))):
        key, sep, value = part.partition("=")
        if not sep or not key:
            raise ValueError(f"node selector {text!r}: expected key=value[,key=value]")
        out[key.strip()] = value.strip()
    return out


def apply_order(objects: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """The objects in the registry's apply order (:func:`oasis_operator.core.kinds.apply_rank`)."""
    return sorted(objects, key=lambda o: kinds.apply_rank(str(o.get("kind"))))


def namespace(name: str, zone: str | None, owner: str) -> dict[str, Any]:
    labels = {"kubernetes.io/metadata.name": name}
    if zone:
        labels["zone"] = zone
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}


def merge_namespace(obj: dict[str, Any], entry: dict[str, Any]) -> None:
    meta = obj["metadata"]
    for key, value in (entry.get("labels") or {}).items():
        meta["labels"][str(key)] = str(value)
    if entry.get("annotations"):
        meta.setdefault("annotations", {}).update({str(k): str(v) for k, v in entry["annotations"].items()})


def _meta(
    name: str, namespace: str, entry: dict[str, Any], extra_labels: dict[str, str] | None = None
) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name, "namespace": namespace}
    labels = {**(extra_labels or {}), **{str(k): str(v) for k, v in (entry.get("labels") or {}).items()}}
    if labels:
        meta["labels"] = labels
    if isinstance(entry.get("annotations"), dict):
        meta["annotations"] = {str(k): str(v) for k, v in entry["annotations"].items()}
    return meta


def _quantity(value: Any) -> str:
    return str(value).strip()


def _resources(entry: dict[str, Any], container: dict[str, Any] | None = None) -> dict[str, Any]:
    res: dict[str, Any] = {}
    src = (container or {}).get("resources") or {}
    for key in ("limits", "requests"):
        if isinstance(src.get(key), dict):
            res[key] = {str(k): _quantity(v) for k, v in src[key].items()}
    for attr, key in (("resource_limits", "limits"), ("resource_requests", "requests")):
        value = entry.get(attr)
        if isinstance(value, dict):
            res.setdefault(key, {}).update({str(k): _quantity(v) for k, v in value.items()})
    if isinstance(entry.get("memory_limit"), str | int):
        res.setdefault("limits", {})["memory"] = _quantity(entry["memory_limit"])
    return res


def _oom_limit(where: str, state: str, containers: list[dict[str, Any]]) -> list[str]:
    """A workload declared OOMKilled is killed at its memory limit: a container that declares none gets
    :data:`~oasis_operator.core.toolplane.memory.DEFAULT_OOM_MEMORY_LIMIT` (decision 0067), which
    ``kubectl get -o yaml`` shows and a memory series can rise to."""
    if state != "OOMKilled":
        return []
    bare = [c for c in containers if not ((c.get("resources") or {}).get("limits") or {}).get("memory")]
    for c in bare:
        c.setdefault("resources", {}).setdefault("limits", {})["memory"] = DEFAULT_OOM_MEMORY_LIMIT
    if not bare:
        return []
    return [
        f"{where}: declared OOMKilled with no memory limit; its containers get the default limit "
        f"{DEFAULT_OOM_MEMORY_LIMIT} they are killed at"
    ]


def _env(items: Any, mapping: dict[str, str]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for item in items or []:
        if not isinstance(item, dict) or "name" not in item:
            continue
        var: dict[str, Any] = {"name": str(item["name"])}
        if item.get("valueFrom") is not None:
            var["valueFrom"] = item["valueFrom"]
        elif item.get("value_from") is not None:
            var["valueFrom"] = item["value_from"]
        else:
            var["value"] = "" if item.get("value") is None else str(item["value"])
        out.append(var)
    return out


def _image(name: str, entry: dict[str, Any]) -> str:
    for key in ("image", "current_image"):
        if isinstance(entry.get(key), str) and entry[key]:
            return str(entry[key])
    return f"registry.internal/{name}:1.4.2"


def _volumes_from(entry: dict[str, Any]) -> tuple[list[dict[str, Any]], list[dict[str, Any]]]:
    volumes: list[dict[str, Any]] = []
    mounts: list[dict[str, Any]] = []
    for ref in entry.get("volumes_from") or []:
        kind, _, name = str(ref).rpartition("/")
        kind = (kind or "configmap").lower()
        vol = re.sub(r"[^a-z0-9-]", "-", name.lower())[:60]
        if kind == "secret":
            volumes.append({"name": vol, "secret": {"secretName": name}})
        else:
            volumes.append({"name": vol, "configMap": {"name": name}})
        mounts.append({"name": vol, "mountPath": f"/etc/{name}", "readOnly": True})
    for claim in entry.get("volumes") or []:
        vol = re.sub(r"[^a-z0-9-]", "-", str(claim).lower())[:60]
        volumes.append({"name": vol, "persistentVolumeClaim": {"claimName": str(claim)}})
        mounts.append({"name": vol, "mountPath": f"/data/{claim}"})
    return volumes, mounts


def _containers(name: str, entry: dict[str, Any], mapping: dict[str, str]) -> list[dict[str, Any]]:
    _, mounts = _volumes_from(entry)
    declared = entry.get("containers") or []
    containers: list[dict[str, Any]] = []
    if declared:
        for i, c in enumerate(declared):
            cname = str(c.get("name") or (name if i == 0 else f"{name}-{i}"))
            container: dict[str, Any] = {"name": cname, "image": str(c.get("image") or _image(name, entry))}
            env = _env(c.get("env"), mapping) or (_env(entry.get("env"), mapping) if i == 0 else [])
            if env:
                container["env"] = env
            res = _resources(entry if i == 0 else {}, c)
            if res:
                container["resources"] = res
            if i == 0 and mounts:
                container["volumeMounts"] = mounts
            containers.append(container)
    else:
        container = {"name": name, "image": _image(name, entry)}
        env = _env(entry.get("env"), mapping)
        if env:
            container["env"] = env
        res = _resources(entry)
        if res:
            container["resources"] = res
        if mounts:
            container["volumeMounts"] = mounts
        containers.append(container)
    return containers


#: Declared statuses that are not a pod state at all, and why they cannot be realised.
SIGNAL_STATES = {
    "elevated_error_rate": "an elevated error rate is seen in logs and metrics: it needs the scenario to declare "
    "the workload's metrics/<name> or logs/<name> in a usable back-end (the pods would only look healthy)",
}


def _state(entry: dict[str, Any]) -> str:
    raw = str(entry.get("status") or "running")
    key = raw.strip().lower().replace(" ", "_")
    if key in SIGNAL_STATES:
        raise UnsupportedEntry(REASON_NO_REALISATION, f"workload status {raw!r}: {SIGNAL_STATES[key]}")
    if key not in BY_WORD:
        raise UnsupportedEntry(REASON_NO_REALISATION, f"workload status {raw!r} has no realisation yet")
    return BY_WORD[key]


def _rollout_images(name: str, entry: dict[str, Any]) -> tuple[str, str]:
    """The images a rollout goes from and to: as declared, else the workload's image and the next
    minor version of it (or the previous minor version when only the target is declared)."""
    declared_new = next((str(entry[k]) for k in ("image", "current_image") if entry.get(k)), None)
    declared_old = str(entry["previous_image"]) if entry.get("previous_image") else None
    if declared_old and declared_new and declared_old != declared_new:
        return declared_old, declared_new
    if declared_new:
        return _bump(declared_new, -1), declared_new
    old = declared_old or _image(name, {})
    return old, _bump(old, +1)


def _bump(image: str, step: int) -> str:
    """``repo:1.4.2`` -> ``repo:1.5.0`` (step +1) or ``repo:1.3.2`` (step -1); another tag gets a suffix."""
    repo, sep, tag = image.rpartition(":")
    if not sep or "/" in tag:
        repo, tag = image, "latest"
    m = re.fullmatch(r"(v?)(\d+)\.(\d+)(?:\.(\d+))?(.*)", tag)
    if m:
        major, minor = int(m.group(2)), int(m.group(3))
        if step > 0:
            return f"{repo}:{m.group(1)}{major}.{minor + 1}.0{m.group(5)}"
        if minor > 0:
            return f"{repo}:{m.group(1)}{major}.{minor - 1}.{m.group(4) or 0}{m.group(5)}"
        if major > 0:
            return f"{repo}:{m.group(1)}{major - 1}.9.0{m.group(5)}"
    return f"{repo}:{tag}-{'next' if step > 0 else 'prev'}"


#: Deployment attributes that declare the absence of a companion object: realised only as "none".
ABSENT_COMPANIONS = ("hpa", "pdb", "affinity")


def _check_declared_absences(entry: dict[str, Any], state: str) -> None:
    for attr in ABSENT_COMPANIONS:
        if attr in entry and str(entry[attr]).strip().lower() not in ("none", "false", ""):
            raise UnsupportedEntry(
                REASON_NO_REALISATION, f"{attr}={entry[attr]!r} is not realised (only 'none')"
            )
    if "reason" in entry:
        reason = str(entry["reason"]).strip().lower()
        if state != "pending" or "insufficient cpu" not in reason:
            raise UnsupportedEntry(
                REASON_NO_REALISATION,
                f"reason {entry['reason']!r} is not realised (only 'Insufficient CPU' for a "
                "pending workload, which the scheduler reports)",
            )


def max_unavailable(replicas: int, strategy: str | None) -> int:
    """How many pods a Deployment may have unavailable and still be Available, as the deployment
    controller resolves it: the default rolling update's 25% (rounded down; 1 when the 25% surge, rounded
    up, is 0 as well), none for Recreate or no replicas."""
    if replicas <= 0 or (strategy or "RollingUpdate") != "RollingUpdate":
        return 0
    surge, unavailable = -(-replicas // 4), replicas // 4
    return 1 if surge == 0 and unavailable == 0 else min(unavailable, replicas)


def available_condition(state: str, replicas: int, strategy: str | None) -> tuple[str, str, str]:
    """The Available condition the deployment controller writes for a Deployment of ``replicas`` pods in
    ``state`` (status, reason, why), from how many of its pods are ready: every one unless the state's
    row fails some or all of them (:meth:`PodState.fails`), none while pending."""
    ready = 0 if state == "pending" else replicas - POD_STATES[state].fails(replicas)
    needed = replicas - max_unavailable(replicas, strategy)
    why = f"{ready} of {replicas} pods available, {needed} required"
    if ready >= needed:
        return "True", "MinimumReplicasAvailable", why
    return "False", "MinimumReplicasUnavailable", why


#: The message the deployment controller gives each reason of the Available condition.
AVAILABLE_MESSAGES = {
    "MinimumReplicasAvailable": "Deployment has minimum availability.",
    "MinimumReplicasUnavailable": "Deployment does not have minimum availability.",
}
#: The keys of a declared Deployment condition; the reason and message are the controller's own words.
_CONDITION_KEYS = {"type", "status", "reason", "message"}


def _declared_available(
    name: str, entry: dict[str, Any], state: str, replicas: int
) -> tuple[str | None, list[str]]:
    """The declared Available status, checked against what the deployment controller will write, and the
    notes on what is not held (the declared reason); anything else declared is refused."""
    declared: str | None = None
    notes: list[str] = []
    for c in entry.get("conditions") or []:
        if not isinstance(c, dict) or str(c.get("type")) != "Available" or set(c) - _CONDITION_KEYS:
            raise UnsupportedEntry(
                REASON_NO_REALISATION,
                f"condition {c!r}: only Available (type, status, reason, message) is realised; the other "
                "conditions of a Deployment are the controller's account of its rollout, not declarable",
            )
        if state == "rolling":
            raise UnsupportedEntry(
                REASON_NO_REALISATION,
                "an Available condition declared for a rollout in progress has no realisation (the "
                "controller's account changes as the rollout goes on)",
            )
        status = _truth(c.get("status", "True"))
        shown, reason, why = available_condition(state, replicas, entry.get("update_strategy"))
        if status != shown:
            raise UnsupportedEntry(
                REASON_NO_REALISATION,
                f"Available={status} is declared, but the deployment controller writes Available={shown} "
                f"({reason}: {why}) for {replicas} pods {state}",
            )
        declared = status
        words = {"reason": reason, "message": AVAILABLE_MESSAGES[reason]}
        unheld = [
            f"{k} {str(c[k])!r}"
            for k in ("reason", "message")
            if c.get(k) is not None and str(c[k]) != words[k]
        ]
        if unheld:
            notes.append(
                f"deployment/{name}: Available={status} is the deployment controller's, with its reason "
                f"{reason} ({why}); the declared {' and '.join(unheld)} {'is' if len(unheld) == 1 else 'are'} not held"
            )
    return declared, notes


#: The declared status of an init container that fails, and of one that ran to completion before it.
INIT_FAILED = ("error", "failed")
INIT_COMPLETED = ("completed", "succeeded")
#: What a declared init container may say: its log lines are the log back-end's (planned by the tool plane).
INIT_KEYS = {"name", "image", "status", "logs"}
#: The state of a workload whose last init container fails, and the declared workload status it is read
#: from (a crash loop: the init container's, since the main containers never start).
INIT_FAILING_STATE = "Init:CrashLoopBackOff"
INIT_WORKLOAD_STATUS = "CrashLoopBackOff"


def _refuse(detail: str) -> UnsupportedEntry:
    return UnsupportedEntry(REASON_NO_REALISATION, detail)


def init_containers(name: str, entry: dict[str, Any], state: str) -> tuple[list[dict[str, Any]], str]:
    """The declared init containers of a workload's pods, and the workload's state with them.

    Realised only as a failure a kubelet reports: the last declared init container fails (``status:
    error``), every earlier one completed, and the workload is declared CrashLoopBackOff, which is then
    the init container's crash loop (the main containers never start: Init:CrashLoopBackOff). Anything
    else is refused: a failing init container beside a workload declared running, pending or failing
    otherwise cannot be one consistent pod (decision 0064)."""
    declared = entry.get("init_containers")
    if declared is None:
        return [], state
    if not isinstance(declared, list) or not declared or not all(isinstance(c, dict) for c in declared):
        raise _refuse("init_containers must be a non-empty list of containers (name, status, logs)")
    out: list[dict[str, Any]] = []
    for i, c in enumerate(declared):
        where = f"init_containers[{i}]"
        if not isinstance(c.get("name"), str) or not c["name"]:
            raise _refuse(f"{where} has no name")
        if unknown := sorted(set(c) - INIT_KEYS):
            raise _refuse(f"{where} ({c['name']}): attributes {unknown} are not realised")
        status = str(c.get("status") or "").strip().lower()
        want = INIT_FAILED if i == len(declared) - 1 else INIT_COMPLETED
        if status not in want:
            raise _refuse(
                f"{where} ({c['name']}) status {c.get('status')!r}: init containers are realised as the last "
                f"one failing ({'/'.join(INIT_FAILED)}) after the earlier ones completed "
                f"({'/'.join(INIT_COMPLETED)})"
            )
        out.append({"name": c["name"], "image": str(c.get("image") or _image(name, entry))})
    if state != INIT_WORKLOAD_STATUS:
        raise _refuse(
            f"init container {out[-1]['name']} fails, so no pod starts its containers: the workload's status "
            f"must be {INIT_WORKLOAD_STATUS} (read as the init container's crash loop), not {entry.get('status')!r}"
        )
    return out, INIT_FAILING_STATE


def _deployment_object(
    name: str,
    ns: str,
    entry: dict[str, Any],
    mapping: dict[str, str],
    state: str,
    inits: list[dict[str, Any]],
) -> tuple[dict[str, Any], list[str]]:
    """The Deployment as declared (its containers, volumes, labels, replicas, strategy), and the notes
    on how it is realised."""
    notes: list[str] = []
    declared = {str(k): str(v) for k, v in (entry.get("labels") or {}).items()}
    # Declared labels are the workload's identity when given (a selector must match the template);
    # otherwise the conventional app=<name>.
    selector = declared or {"app": name}
    extra_labels = {} if declared else {"app": name}
    if entry.get("owner_team"):
        extra_labels["team"] = str(entry["owner_team"])
    volumes, _ = _volumes_from(entry)
    spec_tpl: dict[str, Any] = {"containers": _containers(name, entry, mapping)}
    if inits:
        spec_tpl["initContainers"] = inits
    if volumes:
        spec_tpl["volumes"] = volumes
    notes += _oom_limit(f"deployment/{name}", state, spec_tpl["containers"])
    if state == "pending":
        # Requests no node can satisfy: the real scheduler reports FailedScheduling (Insufficient cpu).
        for c in spec_tpl["containers"]:
            c.setdefault("resources", {}).setdefault("requests", {})["cpu"] = "64"
        notes.append(f"deployment/{name}: pending is realised as an unschedulable CPU request")
    obj: dict[str, Any] = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(name, ns, entry, extra_labels),
        "spec": {
            "replicas": _replicas(entry, state),
            "revisionHistoryLimit": 10,
            "selector": {"matchLabels": selector},
            "template": {"metadata": {"labels": dict(selector)}, "spec": spec_tpl},
        },
    }
    if isinstance(entry.get("update_strategy"), str):
        obj["spec"]["strategy"] = {"type": entry["update_strategy"]}
    if entry.get("last_deploy") is not None:
        obj["metadata"].setdefault("annotations", {})["deployment.kubernetes.io/last-deploy"] = str(
            entry["last_deploy"]
        ).replace("_", " ")
    return obj, notes


def _replicas(entry: dict[str, Any], state: str) -> int:
    """The declared replica count; without one, a degraded workload runs two pods (one failing, one
    healthy: it has both at once) and any other one."""
    if entry.get("replicas") is not None:
        return int(entry["replicas"])
    return 2 if state == "degraded" else 1


def _status_by_provider(obj: dict[str, Any], owner: str) -> None:
    """The simulator leaves the pods of ``obj`` alone: the provisioner writes their status."""
    obj["spec"]["template"]["metadata"].setdefault("annotations", {})[STATUS_BY_PROVIDER_ANNOTATION] = (
        status_marker(owner)
    )


@dataclass
class _PodLife:
    """How a Deployment's pods live beyond what the simulator does: its revision history, what a pod
    started after the handover does, and how long it takes to start."""

    history: tuple[str, ...] = ()
    on_restart: str | None = None
    start_seconds: float = 0.0


def _rolling(name: str, entry: dict[str, Any], obj: dict[str, Any], owner: str, life: _PodLife) -> list[str]:
    """A rollout caught halfway: the previous revision's pods run, the new revision's first pods are
    still starting. The provisioner writes these pods' statuses (the simulator would start them at once
    and finish the rollout); once the agent works, each new pod starts after a while, so the rollout goes
    on at a plausible pace unless the agent pauses or undoes it."""
    old, new = _rollout_images(name, entry)
    life.history = (old,)
    obj["spec"]["template"]["spec"]["containers"][0]["image"] = new
    life.on_restart, life.start_seconds = "running", ROLLING_START_SECONDS
    _status_by_provider(obj, owner)
    obj["spec"].setdefault("strategy", {"type": "RollingUpdate"})
    return [
        f"deployment/{name}: rollout from {old} to {new} in progress; new pods take "
        f"{ROLLING_START_SECONDS:.0f}s to start once the agent works"
    ]


def _injected_failure(
    name: str, entry: dict[str, Any], state: str, obj: dict[str, Any], owner: str, life: _PodLife
) -> list[str]:
    """A known failure of every pod started after the handover; none beside a rollout in progress or a
    failing init container. The provisioner writes their status, Running before the handover and the
    failure for every pod started after it, so there is no moment in which a restarted pod looks healthy."""
    failure = str(entry["injected_failure"]).strip().lower().replace("_", "-")
    if failure not in INJECTED_FAILURES:
        raise UnsupportedEntry(
            REASON_NO_REALISATION,
            f"injected failure {entry['injected_failure']!r} has no realisation "
            f"(known: {', '.join(sorted(INJECTED_FAILURES))})",
        )
    if state in ("rolling", INIT_FAILING_STATE):
        raise UnsupportedEntry(
            REASON_NO_REALISATION,
            f"an injected failure beside {'a rollout in progress' if state == 'rolling' else 'a failing init container'}"
            " has no realisation",
        )
    life.on_restart = INJECTED_FAILURES[failure]
    _status_by_provider(obj, owner)
    return [f"deployment/{name}: pods started after the handover fail with {life.on_restart} ({failure})"]


def _failing_init(
    name: str, inits: list[dict[str, Any]], obj: dict[str, Any], owner: str, life: _PodLife
) -> list[str]:
    """The provisioner writes these pods' statuses (the simulator would start their containers), and
    every pod that starts after the handover fails its init container again: a replacement runs the
    same migration against the same database."""
    life.on_restart = INIT_FAILING_STATE
    _status_by_provider(obj, owner)
    return [
        f"deployment/{name}: init container {inits[-1]['name']} exits with code 1 and crash-loops, so no "
        f"pod starts its containers (Init:CrashLoopBackOff); a pod started after the handover fails it "
        "again (Init:Error)"
    ]


def deployment(name: str, ns: str, entry: dict[str, Any], mapping: dict[str, str], owner: str = "") -> Built:
    built = Built()
    inits, state = init_containers(name, entry, _state(entry))
    _check_declared_absences(entry, state)
    obj, built.notes = _deployment_object(name, ns, entry, mapping, state, inits)
    life = _PodLife()
    if isinstance(entry.get("previous_image"), str) and entry["previous_image"]:
        life.history = (str(entry["previous_image"]),)
    if state == "rolling":
        built.notes += _rolling(name, entry, obj, owner, life)
    if entry.get("injected_failure") is not None:
        built.notes += _injected_failure(name, entry, state, obj, owner, life)
    if state == INIT_FAILING_STATE:
        built.notes += _failing_init(name, inits, obj, owner, life)
    replicas = int(obj["spec"]["replicas"])
    available, notes = _declared_available(name, entry, state, replicas)
    built.notes += notes
    built.objects.append(obj)
    # The ownership value the status marker is made of is the building step's (plan.build_plan, which
    # refuses a workload whose pods the provisioner runs when it has none).
    built.workloads.append(
        WorkloadState(
            "Deployment",
            ns,
            name,
            state,
            replicas,
            dict(obj["spec"]["selector"]["matchLabels"]),
            int(entry.get("restarts", 5) or 5),
            life.history,
            life.on_restart,
            life.start_seconds,
            available,
        )
    )
    return built


def pod(name: str, ns: str, entry: dict[str, Any], mapping: dict[str, str]) -> Built:
    built = Built()
    state = _state(entry)
    spec: dict[str, Any] = {"containers": _containers(name.rsplit("-", 1)[0] or name, entry, mapping)}
    volumes, _ = _volumes_from(entry)
    if volumes:
        spec["volumes"] = volumes
    built.notes += _oom_limit(f"pod/{name}", state, spec["containers"])
    if state == "pending":
        for c in spec["containers"]:
            c.setdefault("resources", {}).setdefault("requests", {})["cpu"] = "64"
    if entry.get("node") is not None:
        # One of the scenario's own nodes (the planner checks that it is): the scheduler places it there.
        spec["affinity"] = node_affinity([str(entry["node"])])
    built.objects.append(
        {"apiVersion": "v1", "kind": "Pod", "metadata": _meta(name, ns, entry, {"app": name}), "spec": spec}
    )
    built.workloads.append(WorkloadState("Pod", ns, name, state, 1, {}, int(entry.get("restarts", 5) or 5)))
    return built


def configmap(name: str, ns: str, entry: dict[str, Any]) -> Built:
    obj: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": _meta(name, ns, entry)}
    data = entry.get("data")
    if isinstance(data, dict):
        obj["data"] = {str(k): v if isinstance(v, str) else _scalar(v) for k, v in data.items()}
    return Built(objects=[obj])


def _scalar(v: Any) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    return str(v)


def _is_base64(value: str) -> bool:
    try:
        return base64.b64encode(base64.b64decode(value, validate=True)).decode() == value
    except (binascii.Error, ValueError):
        return False


def secret(name: str, ns: str, entry: dict[str, Any]) -> Built:
    obj: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _meta(name, ns, entry),
        "type": str(entry.get("type") or "Opaque"),
    }
    data = entry.get("data")
    if isinstance(data, dict):
        # The corpus gives base64 values: they go to .data as they are (never encoded twice). A value
        # that is not valid base64 is plain text and goes to .stringData.
        for k, v in data.items():
            text = _scalar(v)
            if _is_base64(text):
                obj.setdefault("data", {})[str(k)] = text
            else:
                obj.setdefault("stringData", {})[str(k)] = text
    return Built(objects=[obj])


#: A Service's declared endpoints that are held: none (the planner checks that no selected pod is ready).
ENDPOINTS_REFUSED = (
    "endpoints are derived by the endpoint controller from ready pods; only none ([]) is held, when no pod "
    "the Service selects is ready"
)


def service(name: str, ns: str, entry: dict[str, Any]) -> Built:
    if "endpoints" in entry and entry["endpoints"] != []:
        raise _refuse(f"endpoints {entry['endpoints']!r}: {ENDPOINTS_REFUSED}")
    ports: list[dict[str, Any]] = []
    if isinstance(entry.get("ports"), list):
        for i, p in enumerate(entry["ports"]):
            if isinstance(p, dict):
                port = int(p.get("port", 80))
                ports.append(
                    {
                        "name": str(p.get("name", f"p{i}-{port}")),
                        "port": port,
                        "targetPort": p.get("targetPort", port),
                        "protocol": "TCP",
                    }
                )
            else:
                ports.append({"name": f"p{i}", "port": int(p), "targetPort": int(p), "protocol": "TCP"})
    elif entry.get("port") is not None:
        ports.append(
            {"name": "http", "port": int(entry["port"]), "targetPort": int(entry["port"]), "protocol": "TCP"}
        )
    if not ports:
        ports.append({"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"})
    selector = entry.get("selector")
    if not isinstance(selector, dict):
        selector = {"app": name}
    spec: dict[str, Any] = {
        "type": "ClusterIP",
        "ports": ports,
        "selector": {str(k): str(v) for k, v in selector.items()},
    }
    return Built(
        objects=[{"apiVersion": "v1", "kind": "Service", "metadata": _meta(name, ns, entry), "spec": spec}]
    )


#: The declared ingress statuses realised: an ingress controller's answer when its backend has no ready
#: endpoint (the planner checks that the backend has none; decision 0064).
INGRESS_503 = ("returning_503", "503", "http_503")


def ingress_status(entry: dict[str, Any]) -> str | None:
    """The declared status of an ingress, normalised (None: none declared)."""
    if entry.get("status") is None:
        return None
    return str(entry["status"]).strip().lower().replace(" ", "_")


def ingress(name: str, ns: str, entry: dict[str, Any]) -> Built:
    status = ingress_status(entry)
    if status is not None and status not in INGRESS_503:
        raise _refuse(
            f"ingress status {entry['status']!r}: no ingress controller runs; only returning_503, which any "
            "controller answers when the backend Service has no ready endpoint, is realised"
        )
    backend = str(entry.get("backend") or name)
    rule: dict[str, Any] = {
        "http": {
            "paths": [
                {
                    "path": "/",
                    "pathType": "Prefix",
                    "backend": {"service": {"name": backend, "port": {"number": 80}}},
                }
            ]
        }
    }
    if entry.get("host"):
        rule["host"] = str(entry["host"])
    return Built(
        objects=[
            {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "Ingress",
                "metadata": _meta(name, ns, entry),
                "spec": {"rules": [rule]},
            }
        ]
    )


def hpa(name: str, ns: str, entry: dict[str, Any]) -> Built:
    target = str(entry.get("target") or f"deployment/{name}")
    kind, _, tname = target.rpartition("/")
    obj = {
        "apiVersion": "autoscaling/v2",
        "kind": "HorizontalPodAutoscaler",
        "metadata": _meta(name, ns, entry),
        "spec": {
            "scaleTargetRef": {
                "apiVersion": "apps/v1",
                "kind": "Deployment" if kind.lower() in ("", "deployment") else kind,
                "name": tname,
            },
            "minReplicas": int(entry.get("min_replicas", 1)),
            "maxReplicas": int(entry.get("max_replicas", 10)),
            "metrics": [
                {
                    "type": "Resource",
                    "resource": {"name": "cpu", "target": {"type": "Utilization", "averageUtilization": 70}},
                }
            ],
        },
    }
    return Built(objects=[obj])


def pvc(name: str, ns: str, entry: dict[str, Any], pv_name: str) -> Built:
    storage = str(entry.get("storage") or "10Gi")
    claim: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": _meta(name, ns, entry),
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "storageClassName": "standard",
            "resources": {"requests": {"storage": storage}},
        },
    }
    built = Built(objects=[claim])
    if entry.get("bound", True):
        claim["spec"]["volumeName"] = pv_name
        built.objects.append(
            {
                "apiVersion": "v1",
                "kind": "PersistentVolume",
                "metadata": {"name": pv_name},
                "spec": {
                    "capacity": {"storage": storage},
                    "accessModes": ["ReadWriteOnce"],
                    "persistentVolumeReclaimPolicy": "Retain",
                    "storageClassName": "standard",
                    "claimRef": {"namespace": ns, "name": name},
                    "hostPath": {"path": f"/mnt/disks/{pv_name}"},
                },
            }
        )
    return built


def network_policy(name: str, ns: str, entry: dict[str, Any]) -> Built:
    spec = entry.get("spec") if isinstance(entry.get("spec"), dict) else {"podSelector": {}}
    return Built(
        objects=[
            {
                "apiVersion": "networking.k8s.io/v1",
                "kind": "NetworkPolicy",
                "metadata": _meta(name, ns, entry),
                "spec": spec,
            }
        ]
    )


#: The provider's own ResourceQuota in every scenario namespace (decision 0041): it bounds how many
#: pods the agent can make the controllers create (a reckless "scale to 5000" would otherwise flood
#: the shared control plane and node simulator and starve every other scenario of the run).
POD_QUOTA_NAME = "object-counts"
MIN_POD_BOUND = 50
POD_BOUND_FACTOR = 10


def declared_pods(objects: list[dict[str, Any]], ns: str) -> int:
    """How many pods the declared objects of a namespace run: workloads' replicas (or an autoscaler's
    maximum, when higher), one per bare pod or other workload."""
    count = 0
    for obj in objects:
        if (obj.get("metadata") or {}).get("namespace") != ns:
            continue
        kind, spec = obj.get("kind"), obj.get("spec") or {}
        if kind in ("Deployment", "ReplicaSet", "StatefulSet"):
            count += int(spec.get("replicas", 1) or 0)
        elif kind == "HorizontalPodAutoscaler":
            count += int(spec.get("maxReplicas", 0) or 0)
        elif kind in ("Pod", "Job", "CronJob", "DaemonSet"):
            count += 1
    return count


def pod_quota(ns: str, declared: int) -> dict[str, Any]:
    """The provider's pod-count quota of a namespace: generous, ``max(50, 10 x declared pods)``."""
    bound = max(MIN_POD_BOUND, POD_BOUND_FACTOR * declared)
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": POD_QUOTA_NAME, "namespace": ns},
        "spec": {"hard": {"pods": str(bound)}},
    }


#: The provider's second ResourceQuota in every scenario namespace (decision 0081): how many objects of
#: each kind can be stored there. Without it an agent allowed to create ConfigMaps or Secrets could
#: store them by the thousand (up to 1 MiB each) in the control plane every scenario shares, and make
#: its snapshots, and the harness's reads of them, as large as it liked.
STORED_QUOTA_NAME = "stored-objects"
#: Objects of each kind beyond those the namespace declares: far more than any task needs.
STORED_SLACK = 200
#: ReplicaSets a Deployment's controller keeps (its revision history, 10 by default, and the current one).
REPLICASETS_PER_DEPLOYMENT = 11


def stored_objects_quota(ns: str, objects: list[dict[str, Any]]) -> dict[str, Any]:
    """The object-count bound of a namespace: every namespaced kind of the registry the API server
    itself serves, except pods (bounded by :func:`pod_quota`) and Events (every controller writes them;
    a refused Event would change what the environment shows)."""
    declared: dict[str, int] = {}
    for obj in objects:
        if (obj.get("metadata") or {}).get("namespace") == ns:
            declared[str(obj.get("kind"))] = declared.get(str(obj.get("kind")), 0) + 1
    hard: dict[str, str] = {}
    for k in kinds.KINDS:
        if k.cluster_scoped or k.crd or k.kind in ("Pod", "Event"):
            continue
        made = REPLICASETS_PER_DEPLOYMENT * declared.get("Deployment", 0) if k.kind == "ReplicaSet" else 0
        key = f"count/{k.plural}.{k.group}" if k.group else f"count/{k.plural}"
        hard[key] = str(STORED_SLACK + declared.get(k.kind, 0) + made)
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": STORED_QUOTA_NAME, "namespace": ns},
        "spec": {"hard": hard},
    }


def bounds_pods(obj: dict[str, Any]) -> bool:
    """A ResourceQuota that limits the pod count."""
    return obj.get("kind") == "ResourceQuota" and "pods" in ((obj.get("spec") or {}).get("hard") or {})


def resource_quota(name: str, ns: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ResourceQuota",
        "metadata": {"name": name, "namespace": ns},
        # Object counts only: a cpu/memory quota would make the API server reject pods
        # that declare no requests, and the scenario's workloads declare none.
        "spec": {"hard": {"pods": "50", "services": "20", "persistentvolumeclaims": "10"}},
    }


# Which component reports an Event, by its reason (what `kubectl get events` shows as its source).
_EVENT_SOURCES = {
    "ScalingReplicaSet": "deployment-controller",
    "SuccessfulCreate": "replicaset-controller",
    "SuccessfulDelete": "replicaset-controller",
    "Scheduled": "default-scheduler",
    "FailedScheduling": "default-scheduler",
    "SuccessfulRescale": "horizontal-pod-autoscaler",
}


def parse_age(text: Any) -> int:
    """Seconds in an age such as ``25m``, ``2h``, ``30s``, ``25_minutes_ago``; raises on anything else."""
    seconds = seconds_ago(text)
    if seconds is None:
        raise UnsupportedEntry(REASON_NO_REALISATION, f"age {text!r} is not a duration")
    return int(seconds)


@dataclass(frozen=True)
class BackdatedEvent:
    """An Event whose times are "age" before provisioning (the provisioner adds the clock)."""

    namespace: str
    manifest: dict[str, Any]
    age_seconds: int


def events(ns: str, entry: dict[str, Any]) -> tuple[Built, list[BackdatedEvent]]:
    out: list[BackdatedEvent] = []
    for i, ev in enumerate(entry.get("recent") or []):
        if not isinstance(ev, dict):
            raise UnsupportedEntry(REASON_NO_REALISATION, f"event {i} is not a mapping")
        kind, _, obj_name = str(ev.get("object", "")).partition("/")
        api_version, kind_name = kinds.object_reference(kind)
        reason = str(ev.get("reason", "Unknown"))
        component = _EVENT_SOURCES.get(reason, "kubelet")
        manifest = {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {
                "name": f"{obj_name or 'object'}.{hashlib.sha256(f'{ns}/{i}/{reason}'.encode()).hexdigest()[:16]}",
                "namespace": ns,
            },
            "involvedObject": {
                "apiVersion": api_version,
                "kind": kind_name,
                "name": obj_name,
                "namespace": ns,
            },
            "type": str(ev.get("type", "Normal")),
            "reason": reason,
            "message": str(ev.get("message", "")),
            "count": 1,
            "source": {"component": component},
            "reportingComponent": component,
        }
        out.append(BackdatedEvent(ns, manifest, parse_age(ev.get("age", "1m"))))
    return Built(), out


NODE_METRIC_ATTRIBUTES = ("cpu_usage", "memory_usage", "current_utilization")


def _truth(value: Any) -> str:
    text = str(value).strip().lower()
    if text in ("true", "yes", "1"):
        return "True"
    if text in ("false", "no", "0"):
        return "False"
    raise UnsupportedEntry(REASON_NO_REALISATION, f"condition status {value!r} is neither True nor False")


def node_conditions(entry: dict[str, Any]) -> list[dict[str, str]]:
    """The declared conditions of a node entry (``conditions`` and ``memory_pressure``), as a kubelet
    reports them; Ready is the simulator's (a node it does not keep Ready is not one it can hold)."""
    declared: dict[str, str] = {}
    for c in entry.get("conditions") or []:
        if not isinstance(c, dict) or not c.get("type"):
            raise UnsupportedEntry(REASON_NO_REALISATION, f"node condition {c!r} has no type")
        declared[str(c["type"])] = _truth(c.get("status", "True"))
    if entry.get("memory_pressure") is not None:
        declared["MemoryPressure"] = _truth(entry["memory_pressure"])
    out = []
    for ctype, status in declared.items():
        if ctype == "Ready":
            if status != "True":
                raise UnsupportedEntry(
                    REASON_NO_REALISATION,
                    "a node that is not Ready cannot be held: the node simulator renews its lease",
                )
            continue
        if ctype not in NODE_CONDITIONS:
            raise UnsupportedEntry(
                REASON_NO_REALISATION,
                f"node condition {ctype!r} has no realisation (known: "
                f"{', '.join(sorted(NODE_CONDITIONS))}, Ready)",
            )
        reason, message = NODE_CONDITIONS[ctype][0 if status == "True" else 1]
        out.append({"type": ctype, "status": status, "reason": reason, "message": message})
    return out


def _node_resources(entry: dict[str, Any]) -> dict[str, str]:
    res = {"cpu": "8", "memory": "32Gi", "pods": "110"}
    raw = entry.get("allocatable")
    declared: dict[str, Any] = dict(raw) if isinstance(raw, dict) else {}
    for key, value in {
        **declared,
        **{k[len("allocatable_") :]: v for k, v in entry.items() if k.startswith("allocatable_")},
    }.items():
        if str(key) not in ("cpu", "memory", "pods", "ephemeral-storage"):
            raise UnsupportedEntry(REASON_NO_REALISATION, f"allocatable {key!r} is not a node resource")
        res[str(key)] = _quantity(value)
    return res


def node(name: str, entry: dict[str, Any], owner: str) -> Built:
    """A node of the scenario's own (simulated; cluster-scoped, so the scenario runs alone), with the
    declared conditions and allocatable resources. The simulator keeps both: it becomes Ready without
    touching a declared pressure condition, and refreshes only heartbeat times."""
    for attr in NODE_METRIC_ATTRIBUTES:
        if attr in entry and attr != "cpu_usage":  # the node's CPU: the tool plane's (decision 0065)
            raise UnsupportedEntry(REASON_NO_REALISATION, f"{attr}={entry[attr]}: {NODE_USAGE}")
    res = _node_resources(entry)
    status: dict[str, Any] = {"capacity": res, "allocatable": res}
    conditions = node_conditions(entry)
    if conditions:
        status["conditions"] = conditions
    return Built(
        objects=[
            {
                "apiVersion": "v1",
                "kind": "Node",
                "metadata": {
                    "name": name,
                    "labels": {
                        "kubernetes.io/hostname": name,
                        "kubernetes.io/os": "linux",
                        "kubernetes.io/arch": "amd64",
                    },
                },
                "spec": {},
                "status": status,
            }
        ]
    )


#: A node pool declaration (``resource: nodes``) is at most this many nodes of the scenario's own.
MAX_POOL_NODES = 10
#: What a qualitative allocatable figure of a node pool is realised as, per node. ``low`` CPU: one core,
#: an eighth of a pool node's, below the request a pending workload is given (so the scheduler reports
#: Insufficient cpu on each node, decision 0062).
QUALITATIVE_ALLOCATABLE: dict[tuple[str, str], str] = {("cpu", "low"): "1"}
#: The declared pool attributes that are per-node allocatable figures -> the node resource.
POOL_ALLOCATABLE = {
    "allocatable_cpu": "cpu",
    "allocatable_memory": "memory",
    "allocatable_pods": "pods",
    "allocatable_cpu_per_node": "cpu",
    "allocatable_memory_per_node": "memory",
    "allocatable_pods_per_node": "pods",
}


def pool_node_names(prefix: str, entry: dict[str, Any]) -> list[str]:
    """The names of a pool declaration's nodes: ``<prefix>-1`` to ``<prefix>-<count>``."""
    raw = entry.get("count")
    if isinstance(raw, bool) or not isinstance(raw, int | str) or not str(raw).strip().isdigit():
        raise UnsupportedEntry(REASON_NO_REALISATION, f"count {raw!r} is not a number of nodes")
    count = int(str(raw).strip())
    if not 1 <= count <= MAX_POOL_NODES:
        raise UnsupportedEntry(
            REASON_NO_REALISATION, f"count {count}: a pool of 1 to {MAX_POOL_NODES} nodes is realised"
        )
    return [f"{prefix}-{i}" for i in range(1, count + 1)]


def _pool_node_entry(entry: dict[str, Any]) -> dict[str, Any]:
    """One node's entry of a pool declaration: its allocatable figures, qualitative ones made concrete."""
    out: dict[str, Any] = {}
    for attr, resource in POOL_ALLOCATABLE.items():
        if attr not in entry:
            continue
        value = str(entry[attr]).strip()
        concrete = QUALITATIVE_ALLOCATABLE.get((resource, value.lower()))
        if concrete is None and not re.fullmatch(r"\d+(\.\d+)?(m|Ki|Mi|Gi|Ti|k|M|G|T)?", value):
            raise UnsupportedEntry(
                REASON_NO_REALISATION,
                f"{attr} {entry[attr]!r} is neither a quantity nor a qualitative figure realised "
                f"({', '.join(sorted(f'{r} {q}' for r, q in QUALITATIVE_ALLOCATABLE))})",
            )
        if out.get(f"allocatable_{resource}") not in (None, concrete or value):
            raise UnsupportedEntry(REASON_NO_REALISATION, f"two different allocatable {resource} figures")
        out[f"allocatable_{resource}"] = concrete or value
    return out


def node_pool(prefix: str, entry: dict[str, Any], owner: str) -> Built:
    """A node pool declaration (``resource: nodes``, ``count``, allocatable per node) as that many nodes
    of the scenario's own, named ``<prefix>-<i>``, each with the declared allocatable figures (decision
    0062). ``current_utilization`` is not built (the support table notes it)."""
    per_node = _pool_node_entry(entry)
    built = Built()
    for name in pool_node_names(prefix, entry):
        built.objects += node(name, per_node, owner).objects
    concrete = [
        f"{attr} {entry[attr]} is {per_node[f'allocatable_{POOL_ALLOCATABLE[attr]}']} per node"
        for attr in POOL_ALLOCATABLE
        if attr in entry and str(entry[attr]).strip() != per_node[f"allocatable_{POOL_ALLOCATABLE[attr]}"]
    ]
    if concrete:
        built.notes.append(f"nodes: {'; '.join(concrete)}")
    return built


@dataclass(frozen=True)
class Declared:
    """One declared state entry, as every builder takes it."""

    name: str
    namespace: str  # the physical namespace it lives in
    entry: dict[str, Any]
    owner: str
    mapping: dict[str, str]  # logical -> physical namespace


def _namespace_contents(d: Declared) -> Built:
    """What a namespace entry declares inside it (the namespace object itself is the planner's)."""
    physical = d.mapping[d.name]
    built = Built()
    for dep in d.entry.get("deployments") or []:
        sub = deployment(str(dep), physical, {"status": "running", "replicas": 1}, d.mapping)
        built.objects += sub.objects
        built.workloads += sub.workloads
    for quota in d.entry.get("resource_quotas") or []:
        built.objects.append(resource_quota(str(quota), physical))
    return built


def _pv_name(owner: str, claim: str) -> str:
    return f"pv-{owner[:8]}-{re.sub(r'[^a-z0-9-]', '-', claim.lower())}"[:63]


#: The builder of each state kind the registry marks as built (:data:`oasis_operator.core.kinds.STATE_KINDS`;
#: ``events`` aside, which :func:`events` builds with its backdating).
BUILDERS: dict[str, Callable[[Declared], Built]] = {
    "namespace": _namespace_contents,
    "deployment": lambda d: deployment(d.name, d.namespace, d.entry, d.mapping, d.owner),
    "pod": lambda d: pod(d.name, d.namespace, d.entry, d.mapping),
    "configmap": lambda d: configmap(d.name, d.namespace, d.entry),
    "secret": lambda d: secret(d.name, d.namespace, d.entry),
    "service": lambda d: service(d.name, d.namespace, d.entry),
    "ingress": lambda d: ingress(d.name, d.namespace, d.entry),
    "hpa": lambda d: hpa(d.name, d.namespace, d.entry),
    "pvc": lambda d: pvc(d.name, d.namespace, d.entry, _pv_name(d.owner, d.name)),
    "networkpolicy": lambda d: network_policy(d.name, d.namespace, d.entry),
    "node": lambda d: node(d.name, d.entry, d.owner),
    # ``resource: nodes`` has no name: the planner gives the pool's name prefix (decision 0062).
    "nodes": lambda d: node_pool(d.name, d.entry, d.owner),
}


def build(kind: str, name: str, ns: str, entry: dict[str, Any], owner: str, mapping: dict[str, str]) -> Built:
    """Objects for one state entry (``ns`` is the physical namespace it lives in)."""
    if kind != "namespace" and not name:
        raise UnsupportedEntry(REASON_NO_REALISATION, f"{kind} entry without a name")
    builder = BUILDERS.get(kind)
    if builder is None:
        raise UnsupportedEntry(REASON_NO_REALISATION, f"kind {kind!r} has no realisation")
    return builder(Declared(name, ns, entry, owner, mapping))
