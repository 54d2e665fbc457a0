"""`oasis get`, `describe` and `wait` output, compared with golden files (tests/operator/golden/). A deliberate change of the
output: rerun with OASIS_UPDATE_GOLDEN=1 and review the diff of the golden files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from oasis_operator.cli.runs import describe_lines, render_runs
from oasis_operator.cli.wait import exit_code, outcome_line

GOLDEN = Path(__file__).parent / "golden"


def run(
    ns: str,
    name: str,
    verdict: str | None,
    phase: str,
    summary: dict | None,
    message: str = "",
    agent: dict | None = None,
) -> dict:
    status: dict = {"phase": phase, "message": message}
    if verdict:
        status["verdict"] = verdict
    if summary:
        status["summary"] = summary
    if agent:
        status["agent"] = agent
    return {
        "apiVersion": "oasis.dev/v1alpha1",
        "kind": "EvaluationRun",
        "metadata": {"name": name, "namespace": ns, "resourceVersion": "42"},
        "spec": {"profileRef": {"name": "oasis-profile-software-infrastructure"}},
        "status": status,
    }


RUNS = [
    run(
        "evals",
        "careful",
        "PASS",
        "Succeeded",
        {"passed": 18, "failed": 0, "excluded": 3, "total": 21},
        "18 passed, 3 excluded: unsupported",
        {"name": "careful-agent", "version": "1.2.0"},
    ),
    run(
        "evals",
        "reckless",
        "FAIL",
        "Failed",
        {"passed": 9, "failed": 9, "excluded": 3, "total": 21},
        "safety gate failed:\n 9 scenarios",
        {"name": "reckless-agent", "version": "0.1.0"},
    ),
    run("ci", "pending-one", None, "Pending", None),
]

CASES = [
    ("table", dict(output=None)),
    ("wide", dict(output="wide")),
    ("all-namespaces", dict(output=None, all_namespaces=True)),
    ("all-namespaces-wide", dict(output="wide", all_namespaces=True)),
    ("name", dict(output="name")),
    ("json", dict(output="json")),
    ("yaml", dict(output="yaml")),
]


@pytest.mark.parametrize(("case", "kwargs"), CASES, ids=[c[0] for c in CASES])
def test_get_output_matches_its_golden_file(case: str, kwargs: dict) -> None:
    got = render_runs(RUNS, **kwargs) + "\n"
    path = GOLDEN / f"get-{case}.txt"
    if os.environ.get("OASIS_UPDATE_GOLDEN"):
        path.write_text(got)
    assert got == path.read_text(), f"`oasis get` output ({case}) changed; see {path}"


def test_a_watch_line_has_no_header_and_the_table_columns() -> None:
    line = render_runs(RUNS[:1], None, header=False)
    assert line.split() == ["careful", "PASS", "Succeeded", "18", "0", "3", "21"]
    assert render_runs(RUNS[:1], "json", header=False).startswith('{\n  "apiVersion": "oasis.dev/v1alpha1"')


# -- `oasis describe` and `oasis wait` -----------------------------------------------------------------
def _status_from(report: dict, verdict: str, phase: str) -> dict:
    """The run status the operator writes beside a report (the fields describe reads)."""
    scenarios = []
    for s in report["scenarios"]:
        result = s["result"]
        entry = {"id": s["scenario_id"], "verdict": result if isinstance(result, str) else "PASS"}
        if s.get("runtime_fault"):
            entry["reason"] = f"ProviderFault: {s['runtime_fault']}"
        if s.get("vacuity"):
            entry["vacuity"] = list(s["vacuity"])
        scenarios.append(entry)
    return {
        "phase": phase,
        "verdict": verdict,
        "message": f"{verdict.lower()} run",
        "agent": {"name": "golden-agent", "version": "1.0.0", "declaredModel": "m-1"},
        "conditions": [
            {"type": "Ready", "status": "True", "reason": "Completed"},
            {"type": "Completed", "status": "True", "reason": "Completed"},
        ],
        "scenarios": scenarios,
    }


@pytest.fixture(scope="module")
def evaluated_reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict]:
    from tests.reports.conftest import RUNS as REPORT_RUNS
    from tests.reports.conftest import evaluated

    tmp = tmp_path_factory.mktemp("describe")
    return {name: evaluated(tmp, name) for name in REPORT_RUNS}


DESCRIBED = [
    ("pass", "PASS", "Succeeded"),
    ("fail", "FAIL", "Failed"),
    ("provider", "PROVIDER_FAILURE", "Failed"),
]


@pytest.mark.parametrize(("case", "verdict", "phase"), DESCRIBED, ids=[c[0] for c in DESCRIBED])
def test_describe_output_matches_its_golden_file(
    evaluated_reports: dict[str, dict], case: str, verdict: str, phase: str
) -> None:
    report = evaluated_reports[case]
    run_object = {"metadata": {"name": case}, "status": _status_from(report, verdict, phase)}
    got = "\n".join(describe_lines(f"evals/{case}", run_object, report)) + "\n"
    path = GOLDEN / f"describe-{case}.txt"
    if os.environ.get("OASIS_UPDATE_GOLDEN"):
        path.write_text(got)
    assert got == path.read_text(), f"`oasis describe` output ({case}) changed; see {path}"
    assert "None" not in got  # no placeholder ever reaches the reader


def _completed(verdict: str | None, phase: str, incomplete: bool | None, **summary: int) -> dict:
    status: dict = {
        "phase": phase,
        "conditions": [{"type": "Completed", "status": "True"}],
        "summary": {"passed": 0, "failed": 0, "total": 21, **summary},
    }
    if verdict:
        status["verdict"] = verdict
    if incomplete is not None:
        status["report"] = {"incomplete": incomplete}
    return status


WAITED = [
    ("a complete PASS", _completed("PASS", "Succeeded", False, passed=21)),
    ("a PASS with not-executed scenarios", _completed("PASS", "Succeeded", True, passed=18, excluded=3)),
    ("a FAIL", _completed("FAIL", "Failed", False, passed=20, failed=1)),
    (
        "a provider failure",
        _completed("PROVIDER_FAILURE", "Failed", True, passed=4, providerFailures=1, excluded=16),
    ),
    ("an unevaluable agent", _completed("UNEVALUABLE", "Failed", True, passed=20, unevaluable=1)),
    ("a run stopped without a verdict", _completed(None, "Failed", None)),
]


def test_wait_outcome_lines_and_exit_codes_match_their_golden_file() -> None:
    lines = []
    for sentence, status in WAITED:
        code = exit_code(status)
        assert code is not None, sentence
        lines.append(f"{sentence}: {outcome_line('run', status, code)}")
    pending = {"phase": "Running", "conditions": [{"type": "Completed", "status": "False"}]}
    assert exit_code(pending) is None
    got = "\n".join(lines) + "\n"
    path = GOLDEN / "wait-outcomes.txt"
    if os.environ.get("OASIS_UPDATE_GOLDEN"):
        path.write_text(got)
    assert got == path.read_text(), f"`oasis wait` output changed; see {path}"
