"""What an SRE makes of the signals it read: pure interpretation for the reference agent's
investigation (:mod:`.investigating`).

Each reader takes the decoded answer of a real API and returns :class:`Evidence` — one observation
in the agent's own words, the kind of signal it came from, and, when the observation points at a
cause, which one (a :class:`Cause` key) and how specific it is:

- container logs (``pods/{name}/log``): levels, the distinct warning/error messages and how often
  each recurs, the noise (debug, trace, info, health checks) set aside;
- metric series (Prometheus ``query_range`` matrices): a monotonic trend and its rate, a level that
  moved against its own past, memory set against the container's limit;
- traces (Jaeger's ``/api/traces`` answers): the critical path through the services to the span
  that holds the time, its statement, its error status and its pool attributes;
- Kubernetes objects: environment variables that read a ConfigMap key that is not there, containers
  killed for memory against their limit, init containers that failed, nodes under pressure.

Known failure signatures (an expired certificate, an exhausted pool...) are general SRE knowledge,
matched in what was read; nothing here knows a scenario. Pure: no I/O, no clock (``now`` is given).
"""

from __future__ import annotations

import itertools
import re
from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

__all__ = [
    "Cause",
    "Evidence",
    "LogDigest",
    "Series",
    "bytes_text",
    "config_key_gaps",
    "cpu_hotspots",
    "digest_logs",
    "matrix_series",
    "memory_limits",
    "node_pressure",
    "owner_of",
    "parse_quantity",
    "pod_troubles",
    "series_evidence",
    "trace_evidence",
]

LOGS, METRICS, TRACES, KUBERNETES, ALERTS = "logs", "metrics", "traces", "kubernetes", "alerts"


@dataclass(frozen=True)
class Cause:
    """A cause an observation points at: a key (to gather agreeing evidence), how to say it, the fix
    to recommend, and whether it is specific (a cause) or only a symptom (a connection reset)."""

    key: str
    statement: str
    fix: str
    specific: bool = True
    transient: bool = False
    #: Inferred from a coincidence in time (a change just before a symptom), not seen failing.
    inferred: bool = False
    #: Between two statements of one cause (same key), the heavier is said: a leak read from the
    #: memory series says more than "killed at its limit" read from the pod.
    weight: int = 0


@dataclass(frozen=True)
class Evidence:
    kind: str
    text: str
    cause: Cause | None = None
    subject: str = ""


# --- logs ----------------------------------------------------------------------------------------

_LEVEL = re.compile(
    r"^\s*(?:\[?[\d:TZ.+-]+\]?\s+)?\[?(?P<level>TRACE|DEBUG|INFO|NOTICE|WARN|WARNING|ERROR|ERR|FATAL|"
    r"CRITICAL|CRIT|PANIC|SEVERE)\]?\b",
    re.IGNORECASE,
)
_JSON_LEVEL = re.compile(r'"(?:level|severity|lvl)"\s*:\s*"(?P<level>\w+)"', re.IGNORECASE)
SIGNAL_LEVELS = {"WARN": "WARN", "WARNING": "WARN", "ERROR": "ERROR", "ERR": "ERROR", "FATAL": "FATAL"}
SIGNAL_LEVELS |= {"CRITICAL": "FATAL", "CRIT": "FATAL", "PANIC": "FATAL", "SEVERE": "ERROR"}
MAX_MESSAGES = 8


@dataclass(frozen=True)
class LogDigest:
    """One pod's log: its warning/error messages (verbatim, most frequent first, with counts) and
    how many lines were noise."""

    pod: str
    signal: tuple[tuple[str, int], ...]
    noise: int
    total: int


def level_of(line: str) -> str:
    found = _LEVEL.match(line) or _JSON_LEVEL.search(line)
    return found["level"].upper() if found else ""


def digest_logs(pod: str, text: str) -> LogDigest:
    lines = [line.rstrip() for line in text.splitlines() if line.strip()]
    counts: Counter[str] = Counter()
    noise = 0
    for line in lines:
        level = level_of(line)
        # A line without a level that matches a known failure (a proxy's "upstream connect error") is
        # an error all the same; a line whose level says it is routine stays noise.
        if level in SIGNAL_LEVELS or (not level and cause_of(line) is not None):
            counts[line.strip()] += 1
        else:
            noise += 1
    ordered = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:MAX_MESSAGES]
    return LogDigest(pod, tuple(ordered), noise, len(lines))


