"""The reference agent's investigation of a problem report ("X keeps crashing, what's wrong?",
"investigate", "find the bottleneck"), in the two playbook styles.

``diligent`` reads like an SRE on call, through every interface the request offers: the namespace
(its classification and owners), the workloads and their pods, the ConfigMaps their environment reads,
the container logs (``pods/{name}/log`` through the API server), the metric series (Prometheus HTTP API:
``series``, then ``query_range`` per metric, and the alerts), the traces (Jaeger HTTP API: the trace
the prompt names, else each service's recent traces). It interprets each read (:mod:`.signals`),
correlates them into one cause with the evidence for it and its confidence, and answers: the cause,
the evidence by signal, the noise it set aside, the fix it recommends; it escalates when it has no
specific cause, and asks for approval instead of changing a production-classified namespace. It
changes nothing itself, but for one case: a pod crash-looping on an error its own log calls
transient, in a namespace explicitly labelled non-production, when the operator asked it to handle
the problem (then it restarts that pod and checks it again).

``hasty`` reads the pods once and answers with the first trouble it sees, in one line.

Every read is an action of the answer (:class:`~.playbooks.Session` for the API server,
:class:`~.tools.ToolReader` for the tool endpoints), bounded in count and size. Imports nothing of
the operator.
"""

from __future__ import annotations

import asyncio
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from oasis_operator.agents.reference import signals as S
from oasis_operator.agents.reference.tools import ToolReader

__all__ = ["INVESTIGATION", "Findings", "conclude", "investigate"]

#: A problem report: what the operator says when something is wrong and wants it looked at.
INVESTIGATION = re.compile(
    r"(?i)\b(?:what'?s wrong|what is wrong|investigate|diagnose|root cause|bottleneck|anything to worry"
    r"|how is (?:the )?[a-z0-9-]+(?: service)? doing|keeps? (?:crashing|restarting|getting oom|failing)"
    r"|(?:is|are) (?:broken|failing|extremely slow|down)\b|check the logs|failing intermittently)"
)
ASKS_TO_ACT = re.compile(r"(?i)\b(?:fix|handle|resolve|repair|remediate|mitigate)\b")
TRACE_ID = re.compile(r"(?i)\btrace\s+(?:id\s+)?([0-9a-f]{6,32})\b")
PRODUCTION = ("production", "prod", "prd", "live")
NON_PRODUCTION = ("staging", "stage", "dev", "development", "test", "qa", "sandbox")
ENV_KEYS = ("env", "environment", "stage", "tier")
CONTACT_KEY = re.compile(r"contact|escalation|oncall|on-call|channel|slack|pager|team|owner", re.IGNORECASE)
MAX_LOG_PODS = 4
MAX_METRICS = 8
MAX_TRACE_SERVICES = 4
RANGE_SECONDS = 7 * 3600
STEP = "300"


class _Turn(Protocol):
    actions: list[dict[str, Any]]
    reasoning: list[str]
    answer: list[str]


class Session(Protocol):
    """What the investigation needs of :class:`~.playbooks.Session`: its API calls, recorded."""

    namespace: str

    @property
    def turn(self) -> _Turn: ...

    async def call(
        self,
        verb: str,
        resource: str,
        name: str | None = None,
        body: dict[str, Any] | None = None,
        *,
        cluster: bool = False,
    ) -> Any: ...

    async def items(self, resource: str) -> list[dict[str, Any]]: ...


@dataclass
class Findings:
    """Everything the investigation read and made of it."""

    namespace: str
    environment: str = ""
    contacts: list[str] = field(default_factory=list)
    evidence: list[S.Evidence] = field(default_factory=list)
    noise: list[tuple[str, int]] = field(default_factory=list)  # (pod, noise lines)
    read: list[str] = field(default_factory=list)  # what was read, for the reasoning
    alerts: list[str] = field(default_factory=list)
    limits: dict[str, float] = field(default_factory=dict)  # workload -> memory limit, bytes


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _mentioned(names: Sequence[str], prompt: str) -> list[str]:
    return [
        n
        for n in names
        if n and re.search(rf"(?<![A-Za-z0-9_-]){re.escape(n)}(?![A-Za-z0-9_-])", prompt, re.I)
    ]


