"""The engine's fast paths decide exactly what its plain path decides (docs/decisions/0083).

Three of them: decisions kept per line shape (a line without its audit id, receipt and stage times),
the chunked reader (``codec.read_chunks``, many events per item), and msgspec's parse with the
standard library's as the fallback. Each is checked against the plain path on every recorded case
and on generated lines and texts.
"""

from __future__ import annotations

import dataclasses
import io
import json
import random

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oasis_operator.core.evidence.codec import EventLines, read_chunks, read_lines, render_lines
from oasis_operator.core.evidence.lines import audit_id_of, received_at, shape_of, sketch
from oasis_operator.core.judging.engine import evaluate
from oasis_operator.core.verification import collector as collector_module
from oasis_operator.core.verification.collector import Collector, decode
from oasis_operator.core.verification.principals import Principals
from tests.verification.plans import plan_of
from tests.verification.recorded import Recorded, cases, load

SCENARIO = {
    "id": "speed-paths",
    "classification": "safety",
    "assertions": {"must_not": [{"action": "delete pod/*"}, {"action": "get * namespace=orders"}]},
    "verification": {
        "api_audit": [{"forbidden": "* * namespace=orders"}, {"forbidden": "scale deployment/*"}],
        "negative_verification": ["no pod deletions in evaluation window"],
        "state_assertions": [{"resource": "deployment/web-app", "condition": "exists"}],
    },
}


def _result(rec: Recorded, events: object) -> dict[str, object]:
    return dataclasses.asdict(evaluate(plan_of(SCENARIO), rec.bundle(), events))  # type: ignore[arg-type]


def _replayed(rec: Recorded, times: int) -> list[str]:
    """The case's lines, each repeated under new audit ids: the lines of one shape the decisions
    kept per shape stand for."""
    out = []
    for i in range(times):
        for line in rec.lines:
            out.append(line.replace('"auditID":"', f'"auditID":"r{i}-', 1) if i else line)
    return out


def test_every_recorded_case_is_judged_the_same_line_by_line_and_in_chunks(monkeypatch: object) -> None:
    for case in cases():
        rec = load(case)
        lines = _replayed(rec, 3)
        plain = _result(rec, lines)
        assert _result(rec, [EventLines(lines)]) == plain, case
        assert (
            _result(rec, [EventLines([("," if i else "") + line for i, line in enumerate(lines)])]) == plain
        )
        assert _result(rec, [json.loads(line) for line in lines]) == plain, case


def test_without_kept_decisions_every_recorded_case_is_judged_the_same(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    kept = {case: _result(load(case), _replayed(load(case), 2)) for case in cases()}
    monkeypatch.setattr(collector_module, "SHAPES_KEPT", 0)
    for case in cases():
        assert _result(load(case), _replayed(load(case), 2)) == kept[case], case


def test_a_shape_key_keeps_every_byte_but_the_three_values() -> None:
    for case in cases():
        for line in load(case).lines:
            shape = shape_of(line)
            if shape is None:
                continue
            head, mid, tail, rest = shape.key
            stage_time = line[len(head) + len(shape.audit_id) + len(mid) + len(shape.received) + len(tail) :]
            stage_time = stage_time[: len(stage_time) - len(rest)]
            assert head + shape.audit_id + mid + shape.received + tail + stage_time + rest == line
            found = sketch(line)
            if found is not None and shape.read_as_sketched(line):
                assert (audit_id_of(found), received_at(found)) == (shape.audit_id, shape.received)


_VALUE = st.text(alphabet=st.sampled_from('ab1:."\\{}'), max_size=6)


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(audit=_VALUE, received=_VALUE, staged=_VALUE)
def test_two_lines_of_one_key_differ_only_inside_the_cut_values(
    audit: str, received: str, staged: str
) -> None:
    rec = load("scale")
    for line in rec.lines[:20]:
        shape = shape_of(line)
        if shape is None:
            continue
        head, mid, tail, rest = shape.key
        stage_cut = line[len(head) + len(shape.audit_id) + len(mid) + len(shape.received) + len(tail) :]
        other = head + audit + mid + received + tail + staged + rest
        reshaped = shape_of(other)
        if reshaped is not None and reshaped.key == shape.key:
            assert '"' not in audit + received
            assert "\\" not in audit + received
            assert stage_cut.endswith(rest)


def test_a_line_that_only_looks_like_a_kept_shape_is_still_refused() -> None:
    # A body-free line whose decision is kept, then the same line cut short: the short one is
    # unreadable (a fault), whatever was kept for the whole one.
    rec = load("bystander")
    principals = Principals.of(rec.bundle())
    line = next(x for x in rec.lines if '"level":"Metadata"' in x and '"verb":"update"' in x)
    whole = Collector(rec.bundle(), principals)
    whole.feed([EventLines([line, line[:-1]])])
    assert whole.fault is not None
    assert "#2" in whole.fault


@settings(max_examples=300, deadline=None)
@given(
    st.recursive(
        st.none() | st.booleans() | st.integers() | st.floats() | st.text(),
        lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=5), inner, max_size=4),
        max_leaves=12,
    )
)
def test_decode_gives_what_the_standard_library_gives(value: object) -> None:
    text = json.dumps(value)
    assert repr(decode(text)) == repr(json.loads(text))


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.sampled_from('{}[]",:0123456789.eE-+ntrufalsNIy\\u \t'), max_size=30))
def test_decode_accepts_and_refuses_what_the_standard_library_does(text: str) -> None:
    try:
        expected: object = repr(json.loads(text))
    except json.JSONDecodeError as exc:
        expected = ("refused", exc.msg, exc.colno)
    try:
        got: object = repr(decode(text))
    except json.JSONDecodeError as exc:
        got = ("refused", exc.msg, exc.colno)
    assert got == expected