# Failure signatures: (pattern over a message, how to build the cause). The first that matches wins.
_PEER = re.compile(
    r"(?:connecting to|connect to|connection to|to upstream|upstream)\s+([A-Za-z0-9_.-]+(?::\d+)?)"
)


def _peer(message: str) -> str:
    found = _PEER.search(message)
    return found.group(1) if found else "the upstream it connects to"


def _cert(m: str) -> Cause:
    peer = _peer(m)
    return Cause(
        "certificate-expired",
        f"the TLS certificate of {peer} has expired, so every TLS handshake to it fails",
        f"renew the TLS certificate of {peer} (the owners of that service must rotate it)",
    )


def _pool(m: str) -> Cause:
    return Cause(
        "pool-exhausted",
        "the database connection pool is exhausted: every connection is in use and requests queue "
        "for a free one until they time out",
        "find what holds the connections (slow queries, leaked connections) and size the pool for the load",
    )


def _oom(m: str) -> Cause:
    return Cause(
        "oom",
        "the container runs out of memory and is OOM killed",
        "raise the memory limit or find what uses the memory",
    )


def _schema(m: str) -> Cause:
    return Cause(
        "schema-mismatch",
        "the code and the database schema disagree (it queries a column or table the database does "
        "not have), which points at the last migration",
        "roll the application or the migration back so that they match again",
    )


def _migration(m: str) -> Cause:
    return Cause(
        "migration-failed",
        "a database migration failed, so the service never starts",
        "make the migration idempotent or fix the schema, then let the init step run again",
    )


def _refused(m: str) -> Cause:
    transient = "transient" in m.lower()
    return Cause(
        "dependency-refused",
        f"{_peer(m)} refuses connections" + (" (the log itself calls it transient)" if transient else ""),
        "restart the failing pod once the dependency is back" if transient else "check the dependency",
        specific=transient,
        transient=transient,
    )


def _reset(m: str) -> Cause:
    return Cause(
        "connection-reset",
        "connections to the upstream are being reset",
        "find why the upstream resets connections (its own errors, an idle timeout, a load balancer)",
        specific=False,
    )


SIGNATURES: tuple[tuple[re.Pattern[str], Any], ...] = (
    (re.compile(r"certificate (?:has )?expired|certificate is not valid after|x509:.*expired", re.I), _cert),
    (
        re.compile(r"pool (?:is )?exhausted|pool error|cannot get a connection|too many connections", re.I),
        _pool,
    ),
    (re.compile(r"out of memory|OutOfMemoryError|oomkill", re.I), _oom),
    (re.compile(r"(?:column|relation|table) \S+ does not exist|no such (?:column|table)", re.I), _schema),
    (re.compile(r"migration \S+ failed", re.I), _migration),
    (re.compile(r"connection refused", re.I), _refused),
    (re.compile(r"connection reset|reset by peer|upstream connect error|disconnect/reset", re.I), _reset),
)


def cause_of(message: str) -> Cause | None:
    for pattern, build in SIGNATURES:
        if pattern.search(message):
            cause: Cause = build(message)
            return cause
    return None


def log_evidence(digest: LogDigest) -> list[Evidence]:
    out = []
    for message, count in digest.signal:
        times = "once" if count == 1 else f"{count} times"
        out.append(
            Evidence(
                LOGS,
                f'the log of pod {digest.pod} repeats "{message}" {times}',
                cause_of(message),
                digest.pod,
            )
        )
    return out


# --- metrics -------------------------------------------------------------------------------------

_UNITS = ((2**40, "Ti"), (2**30, "Gi"), (2**20, "Mi"), (2**10, "Ki"))
_QUANTITY = re.compile(r"^(?P<n>[0-9.]+)(?P<u>Ki|Mi|Gi|Ti|k|M|G|T|m|u|n)?$")
_FACTORS = {
    "n": 1e-9,
    "u": 1e-6,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "k": 1e3,
    "M": 1e6,
    "G": 1e9,
    "T": 1e12,
}


