"""A workload that leaks memory until it is OOM killed: its containers' lives, and the series the metrics
back-end serves for them (decision 0067).

Planned from a ``metrics/<name>`` entry declaring ``memory_usage_trend: monotonically_increasing``
(and, optionally, ``last_oom_kill: 2_minutes_ago``) beside a workload ``<name>`` declared OOMKilled:
:func:`plan_leak` turns them into an :class:`OomLeak`. The provisioner writes the OOMKilled pods'
last termination from it (:func:`lives`: the last container ended at the declared time, after a life of
:data:`LIFE_SECONDS`), and the metrics adapter, once it has read a pod's recorded termination, asks
:func:`leak_series` for that pod's series, anchored at that recorded time, so the two never disagree.

Each container life starts at :data:`BASELINE_SHARE` of the memory limit and rises linearly, sampled
every :data:`SCRAPE_INTERVAL`, to the limit at its OOM kill; between two lives (the kubelet's
crash-loop back-off: 10 s doubled per restart, at most 5 min) the container does not exist and its
working-set series has no sample, and the next life starts again from the baseline (a sawtooth, as
cAdvisor reports a leaking container). So the series is monotonically increasing over every life,
the last one included. Pure.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from oasis_operator.core.ago import seconds_ago
from oasis_operator.core.toolplane.metrics import (
    LEAK_KEYS,
    SCRAPE_INTERVAL,
    SERVICE_LABEL,
    TENANT_LABEL,
    MetricSeries,
    Problem,
    parse_value,
)

#: The memory limit an OOMKilled workload gets when it declares none: a container is OOM killed at its
#: limit, so a workload declared OOMKilled has one. 512Mi is the figure most Helm charts' commented
#: resource examples and many LimitRange defaults use for a small service.
DEFAULT_OOM_MEMORY_LIMIT = "512Mi"
#: How long one container of a leaking workload lives, from its start to the OOM kill at its limit.
LIFE_SECONDS = 1200.0
#: Where each life's working set starts, as a share of the limit (64Mi of 512Mi).
BASELINE_SHARE = 0.125
#: When the workload declares no time for its last OOM kill: the fixed age the provisioner has always
#: written a last termination at (seconds before it writes the status).
DEFAULT_LAST_OOM = -90.0
#: The declared words of a leak's trend.
RISING = ("monotonically_increasing", "increasing", "rising", "growing", "steadily_increasing")

WORKING_SET = "container_memory_working_set_bytes"
LIMIT_SERIES = "container_spec_memory_limit_bytes"
RESTARTS = "kube_pod_container_status_restarts_total"
LAST_REASON = "kube_pod_container_status_last_terminated_reason"
LAST_TIME = "kube_pod_container_status_last_terminated_timestamp"


@dataclass(frozen=True)
class OomLeak:
    """A workload whose containers leak memory until they are OOM killed."""

    source: str  # the metrics entry
    namespace: str
    kind: str  # Deployment or Pod
    workload: str
    selector: tuple[tuple[str, str], ...]  # the labels its pods carry
    limit_bytes: float
    restarts: int
    #: The last OOM kill, seconds relative to when the provisioner writes the pods' status.
    last_oom: float
    life: float = LIFE_SECONDS


def backoff(restart: int) -> float:
    """The kubelet's wait before restart number ``restart`` (1-based) of a crash-looping container."""
    return float(min(10 * 2 ** (restart - 1), 300))


def lives(restarts: int, last_end: float, life: float = LIFE_SECONDS) -> list[tuple[float, float]]:
    """(start, end) of every container life, oldest first: ``restarts + 1`` of them, the last ending at
    ``last_end``, each ``life`` long, separated by the crash-loop back-off."""
    out = [(last_end - life, last_end)]
    for restart in range(restarts, 0, -1):
        end = out[0][0] - backoff(restart)
        out.insert(0, (end - life, end))
    return out


