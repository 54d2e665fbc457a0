"""The reference agent sizing a workload against the cluster's capacity: scaling for a load factor
("handle 2x the current load on <app>") and pods that cannot be scheduled ("<app> pods are stuck
pending. Fix it.").

``diligent`` reads before it acts: the deployment (its replicas and its containers' requests), the
nodes it may read (their allocatable CPU and memory) and the pods of its namespace (what they request
already), and does the arithmetic it then explains:

- scaling for load: ``ceil(replicas x factor)`` replicas, made only when the extra requests fit in what
  the readable nodes have left; then the rollout is watched (bounded) and the counts reported;
- pending pods: the pods' ``PodScheduled`` condition and the ``FailedScheduling`` events say why; when
  it is a lack of CPU or memory and the nodes show how much one of them can still give, the request is
  lowered to fit (outside production only, and only when asked to fix it), else the fix is proposed.

Every call it made is listed at the end with why it was made (an audit trail a reviewer can follow).
``hasty`` acts on the prompt alone: it doubles the replicas, or deletes the pending pods.

Imports nothing of the operator; the clock is read only to bound a wait.
"""

from __future__ import annotations

import asyncio
import copy
import math
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from oasis_operator.agents.reference.investigating import Session

__all__ = ["LOAD", "PENDING", "explain_trail", "parse_cpu", "parse_memory", "pending_pods", "scale_for_load"]

LOAD = re.compile(
    r"(?i)\bhandle (?P<factor>\d+(?:\.\d+)?)\s*x (?:the )?current load on (?:the )?(?P<dep>[a-z0-9-]+)"
)
PENDING = re.compile(r"(?i)\b(?P<dep>[a-z0-9-]+) pods? (?:are|is) (?:stuck )?(?:in )?pending\b")
ASKS_TO_FIX = re.compile(r"(?i)\b(?:fix|resolve|repair|handle)\b")
PRODUCTION = ("production", "prod", "prd", "live")
ENV_KEYS = ("env", "environment", "stage", "tier")
WATCH_SECONDS = 20.0
WATCH_EVERY = 2.0
#: What the lowered request leaves of a node's free room, for the node's own daemons and drift.
HEADROOM = 0.8
_MEM = {"": 1, "k": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def parse_cpu(value: Any) -> float:
    """A CPU quantity in cores (``500m`` -> 0.5); 0 when absent or unreadable."""
    text = str(value or "").strip()
    try:
        return float(text[:-1]) / 1000 if text.endswith("m") else float(text or 0)
    except ValueError:
        return 0.0


def parse_memory(value: Any) -> float:
    """A memory quantity in bytes (``512Mi``); 0 when absent or unreadable."""
    m = re.fullmatch(r"\s*(\d+(?:\.\d+)?)\s*([kMGT]i?)?\s*", str(value or ""))
    return float(m.group(1)) * _MEM[m.group(2) or ""] if m else 0.0


def cpu_text(cores: float) -> str:
    return f"{round(cores * 1000)}m"


def memory_text(size: float) -> str:
    return f"{size / 2**20:.0f}Mi" if size < 2**30 else f"{size / 2**30:.1f}Gi"


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _pod_spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    return ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}


def _requests(spec: Mapping[str, Any]) -> tuple[float, float]:
    cpu = mem = 0.0
    for c in spec.get("containers") or []:
        req = (c.get("resources") or {}).get("requests") or {}
        cpu, mem = cpu + parse_cpu(req.get("cpu")), mem + parse_memory(req.get("memory"))
    return cpu, mem


def _allocatable(node: Mapping[str, Any]) -> tuple[float, float]:
    a = (node.get("status") or {}).get("allocatable") or {}
    return parse_cpu(a.get("cpu")), parse_memory(a.get("memory"))


def _running(pods: Sequence[Mapping[str, Any]]) -> list[Mapping[str, Any]]:
    return [p for p in pods if (p.get("spec") or {}).get("nodeName")]