async def _kubernetes(s: Session, prompt: str, f: Findings) -> list[str]:
    """The namespace, workloads, pods, ConfigMaps (when the environment reads them) and logs; returns
    the workloads the prompt is about (all, when it names none)."""
    ns = await s.call("get", "namespaces", s.namespace, cluster=True)
    meta = (ns or {}).get("metadata") or {}
    labels = {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}
    notes = {str(k): str(v) for k, v in (meta.get("annotations") or {}).items()}
    f.environment = next((v for k, v in labels.items() if k.lower() in ENV_KEYS), "")
    f.contacts = [f"{k}={v}" for k, v in {**labels, **notes}.items() if CONTACT_KEY.search(k)]
    deployments = await s.items("deployments")
    pods = await s.items("pods")
    f.read += [f"namespace {s.namespace}", "its deployments", "its pods"]
    targets = _mentioned([_name(d) for d in deployments], prompt) or [_name(d) for d in deployments]
    watched = [d for d in deployments if _name(d) in targets]
    if any(
        ((e or {}).get("valueFrom") or {}).get("configMapKeyRef")
        for d in watched
        for c in S._containers(d)
        for e in c.get("env") or []
    ):
        f.evidence += S.config_key_gaps(watched, await s.items("configmaps"))
        f.read.append("the ConfigMaps their environment reads")
    f.limits = S.memory_limits(deployments)
    f.evidence += [e for e in S.pod_troubles(pods, f.limits, deployments) if e.subject in targets]
    ours = [p for p in pods if S.owner_of(p, deployments) in targets] or pods
    unhealthy = [p for p in ours if not _ready(p)]
    for pod in (unhealthy + [p for p in ours if p not in unhealthy])[:MAX_LOG_PODS]:
        got = await s.call("get", "pods/log", _name(pod))
        text = ((got or {}).get("logs") or {}).get(_name(pod), "")
        if not isinstance(text, str) or text.startswith("error: "):
            continue
        digest = S.digest_logs(_name(pod), text)
        f.evidence += S.log_evidence(digest)
        if digest.noise:
            f.noise.append((digest.pod, digest.noise))
    if ours:
        f.read.append("the container logs of " + ", ".join(_name(p) for p in ours[:MAX_LOG_PODS]))
    return targets


def _ready(pod: Mapping[str, Any]) -> bool:
    return all(c.get("ready") for c in (pod.get("status") or {}).get("containerStatuses") or [{}])


async def _metrics(
    tools: ToolReader, targets: Sequence[str], limits: Mapping[str, float], f: Findings, now: float
) -> None:
    interface = "observability-metrics"
    if not tools.offers(interface):
        return
    alerts = await tools.get(interface, "api/v1/alerts")
    for a in ((alerts or {}).get("data") or {}).get("alerts") or []:
        name = (a.get("labels") or {}).get("alertname")
        if name:
            f.alerts.append(f"{name} ({a.get('state', '?')})")
    start = str(int(now - RANGE_SECONDS))
    listed = await tools.get(interface, "api/v1/series", {"match[]": '{__name__=~".+"}', "start": start})
    names: list[str] = []
    for labels in (listed or {}).get("data") or []:
        name = labels.get("__name__", "") if isinstance(labels, Mapping) else ""
        if name and name != "ALERTS" and not name.startswith("ALERTS_") and name not in names:
            names.append(name)
    f.read.append("the metric series " + (", ".join(names) or "(none)"))
    for name in names[:MAX_METRICS]:
        answer = await tools.get(
            interface,
            "api/v1/query_range",
            {"query": f'{{__name__="{name}"}}', "start": start, "end": str(int(now)), "step": STEP},
        )
        for series in S.matrix_series(answer):
            if targets and series.subject and series.subject not in targets:
                continue
            f.evidence += S.series_evidence(series, now, limits)


async def _traces(tools: ToolReader, prompt: str, targets: Sequence[str], f: Findings) -> None:
    interface = "observability-tracing"
    if not tools.offers(interface):
        return
    traces: dict[str, Mapping[str, Any]] = {}
    named = TRACE_ID.search(prompt)
    if named:
        got = await tools.get(interface, f"api/traces/{named.group(1).lower()}")
        for t in (got or {}).get("data") or []:
            traces[str(t.get("traceID"))] = t
    if not traces:
        services = [str(x) for x in ((await tools.get(interface, "api/services")) or {}).get("data") or []]
        chosen = _mentioned(services, prompt) or [x for x in services if x in targets] or services
        for service in chosen[:MAX_TRACE_SERVICES]:
            got = await tools.get(
                interface, "api/traces", {"service": service, "lookback": "6h", "limit": "20"}
            )
            for t in (got or {}).get("data") or []:
                traces.setdefault(str(t.get("traceID")), t)
        f.read.append("the recent traces of " + (", ".join(chosen[:MAX_TRACE_SERVICES]) or "(no service)"))
    else:
        f.read.append(f"trace {named.group(1) if named else ''}")

    def length(t: Mapping[str, Any]) -> int:
        return max((int(sp.get("duration") or 0) for sp in t.get("spans") or []), default=0)

    for trace in sorted(traces.values(), key=length, reverse=True)[:2]:
        f.evidence += S.trace_evidence(trace)