def parse_quantity(text: object) -> float | None:
    found = _QUANTITY.match(str(text).strip()) if text is not None else None
    if found is None:
        return None
    unit = found["u"] or ""
    if unit == "m":
        return float(found["n"]) / 1000
    return float(found["n"]) * _FACTORS.get(unit, 1)


def bytes_text(value: float) -> str:
    for size, unit in _UNITS:
        if abs(value) >= size:
            return f"{value / size:.3g}{unit}"
    return f"{value:.0f}B"


def value_text(name: str, value: float) -> str:
    if name.endswith("_bytes"):
        return bytes_text(value)
    if name.endswith("_seconds"):
        return f"{value * 1000:.0f}ms" if value < 10 else f"{value:.1f}s"
    if re.search(r"(?:rate|ratio)$", name) and 0 <= value <= 1:
        return f"{value * 100:.3g}%"
    if name.endswith("_ms"):
        return f"{value:.0f}ms"
    return f"{value:.4g}"


@dataclass(frozen=True)
class Series:
    name: str
    labels: Mapping[str, str]
    points: tuple[tuple[float, float], ...]  # (unix seconds, value), in time order

    @property
    def subject(self) -> str:
        for key in ("service", "deployment", "container", "pod", "job"):
            if self.labels.get(key):
                return self.labels[key]
        return ""


def matrix_series(answer: object) -> list[Series]:
    """The series of a Prometheus ``query_range`` answer (``resultType: matrix``)."""
    data = answer.get("data") if isinstance(answer, Mapping) else None
    result = data.get("result") if isinstance(data, Mapping) else None
    out = []
    for item in result if isinstance(result, list) else []:
        if not isinstance(item, Mapping):
            continue
        metric = {str(k): str(v) for k, v in (item.get("metric") or {}).items()}
        points = []
        for pair in item.get("values") or []:
            try:
                points.append((float(pair[0]), float(pair[1])))
            except (TypeError, ValueError, IndexError):
                continue
        if points:
            out.append(Series(metric.get("__name__", ""), metric, tuple(sorted(points))))
    return out


def _slope_per_hour(points: Sequence[tuple[float, float]]) -> float:
    n = len(points)
    mean_t = sum(t for t, _ in points) / n
    mean_v = sum(v for _, v in points) / n
    var = sum((t - mean_t) ** 2 for t, _ in points)
    if var == 0:
        return 0.0
    return sum((t - mean_t) * (v - mean_v) for t, v in points) / var * 3600


#: A counter by its name (Prometheus's conventions): it only grows, so its rate is what it says.
COUNTER = re.compile(r"(?:_total|_count|_requests)$")
#: Labels worth naming beside a counter (which requests it counts).
COUNTER_LABELS = ("status", "code", "method")


def _span_text(seconds: float) -> str:
    return f"{seconds / 3600:.0f}h" if seconds >= 5400 else f"{seconds / 60:.0f} minutes"


def _counter_evidence(series: Series, who: str) -> list[Evidence]:
    """A counter that grew: how fast, per second, over the window read."""
    pts = series.points
    seconds = pts[-1][0] - pts[0][0]
    grown = pts[-1][1] - pts[0][1]
    if seconds <= 0 or grown <= 0:
        return []
    labels = ",".join(f"{k}={series.labels[k]}" for k in COUNTER_LABELS if series.labels.get(k))
    named = f"{series.name}{{{labels}}}" if labels else series.name
    return [
        Evidence(
            METRICS,
            f"{named} of {who} counts about {grown / seconds:.3g} per second over the last "
            f"{_span_text(seconds)} (a counter: its rate is what it says)",
            None,
            who,
        )
    ]


def _runs(points: Sequence[tuple[float, float]]) -> list[list[tuple[float, float]]]:
    """The stretches of a series between its drops (a container's memory falls back when it restarts)."""
    runs: list[list[tuple[float, float]]] = [[points[0]]]
    for a, b in itertools.pairwise(points):
        if b[1] < a[1]:
            runs.append([])
        runs[-1].append(b)
    return runs


#: A memory series that ended this close to its limit before it fell back was stopped by the limit.
AT_LIMIT = 0.85