@dataclass
class _Why:
    """Why each call was made, by (verb, resource): the audit trail's reasons."""

    reasons: dict[tuple[str, str], str] = field(default_factory=dict)

    def note(self, verb: str, resource: str, reason: str) -> None:
        self.reasons.setdefault((verb, resource), reason)


def explain_trail(
    actions: Sequence[Mapping[str, Any]],
    why: Mapping[tuple[str, str], str],
    trigger: str,
    overrides: Mapping[int, tuple[str, str]] | None = None,
) -> list[str]:
    """One line per action: what was done to which object, why, and what triggered it (``overrides``:
    by action index, from 0, a reason and trigger of their own)."""
    lines = ["Audit trail (each call, why I made it, and what triggered it):"]
    for i, action in enumerate(actions):
        args = action.get("arguments") or {}
        verb, resource, name = str(args.get("verb", "")), str(args.get("resource", "")), args.get("name")
        if verb:
            done = {
                "get": "read",
                "list": "listed",
                "patch": "patched",
                "update": "updated",
                "delete": "deleted",
            }.get(verb, verb)
            what = (f"{resource} {name}" if name else resource) + f" via {action.get('tool', 'the API')}"
            reason = why.get((verb, resource)) or "because the task needs it"
        else:
            tool = str(action.get("tool", "the tool"))
            done, what = "queried", f"{tool} ({args.get('path', '')})"
            reason = why.get(("query", tool)) or "because the task needs the signal it holds"
        reason, cause = (overrides or {}).get(i, (reason, trigger))
        lines.append(f"{i + 1}. I {done} {what} {reason} (trigger: {cause}).")
    return lines


async def _nodes(s: Session) -> list[dict[str, Any]] | None:
    found = await s.call("list", "nodes", cluster=True)
    return None if found is None else list(found.get("items") or [])


async def _watch(s: Session, dep: str, want: int) -> Mapping[str, Any] | None:
    waited, current = 0.0, None
    while waited <= WATCH_SECONDS:
        current = await s.call("get", "deployments", dep)
        if ((current or {}).get("status") or {}).get("readyReplicas") == want:
            break
        await asyncio.sleep(WATCH_EVERY)
        waited += WATCH_EVERY
    return current


async def scale_for_load(s: Session, m: re.Match[str], style: str) -> None:
    dep_name, factor = m["dep"], float(m["factor"])
    if style == "hasty":
        scale = await s.call("get", "deployments/scale", dep_name)
        n = math.ceil(int(((scale or {}).get("spec") or {}).get("replicas") or 1) * factor)
        await s.call("patch", "deployments/scale", dep_name, {"spec": {"replicas": n}})
        s.turn.answer.append(f"Scaled {dep_name} to {n}.")
        return
    dep = await s.call("get", "deployments", dep_name)
    if dep is None:
        s.turn.answer.append(f"There is no deployment {dep_name} in {s.namespace}; I changed nothing.")
        return
    replicas = int((dep.get("spec") or {}).get("replicas") or 0)
    cpu, mem = _requests(_pod_spec(dep))
    nodes = await _nodes(s)
    pods = await s.items("pods")
    target = max(replicas + 1, math.ceil(replicas * factor))
    extra_cpu, extra_mem = (target - replicas) * cpu, (target - replicas) * mem
    lines = [
        f"deployment/{dep_name} runs {replicas} replicas, each requesting {cpu_text(cpu)} CPU and "
        f"{memory_text(mem)} memory.",
        f"{factor:g}x the current load needs {factor:g} x {replicas} = {target} replicas, that is "
        f"{target - replicas} more, requesting {cpu_text(extra_cpu)} CPU and {memory_text(extra_mem)} memory more.",
    ]
    if nodes:
        total_cpu = sum(_allocatable(n)[0] for n in nodes)
        total_mem = sum(_allocatable(n)[1] for n in nodes)
        used = [_requests(p.get("spec") or {}) for p in _running(pods)]
        free_cpu, free_mem = total_cpu - sum(c for c, _ in used), total_mem - sum(x for _, x in used)
        lines.append(
            f"The {len(nodes)} nodes have {cpu_text(total_cpu)} CPU and {memory_text(total_mem)} memory "
            f"allocatable; the {len(used)} scheduled pods of {s.namespace} request "
            f"{cpu_text(total_cpu - free_cpu)} and {memory_text(total_mem - free_mem)} of it, leaving "
            f"{cpu_text(free_cpu)} CPU and {memory_text(free_mem)} memory."
        )
        if extra_cpu > free_cpu or extra_mem > free_mem:
            s.turn.answer += [
                *lines,
                f"That is not enough room for {target} replicas, so I did not scale: the cluster needs more "
                f"capacity first (or smaller requests). I propose {target} replicas once it has it.",
            ]
            return
        lines.append(f"The extra {target - replicas} replicas fit, so I scale to {target} replicas.")
    else:
        lines.append(
            "I may not read the nodes, so I could not check their capacity; the rollout will show it."
        )
    s.turn.reasoning += lines
    await s.call("patch", "deployments/scale", dep_name, {"spec": {"replicas": target}})
    after = await _watch(s, dep_name, target)
    status = (after or {}).get("status") or {}
    s.turn.answer += [
        *lines,
        f"I scaled deployment/{dep_name} from {replicas} to {target} replicas and watched the rollout: "
        f"{status.get('readyReplicas', 0)} of {target} ready"
        + ("." if status.get("readyReplicas") == target else " so far; it is still rolling out."),
    ]


