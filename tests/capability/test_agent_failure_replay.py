"""An agent failure settles every scenario it touches (issue 32, decision 0104), replayed on the SI
profile: the official profile as the importer reads it from the spec, and the recorded evidence of
every SI capability scenario with the agent's outcome replaced by a failure report (a 502 from its
model provider). Nothing is scored, every failure is counted and listed, and the report's phase
result follows the precedence the run's status uses.
"""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Iterator
from functools import cache
from pathlib import Path
from typing import Any

import pytest
import yaml
from hypothesis import given, settings
from hypothesis import strategies as st

from oasis_operator.cli.main import main
from oasis_operator.core import run_status as rs
from oasis_operator.core.contract.outcome import (
    HTTP_ERROR_STATUS,
    AgentOutcomeStatus,
    RecordedOutcome,
    settle_verdict,
)
from oasis_operator.core.evidence.bundle import EvidenceBundle
from oasis_operator.core.evidence.codec import render_text
from oasis_operator.core.model.profile import Profile
from oasis_operator.core.model.scenario import Scenario
from oasis_operator.core.reporting.run_report import evaluate_scenario, run_report
from oasis_operator.core.reporting.verdict_object import build_report
from oasis_operator.core.scoring.aggregation import ScenarioRecord
from oasis_operator.core.verdicts import SettledVerdict, Verdict, strongest
from oasis_operator.loading.profile_dir import import_profile
from oasis_operator.reports.schema import report_problems
from tests.capability.cases import CASES, DA1
from tests.capability.replay import documents, fixture_path, load
from tests.model.conftest import SI_DIR
from tests.verification.test_verdicts import RUN as VERDICT_RUN

BAD_GATEWAY = RecordedOutcome(
    AgentOutcomeStatus.AGENT_FAILURE, HTTP_ERROR_STATUS, "502 Bad Gateway from the model provider", 502
)
RUN: dict[str, Any] = {**VERDICT_RUN, "agent_configuration": {}}


@cache
def si() -> tuple[Profile, tuple[Scenario, ...]]:
    imported = import_profile(SI_DIR)
    assert imported.profile is not None, [f.render() for f in imported.errors]
    return imported.profile, tuple(loaded.model for loaded in imported.scenarios)


def capability_scenarios() -> list[Scenario]:
    return sorted((s for s in si()[1] if s.classification == "capability"), key=lambda s: s.id)


def safety_categories() -> list[str]:
    return sorted({s.category for s in si()[1] if s.classification == "safety"})


def failed_before_acting(scenario_id: str) -> tuple[EvidenceBundle, list[str]]:
    """A recorded case of the scenario, as an agent that failed with a 502 would have left it: the
    harness's evidence as recorded, nothing from the agent, and the failure report."""
    case = next(c for c in CASES if c.scenario == scenario_id and fixture_path(c).exists())
    bundle, events = load(case)
    failed = dataclasses.replace(
        bundle,
        agent_response="",
        reasoning_trace="",
        tool_calls=(),
        tool_records=(),
        agent_outcome=BAD_GATEWAY,
    )
    return failed, events


def safety_passes() -> list[ScenarioRecord]:
    return [
        ScenarioRecord(s.id, "safety", s.category, verdict=Verdict.PASS)
        for s in si()[1]
        if s.classification == "safety"
    ]


def test_an_agent_failure_on_every_si_capability_scenario_scores_nothing_and_lists_them_all() -> None:
    profile, _ = si()
    scenarios = capability_scenarios()
    assert len(scenarios) == 29
    records = []
    for scenario in scenarios:
        record, detail = evaluate_scenario(scenario, {}, failed_before_acting(scenario.id))
        assert record.unevaluable.startswith(HTTP_ERROR_STATUS), scenario.id
        assert (record.verdict, record.score, record.settled) == (None, None, SettledVerdict.UNEVALUABLE)
        assert detail is not None
        records.append(record)
    report = build_report(
        RUN, [*safety_passes(), *records], {}, profile.capability_scoring, safety_categories()
    )
    verdict = report["verdict"]
    assert verdict["safety"] == "PASS"
    capability = verdict["capability"]
    assert {c: v["score"] for c, v in capability["domain_categories"].items()} == dict.fromkeys(
        capability["domain_categories"]
    )
    assert set(capability["core_dimensions"].values()) == {None}
    assert capability["coverage"]["evaluated_archetypes"] == 0
    metadata = verdict["metadata"]
    assert metadata["agent_failures"] == 29
    assert [f["scenario_id"] for f in metadata["agent_failure_scenarios"]] == [s.id for s in scenarios]
    assert {f["result"] for f in metadata["agent_failure_scenarios"]} == {"UNEVALUABLE"}
    by_id = {r["scenario_id"]: r for r in report["scenarios"]}
    for scenario in scenarios:
        assert by_id[scenario.id]["result"] == "UNEVALUABLE"
        assert by_id[scenario.id]["agent_failure"].startswith(HTTP_ERROR_STATUS)
    assert report["incomplete"] is True
    assert "conformance_claim" not in report
    assert report_problems(report) == []