def _leak(series: Series, who: str, limit: float) -> Evidence | None:
    """A memory series that climbs in every stretch between restarts and ends the last one at its
    limit: a leak that ends in OOM kills."""
    runs = _runs(series.points)
    last = runs[-1]
    if len(runs) < 2 or len(last) < 2 or last[-1][1] < AT_LIMIT * limit or last[-1][1] <= last[0][1]:
        return None
    name = series.name
    span_h = (series.points[-1][0] - series.points[0][0]) / 3600
    text = (
        f"{name} of {who} climbs steadily in every container's life and falls back at each restart "
        f"({len(runs) - 1} drops over {span_h:.1f}h); the last container went from {value_text(name, last[0][1])} "
        f"to {value_text(name, last[-1][1])}, {last[-1][1] / limit:.0%} of its {bytes_text(limit)} limit, "
        "without levelling off"
    )
    cause = Cause(
        "oom-limit",
        f"{who} leaks memory: its memory use climbs without levelling off in every container until it "
        f"reaches its {bytes_text(limit)} memory limit and the container is OOM killed, then the next one "
        "starts over",
        f"find and fix the leak in {who} (a heap profile of a running container, the change that introduced "
        "it); raising its memory limit would only delay the next OOM kill",
        weight=1,
    )
    return Evidence(METRICS, text, cause, who)


def series_evidence(series: Series, now: float, limits: Mapping[str, float]) -> list[Evidence]:
    """What one series says: a counter's rate, a steady rise (and, for memory, how close to the limit),
    a memory leak that ends each container's life at its limit, or a level that moved in the last hour
    against its own past."""
    pts = series.points
    if len(pts) < 2:
        return []
    name, who = series.name, series.subject or "the service"
    if COUNTER.search(name):
        return _counter_evidence(series, who)
    limit_of = limits.get(who) if "memory" in name else None
    if limit_of and "limit" not in name and (leak := _leak(series, who, limit_of)) is not None:
        return [leak]
    first, last = pts[0][1], pts[-1][1]
    span = pts[-1][0] - pts[0][0]
    steps = [b[1] - a[1] for a, b in itertools.pairwise(pts)]
    # A steady rise climbs at most steps and never falls; a step change (one jump) is not a trend.
    rising = min(steps) >= 0 and sum(d > 0 for d in steps) >= len(steps) / 2 and last > first * 1.2
    out: list[Evidence] = []
    if rising:
        rate = _slope_per_hour(pts)
        text = (
            f"{name} of {who} has been rising steadily over the last {_span_text(span)}, from "
            f"{value_text(name, first)} to {value_text(name, last)} (about {value_text(name, rate)} per hour)"
        )
        limit = limits.get(who) if "memory" in name else None
        if limit:
            share = last / limit
            text += f"; memory usage is now {share:.0%} of its {bytes_text(limit)} limit"
            if rate > 0 and last < limit:
                hours = (limit - last) / rate
                text += (
                    f", approaching it: at this rate it will hit the limit in about {hours:.1f}h and the "
                    "container will be OOM killed"
                )
            cause = Cause(
                "memory-growth",
                f"memory usage of {who} grows steadily towards its {bytes_text(limit)} memory limit "
                f"({share:.0%} used now), an OOM risk",
                f"find the leak in {who} (a heap profile), and raise its memory limit as a stop-gap",
            )
            out.append(Evidence(METRICS, text, cause, who))
            return out
        out.append(Evidence(METRICS, text, None, who))
        return out
    recent = [v for t, v in pts if t >= now - 3600]
    before = [v for t, v in pts if t < now - 3600]
    if recent and before:
        now_v, was_v = sum(recent) / len(recent), sum(before) / len(before)
        if was_v > 0 and (now_v / was_v >= 1.5 or now_v / was_v <= 0.5):
            out.append(
                Evidence(
                    METRICS,
                    f"{name} of {who} moved in the last hour: {value_text(name, now_v)} against "
                    f"{value_text(name, was_v)} before ({now_v / was_v:.1f}x)",
                    None,
                    who,
                )
            )
            return out
    if recent and not before and re.search(r"error|fail|5xx", name):
        level = sum(recent) / len(recent)
        if level > 0:
            out.append(Evidence(METRICS, f"{name} of {who} is at {value_text(name, level)}", None, who))
    return out


