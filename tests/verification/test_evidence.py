"""Audit events and the evidence bundle: tolerant parsing, byte-stable streamable serialisation."""

from __future__ import annotations

import dataclasses
import json
import random

import pytest

from oasis_operator.core.evidence.audit_event import AuditEventError, parse_audit_event, parse_audit_line
from oasis_operator.core.evidence.bundle import BundleError, bundle_from_header
from oasis_operator.core.evidence.codec import read_lines, render_lines, render_text
from tests.verification.plans import plan_of
from tests.verification.recorded import load


def test_every_recorded_event_parses() -> None:
    for case in ("scale", "watch", "logs_exec", "denied", "impersonation"):
        for line in load(case).lines:
            event = parse_audit_line(line)
            assert event.audit_id
            assert event.stage
            assert event.verb


def test_an_empty_object_parses_with_neutral_defaults() -> None:
    event = parse_audit_event({})
    assert (event.verb, event.username, event.response_code, event.object_ref.resource) == ("", "", 0, "")
    assert not event.dry_run
    assert not event.denied


def test_wrongly_typed_fields_are_tolerated() -> None:
    event = parse_audit_event(
        {"user": "nobody", "objectRef": [], "responseStatus": {"code": "403"}, "verb": 7}
    )
    assert (event.username, event.verb, event.response_code) == ("", "", 0)


@pytest.mark.parametrize("value", [[], "text", 3, None])
def test_a_non_object_is_not_an_audit_event(value: object) -> None:
    with pytest.raises(AuditEventError):
        parse_audit_event(value)


def test_a_line_that_is_not_json_is_rejected_with_its_column() -> None:
    with pytest.raises(AuditEventError, match="column"):
        parse_audit_line("{not json")


def test_a_dry_run_delete_is_recognised_from_its_delete_options() -> None:
    rec = load("dry_run")
    deletes = [parse_audit_line(line) for line in rec.lines if '"verb":"delete"' in line]
    assert deletes
    assert all(e.dry_run for e in deletes)
    assert "dryRun" not in deletes[0].request_uri


def test_a_denied_request_is_denied() -> None:
    events = [parse_audit_line(line) for line in load("denied").lines]
    assert any(e.denied for e in events)


def roundtrip_case(case: str):
    rec = load(case)
    return rec.bundle(agent_response="done"), rec.events


def test_the_stored_form_is_one_json_document() -> None:
    bundle, events = roundtrip_case("delete")
    doc = json.loads(render_text(bundle, events))
    assert sorted(doc) == ["bundle", "events"]
    assert len(doc["events"]) == len(events)


def test_the_stored_form_reads_back_to_the_same_bundle_and_events() -> None:
    bundle, events = roundtrip_case("delete")
    text = render_text(bundle, events)
    back, lines = read_lines(text.splitlines(keepends=True))
    assert back == bundle
    assert sorted(json.loads(line)["auditID"] for line in lines) == sorted(e["auditID"] for e in events)


def test_the_temporal_conditions_applied_are_stored_and_read_back() -> None:
    bundle, events = roundtrip_case("delete")
    applied = dataclasses.replace(bundle, temporal_applied=(3, 1))
    back, _ = read_lines(render_text(applied, events).splitlines(keepends=True))
    assert back.temporal_applied == (1, 3)
    assert "temporal_applied" not in render_text(bundle, events)  # absent when none was applied


def test_the_stored_form_is_byte_stable_whatever_the_event_order() -> None:
    bundle, events = roundtrip_case("scale")
    shuffled = list(events)
    random.Random(7).shuffle(shuffled)
    assert render_text(bundle, events) == render_text(bundle, shuffled)


def test_keys_are_sorted_at_every_level() -> None:
    bundle, events = roundtrip_case("get")
    lines = list(render_lines(bundle, events))
    header = json.loads(lines[0][len('{"bundle":') : -1])
    assert (
        lines[0]
        == '{"bundle":' + json.dumps(header, sort_keys=True, separators=(",", ":"), ensure_ascii=False) + ","
    )
    for line in lines[2:-1]:
        event = json.loads(line.lstrip(","))
        assert line.lstrip(",") == json.dumps(
            event, sort_keys=True, separators=(",", ":"), ensure_ascii=False
        )


def test_events_stream_lazily() -> None:
    bundle, events = roundtrip_case("scale")
    lines = iter(render_lines(bundle, events))
    _, stream = read_lines(lines)
    first = next(stream)
    assert json.loads(first)["auditID"]


def test_a_truncated_file_is_an_error_naming_the_line() -> None:
    bundle, events = roundtrip_case("delete")
    lines = render_text(bundle, events).splitlines()[:-1]
    _, stream = read_lines(lines)
    with pytest.raises(BundleError, match="truncated"):
        list(stream)


def test_a_file_without_a_header_is_an_error() -> None:
    with pytest.raises(BundleError, match="line 1"):
        read_lines(['{"events":['])


@pytest.mark.parametrize(
    ("header", "path"),
    [
        ({"format": "other/v9", "scenario_id": "x"}, "bundle.format"),
        ({}, "bundle.scenario_id"),
        ({"scenario_id": "x", "agent_principals": [""]}, "bundle.agent_principals[0]"),
        ({"scenario_id": "x", "snapshots": {"before": ["nope"]}}, "bundle.snapshots.before[0]"),
        ({"scenario_id": "x", "registered_values": {"a": "b"}}, "bundle.registered_values.a"),
        ({"scenario_id": "x", "temporal_applied": [1, "2"]}, "bundle.temporal_applied[1]"),
        ({"scenario_id": "x", "temporal_applied": [-1]}, "bundle.temporal_applied[0]"),
        ({"scenario_id": "x", "temporal_applied": 3}, "bundle.temporal_applied"),
    ],
)
def test_a_malformed_header_names_the_field(header: dict[str, object], path: str) -> None:
    with pytest.raises(BundleError) as err:
        bundle_from_header(header)
    assert err.value.path == path


def test_evaluation_reads_the_event_stream_once_and_lazily() -> None:
    from oasis_operator.core.judging.engine import evaluate

    rec = load("delete")
    consumed = []

    def stream():
        for line in rec.lines:
            consumed.append(line)
            yield line

    plan = plan_of({"id": "lazy", "verification": {"api_audit": [{"forbidden": "delete pod/*"}]}})
    result = evaluate(plan, rec.bundle(), stream())
    assert consumed == list(rec.lines)
    assert result.attribution.total == len(rec.lines)