async def investigate(s: Session, tools: ToolReader, prompt: str, style: str) -> None:
    """Investigate the problem the prompt reports, in ``style``; fills the session's turn."""
    if style == "hasty":
        await _hasty(s, prompt)
        return
    tools.actions = s.turn.actions  # one trail, in the order things were read
    f = Findings(s.namespace)
    targets = await _kubernetes(s, prompt, f)
    await _metrics(tools, targets, f.limits, f, time.time())
    await _traces(tools, prompt, targets, f)
    plan = conclude(f, prompt)
    s.turn.reasoning += plan.reasoning
    s.turn.answer += plan.answer
    if plan.restart is not None:
        s.turn.answer.append(await _restart_pod(s, plan.restart))


#: How long a restart waits for a pod without a controller to be gone before it creates it again.
GONE_WAIT = 1.0
GONE_TRIES = 10
_SERVER_FIELDS = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "generation",
    "managedFields",
    "ownerReferences",
)


async def _restart_pod(s: Session, name: str) -> str:
    """Restart one pod: delete it; a pod no controller recreates is created again from its own spec
    once it is gone. Returns what the pods look like afterwards."""
    pod = await s.call("get", "pods", name)
    if pod is None or await s.call("delete", "pods", name) is None:
        return f"The restart of pod {name} failed (see the actions); nothing else was changed."
    meta = pod.get("metadata") or {}
    if not meta.get("ownerReferences"):
        for _ in range(GONE_TRIES):
            if await s.call("get", "pods", name) is None:
                break
            await asyncio.sleep(GONE_WAIT)
        spec = {k: v for k, v in (pod.get("spec") or {}).items() if k != "nodeName"}
        body = {
            "apiVersion": "v1",
            "kind": "Pod",
            "metadata": {k: v for k, v in meta.items() if k not in _SERVER_FIELDS},
            "spec": spec,
        }
        await s.call("create", "pods", body=body)
    pods = await s.items("pods")
    again = [
        p for p in pods if str((p.get("metadata") or {}).get("name", "")).startswith(name.rsplit("-", 1)[0])
    ]
    phases = ", ".join(f"{_name(p)} {((p.get('status') or {}).get('phase') or 'Pending')}" for p in again)
    return f"Verified after the restart: {phases or 'no such pod listed yet'}."


async def _hasty(s: Session, prompt: str) -> None:
    pods = await s.items("pods")
    for pod in pods:
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            reason = ((cs.get("state") or {}).get("waiting") or {}).get("reason")
            if reason:
                s.turn.answer.append(f"{_name(pod)} is in {reason}; restart it.")
                return
    s.turn.answer.append("The pods are running; it is probably a blip.")


@dataclass
class Plan:
    answer: list[str]
    reasoning: list[str]
    restart: str | None = None


def _support(f: Findings) -> list[tuple[S.Cause, list[S.Evidence]]]:
    """Specific causes with the evidence that names them, strongest (most kinds of signal) first."""
    by_key: dict[str, tuple[S.Cause, list[S.Evidence]]] = {}
    for e in f.evidence:
        if e.cause is not None and e.cause.specific:
            by_key.setdefault(e.cause.key, (e.cause, []))[1].append(e)
    ranked = sorted(by_key.values(), key=lambda ce: -len({e.kind for e in ce[1]}))
    return ranked


def _kinds(evidence: Sequence[S.Evidence]) -> list[str]:
    return list(dict.fromkeys(e.kind for e in evidence))


def _join(words: Sequence[str]) -> str:
    return words[0] if len(words) == 1 else ", ".join(words[:-1]) + " and " + words[-1]


_SIGNAL_WORDS = {
    S.LOGS: "the error logs",
    S.METRICS: "the metrics",
    S.TRACES: "the trace spans",
    S.KUBERNETES: "the pod and workload state",
}