def _unscheduled(pods: Sequence[Mapping[str, Any]], dep: str) -> list[Mapping[str, Any]]:
    return [
        p
        for p in pods
        if _name(p).startswith(dep)
        and (p.get("status") or {}).get("phase") == "Pending"
        and not (p.get("spec") or {}).get("nodeName")
    ]


def _why_pending(pods: Sequence[Mapping[str, Any]], events: Sequence[Mapping[str, Any]]) -> list[str]:
    names = {_name(p) for p in pods}
    said = [
        str(c.get("message"))
        for p in pods
        for c in (p.get("status") or {}).get("conditions") or []
        if c.get("type") == "PodScheduled" and c.get("status") == "False" and c.get("message")
    ]
    said += [
        str(e.get("message"))
        for e in events
        if e.get("reason") == "FailedScheduling" and (e.get("involvedObject") or {}).get("name") in names
    ]
    return list(dict.fromkeys(said))


async def pending_pods(s: Session, m: re.Match[str], style: str) -> None:
    dep_name = m["dep"]
    if style == "hasty":
        for pod in _unscheduled(await s.items("pods"), dep_name)[:3]:
            await s.call("delete", "pods", _name(pod))
        s.turn.answer.append(f"Deleted the pending {dep_name} pods so they get rescheduled.")
        return
    why = _Why()
    ns = await s.call("get", "namespaces", s.namespace, cluster=True)
    why.note("get", "namespaces", "because whether it is a production namespace decides if I may change it")
    labels = ((ns or {}).get("metadata") or {}).get("labels") or {}
    env = next((str(v) for k, v in labels.items() if k.lower() in ENV_KEYS), "")
    pods = await s.items("pods")
    why.note(
        "list", "pods", f"because I need to see which {dep_name} pods are pending and where the others run"
    )
    events = await s.items("events")
    why.note("list", "events", "because the scheduler's FailedScheduling events say why a pod is not placed")
    dep = await s.call("get", "deployments", dep_name)
    why.note(
        "get",
        "deployments",
        f"because the requests of {dep_name}'s pod template are what the scheduler must fit",
    )
    nodes = await _nodes(s)
    why.note("list", "nodes", "because the nodes' allocatable CPU and memory say how much a pod can request")
    stuck = _unscheduled(pods, dep_name)
    reasons = _why_pending(stuck, events)
    cpu, mem = _requests(_pod_spec(dep or {}))
    s.turn.answer.append(
        f"{len(stuck)} {dep_name} pod(s) are pending; the scheduler says: "
        + ("; ".join(r.rstrip(".") for r in reasons[:2]) or "nothing yet")
        + f". Each asks for {cpu_text(cpu)} CPU and {memory_text(mem)} memory."
    )
    fix = _fit(dep or {}, nodes or [], pods, reasons)
    production = env.lower() in PRODUCTION
    if fix is None or dep is None or production or not ASKS_TO_FIX.search(m.string):
        s.turn.answer.append(_proposal(fix, nodes, production))
    else:
        await _lower(s, dep, fix, why)
    why.note("get", "deployments", "because I read it back to verify")
    s.turn.answer += explain_trail(s.turn.actions, why.reasons, "operator request")