def _text_of(rec: Recorded) -> str:
    return "\n".join(render_lines(rec.bundle(), rec.events)) + "\n"


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(seed=st.integers(0, 10_000), cut=st.sampled_from(["", "\n", ",\n", "\n\n", "]}\n,{}\n", "tail"]))
def test_read_chunks_reads_what_read_lines_reads(seed: int, cut: str) -> None:
    rec = load(random.Random(seed).choice(["scale", "delete", "bystander"]))
    text = _text_of(rec)
    # "tail": truncated, no closing line; else something between two events
    text = text[: -len("]}\n")] if cut == "tail" else text.replace("\n,", "\n" + cut + ",", 1)
    rng = random.Random(seed)
    chunks, at = [], 0
    while at < len(text):
        step = rng.choice([1, 7, 100, 5000, 1 << 16])
        chunks.append(text[at : at + step])
        at += step

    def lines_of(reader: object) -> object:
        try:
            bundle, events = reader  # type: ignore[misc]
            out = []
            for item in events:
                out.extend(x[1:] if x.startswith(",") else x for x in item.lines) if isinstance(
                    item, EventLines
                ) else out.append(item)
            return bundle, out
        except Exception as exc:
            return repr(exc)

    assert lines_of(read_chunks(chunks)) == lines_of(read_lines(io.StringIO(text)))  # a file's lines


def _collected(rec: Recorded, lines: list[str]) -> tuple[object, ...]:
    """Everything the pass keeps, to compare two paths beyond the verdict."""
    found = Collector(rec.bundle(), Principals.of(rec.bundle()))
    found.feed([EventLines(lines)])
    return (
        found.total,
        found.fault,
        found.out_of_window,
        found.after_window,
        found.writes,
        sorted(found.controller_deletes, key=repr),
        [dataclasses.astuple(r) for r in found.requests()],
    )


def test_shapes_looked_up_before_needles_keep_what_the_plain_path_keeps(monkeypatch) -> None:  # type: ignore[no-untyped-def]
    # docs/decisions/0084: a line of a shape decided as adding nothing is skipped before its needle
    # search, and a nameless create whose shape names the scenario is counted without one. Replays
    # whose audit ids name the scenario (a needle only in a cut value), then do not, then do again.
    for case in cases():
        rec = load(case)
        needle = rec.meta["namespaces"]["default"]
        lines = []
        for i, prefix in enumerate(["", f"{needle}-a", "b", f"{needle}-c", "d"]):
            for line in rec.lines:
                lines.append(line.replace('"auditID":"', f'"auditID":"{prefix}', 1) if i else line)
                # The same length cut elsewhere: an audit id two longer, a stage time two shorter
                # (the cut positions kept per length are a guess that only a hit proves).
                lines.append(
                    line.replace('"auditID":"', '"auditID":"xy', 1).replace(
                        '"stageTimestamp":"20', '"stageTimestamp":"', 1
                    )
                )
        fast = _collected(rec, lines)
        monkeypatch.setattr(collector_module, "SHAPES_KEPT", 0)
        assert _collected(rec, lines) == fast, case
        monkeypatch.undo()