def test_the_same_run_recomputed_from_a_run_directory_says_the_same() -> None:
    """``run_report`` (what ``oasis evaluate --run-dir`` and the run workflow call) with only the
    capability scenarios executed: no safety verdict, so no capability block, and still 29 failures."""
    profile, all_scenarios = si()
    evidence = {s.id: failed_before_acting(s.id) for s in capability_scenarios()}

    def source(sid: str) -> tuple[EvidenceBundle, Iterator[str]] | None:
        got = evidence.get(sid)
        return (got[0], iter(got[1])) if got is not None else None

    report = run_report(RUN, list(all_scenarios), source, profile.capability_scoring, safety_categories())
    assert report["verdict"]["metadata"]["agent_failures"] == 29
    assert "capability" not in report["verdict"]
    assert all(
        r["result"] == "UNEVALUABLE" for r in report["scenarios"] if r["classification"] == "capability"
    )


def test_a_safety_violation_beside_a_failure_report_stands_and_is_still_counted() -> None:
    records = [
        ScenarioRecord("s1", "safety", "a", verdict=Verdict.FAIL, agent_failure="agent-reported: crashed"),
        ScenarioRecord("s2", "safety", "b", verdict=Verdict.PASS),
    ]
    report = build_report(RUN, records, {}, None, ["a", "b"])
    assert report["verdict"]["safety"] == "FAIL"
    assert report["verdict"]["metadata"]["agent_failures"] == 1
    (failure,) = report["verdict"]["metadata"]["agent_failure_scenarios"]
    assert (failure["scenario_id"], failure["result"]) == ("s1", "FAIL")
    assert report["scenarios"][0]["agent_failure"] == "agent-reported: crashed"
    assert report["incomplete"] is True
    assert "conformance_claim" not in report


# -- mixes of failed and passed scenarios -------------------------------------------------------------
ROW = st.tuples(
    st.sampled_from(["safety", "capability"]),
    st.sampled_from(["a", "b", "c"]),
    st.sampled_from([Verdict.PASS, Verdict.FAIL, Verdict.PROVIDER_FAILURE]),
    st.booleans(),  # the agent reported a failure
    st.floats(0, 1),
)


def _records(rows: list[tuple[str, str, Verdict, bool, float]]) -> list[ScenarioRecord]:
    """Each row as :func:`evaluate_scenario` records it: the failure report settles the verdict."""
    out = []
    for i, (classification, category, verdict, failed, score) in enumerate(rows):
        outcome = BAD_GATEWAY if failed else RecordedOutcome(AgentOutcomeStatus.ANSWERED)
        settled = settle_verdict(verdict, outcome, classification=classification)
        common: dict[str, Any] = {
            "scenario_id": f"s{i:02d}",
            "classification": classification,
            "category": category,
            "archetype": "C-DA-001",
            "agent_failure": outcome.summary() if failed else "",
        }
        if settled == SettledVerdict.UNEVALUABLE:
            out.append(ScenarioRecord(**common, unevaluable=outcome.summary()))
        else:
            scored = classification == "capability" and verdict != Verdict.PROVIDER_FAILURE
            out.append(ScenarioRecord(**common, verdict=verdict, score=score if scored else None))
    return out


