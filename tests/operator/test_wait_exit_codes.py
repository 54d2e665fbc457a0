"""`oasis wait`: a finished run's status -> the exit code a CI pipeline reads (pure; the command itself
is tested against real runs in test_cli_runs.py)."""

from __future__ import annotations

from typing import Any

import pytest

from oasis_operator.cli.wait import (
    EXIT_FAIL,
    EXIT_NO_CLAIM,
    EXIT_PASS,
    EXIT_PROVIDER_FAILURE,
    exit_code,
    outcome_line,
)

COMPLETED = [{"type": "Completed", "status": "True"}]
RUNNING = [{"type": "Completed", "status": "False"}, {"type": "Reconciling", "status": "True"}]


def status(
    verdict: str | None,
    *,
    phase: str = "Failed",
    incomplete: bool | None = False,
    conditions: list[dict[str, str]] = COMPLETED,
) -> dict[str, Any]:
    out: dict[str, Any] = {"phase": phase, "conditions": conditions}
    if verdict is not None:
        out["verdict"] = verdict
    if incomplete is not None:
        out["report"] = {"incomplete": incomplete}
    return out


CASES: dict[str, tuple[dict[str, Any], int | None]] = {
    "a complete PASS is the only exit 0": (status("PASS", phase="Succeeded"), EXIT_PASS),
    "a PASS whose report is incomplete makes no claim": (
        status("PASS", phase="Succeeded", incomplete=True),
        EXIT_NO_CLAIM,
    ),
    "a PASS with no report record makes no claim": (
        status("PASS", phase="Succeeded", incomplete=None),
        EXIT_NO_CLAIM,
    ),
    "a PASS on a run that did not succeed makes no claim": (status("PASS", phase="Cancelled"), EXIT_NO_CLAIM),
    "a FAIL fails, complete or not": (status("FAIL", incomplete=True), EXIT_FAIL),
    "a PROVIDER_FAILURE has its own code": (
        status("PROVIDER_FAILURE", incomplete=True),
        EXIT_PROVIDER_FAILURE,
    ),
    "UNEVALUABLE makes no claim": (status("UNEVALUABLE", incomplete=True), EXIT_NO_CLAIM),
    "a completed run with no verdict makes no claim": (status(None, phase="Cancelled"), EXIT_NO_CLAIM),
    "an unknown verdict word makes no claim": (status("MAYBE", phase="Succeeded"), EXIT_NO_CLAIM),
    "a running run is still waited for": (status("PASS", phase="Running", conditions=RUNNING), None),
    "a run the operator never touched is still waited for": ({}, None),
}


@pytest.mark.parametrize("case", CASES)
def test_exit_code(case: str) -> None:
    st, expected = CASES[case]
    assert exit_code(st) == expected


def test_outcome_line_names_the_verdict_counts_and_code() -> None:
    st = {
        **status("PASS", phase="Succeeded", incomplete=True),
        "summary": {
            "passed": 9,
            "failed": 0,
            "providerFailures": 0,
            "unevaluable": 0,
            "excluded": 3,
            "total": 12,
        },
    }
    line = outcome_line("evals/careful", st, EXIT_NO_CLAIM)
    assert line == (
        "evals/careful: PASS (no conformance claim): 9 passed, 0 failed, 0 provider failures, "
        "0 unevaluable, 3 excluded of 12 (exit 3)"
    )
