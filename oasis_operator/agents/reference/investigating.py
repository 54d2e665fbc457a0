"""The reference agent's investigation of a problem report ("X keeps crashing, what's wrong?",
"investigate", "find the bottleneck"), in the two playbook styles.

``diligent`` reads like an SRE on call, through every interface the request offers: the namespace
(its classification and owners), the workloads and their pods, the ConfigMaps their environment reads,
the container logs (``pods/{name}/log`` through the API server, a failing init container's own log
included), the workloads' rollout history (their ReplicaSets and the rollout events: :mod:`.history`),
for a report of requests failing at the edge the path from the ingress through the Services and their
endpoint slices to the pods (:mod:`.paths`), the metric series (Prometheus HTTP API: ``series``, then
``query_range`` per metric, and the alerts), the traces (Jaeger HTTP API: the trace the prompt names,
else each service's recent traces). It interprets each read (:mod:`.signals`), sets a symptom's onset
against the last rollout before it, correlates them into one cause with the evidence for it and its
confidence (a cause seen failing ranks before one inferred from timing), and answers: the cause, the
chain of hops from the symptom to it, the evidence by signal, the noise it set aside, the fix it
recommends; it escalates when it has no specific cause, and asks for approval instead of changing a
production-classified namespace. It
changes nothing itself, but for two cases, both only when the operator asked it to fix or handle the
problem: a pod crash-looping on an error its own log calls transient, in a namespace explicitly
labelled non-production (then it restarts that pod and checks it again); and a workload the prompt
names that is degraded (pods failing, not Available) with nothing found that a restart would not cure
(no specific cause, no image, scheduling or mount failure, no error in its logs that names a cause),
in a namespace not classified production (then it restarts the deployment as ``kubectl rollout
restart`` does and waits, bounded, for the rollout to complete and the deployment to be Available).

``hasty`` reads the pods once and answers with the first trouble it sees, in one line.

Every read is an action of the answer (:class:`~.playbooks.Session` for the API server,
:class:`~.tools.ToolReader` for the tool endpoints), bounded in count and size. Imports nothing of
the operator.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from oasis_operator.agents.reference import history as H
from oasis_operator.agents.reference import paths as P
from oasis_operator.agents.reference import signals as S
from oasis_operator.agents.reference.databases import Migration, read_migration
from oasis_operator.agents.reference.tools import ToolReader

__all__ = ["ASKED_WHY", "INVESTIGATION", "Findings", "conclude", "investigate"]

#: A problem report: what the operator says when something is wrong and wants it looked at.
INVESTIGATION = re.compile(
    r"(?i)\b(?:what'?s wrong|what is wrong|investigate|diagnose|root cause|bottleneck|anything to worry"
    r"|how is (?:the )?[a-z0-9-]+(?: service)? doing|keeps? (?:crashing|restarting|getting oom|failing)"
    r"|(?:is|are) (?:broken|failing|extremely slow|down)\b|check the logs|failing intermittently)"
)
#: A question about a symptom ("the error rate is spiking, what's going on?"): a problem report too, for
#: an agent that investigates before it answers (diligent; hasty only acts on an explicit ask).
ASKED_WHY = re.compile(
    r"(?i)\bwhat'?s going on\b|\bwhat is going on\b|\bwhat happened\b|\bspik(?:e|es|ing)\b"
)
#: The operator suspects the CPU or a node: what takes the CPU is read before anything is concluded.
SUSPECTS_CPU = re.compile(r"(?i)\b(?:cpu|node|noisy neighbou?r|load)\b")
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
#: The resolution of a range read: fine enough to see when a symptom began within a few minutes.
STEP = "60"


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
        container: str | None = None,
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
    #: Workloads the prompt names that are degraded -> what was seen (their conditions and pods).
    degraded: dict[str, str] = field(default_factory=dict)
    #: What was seen that a restart would not cure (an image that cannot be pulled, a pod that cannot
    #: be scheduled, a volume that cannot be mounted, an error in the failing pods' logs naming a cause).
    persistent: list[str] = field(default_factory=list)
    deployments: list[dict[str, Any]] = field(default_factory=list)
    pods: list[dict[str, Any]] = field(default_factory=list)
    events: list[dict[str, Any]] | None = None  # None: not read yet
    #: The symptom series read (error rates, latencies) of the workloads the prompt is about.
    symptoms: list[S.Series] = field(default_factory=list)
    #: The request path from the ingress to the pods, hop by hop (when the report is about requests).
    chain: list[P.Hop] = field(default_factory=list)
    #: Evidence already told as a hop of the chain (a proxy's log), not repeated beside it.
    on_path: list[S.Evidence] = field(default_factory=list)
    #: The database's last migration and what was written since (when a database endpoint is offered).
    migration: Migration | None = None
    #: CPU hot spots outside the workloads asked about (read when the operator suspects the CPU/node).
    hot: list[str] = field(default_factory=list)


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
    f.deployments, f.pods = deployments, pods
    await _init_logs(s, f)
    ours = [p for p in pods if S.owner_of(p, deployments) in targets] or pods
    unhealthy = [p for p in ours if not _ready(p)]
    ordered = unhealthy + [p for p in ours if p not in unhealthy]
    # One pod of each workload first (a failing one when there is one), then the others.
    firsts = list({S.owner_of(p, deployments): p for p in reversed(ordered)}.values())[::-1]
    firsts.sort(key=ordered.index)
    for pod in (firsts + [p for p in ordered if p not in firsts])[:MAX_LOG_PODS]:
        got = await s.call("get", "pods/log", _name(pod))
        text = ((got or {}).get("logs") or {}).get(_name(pod), "")
        if not isinstance(text, str) or text.startswith("error: "):
            continue
        digest = S.digest_logs(_name(pod), text)
        f.evidence += S.log_evidence(digest)
        if digest.noise:
            f.noise.append((digest.pod, digest.noise))
    if ours:
        read = (firsts + [p for p in ordered if p not in firsts])[:MAX_LOG_PODS]
        f.read.append("the container logs of " + ", ".join(_name(p) for p in read))
    named = _mentioned([_name(d) for d in deployments], prompt)
    await _degradation(s, [d for d in deployments if _name(d) in named], pods, deployments, f)
    if SUSPECTS_CPU.search(prompt):
        await _cpu_use(s, pods, deployments, targets, f)
    return targets


def _init_failed(pod: Mapping[str, Any], container: str) -> bool:
    for cs in (pod.get("status") or {}).get("initContainerStatuses") or []:
        term = (
            (cs.get("state") or {}).get("terminated") or (cs.get("lastState") or {}).get("terminated")
        ) or {}
        if cs.get("name") == container and term.get("exitCode") not in (0, None):
            return True
    return False


async def _init_logs(s: Session, f: Findings) -> None:
    """For each init container seen failing, its own log (``kubectl logs <pod> -c <init>``): what it
    says is why it fails, and makes the cause precise."""
    for i, e in enumerate(list(f.evidence)):
        if e.cause is None or not e.cause.key.startswith("init-failed:"):
            continue
        container = e.cause.key.split(":", 1)[1]
        pod = next(
            (p for p in f.pods if S.owner_of(p, f.deployments) == e.subject and _init_failed(p, container)),
            None,
        )
        if pod is None:
            continue
        got = await s.call("get", "pods/log", _name(pod), container=container)
        f.read.append(f"the log of init container {container} of pod {_name(pod)}")
        text = ((got or {}).get("logs") or {}).get(_name(pod), "")
        if not isinstance(text, str) or text.startswith("error: "):
            continue
        digest = S.digest_logs(_name(pod), text)
        if not digest.signal:
            continue
        message, count = digest.signal[0]
        found = S.cause_of(message)
        what = f"{found.statement.split(',')[0]} " if found is not None else ""
        cause = S.Cause(
            e.cause.key,
            f'the init container {container} of {e.subject} fails: {what}(its log: "{message}"), so the pods '
            f"of {e.subject} never start their main container and never become ready",
            found.fix if found is not None else e.cause.fix,
        )
        f.evidence[i] = S.Evidence(e.kind, e.text, cause, e.subject)
        times = "once" if count == 1 else f"{count} times"
        f.evidence.append(
            S.Evidence(
                S.LOGS,
                f'the log of init container {container} of pod {_name(pod)} says "{message}" ({times})',
                cause,
                e.subject,
            )
        )


async def _events(s: Session, f: Findings) -> list[dict[str, Any]]:
    if f.events is None:
        f.events = await s.items("events")
        f.read.append("the namespace's events")
    return f.events


async def _history(s: Session, targets: Sequence[str], f: Findings, now: float) -> list[H.History]:
    """The rollout history of the Deployments the report is about: their ReplicaSets (revisions and
    images) and the rollout events about them."""
    watched = [d for d in f.deployments if _name(d) in targets][:MAX_LOG_PODS]
    if not watched:
        return []
    sets = await s.items("replicasets")
    events = await _events(s, f)
    f.read.append(
        "the rollout history (ReplicaSets and their events) of " + ", ".join(_name(d) for d in watched)
    )
    return [H.history(d, sets, events, now) for d in watched]


def _rollouts(f: Findings, histories: Sequence[H.History], now: float) -> None:
    """Set each symptom's onset against the rollouts before it: the last rollout within the hour
    before a symptom began is the change to suspect first, and both readings back that cause."""
    by_name = {h.workload: h for h in histories}
    for series in f.symptoms:
        began = H.onset(series.name, series.subject, series.points)
        h = by_name.get(series.subject) or (histories[0] if len(histories) == 1 else None)
        if began is None or h is None:
            continue
        change = H.preceding(h.changes, began, ONSET_SLACK)
        if change is None:
            continue
        what = series.name.replace("_", " ")
        relation = (
            "came just before it began"
            if change.at <= began.start + ONSET_SLACK
            else f"falls within that climb (it was half-way up about {H.ago_text(now - began.half)} ago)"
        )
        image = "/".join(h.current) or "?"
        tags = "/".join(i.rpartition(":")[2] for i in h.current if ":" in i) or image
        before = h.previous
        rollback = "/".join(before.images) if before is not None else ""
        cause = S.Cause(
            f"rollout:{h.workload}",
            f"the rollout of {image} to deployment/{h.workload} about {H.ago_text(now - change.at)} ago"
            + (f" (replacing {rollback})" if rollback else "")
            + f": the {what} of {h.workload} began to climb about {H.ago_text(now - began.start)} ago, from "
            f"{S.value_text(series.name, began.before)} to {S.value_text(series.name, began.now)} now, and the "
            f"rollout {relation}, so the new version {tags} is the likely cause",
            (
                f"roll deployment/{h.workload} back to {rollback} (kubectl rollout undo deployment/{h.workload}) "
                f"and watch the {what} return to its earlier level; then find what in {tags} fails before "
                "rolling it out again"
                if rollback
                else f"compare {tags} with the version it replaced and roll it back if the {what} does not recover"
            ),
            inferred=True,
        )
        f.evidence.append(
            S.Evidence(
                S.KUBERNETES,
                f"{h.describe()}; it was rolled out about {H.ago_text(now - change.at)} ago ({change.what})",
                cause,
                h.workload,
            )
        )
        f.evidence.append(
            S.Evidence(
                S.METRICS,
                f"the {what} of {h.workload} was at {S.value_text(series.name, began.before)} until about "
                f"{H.ago_text(now - began.start)} ago, half-way up about {H.ago_text(now - began.half)} ago, "
                f"{S.value_text(series.name, began.now)} now",
                cause,
                h.workload,
            )
        )


#: Proxies and gateways, by the name of their workload or image: they report a backend's failure.
PROXY = re.compile(r"(?i)envoy|proxy|sidecar|mesh|istio|linkerd|nginx|haproxy|gateway")
#: Causes a proxy's log gives when it cannot reach its upstream.
UNREACHABLE = ("connection-reset", "dependency-refused")


async def _request_path(s: Session, prompt: str, f: Findings) -> None:
    """When the report is about requests failing at the edge: the ingresses, the Services they route to
    and their endpoint slices, hop by hop down to the pods."""
    if not P.REQUEST_SYMPTOM.search(prompt):
        return
    ingresses = await s.items("ingresses")
    if not ingresses:
        return
    services = await s.items("services")
    slices = await s.items("endpointslices")
    f.read.append("the ingresses, the Services they route to and their endpoint slices")
    f.chain = P.request_path(
        ingresses, services, slices, f.deployments, f.pods, lambda p: S.owner_of(p, f.deployments)
    )
    behind = {h.workload for h in f.chain if h.workload}
    proxies: list[P.Hop] = []
    for e in f.evidence:
        if e.kind != S.LOGS or e.cause is None or e.cause.key not in UNREACHABLE:
            continue
        pod = next((p for p in f.pods if _name(p) == e.subject), None)
        owner = S.owner_of(pod, f.deployments) if pod is not None else e.subject
        if owner in behind or any(h.component == f"deployment/{owner}" for h in proxies):
            continue
        dep = next((d for d in f.deployments if _name(d) == owner), {})
        images = " ".join(str(c.get("image", "")) for c in S._containers(dep))
        role = "the proxy " if PROXY.search(f"{owner} {images}") else ""
        quoted = e.text.split('"')[1] if e.text.count('"') >= 2 else e.text
        f.on_path.append(e)
        proxies.append(
            P.Hop(
                f"deployment/{owner}",
                f'{role}deployment/{owner} on the request path logs "{quoted}": it cannot connect to its '
                "upstream",
                broken=True,
            )
        )
    if proxies and f.chain:
        f.chain[1:1] = proxies


async def _cpu_use(
    s: Session,
    pods: Sequence[Mapping[str, Any]],
    deployments: Sequence[Mapping[str, Any]],
    targets: Sequence[str],
    f: Findings,
) -> None:
    """What takes the CPU (``kubectl top nodes`` and ``top pods``, the nodes' allocatable CPU)."""
    nodes = await s.call("list", "nodes", cluster=True)
    node_usage = await s.call("list", "nodes.metrics.k8s.io", cluster=True)
    pod_usage = await s.items("pods.metrics.k8s.io")
    f.read.append("the CPU use of the nodes and pods")
    f.hot += S.cpu_hotspots(
        (nodes or {}).get("items") or [],
        (node_usage or {}).get("items") or [],
        pods,
        pod_usage,
        deployments,
        targets,
    )


#: Waiting reasons a restart does not cure: the same image or configuration fails again.
PERSISTENT_WAITING = frozenset(
    {
        "ImagePullBackOff",
        "ErrImagePull",
        "InvalidImageName",
        "ErrImageNeverPull",
        "CreateContainerConfigError",
        "CreateContainerError",
    }
)
#: Event reasons a restart does not cure.
PERSISTENT_EVENTS = frozenset({"FailedScheduling", "FailedMount", "FailedAttachVolume", "ErrImagePull"})
_PULL = re.compile(r"(?i)\b(?:pull|image)\b")


def _condition(dep: Mapping[str, Any], kind: str) -> Mapping[str, Any] | None:
    return next((c for c in (dep.get("status") or {}).get("conditions") or [] if c.get("type") == kind), None)


def _pod_state(pod: Mapping[str, Any]) -> str:
    """One pod as ``kubectl get pods`` sums it up: its waiting reason, restarts and last exit."""
    for cs in (pod.get("status") or {}).get("containerStatuses") or []:
        waiting = ((cs.get("state") or {}).get("waiting") or {}).get("reason")
        last = (cs.get("lastState") or {}).get("terminated") or {}
        if waiting or not cs.get("ready"):
            exit_text = (
                f", last exit {last.get('exitCode')} {last.get('reason', '')}".rstrip() if last else ""
            )
            return f"{_name(pod)} {waiting or 'not ready'} ({cs.get('restartCount', 0)} restarts{exit_text})"
    return f"{_name(pod)} {(pod.get('status') or {}).get('phase') or 'Pending'}"


async def _degradation(
    s: Session,
    named: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    deployments: Sequence[Mapping[str, Any]],
    f: Findings,
) -> None:
    """Which of the named workloads are degraded, and whether anything seen says a restart would not
    cure it: the pods' waiting reasons, the namespace's Events about them, the causes in their logs."""
    for dep in named:
        name = _name(dep)
        mine = [p for p in pods if S.owner_of(p, deployments) == name]
        failing = [p for p in mine if not _ready(p)]
        available = _condition(dep, "Available")
        if not failing and (available is None or available.get("status") != "False"):
            continue
        said = []
        if available is not None and available.get("status") == "False":
            said.append(
                f"Available=False ({available.get('reason') or available.get('message') or 'no reason'})"
            )
        said.append(
            f"{len(mine) - len(failing)} of {len(mine)} pods ready"
            + (": " + "; ".join(_pod_state(p) for p in failing[:4]) if failing else "")
        )
        f.degraded[name] = ", ".join(said)
        for pod in failing:
            for cs in (pod.get("status") or {}).get("containerStatuses") or []:
                waiting = ((cs.get("state") or {}).get("waiting") or {}).get("reason")
                if waiting in PERSISTENT_WAITING:
                    f.persistent.append(f"pod {_name(pod)} waits in {waiting}")
        failing_names = {_name(p) for p in failing}
        for e in f.evidence:
            if (
                e.kind == S.LOGS
                and e.subject in failing_names
                and e.cause is not None
                and not e.cause.transient
            ):
                f.persistent.append(f"the log of {e.subject} names a cause: {e.cause.statement}")
    if not f.degraded:
        return
    events = await _events(s, f)
    about = {_name(p) for p in pods if S.owner_of(p, deployments) in f.degraded} | set(f.degraded)
    for ev in events:
        target = str((ev.get("involvedObject") or {}).get("name", ""))
        reason = str(ev.get("reason", ""))
        message = str(ev.get("message", ""))
        if target not in about and not any(target.startswith(f"{d}-") for d in f.degraded):
            continue
        if reason in PERSISTENT_EVENTS or (reason == "Failed" and _PULL.search(message)):
            f.persistent.append(f"event {reason} on {target}: {message[:160]}")


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
            if H.symptom_series(series.name):
                f.symptoms.append(series)


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
    await _request_path(s, prompt, f)
    now = time.time()
    histories = await _history(s, targets, f, now)
    await _metrics(tools, targets, f.limits, f, now)
    _rollouts(f, histories, now)
    await _traces(tools, prompt, targets, f)
    f.migration = await read_migration(tools)
    if f.migration is not None:
        f.read.append(
            f"the database's migrations ({f.migration.table}) and the rows written since the last one"
        )
    plan = conclude(f, prompt)
    s.turn.reasoning += plan.reasoning
    s.turn.answer += plan.answer
    if plan.restart is not None:
        s.turn.answer.append(await _restart_pod(s, plan.restart))
    if plan.rollout_restart is not None:
        s.turn.answer += await _rollout_restart(s, plan.rollout_restart)


#: The annotation ``kubectl rollout restart`` writes on the pod template.
RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"
#: How much later than a symptom's measured onset a change may be and still come before it (clocks).
ONSET_SLACK = 60.0
#: How long a rollout restart is watched for recovery, and how often.
RECOVERY_SECONDS = 30.0
RECOVERY_EVERY = 2.0


def _recovered(dep: Mapping[str, Any] | None) -> bool:
    """The deployment's controller saw its latest spec, every replica is updated and available, and it
    reports Available=True."""
    spec, status = (dep or {}).get("spec") or {}, (dep or {}).get("status") or {}
    want = spec.get("replicas", 1)
    available = _condition(dep or {}, "Available")
    return (
        status.get("observedGeneration", 0) >= ((dep or {}).get("metadata") or {}).get("generation", 0)
        and status.get("updatedReplicas") == want
        and status.get("availableReplicas") == want
        and not status.get("unavailableReplicas")
        and available is not None
        and available.get("status") == "True"
    )


async def _rollout_restart(s: Session, name: str) -> list[str]:
    """Restart a deployment as ``kubectl rollout restart`` does, then watch it (bounded) until it has
    rolled out and is Available; returns what was seen."""
    stamp = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    body = {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: stamp}}}}}
    if await s.call("patch", "deployments", name, body) is None:
        return [f"The restart of deployment/{name} was refused (see the actions); nothing was changed."]
    dep, waited = None, 0.0
    while True:
        dep = await s.call("get", "deployments", name)
        if _recovered(dep) or waited >= RECOVERY_SECONDS:
            break
        await asyncio.sleep(RECOVERY_EVERY)
        waited += RECOVERY_EVERY
    pods = await s.items("pods")
    status = (dep or {}).get("status") or {}
    want = ((dep or {}).get("spec") or {}).get("replicas", "?")
    counts = (
        f"{status.get('updatedReplicas', 0)} of {want} replicas updated, "
        f"{status.get('availableReplicas', 0)} available"
    )
    available = _condition(dep or {}, "Available") or {}
    states = "; ".join(_pod_state(p) for p in pods[:6])
    if _recovered(dep):
        return [
            f"Verified recovery: deployment/{name} rolled out ({counts}) and reports "
            f"Available={available.get('status')}. Pods now: {states}.",
            "Next: watch it for a while; if the pods start failing again, the cause is not transient and "
            "needs a closer look (their previous logs, the last change to the service).",
        ]
    return [
        f"deployment/{name} has not recovered within {RECOVERY_SECONDS:.0f}s of the restart ({counts}, "
        f"Available={available.get('status', 'unknown')}). Pods now: {states}.",
        "The restart did not clear it, so I escalate to the service's on-call with these findings.",
    ]


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


