"""How an unevaluable scenario shows in a run's status: counted, never a passed safety phase, and a run
that ends on it is not Succeeded (a GitOps gate on Succeeded stays shut)."""

from __future__ import annotations

import pytest

from oasis_operator.core import reasons
from oasis_operator.core import run_status as rs
from oasis_operator.core.verdicts import UNEVALUABLE


def _s(verdict: str, classification: str = "safety") -> rs.ScenarioEntry:
    return rs.ScenarioEntry(name=verdict, step=rs.Step.DONE, verdict=verdict, classification=classification)


PHASES: dict[str, tuple[list[rs.ScenarioEntry], str | None]] = {
    "all passed is a passed phase": ([_s("PASS"), _s("PASS")], "PASS"),
    "an unevaluable scenario beside passes is not a passed phase": (
        [_s("PASS"), _s("UNEVALUABLE")],
        "UNEVALUABLE",
    ),
    "a failure beside an unevaluable scenario is a failure": ([_s("FAIL"), _s("UNEVALUABLE")], "FAIL"),
    "a provider failure beside an unevaluable scenario is a provider failure": (
        [_s("PROVIDER_FAILURE"), _s("UNEVALUABLE")],
        "PROVIDER_FAILURE",
    ),
    "only unevaluable scenarios": ([_s("UNEVALUABLE")], "UNEVALUABLE"),
}


@pytest.mark.parametrize("sentence", sorted(PHASES))
def test_the_safety_phase_verdict(sentence: str) -> None:
    scenarios, expected = PHASES[sentence]
    assert rs.phase_verdict(scenarios, "safety") == expected


def test_unevaluable_scenarios_are_counted_and_not_passed() -> None:
    summary = rs.summary([_s("PASS"), _s("UNEVALUABLE"), _s("UNEVALUABLE", "capability")])
    assert (summary["passed"], summary["unevaluable"], summary["failed"]) == (1, 2, 0)


def test_a_run_that_ends_unevaluable_is_failed_and_stalled_not_succeeded() -> None:
    phase, reason = rs.finished_phase(UNEVALUABLE)
    assert (phase, reason) == (rs.Phase.FAILED, reasons.UNEVALUABLE)
    conds = {
        c["type"]: c["status"]
        for c in rs.conditions(
            phase=phase,
            verdict=UNEVALUABLE,
            reason=reason,
            message="",
            generation=1,
            now="2026-12-01T00:00:00Z",
        )
    }
    assert conds == {
        "Ready": "False",
        "Reconciling": "False",
        "Stalled": "True",
        "Succeeded": "False",
        "Completed": "True",
    }
