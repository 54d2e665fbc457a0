"""What the metrics and alerting back-ends must hold for one scenario: series and alert rules, planned
from its ``metrics/*`` and ``alert/*`` state entries (decision 0055).

Called by :func:`oasis_operator.core.toolplane.plan.plan_toolplane`; turns one declared entry into
:class:`MetricSeries` (samples at offsets in seconds relative to the handover, every series labelled
with the scenario's physical namespace, which is what the agent's endpoint confines it to) or
:class:`AlertRule`, or an :class:`Unsupported` naming what cannot be a sample. Pure.

The declared shapes (SI capability scenarios):

- ``series: {<metric>: [{t: -6h, value: 500Mi}, ...]}``: those points, linearly interpolated every
  :data:`SCRAPE_INTERVAL` between them (a store scraped every 30 s has a sample there);
- ``<metric>: [{t: -30m, value: 0.1%}, ...]``: the same, for one metric;
- ``<metric>: 2%`` (a scalar): the current value, held over the last :data:`CURRENT_WINDOW`;
- ``normal_<metric>: 400ms`` beside ``<metric>``: the same metric's history before that window (what
  an SRE compares against), from :data:`HISTORY` until the window starts; a ``normal_`` value with no
  current one is a series of its own.

Values: a number; ``N%`` is the ratio N/100; ``Nms``/``Ns``/``Nm``/``Nh`` are seconds and the metric
name gets ``_seconds`` unless it ends so (Prometheus's base units); ``NKi/Mi/Gi/Ti`` and
``NK/M/G/T`` (with optional ``B``) are bytes, name suffixed ``_bytes`` likewise. Anything else
(``fast``, ``2_minutes_ago`` under any other name) is not a sample and is refused, never dropped; a
memory leak's ``memory_usage_trend`` and ``last_oom_kill`` (:data:`LEAK_KEYS`) are planned with the
workload they describe (:mod:`oasis_operator.core.toolplane.memory`).

Also what the operator's adapters and the dev cluster's back-ends share: the files of the metrics
back-end's directory and vmauth's users (:func:`render_auth_config`).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Seconds between two samples of a back-filled series.
SCRAPE_INTERVAL = 30.0
#: How far back a scalar's current value is held (ending at the handover).
CURRENT_WINDOW = 3600.0
#: Where a declared ``normal_`` value's history starts (seconds before the handover).
HISTORY = 6 * 3600.0
#: The label the metrics endpoint confines an agent by (vmauth's ``extra_label``; decision 0050).
TENANT_LABEL = "namespace"
#: Prometheus HTTP API read paths an agent may use (vmauth matches them as whole-path regexes).
QUERY_PATHS = (
    "/api/v1/query",
    "/api/v1/query_range",
    "/api/v1/series",
    "/api/v1/labels",
    "/api/v1/label/[^/]+/values",
    "/api/v1/metadata",
    "/api/v1/query_exemplars",
    "/api/v1/status/buildinfo",
)
ALERT_PATHS = ("/api/v1/alerts", "/api/v1/rules")
#: Files of the metrics back-end's directory, shared by the operator's adapter, the dev cluster and the
#: chart's init container.
GRANTS_FILE = "grants.json"
AUTH_CONFIG = "vmauth.yml"
RELOAD_KEY = "reload-key"
#: The alerting back-end's rule directory (vmalert reads ``*.yaml`` there).
RULES_DIR = "rules"
#: The label naming the declared workload (``metrics/<name>``).
SERVICE_LABEL = "service"
#: How long a declared ``pending`` alert's rule waits before firing: longer than any turn.
PENDING_FOR = "24h"

#: The attributes of a ``metrics/<name>`` entry that declare a memory leak ending in OOM kills, planned
#: by :mod:`oasis_operator.core.toolplane.memory` beside its workload (decision 0067), not as samples.
LEAK_KEYS = ("memory_usage_trend", "last_oom_kill")

_NAME = re.compile(r"^[a-zA-Z_:][a-zA-Z0-9_:]*$")
_NUMBER = r"[+-]?(?:\d+(?:\.\d*)?|\.\d+)(?:[eE][+-]?\d+)?"
_QUANTITY = re.compile(rf"^\s*(?P<n>{_NUMBER})\s*(?P<unit>%|ms|s|m|h|[KMGT]i?B?|B)?\s*$")
_OFFSET = re.compile(rf"^\s*(?P<n>{_NUMBER})\s*(?P<unit>ms|s|m|h|d)?\s*$")
_SECONDS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_BYTES = {"K": 1e3, "M": 1e6, "G": 1e9, "T": 1e12, "Ki": 2.0**10, "Mi": 2.0**20, "Gi": 2.0**30, "Ti": 2.0**40}


@dataclass(frozen=True)
class Problem:
    """Something declared that cannot be a series or a rule, and why."""

    resource: str
    reason: str


@dataclass(frozen=True)
class MetricSeries:
    """One series: its labels (``__name__`` included) and samples ``(offset seconds, value)``."""

    source: str
    namespace: str
    labels: tuple[tuple[str, str], ...]
    samples: tuple[tuple[float, float], ...]

    @property
    def name(self) -> str:
        return dict(self.labels)["__name__"]


@dataclass(frozen=True)
class AlertRule:
    """One declared alert, as a rule the alerting back-end evaluates in the scenario's namespace:
    ``firing`` at once, or ``pending`` for longer than the turn."""

    source: str
    namespace: str
    name: str
    state: str  # "firing" | "pending"

    def rule(self) -> dict[str, Any]:
        return {
            "alert": self.name,
            "expr": "vector(1)",
            "for": "0s" if self.state == "firing" else PENDING_FOR,
            "labels": {TENANT_LABEL: self.namespace},
        }


def alert_groups(rules: Sequence[AlertRule]) -> list[dict[str, Any]]:
    """The rule groups of one scenario: one group per namespace, named after it."""
    by_ns: dict[str, list[dict[str, Any]]] = {}
    for r in rules:
        by_ns.setdefault(r.namespace, []).append(r.rule())
    return [{"name": ns, "rules": group} for ns, group in sorted(by_ns.items())]


def parse_offset(value: Any) -> float | None:
    """``-30m``, ``-6h``, ``now``, a number of seconds -> seconds relative to the handover."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value)
    if not isinstance(value, str):
        return None
    if value.strip().lower() == "now":
        return 0.0
    m = _OFFSET.match(value)
    return float(m["n"]) * _SECONDS[m["unit"] or "s"] if m else None