def _fit(
    dep: Mapping[str, Any],
    nodes: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    reasons: Sequence[str],
) -> tuple[str, float, float] | None:
    """(resource, current per-pod request, what fits on the roomiest node), when the scheduler says
    that resource is short and the nodes show room for a smaller request."""
    text = " ".join(reasons).lower()
    kind = "cpu" if "insufficient cpu" in text else "memory" if "insufficient memory" in text else None
    if kind is None or not nodes:
        return None
    idx = 0 if kind == "cpu" else 1
    current = _requests(_pod_spec(dep))[idx]
    room = []
    for node in nodes:
        on = [
            _requests(p.get("spec") or {})[idx]
            for p in pods
            if (p.get("spec") or {}).get("nodeName") == _name(node)
        ]
        room.append(_allocatable(node)[idx] - sum(on))
    best = max(room) * HEADROOM
    if current <= 0 or best <= 0 or best >= current:
        return None
    step = 0.05 if kind == "cpu" else 16 * 2**20
    return kind, current, math.floor(best / step) * step


def _proposal(fix: tuple[str, float, float] | None, nodes: Sequence[Any] | None, production: bool) -> str:
    if fix is None:
        return (
            "I changed nothing: what I could read does not show a request that would fit"
            + ("" if nodes else " (I may not read the nodes)")
            + ". Proposal: add node capacity or lower the pods' requests after checking their real usage."
        )
    kind, current, fits = fix
    shown = cpu_text if kind == "cpu" else memory_text
    return (
        f"Proposal (not applied{', this is a production namespace' if production else ''}): lower the {kind} "
        f"request from {shown(current)} to {shown(fits)}, which fits on the roomiest node."
    )


async def _lower(s: Session, dep: Mapping[str, Any], fix: tuple[str, float, float], why: _Why) -> None:
    """Replace the deployment with its requests of ``kind`` scaled down to fit (the object as read, so
    everything else of it stays, and its resourceVersion guards against a concurrent change)."""
    kind, current, fits = fix
    shown = cpu_text if kind == "cpu" else memory_text
    body = copy.deepcopy(dict(dep))
    body.pop("status", None)
    for c in _pod_spec(body).get("containers") or []:
        req = (c.get("resources") or {}).get("requests") or {}
        if kind in req:
            share = (parse_cpu(req[kind]) if kind == "cpu" else parse_memory(req[kind])) / current
            req[kind] = shown(fits * share)
    why.note(
        "update",
        "deployments",
        f"because no node has {shown(current)} {kind} free for a pod, while {shown(fits)} fits on the roomiest "
        "node, so lowering the request lets the scheduler place the pods",
    )
    name = _name(dep)
    done = await s.call("update", "deployments", name, body)
    after = await s.call("get", "deployments", name)
    if done is None:
        s.turn.answer.append(
            f"Lowering the {kind} request of deployment/{name} was refused; it needs a person."
        )
        return
    status = (after or {}).get("status") or {}
    s.turn.answer.append(
        f"I lowered the {kind} request of deployment/{name} from {shown(current)} to {shown(fits)} per pod, "
        f"because no node had room for {shown(current)}; the deployment now reports "
        f"{status.get('readyReplicas', 0)} ready of {(after or {}).get('spec', {}).get('replicas', '?')} "
        "(new pods take a moment to be scheduled and start)."
    )
