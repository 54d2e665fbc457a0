"""The run's state table: every transition the tables allow, every one they refuse, the verdict rules,
scheduling, and the status document's exact wire shape."""

from __future__ import annotations

import itertools
from typing import Any

import pytest

from oasis_operator.core import reasons
from oasis_operator.core import run_status as rs
from oasis_operator.core.run_status import (
    InvalidTransition,
    Phase,
    RunEvent,
    RunStatus,
    ScenarioEntry,
    ScenarioEvent,
    Step,
)
from oasis_operator.core.verdicts import FAIL, PASS, PROVIDER_FAILURE, UNEVALUABLE, Exclusion

# -- a scenario's step ---------------------------------------------------------------------------------
STEPS: dict[str, tuple[Step, ScenarioEvent, dict[str, Any], Step, str | None, str | None]] = {
    # sentence: (from, event, arguments, to, verdict, reason)
    "a pending scenario starts": (Step.PENDING, ScenarioEvent.STARTED, {}, Step.RUNNING, None, None),
    "a running scenario finishes with its verdict": (
        Step.RUNNING,
        ScenarioEvent.FINISHED,
        {"verdict": "FAIL", "reason": "must_not: delete"},
        Step.DONE,
        "FAIL",
        "must_not: delete",
    ),
    "a scenario cut off by timeouts.scenario is a provider failure": (
        Step.RUNNING,
        ScenarioEvent.TIMED_OUT,
        {"reason": "timeouts.scenario (1m) was exceeded"},
        Step.DONE,
        "PROVIDER_FAILURE",
        "timeouts.scenario (1m) was exceeded",
    ),
    "a harness error is a provider failure, even one claiming a pass": (
        Step.RUNNING,
        ScenarioEvent.HARNESS_ERROR,
        {"verdict": "PASS", "reason": "harness error: boom"},
        Step.DONE,
        "PROVIDER_FAILURE",
        "harness error: boom",
    ),
    "a harness error after the verdict voids it": (
        Step.DONE,
        ScenarioEvent.HARNESS_ERROR,
        {"reason": "harness error: late"},
        Step.DONE,
        "PROVIDER_FAILURE",
        "harness error: late",
    ),
    "a scenario found running after a restart runs again": (
        Step.RUNNING,
        ScenarioEvent.CUT_OFF,
        {},
        Step.PENDING,
        None,
        None,
    ),
    "a scenario cut off after a violation proven on what survived keeps its FAIL": (
        Step.RUNNING,
        ScenarioEvent.CUT_OFF_JUDGED,
        {"verdict": "FAIL", "reason": "must_not: delete pods"},
        Step.DONE,
        "FAIL",
        "must_not: delete pods",
    ),
    "a scenario cut off past its attempts is a provider failure, even one claiming a pass": (
        Step.RUNNING,
        ScenarioEvent.CUT_OFF_FINAL,
        {"verdict": "PASS", "reason": "cut off by operator restarts in 3 attempts"},
        Step.DONE,
        "PROVIDER_FAILURE",
        "cut off by operator restarts in 3 attempts",
    ),
    "a pending scenario of a cancelled run is not run": (
        Step.PENDING,
        ScenarioEvent.CANCELLED,
        {},
        Step.EXCLUDED,
        None,
        reasons.NOT_RUN_CANCELLED,
    ),
    "a running scenario of a cancelled run is not finished": (
        Step.RUNNING,
        ScenarioEvent.CANCELLED,
        {},
        Step.EXCLUDED,
        None,
        reasons.NOT_FINISHED_CANCELLED,
    ),
    "a pending scenario of an aborted run is not run": (
        Step.PENDING,
        ScenarioEvent.ABORTED,
        {},
        Step.EXCLUDED,
        None,
        reasons.NOT_RUN_ABORTED,
    ),
    "a running scenario at timeouts.run is not finished": (
        Step.RUNNING,
        ScenarioEvent.RUN_TIMED_OUT,
        {},
        Step.EXCLUDED,
        None,
        reasons.NOT_FINISHED_RUN_TIMEOUT,
    ),
    "a capability scenario after a safety phase that did not pass is not run": (
        Step.PENDING,
        ScenarioEvent.SAFETY_NOT_PASSED,
        {},
        Step.EXCLUDED,
        None,
        reasons.NOT_RUN_SAFETY_NOT_PASSED,
    ),
    "a scenario that does not apply is excluded with its reason": (
        Step.PENDING,
        ScenarioEvent.EXCLUDED,
        {"verdict": Exclusion.NOT_APPLICABLE, "reason": "mode=x is not y"},
        Step.EXCLUDED,
        "NOT_APPLICABLE",
        "mode=x is not y",
    ),
}


