"""JUnit XML from real reports, read back with a JUnit library: FAIL is a failure, PROVIDER_FAILURE
an error, NOT_APPLICABLE and the scenarios the provider did not execute skipped with their reason,
every case and suite timed, and the counts add up."""

from __future__ import annotations

import xml.etree.ElementTree as ET
from pathlib import Path
from typing import Any

from junitparser import Error, Failure, JUnitXml, Skipped, TestCase

from oasis_operator.reports.junit import render_junit
from tests.reports.conftest import with_unsupported


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
    complete = {**reports["pass"], "incomplete": False, "conformance_claim": {"claimed": True}}
    path.write_text(render_junit(complete), encoding="utf-8")
    xml = JUnitXml.fromfile(str(path))
    suites = {suite.name: suite for suite in xml}
    assert set(suites) == {"oasis.safety", "oasis.capability"}
    safety = suites["oasis.safety"]
    assert (safety.tests, safety.failures, safety.errors, safety.skipped) == (3, 0, 0, 1)
    assert suites["oasis.capability"].tests == 1
    assert (xml.tests, xml.failures, xml.errors) == (4, 0, 0)


def test_an_incomplete_pass_has_one_failure_the_missing_conformance_claim(
    reports: dict[str, Any], tmp_path: Path
) -> None:
    """Decision 0105: a JUnit gate (no failures) never opens on an incomplete evaluation."""
    path = tmp_path / "junit.xml"
    incomplete = {k: v for k, v in reports["pass"].items() if k != "conformance_claim"}
    path.write_text(render_junit({**incomplete, "incomplete": True}), encoding="utf-8")
    xml = JUnitXml.fromfile(str(path))
    suites = {suite.name: suite for suite in xml}
    assert set(suites) == {"oasis.safety", "oasis.capability", "oasis.claim"}
    assert suites["oasis.safety"].failures == 0, "the scenarios' own cases are unchanged"
    (case,) = list(suites["oasis.claim"])
    assert case.name == "conformance claim"
    assert kinds(case) == [Failure]
    assert "incomplete evaluation: no conformance claim (safety PASS" in case.result[0].message
    assert (xml.tests, xml.failures, xml.errors) == (5, 1, 0)


def test_a_not_executed_scenario_is_skipped(reports: dict[str, Any], tmp_path: Path) -> None:
    report = dict(reports["fail"])
    report["scenarios"] = [
        {**s, "result": "NOT_EXECUTED"} if s["scenario_id"] == "find-it" else s for s in report["scenarios"]
    ]
    assert kinds(parsed(report, tmp_path)["find-it"]) == [Skipped]


def test_scenarios_the_provider_did_not_execute_are_listed_as_skipped_with_their_reason(
    reports: dict[str, Any], tmp_path: Path
) -> None:
    report = with_unsupported(reports["fail"])
    cases = parsed(report, tmp_path)
    entries = report["not_executed_by_provider"]
    assert len(entries) == 4
    # Incomplete (scenarios not executed): the failed conformance-claim case too (decision 0105).
    assert set(cases) == {"no-deletes", "stay-home", "read-only-only", "find-it", "conformance claim"} | {
        e["scenario_id"] for e in entries
    }
    for e in entries:
        case = cases[e["scenario_id"]]
        assert kinds(case) == [Skipped]
        assert case.result[0].message == f"not executed by the provider: {e['reason']}"
        assert case.classname == "oasis.not-executed.uncategorised"
    xml = JUnitXml.fromfile(str(tmp_path / "junit.xml"))
    suites = {suite.name: suite for suite in xml}
    assert list(suites) == ["oasis.safety", "oasis.capability", "oasis.not-executed", "oasis.claim"]
    assert (suites["oasis.not-executed"].tests, suites["oasis.not-executed"].skipped) == (4, 4)
    assert (xml.tests, xml.failures, xml.skipped) == (9, 3, 5)  # and the missing claim
    for suite in xml:
        assert {p.name: p.value for p in suite.properties()}["incomplete"] == "true"


def test_a_not_executed_entry_that_names_its_classification_joins_that_suite(
    reports: dict[str, Any], tmp_path: Path
) -> None:
    report = with_unsupported(reports["pass"])
    first = report["not_executed_by_provider"][0]
    first.update(classification="safety", category="boundary-enforcement", result="UNSUPPORTED")
    cases = parsed(report, tmp_path)
    case = cases[first["scenario_id"]]
    assert case.classname == "oasis.safety.boundary-enforcement"
    assert case.result[0].message.startswith("not executed by the provider (UNSUPPORTED): ")
    suites = {suite.name: suite for suite in JUnitXml.fromfile(str(tmp_path / "junit.xml"))}
    assert (suites["oasis.safety"].tests, suites["oasis.safety"].skipped) == (4, 2)
    assert {p.name: p.value for p in suites["oasis.safety"].properties()}["incomplete"] == "true"


def test_every_testcase_and_suite_has_a_time_and_the_times_add_up(
    reports: dict[str, Any], tmp_path: Path
) -> None:
    report = with_unsupported(reports["fail"])
    timed = {"no-deletes": 2.5, "stay-home": 1.25}
    for s in report["scenarios"]:
        if s["scenario_id"] in timed:
            s["duration_seconds"] = timed[s["scenario_id"]]
    path = tmp_path / "junit.xml"
    path.write_text(render_junit(report), encoding="utf-8")
    root = ET.parse(path).getroot()
    assert root.tag == "testsuites"
    for element in root.iter():
        if element.tag in ("testsuites", "testsuite", "testcase"):
            assert "time" in element.attrib, (element.tag, element.attrib)
            assert float(element.attrib["time"]) >= 0
    xml = JUnitXml.fromfile(str(path))
    cases = {case.name: case for suite in xml for case in suite}
    assert {name: cases[name].time for name in timed} == timed
    assert cases["find-it"].time == 0.0  # a record without a duration
    suites = {suite.name: suite for suite in xml}
    assert suites["oasis.safety"].time == 3.75
    assert suites["oasis.not-executed"].time == 0.0
    assert float(root.attrib["time"]) == 3.75


def test_every_suite_carries_one_property_per_unmet_preflight_check(
    reports: dict[str, Any], tmp_path: Path
) -> None:
    report = with_unsupported(reports["fail"])
    environment = report["verdict"]["metadata"]["environment"]
    environment["preflight"] = [
        {
            "kind": "requirement",
            "name": "network_policy_enforcement",
            "met": False,
            "required": True,
            "reason": "declared False, expected True",
            "excludes": "the traffic side",
            "declared": False,
            "expected": True,
        },
        {
            "kind": "requirement",
            "name": "environment_type",
            "met": True,
            "required": True,
            "reason": "ok",
            "declared": "kubernetes-cluster",
            "expected": "kubernetes-cluster",
        },
    ]
    path = tmp_path / "junit.xml"
    path.write_text(render_junit(report), encoding="utf-8")
    for suite in JUnitXml.fromfile(str(path)):
        unmet = [p.value for p in suite.properties() if p.name == "preflight.unmet"]
        assert unmet == [
            "requirement network_policy_enforcement: declared False, expected True "
            "-- excludes the traffic side"
        ], suite.name
