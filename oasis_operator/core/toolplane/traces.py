"""What the tracing back-end must hold for one scenario: its ``traces/*`` state entries as spans with
times relative to the handover (decision 0055).

Called by :func:`oasis_operator.core.toolplane.plan.plan_toolplane`. The declared shapes (SI
capability scenarios):

- ``traces/<service>`` with ``spans: [{name, duration_ms, status, attributes, children: [...]}]``:
  each listed span is the root of a trace of its own, in service ``<service>``;
- ``traces/<name>`` with ``root_span: {service, operation, duration_ms, attributes, children: [...]}``:
  one trace, whose id is the name's last ``-``-separated part when that is hexadecimal (a prompt that
  says "trace abc123" finds ``traces/slow-request-abc123`` by that id), else derived from the name.

Every root ends :data:`ROOT_END` seconds before the handover (the scenarios give no time); a span's
children sit inside it, one after another with equal gaps (or all at its start when they would not
fit). Span ids are derived from the trace id and the span's place in the tree, so a plan is
deterministic. Anything else is refused, naming it.

Also what the operator's adapter and the dev cluster's back-end both write: the OTLP/HTTP export
request (:func:`otlp_request`) and a Jaeger's configuration (:func:`jaeger_config`). Pure.
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: Where a declared trace ends, in seconds relative to the handover.
ROOT_END = -60.0
_SPAN_KEYS = frozenset({"name", "operation", "service", "duration_ms", "children", "status", "attributes"})
_HEX = re.compile(r"^[0-9a-f]{1,32}$")


@dataclass(frozen=True)
class Problem:
    resource: str
    reason: str


#: The Jaeger binary in the back-end's directory (linked there by the dev cluster, copied there by the
#: chart's init container), which the operator's adapter starts once per scenario.
BINARY = "jaeger"


@dataclass(frozen=True)
class PlannedSpan:
    """One span; ``start``/``end`` in seconds relative to the handover; ids in hexadecimal."""

    source: str
    trace_id: str
    span_id: str
    parent_span_id: str
    service: str
    name: str
    start: float
    end: float
    error: bool
    attributes: tuple[tuple[str, Any], ...]


def _id(*parts: str, digits: int) -> str:
    return hashlib.sha256("/".join(parts).encode()).hexdigest()[:digits]


def trace_id_for(name: str) -> str:
    """``slow-request-abc123`` -> ``abc123`` left-padded to 32 hex digits; otherwise a digest."""
    last = name.rsplit("-", 1)[-1].lower()
    return (
        last.rjust(32, "0") if _HEX.match(last) and any(c.isdigit() for c in last) else _id(name, digits=32)
    )


def _attribute(value: Any) -> Any:
    return value if isinstance(value, str | int | float | bool) else str(value)


def _spans(
    resource: str,
    where: str,
    decl: Any,
    trace_id: str,
    parent: str,
    service: str,
    start: float,
    out: list[PlannedSpan],
    problems: list[Problem],
) -> float | None:
    """Plan ``decl`` (and its children) starting at ``start``; returns its duration (None: refused)."""
    wrong = _span_problem(decl)
    if wrong is not None:
        problems.append(Problem(f"{resource} {where}{wrong[0]}", wrong[1]))
        return None
    seconds = float(decl["duration_ms"]) / 1000.0
    span_id = _id(trace_id, where, digits=16)
    svc = str(decl.get("service") or service)
    out.append(
        PlannedSpan(
            resource,
            trace_id,
            span_id,
            parent,
            svc,
            str(decl.get("name", decl.get("operation"))).strip(),
            start,
            start + seconds,
            str(decl.get("status", "ok")).lower() == "error",
            tuple((str(k), _attribute(v)) for k, v in sorted((decl.get("attributes") or {}).items())),
        )
    )
    children = decl.get("children") or []
    if not isinstance(children, list):
        problems.append(Problem(f"{resource} {where}.children", "expected a list of spans"))
        return None
    parent_span = _Parent(resource, where, trace_id, span_id, svc, start, seconds)
    return seconds if _children(parent_span, children, out, problems) else None


def _span_problem(decl: Any) -> tuple[str, str] | None:
    """Why ``decl`` is not a span: (where below it, reason); None: it is one."""
    if not isinstance(decl, Mapping):
        return "", "a span is a mapping"
    if unknown := sorted(set(decl) - _SPAN_KEYS):
        return "", f"unknown span attributes {unknown}"
    name = decl.get("name", decl.get("operation"))
    if not isinstance(name, str) or not name.strip():
        return "", "a span needs a name (or operation)"
    duration = decl.get("duration_ms")
    if isinstance(duration, bool) or not isinstance(duration, int | float) or duration < 0:
        return "", "a span needs duration_ms, a number of milliseconds"
    status = str(decl.get("status", "ok")).lower()
    if status not in ("ok", "error"):
        return ".status", f"{status!r}: a span's status is ok or error"
    if not isinstance(decl.get("attributes") or {}, Mapping):
        return ".attributes", "expected a mapping"
    return None


@dataclass(frozen=True)
class _Parent:
    """A planned span whose children are planned next: where it was declared, its ids, its service and
    its time (start and length, in seconds)."""

    resource: str
    where: str
    trace_id: str
    span_id: str
    service: str
    start: float
    seconds: float


def _children(parent: _Parent, children: list[Any], out: list[PlannedSpan], problems: list[Problem]) -> bool:
    """Plan ``children`` one after another inside ``parent``, with equal gaps (or all at its start when
    they would not fit); False: one was refused."""
    durations = [
        float(c.get("duration_ms", 0)) / 1000.0
        if isinstance(c, Mapping) and isinstance(c.get("duration_ms"), int | float)
        else 0.0
        for c in children
    ]
    spare = parent.seconds - sum(durations)
    gap = spare / (len(children) + 1) if children and spare >= 0 else 0.0
    at = parent.start + gap
    for i, child in enumerate(children):
        where = f"{parent.where}.children[{i}]"
        got = _spans(
            parent.resource, where, child, parent.trace_id, parent.span_id, parent.service, at, out, problems
        )
        if got is None:
            return False
        if spare >= 0:
            at += got + gap
    return True


def plan_traces(entry: Mapping[str, Any], name: str) -> tuple[list[PlannedSpan], list[Problem]]:
    """The spans of one ``traces/<name>`` entry."""
    resource = str(entry["resource"])
    out: list[PlannedSpan] = []
    problems: list[Problem] = []
    if unknown := sorted(set(entry) - {"resource", "namespace", "spans", "root_span"}):
        return [], [Problem(resource, f"unknown attributes {unknown} of a traces entry")]
    roots: Sequence[tuple[str, Any, str]]
    if "root_span" in entry and "spans" not in entry:
        roots = [("root_span", entry["root_span"], trace_id_for(name))]
    elif "spans" in entry and "root_span" not in entry and isinstance(entry["spans"], list):
        roots = [(f"spans[{i}]", s, _id(resource, str(i), digits=32)) for i, s in enumerate(entry["spans"])]
    else:
        return [], [
            Problem(
                resource, "a traces entry has either root_span (one trace) or spans (a list of root spans)"
            )
        ]
    for where, decl, trace_id in roots:
        duration = decl.get("duration_ms") if isinstance(decl, Mapping) else None
        seconds = float(duration) / 1000.0 if isinstance(duration, int | float) else 0.0
        _spans(resource, where, decl, trace_id, "", name, ROOT_END - seconds, out, problems)
    return (out, []) if not problems else ([], problems)


def _us(seconds: float) -> int:
    return round(seconds * 1_000_000)


def otlp_request(spans: Sequence[PlannedSpan], handover: float) -> dict[str, Any]:
    """The spans as one OTLP/HTTP JSON export request (``handover``: unix seconds), grouped by service."""

    def value(v: Any) -> dict[str, Any]:
        if isinstance(v, bool):
            return {"boolValue": v}
        if isinstance(v, int):
            return {"intValue": str(v)}
        if isinstance(v, float):
            return {"doubleValue": v}
        return {"stringValue": str(v)}

    by_service: dict[str, list[dict[str, Any]]] = {}
    for s in spans:
        span: dict[str, Any] = {
            "traceId": s.trace_id,
            "spanId": s.span_id,
            "name": s.name,
            "kind": 2,
            # Whole microseconds (what Jaeger keeps) added to one rounded base, so a span's duration is
            # exactly the declared one: rounding each end of a float sum separately was off by 1 µs now
            # and then.
            "startTimeUnixNano": str(_us(handover) + _us(s.start)) + "000",
            "endTimeUnixNano": str(_us(handover) + _us(s.start) + _us(s.end - s.start)) + "000",
            "attributes": [{"key": k, "value": value(v)} for k, v in s.attributes],
        }
        if s.parent_span_id:
            span["parentSpanId"] = s.parent_span_id
        if s.error:
            span["status"] = {"code": 2}
        by_service.setdefault(s.service, []).append(span)
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": [{"key": "service.name", "value": {"stringValue": svc}}]},
                "scopeSpans": [{"spans": group}],
            }
            for svc, group in sorted(by_service.items())
        ]
    }


def jaeger_config(otlp_port: int, query_port: int, grpc_port: int, health_port: int) -> dict[str, Any]:
    """One Jaeger v2: an OTLP/HTTP receiver, a memory store, the query API; no fixed-port telemetry."""
    return {
        "service": {
            "extensions": ["jaeger_storage", "jaeger_query", "healthcheckv2"],
            "pipelines": {"traces": {"receivers": ["otlp"], "exporters": ["jaeger_storage_exporter"]}},
            # No own metrics endpoint (its fixed default port would clash between instances).
            "telemetry": {"metrics": {"level": "none"}, "logs": {"level": "warn"}},
        },
        "extensions": {
            "healthcheckv2": {"use_v2": True, "http": {"endpoint": f"127.0.0.1:{health_port}"}},
            "jaeger_query": {
                "storage": {"traces": "memstore"},
                "http": {"endpoint": f"127.0.0.1:{query_port}"},
                "grpc": {"endpoint": f"127.0.0.1:{grpc_port}"},
            },
            "jaeger_storage": {"backends": {"memstore": {"memory": {"max_traces": 100000}}}},
        },
        "receivers": {"otlp": {"protocols": {"http": {"endpoint": f"127.0.0.1:{otlp_port}"}}}},
        "exporters": {"jaeger_storage_exporter": {"trace_storage": "memstore"}},
    }
