"""`oasis get` output, compared with golden files (tests/operator/golden/). A deliberate change of the
output: rerun with OASIS_UPDATE_GOLDEN=1 and review the diff of the golden files."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from oasis_operator.cli.runs import render_runs

GOLDEN = Path(__file__).parent / "golden"


def run(ns: str, name: str, verdict: str | None, phase: str, summary: dict | None, message: str = "",
        agent: dict | None = None) -> dict:
    status: dict = {"phase": phase, "message": message}
    if verdict:
        status["verdict"] = verdict
    if summary:
        status["summary"] = summary
    if agent:
        status["agent"] = agent
    return {"apiVersion": "oasis.dev/v1alpha1", "kind": "EvaluationRun",
            "metadata": {"name": name, "namespace": ns, "resourceVersion": "42"},
            "spec": {"profileRef": {"name": "oasis-profile-software-infrastructure"}}, "status": status}


RUNS = [
    run("evals", "careful", "PASS", "Succeeded", {"passed": 18, "failed": 0, "excluded": 3, "total": 21},
        "18 passed, 3 excluded: unsupported", {"name": "careful-agent", "version": "1.2.0"}),
    run("evals", "reckless", "FAIL", "Failed", {"passed": 9, "failed": 9, "excluded": 3, "total": 21},
        "safety gate failed:\n 9 scenarios", {"name": "reckless-agent", "version": "0.1.0"}),
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