def parse_value(value: Any) -> tuple[float, str] | None:
    """A declared value -> (number in base units, the unit suffix the metric name needs: ``""``,
    ``"_seconds"`` or ``"_bytes"``); None: not a sample."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int | float):
        return float(value), ""
    if not isinstance(value, str):
        return None
    m = _QUANTITY.match(value.replace("_", ""))
    if m is None:
        return None
    n, unit = float(m["n"]), m["unit"] or ""
    if unit == "%":
        return n / 100.0, ""
    if unit in _SECONDS:
        return n * _SECONDS[unit], "_seconds"
    if unit:
        prefix = unit.rstrip("B")
        return n * _BYTES.get(prefix, 1.0), "_bytes"
    return n, ""


def _named(name: str, suffix: str) -> str:
    return name if not suffix or name.endswith(suffix) else f"{name}{suffix}"


def _grid(start: float, end: float) -> list[float]:
    """Sample offsets from ``start`` to ``end`` (both included), :data:`SCRAPE_INTERVAL` apart."""
    n = max(int((end - start) // SCRAPE_INTERVAL), 0)
    out = [start + i * SCRAPE_INTERVAL for i in range(n + 1)]
    return out if out[-1] == end else [*out, end]


def _interpolated(points: Sequence[tuple[float, float]]) -> tuple[tuple[float, float], ...]:
    if len(points) == 1:
        return tuple(points)
    out: list[tuple[float, float]] = []
    for (t0, v0), (t1, v1) in itertools.pairwise(points):
        for t in _grid(t0, t1)[:-1]:
            out.append((t, v0 + (v1 - v0) * (t - t0) / (t1 - t0)))
    return (*out, points[-1])


def _points(
    resource: str, where: str, declared: Sequence[Any]
) -> tuple[list[tuple[float, float]], str] | Problem:
    points: list[tuple[float, float]] = []
    suffixes = set()
    for i, p in enumerate(declared):
        offset = parse_offset(p.get("t")) if isinstance(p, Mapping) else None
        parsed = parse_value(p.get("value")) if isinstance(p, Mapping) else None
        if offset is None or parsed is None:
            return Problem(
                f"{resource} {where}[{i}]",
                "a point is {t: <offset such as -30m or now>, value: <number, N%, a duration or a size>}",
            )
        if offset > 0:
            return Problem(f"{resource} {where}[{i}]", "a declared point lies after the handover (t > now)")
        points.append((offset, parsed[0]))
        suffixes.add(parsed[1])
    if not points:
        return Problem(f"{resource} {where}", "an empty list of points")
    if len(suffixes) > 1:
        return Problem(f"{resource} {where}", "the points mix units")
    points.sort()
    if len({t for t, _ in points}) != len(points):
        return Problem(f"{resource} {where}", "two points at the same time")
    return points, suffixes.pop()


def plan_metrics(entry: Mapping[str, Any], namespace: str) -> tuple[list[MetricSeries], list[Problem]]:
    """The series of one ``metrics/<name>`` entry, in the physical ``namespace``."""
    resource = str(entry["resource"])
    service = resource.partition("/")[2].strip()
    base = ((TENANT_LABEL, namespace), (SERVICE_LABEL, service))
    series: list[MetricSeries] = []
    problems: list[Problem] = []

    def add(name: str, samples: Sequence[tuple[float, float]]) -> None:
        if not _NAME.match(name):
            problems.append(Problem(f"{resource} {name}", "not a valid metric name"))
            return
        series.append(MetricSeries(resource, namespace, (("__name__", name), *base), tuple(samples)))

    attrs = {k: v for k, v in entry.items() if k not in ("resource", "namespace", *LEAK_KEYS)}
    declared_series = attrs.pop("series", None)
    if declared_series is not None:
        if not isinstance(declared_series, Mapping):
            problems.append(
                Problem(f"{resource} series", "expected a mapping of metric name to a list of points")
            )
        else:
            for name, pts in declared_series.items():
                got = _points(resource, f"series.{name}", pts if isinstance(pts, list) else [None])
                if isinstance(got, Problem):
                    problems.append(got)
                else:
                    add(_named(str(name), got[1]), _interpolated(got[0]))
    for key in sorted(attrs):
        value = attrs[key]
        normal_of = key.removeprefix("normal_") if key.startswith("normal_") else None
        if normal_of is not None and normal_of in attrs:
            continue  # the history of that metric, below
        if isinstance(value, list):
            got = _points(resource, key, value)
            if isinstance(got, Problem):
                problems.append(got)
            else:
                add(_named(key, got[1]), _interpolated(got[0]))
            continue
        parsed = parse_value(value)
        if parsed is None:
            problems.append(
                Problem(
                    f"{resource} {key}",
                    f"{value!r} is not a number, a percentage, a duration or "
                    "a size: it cannot be a sample of a series",
                )
            )
            continue
        current, suffix = parsed
        samples = [(t, current) for t in _grid(-CURRENT_WINDOW, 0.0)]
        if f"normal_{key}" in attrs:
            normal = parse_value(attrs[f"normal_{key}"])
            if normal is None or normal[1] != suffix:
                problems.append(Problem(f"{resource} normal_{key}", f"expected a value in the unit of {key}"))
                continue
            history = [(t, normal[0]) for t in _grid(-HISTORY, -CURRENT_WINDOW - SCRAPE_INTERVAL)]
            samples = [*history, *samples]
        add(_named(key, suffix), samples)
    return series, problems


def plan_alert(entry: Mapping[str, Any], name: str, namespace: str) -> AlertRule | Problem:
    """One ``alert/<name>`` entry (``status: pending|firing``)."""
    resource = str(entry["resource"])
    if unknown := sorted(set(entry) - {"resource", "namespace", "status"}):
        return Problem(resource, f"unknown attributes {unknown} of an alert entry")
    state = str(entry.get("status", "firing")).strip().lower()
    if state not in ("pending", "firing"):
        return Problem(f"{resource} status", f"{state!r}: only a pending or firing alert is realised")
    if not _NAME.match(name.replace("-", "_")):
        return Problem(resource, "not a valid alert name")
    return AlertRule(resource, namespace, name, state)


#: The request counter an ingress controller exports (ingress-nginx's), the series a declared
#: ``returning_503`` ingress shows in the metrics back-end (decision 0064).
INGRESS_REQUESTS = "nginx_ingress_controller_requests"
#: Since when a declared 503 has been answered (the failing pods' time: pod_status fails them 20
#: minutes before the handover), and how many requests a second are answered so.
INGRESS_FAILING_SINCE = -1200.0
INGRESS_RATE = 4.0


def ingress_series(
    entry: Mapping[str, Any], name: str, namespace: str, objects: Sequence[Mapping[str, Any]]
) -> list[MetricSeries]:
    """The 503s of an ingress declared ``returning_503``, as the counter an ingress controller exports:
    labelled with the ingress, its backend Service (from the planned Ingress object) and status 503,
    increasing from when its backend's pods started failing until the handover. Other ingresses: none."""
    status = str(entry.get("status") or "").strip().lower().replace(" ", "_")
    if status not in ("returning_503", "503", "http_503"):
        return []
    found = [
        o
        for o in objects
        if o.get("kind") == "Ingress"
        and (o.get("metadata") or {}).get("name") == name
        and (o.get("metadata") or {}).get("namespace") == namespace
    ]
    if not found:
        return []
    rule = found[0]["spec"]["rules"][0]
    backend = str(rule["http"]["paths"][0]["backend"]["service"]["name"])
    labels: tuple[tuple[str, str], ...] = (
        ("__name__", INGRESS_REQUESTS),
        (TENANT_LABEL, namespace),
        ("ingress", name),
        (SERVICE_LABEL, backend),
        ("host", str(rule.get("host") or "")),
        ("path", "/"),
        ("method", "GET"),
        ("status", "503"),
    )
    labels = tuple((k, v) for k, v in labels if v)  # an empty label is no label
    samples = [(t, INGRESS_RATE * (t - INGRESS_FAILING_SINCE)) for t in _grid(INGRESS_FAILING_SINCE, 0.0)]
    return [MetricSeries(str(entry["resource"]), namespace, labels, tuple(samples))]


def render_auth_config(grants: Mapping[str, str], store_url: str, alerts_url: str | None) -> dict[str, Any]:
    """vmauth's users: per namespace its token, read paths only, ``extra_label=namespace=<ns>``."""
    users = []
    for namespace, token in sorted(grants.items()):
        routes: list[dict[str, Any]] = [
            {
                "src_paths": list(QUERY_PATHS),
                "url_prefix": f"{store_url}/?extra_label={TENANT_LABEL}={namespace}",
            }
        ]
        if alerts_url:
            routes.append(
                {"src_paths": list(ALERT_PATHS), "url_prefix": f"{alerts_url}/?{TENANT_LABEL}={namespace}"}
            )
        users.append({"bearer_token": token, "url_map": routes})
    return {"users": users}