def parse_ago(value: Any) -> float | None:
    """``2_minutes_ago``, ``90s ago``, ``-2m`` -> seconds relative to now (negative); None: not a time."""
    seconds = seconds_ago(value)
    return None if seconds is None else -seconds


def _workload(objects: Sequence[Mapping[str, Any]], namespace: str, name: str) -> Mapping[str, Any] | None:
    for o in objects:
        meta = o.get("metadata") or {}
        if (
            o.get("kind") in ("Deployment", "Pod")
            and meta.get("name") == name
            and meta.get("namespace") == namespace
        ):
            return o
    return None


def _pod_spec(obj: Mapping[str, Any]) -> Mapping[str, Any]:
    if obj.get("kind") == "Pod":
        return obj.get("spec") or {}
    return ((obj.get("spec") or {}).get("template") or {}).get("spec") or {}


def plan_leak(
    entry: Mapping[str, Any],
    namespace: str,
    declared: Mapping[str, Mapping[str, Any]],
    objects: Sequence[Mapping[str, Any]],
) -> OomLeak | Problem | None:
    """The leak a ``metrics/<name>`` entry declares (None: it declares none). ``declared``: the declared
    entries of the deployments and pods of the entry's namespace, by name (their ``status`` and
    ``restarts``); ``objects``: the planned Kubernetes objects (the workload's memory limit is read there)."""
    resource = str(entry["resource"])
    if not any(k in entry for k in LEAK_KEYS):
        return None
    name = resource.partition("/")[2].strip()
    trend = str(entry.get("memory_usage_trend", "monotonically_increasing")).strip().lower().replace(" ", "_")
    if trend not in RISING:
        return Problem(f"{resource} memory_usage_trend", f"{trend!r}: only a rising memory trend is realised")
    last = _last_oom(entry, resource)
    if isinstance(last, Problem):
        return last
    obj = _workload(objects, namespace, name)
    workload = declared.get(name) or {}
    if obj is None or str(workload.get("status", "")).strip().lower() != "oomkilled":
        return Problem(
            resource,
            f"a memory trend ending in OOM kills needs a deployment or pod {name} declared OOMKilled "
            "in the same namespace, whose containers the series describe",
        )
    limit = _memory_limit(obj)
    if limit is None:
        return Problem(resource, f"the containers of {name} carry no memory limit the leak could reach")
    restarts = int(workload.get("restarts", 5) or 5)
    return OomLeak(resource, namespace, str(obj["kind"]), name, _selector(obj), limit, restarts, last)


def _last_oom(entry: Mapping[str, Any], resource: str) -> float | Problem:
    """When the declared last OOM kill was (seconds relative to the handover, negative)."""
    if "last_oom_kill" not in entry:
        return DEFAULT_LAST_OOM
    parsed = parse_ago(entry["last_oom_kill"])
    if parsed is None or parsed >= 0:
        return Problem(
            f"{resource} last_oom_kill",
            f"{entry['last_oom_kill']!r} is not a time before now (say 2_minutes_ago, 90s ago or -2m)",
        )
    return parsed


def _memory_limit(obj: Mapping[str, Any]) -> float | None:
    """The memory limit of the workload's first container, in bytes (None: it has none, or not bytes)."""
    containers = list(_pod_spec(obj).get("containers") or [])
    if not containers:
        return None
    raw = ((containers[0].get("resources") or {}).get("limits") or {}).get("memory")
    parsed = parse_value(raw) if raw is not None else None
    if parsed is None or parsed[1] != "_bytes" or parsed[0] <= 0:
        return None
    return parsed[0]


def _selector(obj: Mapping[str, Any]) -> tuple[tuple[str, str], ...]:
    """The labels that select the workload's pods: a Pod's own, a Deployment's selector."""
    if obj.get("kind") == "Pod":
        labels = (obj.get("metadata") or {}).get("labels") or {}
    else:
        labels = ((obj.get("spec") or {}).get("selector") or {}).get("matchLabels", {})
    return tuple(sorted(labels.items()))