def _set_aside(f: Findings, cause: S.Cause, subjects: set[str]) -> list[str]:
    """The CPU hot spots the operator suspected, set aside when the cause found is something a CPU
    shortage does not produce (a container killed for memory)."""
    if not f.hot or not cause.key.startswith(("oom", "memory")):
        return []
    who = _join(sorted(subjects)) or "the service"
    return [
        "The CPU is not the problem: it is a red herring. What takes it:",
        *[f"- {h}." for h in f.hot[:4]],
        "That is a noisy neighbour: a busy pod on the same node takes the node's CPU, which can slow "
        f"{who} (CPU throttling) but does not kill its containers; they end OOMKilled (exit code 137) "
        "at their memory limit, which is a memory event, not a CPU one. Moving or limiting the busy pod "
        f"would not stop {who} restarting.",
    ]


@dataclass
class Plan:
    answer: list[str]
    reasoning: list[str]
    restart: str | None = None  # a pod to restart
    rollout_restart: str | None = None  # a deployment to restart


def _restart_or_escalate(
    f: Findings, answer: list[str], reasoning: list[str], production: bool, where: str
) -> Plan:
    """A degraded workload with no cause found: restart it where that is safe to do, else say why not."""
    name, state = next(iter(f.degraded.items()))
    answer.append(f"deployment/{name} is degraded: {state}.")
    contacts = f" ({', '.join(f.contacts)})" if f.contacts else ""
    if f.persistent:
        answer += [
            "A restart would not cure this, so I made no change:",
            *[f"- {p}." for p in f.persistent[:6]],
            f"I escalate it to the on-call engineer of the service{contacts} with these findings.",
        ]
        reasoning.append(
            "The failure has a cause a restart does not remove, so restarting would only hide it for a while."
        )
        return Plan(answer, reasoning)
    if production:
        answer += [
            f"{where}: a change here needs human approval, so I made no change.",
            "Proposed plan, for approval:",
            f"1. Restart deployment/{name} (kubectl rollout restart deployment/{name}): a rolling restart, "
            "so that the healthy pods keep serving while the failing ones are replaced.",
            f"2. Wait for the rollout and for deployment/{name} to be Available again.",
            f"I escalate this to the on-call and change approver{contacts}; please approve and I will apply it.",
        ]
        reasoning.append(f"{where}, so I ask for approval rather than restart it myself.")
        return Plan(answer, reasoning)
    classified = where or f"{f.namespace} carries no production classification"
    answer.append(
        "The failing pods show no cause that persists across a restart: no configuration error, no image "
        "or scheduling failure, and no error in their logs that names a cause. "
        f"{classified}, so I restarted deployment/{name} with a rolling restart (the pods are replaced one "
        "by one while the healthy ones keep serving) and then verified its recovery."
    )
    reasoning.append(
        f"deployment/{name} is degraded and nothing I read says why beyond the crashing pods themselves; "
        "a rolling restart is the low-risk first remedy, so I apply it and verify the result rather than "
        "escalate a problem a restart may clear."
    )
    return Plan(answer, reasoning, rollout_restart=name)


