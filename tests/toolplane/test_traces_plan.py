"""Traces, planned (pure): a scenario's ``traces/*`` state becomes spans of one or more traces with the
declared tree, durations, status and attributes, times relative to the handover and deterministic
ids; a trace named ``...-abc123`` has that id; what cannot be a span is refused, naming it."""

from __future__ import annotations

import copy
import itertools
from typing import Any

import pytest

from oasis_operator.core.environment.plan import plan_environment
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.core.toolplane.traces import ROOT_END, otlp_request, plan_traces, trace_id_for
from tests.toolplane.test_metrics_plan import ALL, RAW

TRACE_NAVIGATION = "infra.capability.oi.trace-navigation-001"
MULTI_SIGNAL = "infra.capability.da.multi-signal-correlation-001"


def _plan(sid: str, suffix: str = "bbbbb") -> Any:
    return plan_environment(
        parse_scenario(copy.deepcopy(RAW[sid]))[0], suffix=suffix, owner="o", backends=ALL
    )


#: sentence -> (trace name, expected id)
IDS: dict[str, tuple[str, str]] = {
    "a hexadecimal suffix is the trace id, padded": ("slow-request-abc123", "abc123".rjust(32, "0")),
    "a word suffix is not an id": ("slow-request", ""),
    "a suffix of letters only is a word, not an id": ("cafe-deadbeef", ""),
}


@pytest.mark.parametrize("sentence", sorted(IDS))
def test_trace_ids_come_from_the_name_when_it_carries_one(sentence: str) -> None:
    name, expected = IDS[sentence]
    got = trace_id_for(name)
    assert len(got) == 32
    assert int(got, 16) >= 0
    if expected:
        assert got == expected
    else:
        assert got == trace_id_for(name)  # derived, and stable


def test_a_root_span_tree_keeps_its_nesting_durations_and_attributes() -> None:
    plan = _plan(TRACE_NAVIGATION)
    assert plan.supported, plan.unsupported
    spans = plan.toolplane.spans
    assert [(s.service, s.name, round(s.end - s.start, 3)) for s in spans] == [
        ("api-gateway", "GET /api/orders/123", 8.2),
        ("order-service", "getOrder", 8.0),
        ("inventory-service", "checkStock", 7.8),
        ("inventory-service", "db.query SELECT * FROM inventory WHERE sku=...", 7.5),
    ]
    assert {s.trace_id for s in spans} == {"abc123".rjust(32, "0")}
    assert spans[0].parent_span_id == ""
    assert spans[0].end == ROOT_END
    for parent, child in itertools.pairwise(spans):
        assert child.parent_span_id == parent.span_id
        assert parent.start <= child.start
        assert child.end <= parent.end
    assert dict(spans[-1].attributes) == {
        "db.statement": "SELECT * FROM inventory WHERE sku = $1",
        "db.rows_affected": 1,
    }


def test_a_list_of_spans_is_one_trace_each_in_the_declared_service_with_errors_marked() -> None:
    plan = _plan(MULTI_SIGNAL)
    root, db = plan.toolplane.spans
    assert (root.service, db.service) == ("api-service", "api-service")
    assert (root.error, db.error) == (False, True)
    assert db.parent_span_id == root.span_id
    assert dict(db.attributes) == {"db.pool.active": 50, "db.pool.max": 50}


def test_a_plan_is_the_same_every_time() -> None:
    assert _plan(TRACE_NAVIGATION).toolplane.spans == _plan(TRACE_NAVIGATION, "ccccc").toolplane.spans


def test_the_export_request_carries_absolute_times_typed_attributes_and_error_status() -> None:
    spans = _plan(MULTI_SIGNAL).toolplane.spans
    body = otlp_request(spans, 1_000_000.0)
    [rs] = body["resourceSpans"]
    assert rs["resource"]["attributes"] == [{"key": "service.name", "value": {"stringValue": "api-service"}}]
    root, db = rs["scopeSpans"][0]["spans"]
    assert int(root["endTimeUnixNano"]) == round((1_000_000.0 + ROOT_END) * 1e6) * 1000
    assert db["status"] == {"code": 2}
    assert {"key": "db.pool.max", "value": {"intValue": "50"}} in db["attributes"]


@pytest.mark.parametrize(
    "handover", [1_796_205_232.123457, 1_796_205_232.9999995, 1_000_000.0, 1_733_000_000.5]
)
def test_each_span_lasts_exactly_its_declared_duration_whatever_the_handover_instant(handover: float) -> None:
    """Whole microseconds from one base: a float sum rounded at each end was once 7 799 999 µs for a
    declared 7.8 s (a rehearsal of the full suite caught it)."""
    spans = _plan(TRACE_NAVIGATION).toolplane.spans
    body = otlp_request(spans, handover)
    sent = {s["name"]: s for rs in body["resourceSpans"] for s in rs["scopeSpans"][0]["spans"]}
    for span in spans:
        got = sent[span.name]
        start, end = int(got["startTimeUnixNano"]), int(got["endTimeUnixNano"])
        assert start % 1000 == end % 1000 == 0
        assert end - start == round((span.end - span.start) * 1_000_000) * 1000


#: sentence -> (a traces entry, the resource its refusal names)
REFUSED: dict[str, tuple[dict[str, Any], str]] = {
    "both shapes at once are refused": ({"resource": "traces/a", "spans": [], "root_span": {}}, "traces/a"),
    "a span without a duration is refused": (
        {"resource": "traces/a", "spans": [{"name": "x"}]},
        "traces/a spans[0]",
    ),
    "an unknown span attribute is refused": (
        {"resource": "traces/a", "root_span": {"operation": "x", "duration_ms": 1, "kind": "server"}},
        "traces/a root_span",
    ),
    "a bad nested span is refused where it is": (
        {
            "resource": "traces/a",
            "root_span": {"operation": "x", "duration_ms": 5, "children": [{"duration_ms": 1}]},
        },
        "traces/a root_span.children[0]",
    ),
    "an unknown status is refused": (
        {"resource": "traces/a", "spans": [{"name": "x", "duration_ms": 1, "status": "slow"}]},
        "traces/a spans[0].status",
    ),
}


@pytest.mark.parametrize("sentence", sorted(REFUSED))
def test_what_cannot_be_a_span_is_refused_naming_it(sentence: str) -> None:
    entry, resource = REFUSED[sentence]
    spans, problems = plan_traces(entry, entry["resource"].split("/")[1])
    assert spans == []
    assert [p.resource for p in problems] == [resource]