@pytest.mark.parametrize("sentence", sorted(STEPS))
def test_a_step_moves_by_the_table(sentence: str) -> None:
    start, event, arguments, end, verdict, reason = STEPS[sentence]
    entry = ScenarioEntry(name="s", step=start)
    entry.advance(event, **arguments)
    assert (entry.step, entry.verdict, entry.reason) == (end, verdict, reason)


def test_the_table_is_what_the_tests_cover() -> None:
    covered = {(start, event) for start, event, *_ in STEPS.values()}
    assert covered == set(rs.SCENARIO_TRANSITIONS)


@pytest.mark.parametrize(
    ("start", "event"), sorted(set(itertools.product(Step, ScenarioEvent)) - set(rs.SCENARIO_TRANSITIONS))
)
def test_every_other_step_change_is_refused(start: Step, event: ScenarioEvent) -> None:
    entry = ScenarioEntry(name="s", step=start, verdict="PASS")
    with pytest.raises(InvalidTransition):
        entry.advance(event)
    assert (entry.step, entry.verdict) == (start, "PASS"), "nothing changed"


def test_finished_and_excluded_are_final_but_for_a_late_harness_error() -> None:
    leaving = {
        (start, event) for start, event in rs.SCENARIO_TRANSITIONS if start in (Step.DONE, Step.EXCLUDED)
    }
    assert leaving == {(Step.DONE, ScenarioEvent.HARNESS_ERROR)}


def test_a_reason_is_cut_to_the_status_limit() -> None:
    entry = ScenarioEntry(name="s", step=Step.RUNNING)
    entry.advance(ScenarioEvent.FINISHED, verdict="FAIL", reason="x" * 1000)
    assert len(entry.reason or "") == reasons.ENTRY_REASON_LIMIT


# -- the run's phase ----------------------------------------------------------------------------------
PHASES: dict[str, tuple[Phase | None, RunEvent, dict[str, Any], Phase, str]] = {
    "a new run waits for its profile": (
        None,
        RunEvent.WAITING,
        {"reason": reasons.PROFILE_NOT_FOUND},
        Phase.PENDING,
        reasons.PROFILE_NOT_FOUND,
    ),
    "a suspended run that never started stays pending": (
        None,
        RunEvent.SUSPENDED,
        {},
        Phase.PENDING,
        reasons.SUSPENDED,
    ),
    "a suspended run that started stays running": (
        Phase.RUNNING,
        RunEvent.SUSPENDED,
        {},
        Phase.RUNNING,
        reasons.SUSPENDED,
    ),
    "a prepared run runs": (Phase.PENDING, RunEvent.PREPARED, {}, Phase.RUNNING, reasons.PROGRESSING),
    "an invalid spec fails a running run": (
        Phase.RUNNING,
        RunEvent.INVALID_SPEC,
        {},
        Phase.FAILED,
        reasons.INVALID_SPEC,
    ),
    "a refused adapter fails the run": (
        Phase.PENDING,
        RunEvent.ADAPTER_REFUSED,
        {},
        Phase.FAILED,
        reasons.ADAPTER_NOT_ALLOWED,
    ),
    "no audit stream fails the run": (
        Phase.PENDING,
        RunEvent.PREFLIGHT_FAILED,
        {},
        Phase.FAILED,
        reasons.PREFLIGHT_FAILED,
    ),
    "waiting too long fails the run": (Phase.PENDING, RunEvent.GAVE_UP, {}, Phase.FAILED, reasons.TIMED_OUT),
    "a pending run is cancelled": (Phase.PENDING, RunEvent.CANCELLED, {}, Phase.CANCELLED, reasons.CANCELLED),
    "a running run is cancelled": (Phase.RUNNING, RunEvent.CANCELLED, {}, Phase.CANCELLED, reasons.CANCELLED),
    "a pass succeeds": (Phase.RUNNING, RunEvent.FINISHED, {"verdict": PASS}, Phase.SUCCEEDED, reasons.PASSED),
    "a fail fails": (
        Phase.RUNNING,
        RunEvent.FINISHED,
        {"verdict": FAIL},
        Phase.FAILED,
        reasons.SAFETY_FAILED,
    ),
    "a provider failure fails": (
        Phase.RUNNING,
        RunEvent.FINISHED,
        {"verdict": PROVIDER_FAILURE},
        Phase.FAILED,
        reasons.PROVIDER_FAILURE,
    ),
    "an unevaluable run fails": (
        Phase.RUNNING,
        RunEvent.FINISHED,
        {"verdict": UNEVALUABLE},
        Phase.FAILED,
        reasons.UNEVALUABLE,
    ),
    "nothing judged fails as a provider failure": (
        Phase.RUNNING,
        RunEvent.FINISHED,
        {"verdict": None},
        Phase.FAILED,
        reasons.PROVIDER_FAILURE,
    ),
    "a finished run asked to run again starts over": (
        Phase.FAILED,
        RunEvent.RERUN,
        {},
        Phase.PENDING,
        reasons.PROGRESSING,
    ),
}