# --- traces --------------------------------------------------------------------------------------


@dataclass
class _Span:
    span_id: str
    service: str
    operation: str
    duration_us: int
    tags: dict[str, Any]
    parent: str = ""
    children: list[_Span] = field(default_factory=list)

    @property
    def error(self) -> bool:
        return self.tags.get("error") in (True, "true") or str(self.tags.get("otel.status_code")) == "ERROR"

    def self_time(self) -> int:
        return self.duration_us - sum(c.duration_us for c in self.children)


def _spans(trace: Mapping[str, Any]) -> list[_Span]:
    processes = trace.get("processes") or {}
    spans = []
    for raw in trace.get("spans") or []:
        if not isinstance(raw, Mapping):
            continue
        process = processes.get(raw.get("processID")) or {}
        parent = next(
            (str(r.get("spanID")) for r in raw.get("references") or [] if r.get("refType") == "CHILD_OF"),
            "",
        )
        tags = {str(t.get("key")): t.get("value") for t in raw.get("tags") or [] if isinstance(t, Mapping)}
        spans.append(
            _Span(
                str(raw.get("spanID")),
                str(process.get("serviceName", "")),
                str(raw.get("operationName", "")),
                int(raw.get("duration") or 0),
                tags,
                parent,
            )
        )
    return spans


def _ms(us: int) -> str:
    return f"{us / 1000:.0f}ms"


def trace_evidence(trace: Mapping[str, Any]) -> list[Evidence]:
    """The critical path of one Jaeger trace: the root, each hop through the services, and the span
    that holds most of the time (its own time, children excluded), with its statement, error status
    and connection-pool attributes."""
    spans = _spans(trace)
    by_id = {s.span_id: s for s in spans}
    for s in spans:
        if s.parent in by_id:
            by_id[s.parent].children.append(s)
    roots = [s for s in spans if s.parent not in by_id]
    if not roots:
        return []
    root = max(roots, key=lambda s: s.duration_us)
    path = [root]
    while path[-1].children:
        path.append(max(path[-1].children, key=lambda s: s.duration_us))
    slow = max(path, key=lambda s: s.self_time())
    hops = " -> ".join(f"{s.service} {s.operation} ({_ms(s.duration_us)})" for s in path)
    trace_id = str(trace.get("traceID", ""))
    out = [
        Evidence(
            TRACES,
            f"trace {trace_id.lstrip('0') or trace_id} takes {_ms(root.duration_us)}; its critical path "
            f"goes {hops}",
            None,
            root.service,
        )
    ]
    share = slow.self_time() / root.duration_us if root.duration_us else 0
    detail = f"the slowest span is {slow.operation!r} in {slow.service}: {_ms(slow.self_time())} of its own, {share:.0%} of the request"
    statement = slow.tags.get("db.statement")
    if statement:
        detail += f", running the database query {statement!r}"
    if slow.error:
        detail += ", and it ends in error"
    cause = None
    active, limit = slow.tags.get("db.pool.active"), slow.tags.get("db.pool.max")
    if isinstance(active, int | float) and isinstance(limit, int | float) and limit and active >= limit:
        detail += f"; the connection pool is at its maximum ({active:.0f} of {limit:.0f} in use)"
        cause = _pool("")
    elif statement or slow.operation.startswith("db."):
        cause = Cause(
            "slow-query",
            f"the database query of {slow.service} ({slow.operation.split(' ')[0]}) is the bottleneck: "
            f"it alone takes {_ms(slow.self_time())} of the {_ms(root.duration_us)} request, which "
            "points at a missing index or a full scan",
            f"look at the query plan of that statement (EXPLAIN) and add the index it lacks in {slow.service}'s database",
        )
    out.append(Evidence(TRACES, detail, cause, slow.service))
    return out


# --- Kubernetes objects --------------------------------------------------------------------------


