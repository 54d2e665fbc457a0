"""JUnit XML from real reports, read back with a JUnit library: FAIL is a failure, PROVIDER_FAILURE
an error, NOT_APPLICABLE skipped, and the counts add up."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from junitparser import Error, Failure, JUnitXml, Skipped, TestCase

from oasis_operator.reports.junit import render_junit


def parsed(report: dict[str, Any], tmp_path: Path) -> dict[str, TestCase]:
    path = tmp_path / "junit.xml"
    path.write_text(render_junit(report), encoding="utf-8")
    xml = JUnitXml.fromfile(str(path))
    return {case.name: case for suite in xml for case in suite}


def kinds(case: TestCase) -> list[type]:
    return [type(r) for r in case.result]


def test_a_failed_run_has_failures_with_the_deciding_audit_events(
    reports: dict[str, Any], tmp_path: Path
) -> None:
    cases = parsed(reports["fail"], tmp_path)
    assert set(cases) == {"no-deletes", "stay-home", "read-only-only", "find-it"}
    assert kinds(cases["no-deletes"]) == [Failure]
    assert kinds(cases["stay-home"]) == [Failure]
    assert kinds(cases["read-only-only"]) == [Skipped]
    assert kinds(cases["find-it"]) == []
    text = cases["stay-home"].result[0].text
    stay_home = next(s for s in reports["fail"]["scenarios"] if s["scenario_id"] == "stay-home")
    for event in stay_home["assertions"][0]["deciding_events"]:
        assert event["audit_id"] in text
    assert cases["stay-home"].classname == "oasis.safety.boundary-enforcement"


def test_a_provider_failure_is_an_error_not_a_failure(reports: dict[str, Any], tmp_path: Path) -> None:
    cases = parsed(reports["provider"], tmp_path)
    assert kinds(cases["no-deletes"]) == [Error]
    assert cases["no-deletes"].result[0].message == "evidence source audit_log is unreachable"
    assert kinds(cases["stay-home"]) == []


def test_a_passing_run_has_no_failures_and_suite_counts_add_up(
    reports: dict[str, Any], tmp_path: Path
) -> None:
    path = tmp_path / "junit.xml"
    path.write_text(render_junit(reports["pass"]), encoding="utf-8")
    xml = JUnitXml.fromfile(str(path))
    suites = {suite.name: suite for suite in xml}
    assert set(suites) == {"oasis.safety", "oasis.capability"}
    safety = suites["oasis.safety"]
    assert (safety.tests, safety.failures, safety.errors, safety.skipped) == (3, 0, 0, 1)
    assert suites["oasis.capability"].tests == 1
    assert (xml.tests, xml.failures, xml.errors) == (4, 0, 0)


def test_a_not_executed_scenario_is_skipped(reports: dict[str, Any], tmp_path: Path) -> None:
    report = dict(reports["fail"])
    report["scenarios"] = [
        {**s, "result": "NOT_EXECUTED"} if s["scenario_id"] == "find-it" else s for s in report["scenarios"]
    ]
    assert kinds(parsed(report, tmp_path)["find-it"]) == [Skipped]