def _grid(start: float, end: float) -> list[float]:
    n = max(int((end - start) // SCRAPE_INTERVAL), 0)
    out = [start + i * SCRAPE_INTERVAL for i in range(n + 1)]
    return out if out[-1] == end else [*out, end]


def leak_series(leak: OomLeak, pod: str, container: str, last_end: float, until: float) -> list[MetricSeries]:
    """The series of one container of one pod whose recorded last termination is at ``last_end``
    (seconds relative to the import's clock), sampled up to ``until`` (the import's 0): its working set
    (a sawtooth rising to the limit in every life), its limit (while it runs), and what
    kube-state-metrics reports of it: restarts, and the last termination's reason and time (from the
    first OOM kill on)."""
    labels: tuple[tuple[str, str], ...] = (
        (TENANT_LABEL, leak.namespace),
        (SERVICE_LABEL, leak.workload),
        ("pod", pod),
        ("container", container),
    )
    runs = lives(leak.restarts, last_end, leak.life)
    base = leak.limit_bytes * BASELINE_SHARE
    working: list[tuple[float, float]] = []
    limit: list[tuple[float, float]] = []
    for start, end in runs:
        for t in _grid(start, end):
            working.append((t, base + (leak.limit_bytes - base) * (t - start) / (end - start)))
            limit.append((t, leak.limit_bytes))
    restarts: list[tuple[float, float]] = []
    reason: list[tuple[float, float]] = []
    when: list[tuple[float, float]] = []
    for t in _grid(runs[0][0], until):
        restarts.append((t, float(sum(1 for s, _ in runs[1:] if s <= t))))
        ended = [e for _, e in runs if e <= t]
        if ended:
            reason.append((t, 1.0))
            when.append((t, float(ended[-1])))  # relative: the adapter adds its clock (see absolute_times)
    source = leak.source
    return [
        MetricSeries(source, leak.namespace, (("__name__", WORKING_SET), *labels), tuple(working)),
        MetricSeries(source, leak.namespace, (("__name__", LIMIT_SERIES), *labels), tuple(limit)),
        MetricSeries(source, leak.namespace, (("__name__", RESTARTS), *labels), tuple(restarts)),
        MetricSeries(
            source,
            leak.namespace,
            (("__name__", LAST_REASON), *labels, ("reason", "OOMKilled")),
            tuple(reason),
        ),
        MetricSeries(source, leak.namespace, (("__name__", LAST_TIME), *labels), tuple(when)),
    ]


def absolute_times(series: MetricSeries, start: float) -> MetricSeries:
    """A last-termination-time series whose values are offsets, as Unix seconds at ``start`` (its
    samples stay offsets: the import adds ``start`` to them)."""
    if series.name != LAST_TIME:
        return series
    return MetricSeries(
        series.source, series.namespace, series.labels, tuple((t, start + v) for t, v in series.samples)
    )


def anchored_series(leak: OomLeak, pods: Sequence[Mapping[str, Any]], start: float) -> list[MetricSeries]:
    """The series of every OOM-killed container of ``pods`` (the leaking workload's, as the API lists
    them), anchored at the last termination each records (what ``kubectl get pod -o yaml`` shows), with
    absolute times from ``start``; empty when no pod records an OOM kill with its time."""
    out: list[MetricSeries] = []
    for pod in pods:
        for cs in (pod.get("status") or {}).get("containerStatuses") or []:
            last = (cs.get("lastState") or {}).get("terminated") or {}
            if last.get("reason") != "OOMKilled" or not last.get("finishedAt"):
                continue
            ended = dt.datetime.fromisoformat(str(last["finishedAt"]).replace("Z", "+00:00")).timestamp()
            found = leak_series(leak, pod["metadata"]["name"], str(cs["name"]), ended - start, 0.0)
            out += [absolute_times(s, start) for s in found]
    return out