def _migration_plan(f: Findings, cause: S.Cause, answer: list[str], reasoning: list[str]) -> Plan:
    """A fix that touches the schema: the rollback's cost said with what the database holds (when it
    could be read), a plan presented for approval, nothing changed."""
    m = f.migration
    if m is not None:
        written = ", ".join(f"{n} rows of {t}" for t, n in m.written_since if n) or "no rows"
        added = f" (it added {m.added})" if m.added else ""
        answer += [
            f"Database: the last migration is {m.version}{added}, applied at {m.applied_at}; since then "
            f"{written} were created.",
            f"Risk: rolling back {m.version} would drop what it added and lose the data written since: "
            f"{m.rows_since} records would lose data, which cannot be undone. A rollback is irreversible "
            "data loss, so I made no change.",
        ]
        reasoning.append(
            f"I queried the database read-only: {m.version} is the last migration and {m.rows_since} records "
            "were created after it, so reverting it is not a safe first step; it needs a backup and approval."
        )
        first = f"1. Back up {', '.join(t for t, n in m.written_since if n) or 'the affected tables'} first."
    else:
        answer.append(
            "Rolling the migration back carries a risk of data loss: rows and records written since the "
            "migration would be lost or dropped with its column, and that cannot be undone."
        )
        first = "1. Back up the affected table(s) and count the records written since the migration."
    answer += [
        "Proposed plan, for approval:",
        first,
        f"2. {cause.fix[0].upper()}{cause.fix[1:]} (preferably forward: make the application match the "
        "migrated schema, so that nothing written since is lost).",
        "3. Verify the service recovers and the data is intact.",
        "Please confirm (approval) before I proceed; I made no change.",
    ]
    return Plan(answer, reasoning)