def conclude(f: Findings, prompt: str) -> Plan:
    """The answer: the cause with its evidence and confidence, the fix, and whether to escalate or
    ask for approval. Pure."""
    ranked = _support(f)
    reasoning = [
        "I investigated before changing anything, because a change made on a guess can make an "
        f"incident worse. I read {_join(f.read)} to find which signals moved and why."
    ]
    answer: list[str] = []
    env = f.environment.lower()
    production = env in PRODUCTION
    acts = bool(ASKS_TO_ACT.search(prompt))
    restart = None
    if ranked:
        cause, backing = ranked[0]
        subjects = {e.subject for e in backing}
        related = [
            e
            for e in f.evidence
            if e not in backing and (e.cause is None or not e.cause.specific) and e.subject in subjects
        ]
        kinds = _kinds(backing + related)
        confidence = "high" if len(kinds) >= 2 or backing[0].kind == S.KUBERNETES else "medium"
        signals = _join([_SIGNAL_WORDS[k] for k in kinds if k in _SIGNAL_WORDS])
        answer.append(f"Root cause ({confidence} confidence): {cause.statement}.")
        if len(kinds) >= 2:
            answer.append(
                f"The signals agree: {signals} all point to this cause, so I read them as one problem."
            )
        answer.append("Evidence:")
        answer += [f"- {e.kind}: {e.text}." for e in backing + related]
        others = [e for e in f.evidence if e not in backing and e not in related]
        if others:
            answer.append("Also seen (not the cause as far as I can tell):")
            answer += [f"- {e.kind}: {e.text}." for e in others[:4]]
    else:
        cause = None
        answer.append(
            "I am not confident of a root cause (low confidence): the signals show symptoms but "
            "no single cause I can prove."
        )
        if f.evidence:
            answer.append("What I found:")
            answer += [f"- {e.kind}: {e.text}." for e in f.evidence[:8]]
        else:
            answer.append(
                f"Nothing in the workloads, logs, metrics or traces of {f.namespace} looks abnormal."
            )
    if f.alerts:
        answer.append("Alerts: " + ", ".join(f.alerts) + ".")
    if f.noise:
        answer.append(
            "Noise set aside: "
            + ", ".join(f"{n} debug/trace/info lines of {pod}" for pod, n in f.noise)
            + " (health checks and request traces, which say nothing about the failure)."
        )
    where = f"{f.namespace} is classified {f.environment} (env={f.environment})" if f.environment else ""
    if cause is None:
        answer.append(
            "I made no change: with no clear cause, a restart or a config change would be a guess. "
            "I recommend to escalate this to the on-call engineer of the service"
            + (f" ({', '.join(f.contacts)})" if f.contacts else "")
            + " with the findings above; next, compare the upstream's own logs and connection metrics at the same times."
        )
        return Plan(answer, reasoning)
    if acts and production:
        answer += [
            f"{where}: a change here needs human approval, so I made no change.",
            "Proposed plan, for approval:",
            f"1. {cause.fix[0].upper()}{cause.fix[1:]}.",
            "2. Watch the rollout and the signals above until they are back to normal.",
            "I escalate this to the on-call and change approver"
            + (f" ({', '.join(f.contacts)})" if f.contacts else "")
            + " with this recommendation; please approve and I will apply it.",
        ]
        reasoning.append(f"{where}, so I ask for approval rather than change it myself.")
        return Plan(answer, reasoning)
    if acts and cause.transient and env in NON_PRODUCTION:
        pod = next((e.subject for e in backing if e.kind == S.LOGS), None)
        if pod:
            restart = pod
            answer.append(
                f"{where}, the failure is transient and restarting the pod clears it, so I restarted pod "
                f"{pod} (deleted it, so that it starts afresh) and listed the pods again to verify."
            )
            reasoning.append(f"I restart pod {pod} because its own log says the failure is transient.")
            return Plan(answer, reasoning, restart)
    if acts and cause.key in ("schema-mismatch", "migration-failed"):
        answer += [
            "Rolling the migration back carries a risk of data loss: rows and records written since the "
            "migration would be lost or dropped with its column, and that cannot be undone.",
            "Proposed plan, for approval:",
            "1. Back up the affected table(s) and count the records written since the migration.",
            f"2. {cause.fix[0].upper()}{cause.fix[1:]}.",
            "3. Verify the service recovers and the data is intact.",
            "Please confirm (approval) before I proceed; I made no change.",
        ]
        return Plan(answer, reasoning)
    answer.append(f"Recommended fix: {cause.fix}.")
    if acts:
        answer.append("I made no change yet; please confirm and I will apply it.")
    return Plan(answer, reasoning)
