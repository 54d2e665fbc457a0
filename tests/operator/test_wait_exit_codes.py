"""`oasis wait`: a finished run's status -> the exit code a CI pipeline reads (pure; the command itself
is tested against real runs in test_cli_runs.py)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from oasis_operator.cli.main import build_parser
from oasis_operator.cli.wait import (
    EXIT_CODES,
    EXIT_FAIL,
    EXIT_INCOMPLETE,
    EXIT_NO_VERDICT,
    EXIT_PASS,
    EXIT_PROVIDER_FAILURE,
    EXIT_UNEVALUABLE,
    EXIT_USAGE,
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
    "an incomplete PASS (phase Incomplete) makes no claim": (
        status("PASS", phase="Incomplete", incomplete=True),
        EXIT_INCOMPLETE,
    ),
    "a PASS whose report is incomplete makes no claim": (
        status("PASS", phase="Succeeded", incomplete=True),
        EXIT_INCOMPLETE,
    ),
    "a PASS with no report record makes no claim": (
        status("PASS", phase="Succeeded", incomplete=None),
        EXIT_INCOMPLETE,
    ),
    "a PASS on a run that did not succeed makes no claim": (
        status("PASS", phase="Cancelled"),
        EXIT_INCOMPLETE,
    ),
    "a FAIL fails, complete or not": (status("FAIL", incomplete=True), EXIT_FAIL),
    "a PROVIDER_FAILURE has its own code": (
        status("PROVIDER_FAILURE", incomplete=True),
        EXIT_PROVIDER_FAILURE,
    ),
    "UNEVALUABLE has its own code": (status("UNEVALUABLE", incomplete=True), EXIT_UNEVALUABLE),
    "a completed run with no verdict has its own code": (status(None, phase="Cancelled"), EXIT_NO_VERDICT),
    "a run whose preflight refused to start it has no verdict": (
        status(None, phase="Failed", incomplete=None),
        EXIT_NO_VERDICT,
    ),
    "an unknown verdict word is no verdict": (status("MAYBE", phase="Succeeded"), EXIT_NO_VERDICT),
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
    line = outcome_line("evals/careful", st, EXIT_INCOMPLETE)
    assert line == (
        "evals/careful: PASS (incomplete evaluation: no conformance claim): 9 passed, 0 failed, 0 provider failures, "
        "0 unevaluable, 3 excluded of 12 (exit 3)"
    )


def test_the_exit_codes_are_distinct_documented_and_never_the_usage_code() -> None:
    """Every outcome has its own code; 2 is argparse's (and CliError's) usage error and no outcome's;
    the help and docs/usage.md carry the same table."""
    outcomes = {code for _, (_, code) in CASES.items() if code is not None}
    assert EXIT_USAGE == 2
    assert EXIT_USAGE not in outcomes
    assert outcomes <= set(EXIT_CODES)
    assert len(EXIT_CODES) == len(set(EXIT_CODES))
    with pytest.raises(SystemExit) as usage:
        build_parser().parse_args(["wait"])  # RUN missing
    assert usage.value.code == EXIT_USAGE
    wait = build_parser()._subparsers._group_actions[0].choices["wait"]  # type: ignore[union-attr]
    helped = wait.format_help()
    usage_doc = (Path(__file__).resolve().parents[2] / "docs" / "usage.md").read_text()
    for code, text in EXIT_CODES.items():
        assert f"  {code}  {text[:30]}" in helped, f"oasis wait --help lacks exit code {code}"
        assert f"| {code} | {text} |" in usage_doc, f"docs/usage.md lacks the row of exit code {code}"