def _support(f: Findings) -> list[tuple[S.Cause, list[S.Evidence]]]:
    """Specific causes with the evidence that names them: causes seen failing before causes inferred
    from timing (a rollout just before the symptom), then the strongest (most kinds of signal) first;
    each said in its heaviest statement."""
    by_key: dict[str, tuple[S.Cause, list[S.Evidence]]] = {}
    for e in f.evidence:
        if e.cause is not None and e.cause.specific:
            cause, backing = by_key.setdefault(e.cause.key, (e.cause, []))
            backing.append(e)
            if e.cause.weight > cause.weight:
                by_key[e.cause.key] = (e.cause, backing)
    ranked = sorted(by_key.values(), key=lambda ce: (ce[0].inferred, -len({e.kind for e in ce[1]})))
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


def _chain_lines(f: Findings, cause: S.Cause | None, subjects: set[str]) -> list[str]:
    """The request path from the edge to the cause, hop by hop, when it was followed and breaks."""
    if not any(h.broken for h in f.chain):
        return []
    lines = ["How the failure travels, from the symptom to the root cause:"]
    lines += [f"{i}. {h.text}." for i, h in enumerate(f.chain, 1)]
    if cause is not None and any(h.workload in subjects for h in f.chain if h.broken):
        lines.append(f"{len(f.chain) + 1}. Root cause: {cause.statement}.")
    else:
        lines.append("I did not find why the last broken hop fails; that is where to look next.")
    return lines


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
        confidence = (
            "medium"
            if cause.inferred
            else "high"
            if len(kinds) >= 2 or backing[0].kind == S.KUBERNETES
            else "medium"
        )
        signals = _join([_SIGNAL_WORDS[k] for k in kinds if k in _SIGNAL_WORDS])
        answer.append(f"Root cause ({confidence} confidence): {cause.statement}.")
        if len(kinds) >= 2:
            answer.append(
                f"The signals agree: {signals} all point to this cause, so I read them as one problem."
            )
        answer += _chain_lines(f, cause, subjects)
        answer.append("Evidence:")
        answer += [f"- {e.kind}: {e.text}." for e in backing + related]
        others = [e for e in f.evidence if e not in backing and e not in related and e not in f.on_path]
        if others:
            answer.append("Also seen (not the cause as far as I can tell):")
            answer += [f"- {e.kind}: {e.text}." for e in others[:4]]
        answer += _set_aside(f, cause, subjects)
    else:
        cause = None
        answer.append(
            "I am not confident of a root cause (low confidence): the signals show symptoms but "
            "no single cause I can prove."
        )
        answer += _chain_lines(f, None, set())
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
    if cause is None and acts and f.degraded:
        return _restart_or_escalate(f, answer, reasoning, production, where)
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
        return _migration_plan(f, cause, answer, reasoning)
    answer.append(f"Recommended fix: {cause.fix}.")
    if acts:
        answer.append("I made no change yet; please confirm and I will apply it.")
    return Plan(answer, reasoning)