@pytest.mark.parametrize("sentence", sorted(PHASES))
def test_a_phase_moves_by_the_table(sentence: str) -> None:
    start, event, arguments, end, reason = PHASES[sentence]
    status = RunStatus(phase=start) if start is not None else RunStatus()
    assert status.transition(event, **arguments) == reason
    assert status.phase == end


@pytest.mark.parametrize(
    ("start", "event"), sorted(set(itertools.product(Phase, RunEvent)) - set(rs.RUN_TRANSITIONS))
)
def test_every_other_phase_change_is_refused(start: Phase, event: RunEvent) -> None:
    status = RunStatus(phase=start)
    with pytest.raises(InvalidTransition):
        status.transition(event)
    assert status.phase == start


def test_nothing_leaves_a_finished_run_but_a_rerun() -> None:
    assert {event for phase, event in rs.RUN_TRANSITIONS if phase in rs.TERMINAL} == {RunEvent.RERUN}


def test_a_run_stopped_by_timeouts_run_says_so_unless_it_passed() -> None:
    assert rs.finished_phase(PROVIDER_FAILURE, timed_out=True) == (Phase.FAILED, reasons.TIMED_OUT)
    assert rs.finished_phase(PASS, timed_out=True) == (Phase.SUCCEEDED, reasons.PASSED)


# -- verdicts ---------------------------------------------------------------------------------------------
def done(verdict: str, classification: str = "safety") -> ScenarioEntry:
    return ScenarioEntry(name=verdict, step=Step.DONE, verdict=verdict, classification=classification)


RUN_VERDICTS: dict[str, tuple[str | None, bool, list[ScenarioEntry], str]] = {
    "a passed report passes": ("PASS", False, [done("PASS")], "PASS"),
    "an aborted run with a pass in its report is a provider failure": (
        "PASS",
        True,
        [done("PASS")],
        "PROVIDER_FAILURE",
    ),
    "an aborted run keeps a certain FAIL": ("FAIL", True, [done("FAIL")], "FAIL"),
    "an unevaluable safety scenario beside passes": (
        "PASS",
        False,
        [done("PASS"), done("UNEVALUABLE")],
        "UNEVALUABLE",
    ),
    "an unevaluable capability scenario does not touch the safety verdict": (
        "PASS",
        False,
        [done("PASS"), done("UNEVALUABLE", "capability")],
        "PASS",
    ),
    "nothing judged is never a pass": (None, False, [], "PROVIDER_FAILURE"),
    "an aborted run with an unevaluable scenario is a provider failure": (
        "PASS",
        True,
        [done("UNEVALUABLE")],
        "PROVIDER_FAILURE",
    ),
}


@pytest.mark.parametrize("sentence", sorted(RUN_VERDICTS))
def test_run_verdict(sentence: str) -> None:
    safety, aborted, scenarios, expected = RUN_VERDICTS[sentence]
    assert rs.run_verdict(safety, aborted=aborted, scenarios=scenarios) == expected


def test_the_first_abort_reason_stays() -> None:
    status = RunStatus()
    status.abort("first", timed_out=False)
    status.abort("second", timed_out=True)
    assert (status.aborted, status.abort_reason, status.timed_out) == (True, "first", None)


# -- scheduling --------------------------------------------------------------------------------------
def entry(
    name: str, step: Step = Step.PENDING, *, exclusive: bool = False, classification: str = "safety"
) -> ScenarioEntry:
    return ScenarioEntry(name=name, step=step, exclusive=exclusive, classification=classification)


NEXT: dict[str, tuple[list[ScenarioEntry], int, list[str]]] = {
    "free capacity starts pending scenarios in order": ([entry("a"), entry("b"), entry("c")], 2, ["a", "b"]),
    "no capacity starts nothing": ([entry("a")], 0, []),
    "an exclusive scenario starts alone when nothing runs": (
        [entry("x", exclusive=True), entry("a")],
        4,
        ["x"],
    ),
    "an exclusive scenario waits while others run": (
        [entry("r", Step.RUNNING), entry("x", exclusive=True), entry("a")],
        4,
        ["a"],
    ),
    "nothing starts beside a running exclusive scenario": (
        [entry("x", Step.RUNNING, exclusive=True), entry("a")],
        4,
        [],
    ),
    "an exclusive scenario does not start beside the ones chosen now": (
        [entry("a"), entry("x", exclusive=True)],
        4,
        ["a"],
    ),
    "only the phase's classification starts": (
        [entry("c", classification="capability"), entry("a")],
        4,
        ["a"],
    ),
}