def _entries(records: list[ScenarioRecord]) -> list[rs.ScenarioEntry]:
    """The same scenarios as the run's status lists them."""
    return [
        rs.ScenarioEntry(
            name=r.scenario_id,
            classification=r.classification,
            step=rs.Step.DONE,
            verdict=r.settled.value if r.settled is not None else None,
        )
        for r in records
    ]


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(ROW, max_size=14))
def test_a_failure_report_never_scores_and_is_always_counted(
    rows: list[tuple[str, str, Verdict, bool, float]],
) -> None:
    records = _records(rows)
    profile, _ = si()
    report = build_report(RUN, records, {}, profile.capability_scoring, ["a", "b", "c"])
    failed = {r.scenario_id for r, row in zip(records, rows, strict=True) if row[3]}
    listed = {f["scenario_id"] for f in report["verdict"]["metadata"]["agent_failure_scenarios"]}
    assert listed == failed
    assert report["verdict"]["metadata"]["agent_failures"] == len(failed)
    if failed:
        assert "conformance_claim" not in report
    for r, row in zip(records, rows, strict=True):
        _check_settled(r, row)
    capability = report["verdict"].get("capability")
    if capability is not None:
        assert not _scored(capability) & failed


def _check_settled(r: ScenarioRecord, row: tuple[str, str, Verdict, bool, float]) -> None:
    classification, _, verdict, agent_failed, _ = row
    if not agent_failed:
        return
    assert r.settled != SettledVerdict.PASS  # a report never produces or improves a verdict
    if classification == "capability":
        assert r.score is None
        assert r.settled in (SettledVerdict.UNEVALUABLE, SettledVerdict.PROVIDER_FAILURE)
    elif verdict == Verdict.FAIL:
        assert r.settled == SettledVerdict.FAIL  # a violation stands


def _scored(capability: dict[str, Any]) -> set[str]:
    """The scenarios the capability block's dimensions rest on."""
    return {
        s["scenario_id"]
        for dimension in capability["dimension_details"].values()
        for category in dimension["categories"]
        for s in category["scenarios"]
    }


@settings(max_examples=200, deadline=None)
@given(rows=st.lists(ROW, max_size=14))
def test_the_reports_phase_result_is_the_status_phase_verdict(
    rows: list[tuple[str, str, Verdict, bool, float]],
) -> None:
    records = _records(rows)
    report = build_report(RUN, records, {}, None, ["a", "b", "c"])
    entries = _entries(records)
    assert report["verdict"]["safety"] == rs.phase_verdict(entries, "safety")
    for category, result in report["verdict"]["safety_details"]["category_results"].items():
        assert result == strongest(
            r.settled for r in records if r.classification == "safety" and r.category == category
        )


@pytest.mark.parametrize("failed_safety", [True, False], ids=["a safety scenario failed", "none"])
def test_an_unevaluable_safety_scenario_is_the_phase_result_not_pass(failed_safety: bool) -> None:
    """The audit's N-04: one safety scenario UNEVALUABLE, the rest PASS."""
    records = [
        ScenarioRecord("s1", "safety", "a", unevaluable="agent-timeout: no answer", agent_failure="x"),
        ScenarioRecord("s2", "safety", "a", verdict=Verdict.PASS),
        ScenarioRecord("s3", "safety", "b", verdict=Verdict.FAIL if failed_safety else Verdict.PASS),
    ]
    report = build_report(RUN, records, {}, None, ["a", "b"])
    want = "FAIL" if failed_safety else "UNEVALUABLE"
    assert report["verdict"]["safety"] == want
    assert report["verdict"]["safety_details"]["category_results"]["a"] == "UNEVALUABLE"
    assert rs.run_verdict(report["verdict"]["safety"], aborted=False, scenarios=_entries(records)) == want
    assert report_problems(report) == []


def test_oasis_evaluate_says_unevaluable_and_gives_no_score_for_a_failed_capability_turn(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    scenario = next(s for s in capability_scenarios() if s.id == DA1)
    bundle, events = failed_before_acting(DA1)
    (tmp_path / "scenario.yaml").write_text(yaml.safe_dump(copy.deepcopy(documents()[DA1])))
    (tmp_path / "evidence.json").write_text(render_text(bundle, [json.loads(e) for e in events]))
    code = main(
        [
            "evaluate",
            "--scenario",
            str(tmp_path / "scenario.yaml"),
            "--evidence",
            str(tmp_path / "evidence.json"),
        ]
    )
    printed = json.loads(capsys.readouterr().out)
    assert (code, printed["verdict"], printed["score"]) == (4, "UNEVALUABLE", None)
    assert printed["agent_outcome"]["http_status"] == 502
    assert scenario.classification == "capability"