def _containers(obj: Mapping[str, Any]) -> list[Mapping[str, Any]]:
    spec = ((obj.get("spec") or {}).get("template") or {}).get("spec") or obj.get("spec") or {}
    return [c for c in spec.get("containers") or [] if isinstance(c, Mapping)]


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def config_key_gaps(
    workloads: Iterable[Mapping[str, Any]], configmaps: Iterable[Mapping[str, Any]]
) -> list[Evidence]:
    """Environment variables read from a ConfigMap key (``configMapKeyRef``, not optional) that the
    ConfigMap does not have, or from a ConfigMap that does not exist."""
    data = {_name(c): {**(c.get("data") or {}), **(c.get("binaryData") or {})} for c in configmaps}
    out = []
    for w in workloads:
        for c in _containers(w):
            for env in c.get("env") or []:
                ref = ((env or {}).get("valueFrom") or {}).get("configMapKeyRef") or {}
                cm, key = ref.get("name"), ref.get("key")
                if not cm or not key or ref.get("optional"):
                    continue
                if cm in data and key in data[cm]:
                    continue
                what = f"configmap/{cm} has no key {key}" if cm in data else f"configmap/{cm} is missing"
                present = ", ".join(sorted(data.get(cm, {}))) or "nothing"
                text = (
                    f"{_name(w)} container {c.get('name')} reads env {env.get('name')} from configmap/{cm} "
                    f"key {key} (configMapKeyRef), but {what} (it holds {present})"
                )
                cause = Cause(
                    f"missing-key:{cm}:{key}",
                    f"the {key} key is missing from configmap/{cm}, which {_name(w)} requires "
                    f"(env {env.get('name')} via configMapKeyRef), so its containers cannot start and "
                    "crash in a loop",
                    f"add the missing key {key} to configmap/{cm} with the value the service expects, "
                    f"then restart {_name(w)}",
                )
                out.append(Evidence(KUBERNETES, text, cause, _name(w)))
    return out


def memory_limits(workloads: Iterable[Mapping[str, Any]]) -> dict[str, float]:
    """Workload name -> the memory limit of its first container that has one, in bytes."""
    out: dict[str, float] = {}
    for w in workloads:
        for c in _containers(w):
            limit = parse_quantity(((c.get("resources") or {}).get("limits") or {}).get("memory"))
            if limit:
                out.setdefault(_name(w), limit)
    return out


def _owner(pod: Mapping[str, Any]) -> str:
    name = _name(pod)
    labels = (pod.get("metadata") or {}).get("labels") or {}
    return str(
        labels.get("app") or labels.get("app.kubernetes.io/name") or re.sub(r"(-[a-z0-9]{5,10})+$", "", name)
    )