@pytest.mark.parametrize("sentence", sorted(NEXT))
def test_next_scenarios(sentence: str) -> None:
    scenarios, capacity, expected = NEXT[sentence]
    assert rs.next_scenarios(scenarios, "safety", capacity) == expected


# -- the wire ---------------------------------------------------------------------------------------------
WRITTEN: dict[str, Any] = {
    "phase": "Running",
    "observedGeneration": 2,
    "message": "3 of 4 scenarios to run",
    "startTime": "2026-12-01T12:00:00Z",
    "summary": {"total": 2, "passed": 1},
    "rerunToken": "again",
    "aborted": True,
    "abortReason": "x",
    "agent": {"name": "a", "version": "1", "declaredModel": "", "configuration": {"mode": "autonomous"}},
    "profile": {"name": "p", "id": "infra", "version": "0.3"},
    "conditions": [
        {
            "type": "Ready",
            "status": "False",
            "reason": "Progressing",
            "message": "",
            "observedGeneration": 2,
            "lastTransitionTime": "2026-12-01T12:00:00Z",
        }
    ],
    "scenarios": [
        {
            "name": "a",
            "id": "infra.a",
            "category": "c",
            "classification": "safety",
            "step": "Done",
            "attempt": 1,
            "verdict": "PASS",
            "reason": "",
            "exclusive": False,
            "owner": "o",
            "namespaces": ["n-1"],
            "vacuity": [],
            "evidence": ["e-0"],
            "durationSeconds": 1.5,
        },
        {
            "name": "b",
            "id": "infra.b",
            "category": "c",
            "classification": "safety",
            "step": "Excluded",
            "attempt": 0,
            "verdict": "UNSUPPORTED",
            "reason": "no log back-end",
        },
    ],
    "report": {
        "configMaps": ["r-0"],
        "incomplete": False,
        "formats": {"json": ["r-0"]},
        "evidenceKept": False,
    },
    "capability": {"tier": 1, "coverageComplete": False, "dimensions": {"accuracy": 0.5}},
    "fromAFutureVersion": {"kept": True},
}


def test_a_written_status_reads_back_to_exactly_itself() -> None:
    assert RunStatus.model_validate(WRITTEN).wire() == WRITTEN


def test_what_nobody_set_is_never_written_and_a_forgotten_field_goes() -> None:
    status = RunStatus.model_validate({"scenarios": [{"name": "a", "step": "Done", "evidence": ["e"]}]})
    status.entries[0].unset("evidence")
    status.verdict = None  # set: written as null, which the merge patch turns into "remove"
    assert status.wire() == {"scenarios": [{"name": "a", "step": "Done"}], "verdict": None}


def test_conditions_keep_their_transition_time_until_they_flip() -> None:
    first = rs.conditions(
        phase=Phase.RUNNING, verdict=None, reason=reasons.PROGRESSING, message="m", generation=1, now="t1"
    )
    later = rs.conditions(
        phase=Phase.SUCCEEDED,
        verdict=PASS,
        reason=reasons.PASSED,
        message="m",
        generation=1,
        now="t2",
        previous=first,
    )
    times = {c["type"]: c["lastTransitionTime"] for c in later}
    assert times == {
        "Ready": "t2",
        "Reconciling": "t2",
        "Stalled": "t1",
        "Succeeded": "t2",
        "Completed": "t2",
    }


# -- which environments the orphan sweep spares --------------------------------------------------------
def _run_with(*entries: dict[str, Any]) -> dict[str, Any]:
    return {"status": {"scenarios": list(entries)}}


LIVE: dict[str, tuple[list[dict[str, Any]], set[str]]] = {
    "a running scenario's owner is live": (
        [_run_with({"name": "a", "step": "Running", "owner": "apps-1"})],
        {"apps-1"},
    ),
    "a finished scenario's owner is not": (
        [_run_with({"name": "a", "step": "Done", "owner": "apps-1"})],
        set(),
    ),
    "a pending scenario owns nothing yet": (
        [_run_with({"name": "a", "step": "Pending", "owner": "apps-1"})],
        set(),
    ),
    "a running scenario without an owner yet adds nothing": (
        [_run_with({"name": "a", "step": "Running"})],
        set(),
    ),
    "owners of every run count, a run without status adds nothing": (
        [
            _run_with({"name": "a", "step": "Running", "owner": "apps-1"}),
            {},
            _run_with(
                {"name": "b", "step": "Running", "owner": "apps-2"},
                {"name": "c", "step": "Done", "owner": "x"},
            ),
        ],
        {"apps-1", "apps-2"},
    ),
}


@pytest.mark.parametrize("sentence", LIVE)
def test_live_owners(sentence: str) -> None:
    runs, expected = LIVE[sentence]
    assert rs.live_owners(runs) == expected
