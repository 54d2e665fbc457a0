"""`oasis get` (the server's Table laid out as kubectl does), `describe` and `wait` output, compared with golden files (tests/operator/golden/). A deliberate change of the
output: rerun with OASIS_UPDATE_GOLDEN=1 and review the diff of the golden files."""

from __future__ import annotations

import datetime as dt
import json
import os
from pathlib import Path

import pytest
import yaml

from oasis_operator.cli.runs import describe_lines, render_runs
from oasis_operator.cli.server_table import human_duration, render_table
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

#: A Table as the API server gives it for ``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``: the CRD's
#: printer columns (written out here, so the test is about the layout; tests/operator/test_cli_table.py
#: compares `oasis get` with `kubectl get` on the real server).
NOW = dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.UTC)
COLUMNS = [
    {"name": "Name", "type": "string", "format": "name", "priority": 0},
    {"name": "Verdict", "type": "string", "format": "", "priority": 0},
    {"name": "Phase", "type": "string", "format": "", "priority": 0},
    {"name": "Passed", "type": "integer", "format": "", "priority": 0},
    {"name": "Total", "type": "integer", "format": "", "priority": 0},
    {"name": "Suspended", "type": "boolean", "format": "", "priority": 1},
    {"name": "Message", "type": "string", "format": "", "priority": 1},
    {"name": "Age", "type": "date", "format": "", "priority": 0},
]
AGES = {
    "careful": "2026-01-02T03:00:52Z",
    "reckless": "2025-12-31T01:04:05Z",
    "pending-one": "2026-01-02T03:04:05Z",
}
TABLE = {
    "kind": "Table",
    "apiVersion": "meta.k8s.io/v1",
    "metadata": {"resourceVersion": "42"},
    "columnDefinitions": COLUMNS,
    "rows": [
        {
            "cells": [
                it["metadata"]["name"],
                it["status"].get("verdict"),
                it["status"]["phase"],
                (it["status"].get("summary") or {}).get("passed"),
                (it["status"].get("summary") or {}).get("total"),
                it["metadata"]["name"] == "pending-one",
                it["status"].get("message") or None,
                AGES[it["metadata"]["name"]],
            ],
            "object": {"kind": "PartialObjectMetadata", "metadata": it["metadata"]},
        }
        for it in RUNS
    ],
}

TABLE_CASES = [
    ("table", dict()),
    ("wide", dict(wide=True)),
    ("all-namespaces", dict(all_namespaces=True)),
    ("all-namespaces-wide", dict(wide=True, all_namespaces=True)),
]
CASES = [("name", dict(output="name")), ("json", dict(output="json")), ("yaml", dict(output="yaml"))]


def _golden(case: str, got: str) -> None:
    path = GOLDEN / f"get-{case}.txt"
    if os.environ.get("OASIS_UPDATE_GOLDEN"):
        path.write_text(got)
    assert got == path.read_text(), f"`oasis get` output ({case}) changed; see {path}"


@pytest.mark.parametrize(("case", "kwargs"), TABLE_CASES, ids=[c[0] for c in TABLE_CASES])
def test_get_lays_out_the_servers_table_as_kubectl(case: str, kwargs: dict) -> None:
    _golden(case, render_table(TABLE, now=NOW, **kwargs) + "\n")


@pytest.mark.parametrize(("case", "kwargs"), CASES, ids=[c[0] for c in CASES])
def test_get_output_matches_its_golden_file(case: str, kwargs: dict) -> None:
    _golden(case, render_runs(RUNS, **kwargs) + "\n")


def test_a_named_run_is_the_object_itself_not_a_list() -> None:
    one = json.loads(render_runs(RUNS[:1], "json", header=False))
    assert one["kind"] == "EvaluationRun"
    assert one["metadata"]["name"] == "careful"
    assert yaml.safe_load(render_runs(RUNS[:1], "yaml", header=False))["kind"] == "EvaluationRun"


@pytest.mark.parametrize(
    ("seconds", "shown"),
    [
        (-5, "<invalid>"),
        (0, "0s"),
        (119, "119s"),
        (125, "2m5s"),
        (600, "10m"),
        (3 * 3600 + 60, "3h1m"),
        (9 * 3600, "9h"),
        (50 * 3600, "2d2h"),
        (10 * 86400, "10d"),
        (800 * 86400, "2y70d"),
        (9 * 365 * 86400, "9y"),
    ],
)
def test_ages_read_as_kubectl_writes_them(seconds: int, shown: str) -> None:
    assert human_duration(seconds) == shown


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