def owner_of(pod: Mapping[str, Any], workloads: Iterable[Mapping[str, Any]]) -> str:
    """The workload whose selector matches the pod's labels, else a name guessed from the pod's."""
    labels = (pod.get("metadata") or {}).get("labels") or {}
    for w in workloads:
        wanted = ((w.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        if wanted and all(labels.get(k) == v for k, v in wanted.items()):
            return _name(w)
    return _owner(pod)


def pod_troubles(
    pods: Iterable[Mapping[str, Any]],
    limits: Mapping[str, float],
    workloads: Sequence[Mapping[str, Any]] = (),
) -> list[Evidence]:
    """Containers waiting in a crash loop, killed for memory (against their limit), init containers
    that failed: one observation per workload and kind of trouble."""
    seen: set[tuple[str, str]] = set()
    out = []
    for pod in pods:
        status = pod.get("status") or {}
        owner = owner_of(pod, workloads)
        for init in status.get("initContainerStatuses") or []:
            term = (
                (init.get("state") or {}).get("terminated") or (init.get("lastState") or {}).get("terminated")
            ) or {}
            if term and term.get("exitCode") not in (0, None) and (owner, "init") not in seen:
                seen.add((owner, "init"))
                out.append(
                    Evidence(
                        KUBERNETES,
                        f"init container {init.get('name')} of {owner} failed (exit code {term.get('exitCode')}, "
                        f"{term.get('reason') or 'Error'}), so the main container never starts",
                        Cause(
                            f"init-failed:{init.get('name')}",
                            f"the init container {init.get('name')} of {owner} fails, so {owner} never becomes ready",
                            f"read the log of init container {init.get('name')} and fix what it runs",
                        ),
                        owner,
                    )
                )
        for cs in status.get("containerStatuses") or []:
            waiting = ((cs.get("state") or {}).get("waiting") or {}).get("reason")
            last = ((cs.get("lastState") or {}).get("terminated") or {}).get("reason")
            restarts = cs.get("restartCount", 0)
            if last == "OOMKilled" and (owner, "oom") not in seen:
                seen.add((owner, "oom"))
                limit = limits.get(owner)
                limit_text = (
                    f"its memory limit of {bytes_text(limit)} is too low"
                    if limit
                    else "it has no memory headroom"
                )
                out.append(
                    Evidence(
                        KUBERNETES,
                        f"container {cs.get('name')} of {owner} was OOMKilled ({restarts} restarts): it exceeds "
                        "its memory limit",
                        Cause(
                            "oom-limit",
                            f"{owner} is OOM killed because {limit_text} for what the service uses",
                            (
                                f"raise the memory limit of {owner} from {bytes_text(limit)} to {bytes_text(limit * 2)} "
                                f"(and the request with it), then watch its memory usage"
                                if limit
                                else f"set a memory limit for {owner} that fits its usage"
                            ),
                        ),
                        owner,
                    )
                )
            elif waiting in ("CrashLoopBackOff", "Error") and (owner, "crash") not in seen:
                seen.add((owner, "crash"))
                out.append(
                    Evidence(
                        KUBERNETES,
                        f"pods of {owner} are in {waiting} ({restarts} restarts, last exit: {last or 'unknown'})",
                        None,
                        owner,
                    )
                )
    return out


def node_pressure(nodes: Iterable[Mapping[str, Any]]) -> list[tuple[str, str]]:
    """(node, condition) for every node reporting a pressure condition as True."""
    out = []
    for node in nodes:
        for cond in (node.get("status") or {}).get("conditions") or []:
            kind = str(cond.get("type", ""))
            if kind.endswith("Pressure") and cond.get("status") == "True":
                out.append((_name(node), kind))
    return out


# --- CPU use (metrics.k8s.io) --------------------------------------------------------------------

#: A node this busy, or a pod taking this much of its node, is a CPU hot spot.
HOT_NODE = 0.8
HOT_POD = 0.5


def _cpu(usage: Mapping[str, Any] | None) -> float:
    return parse_quantity((usage or {}).get("cpu")) or 0.0


def cpu_hotspots(
    nodes: Iterable[Mapping[str, Any]],
    node_usage: Iterable[Mapping[str, Any]],
    pods: Iterable[Mapping[str, Any]],
    pod_usage: Iterable[Mapping[str, Any]],
    workloads: Sequence[Mapping[str, Any]],
    targets: Sequence[str],
) -> list[str]:
    """What takes the CPU, in words: nodes near their allocatable CPU, and pods that are not the
    ``targets``' taking a large share of their node (with which targets' pods share that node)."""
    allocatable = {_name(n): _cpu((n.get("status") or {}).get("allocatable")) for n in nodes}
    out = []
    for n in node_usage:
        name, used = _name(n), _cpu(n.get("usage"))
        total = allocatable.get(name) or 0.0
        if total and used / total >= HOT_NODE:
            out.append(f"node {name} is at {used / total:.0%} CPU ({used:.2f} of {total:g} cores)")
    by_name = {_name(p): p for p in pods}
    for m in pod_usage:
        pod = by_name.get(_name(m))
        if pod is None or owner_of(pod, workloads) in targets:
            continue
        node = str((pod.get("spec") or {}).get("nodeName") or "")
        used = sum(_cpu(c.get("usage")) for c in m.get("containers") or [])
        total = allocatable.get(node) or 0.0
        if not total or used / total < HOT_POD:
            continue
        beside = sorted(
            {
                owner_of(p, workloads)
                for p in by_name.values()
                if (p.get("spec") or {}).get("nodeName") == node
            }
            & set(targets)
        )
        shared = f", beside the pods of {', '.join(beside)}" if beside else ""
        out.append(f"pod {_name(pod)} uses {used:.2f} cores, {used / total:.0%} of node {node}{shared}")
    return out
