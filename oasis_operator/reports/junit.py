"""The JUnit XML rendering of a run, for CI systems that show test reports.

Called by ``oasis report --format junit``. It turns the verdict object (plain data, as stored in
``report.json``) into one ``<testsuites>`` document: a ``<testsuite>`` per classification (safety,
capability) and a ``<testcase>`` per scenario, classname ``oasis.<classification>.<category>``.
FAIL becomes a ``<failure>``, PROVIDER_FAILURE an ``<error>`` (the harness, not the agent, failed),
NOT_APPLICABLE, NOT_EXECUTED and UNEVALUABLE a ``<skipped>``; a capability scenario passes with its score in a
property. Violated assertions and their deciding audit events are the failure's text. Every text
and attribute is made printable (control characters and lone surrogates escaped), so the document is
well-formed whatever the agent declared or named.

Every scenario of the profile is listed, so a CI dashboard shows the whole profile: those the provider
did not execute (``not_executed_by_provider``: UNSUPPORTED, INVALID; they have no record in
``scenarios``) are skipped with their reason, in their classification's suite when the entry names
it, else in ``oasis.not-executed``. Times are the scenario's ``duration_seconds`` when its record
has one, else 0; a suite's time is the sum. Each suite carries an ``incomplete`` property, and a
``preflight.unmet`` property per check the provider's preflight found unmet. An incomplete evaluation
(decision 0105) adds one more suite, ``oasis.claim``, with one failed test case, ``conformance claim``:
a CI gate that opens on a JUnit report without failures never opens on an incomplete PASS. An
executed scenario's case carries what the provider approximated (an ``approximation`` property each,
and the same lines in its ``system-out``), the delivered prompt's digest and whether its evidence file
was kept (decision 0113).
"""

from __future__ import annotations

import xml.etree.ElementTree as ET
from collections.abc import Mapping, Sequence
from typing import Any

from oasis_operator.core.preflight import unmet_lines
from oasis_operator.core.reasons import printable
from oasis_operator.core.reporting.deciding import deciding_line
from oasis_operator.core.verdicts import Exclusion, SettledVerdict, Verdict

#: Suite names, in output order (others, such as NOT_EXECUTED_SUITE, after them, sorted).
SUITES = ("safety", "capability")
#: The suite of scenarios not executed by the provider whose entry names no classification.
NOT_EXECUTED_SUITE = "not-executed"
#: Characters of the report's own texts shown as they are (every other control is escaped).
_KEPT = "\n\t"


def _assertion_lines(scenario: Mapping[str, Any], outcomes: Sequence[str]) -> list[str]:
    lines: list[str] = []
    for a in scenario.get("assertions") or []:
        if a.get("outcome") not in outcomes:
            continue
        lines.append(f"{a.get('outcome')}: [{a.get('source')}] {a.get('text')} — {a.get('detail')}")
        lines += [f"    {deciding_line(e, full=True)}" for e in a.get("deciding_events") or []]
    return lines


def _testcase(scenario: Mapping[str, Any]) -> ET.Element:
    classification = str(scenario.get("classification") or "unknown")
    case = ET.Element(
        "testcase",
        name=str(scenario.get("scenario_id")),
        classname=f"oasis.{classification}.{scenario.get('category') or 'uncategorised'}",
    )
    result = scenario.get("result")
    verdict = scenario.get("verdict", result)
    props = ET.SubElement(case, "properties")
    ET.SubElement(props, "property", name="archetype", value=str(scenario.get("archetype", "")))
    ET.SubElement(props, "property", name="result", value=str(result))
    if scenario.get("vacuity"):
        ET.SubElement(props, "property", name="vacuity", value=",".join(scenario["vacuity"]))
    if result == Exclusion.NOT_APPLICABLE:
        conditions = "; ".join(scenario.get("not_applicable_conditions") or [])
        ET.SubElement(case, "skipped", message=f"not applicable: {conditions}")
    elif result == Exclusion.NOT_EXECUTED:
        ET.SubElement(case, "skipped", message="not executed: the run stopped before this scenario")
    elif result == SettledVerdict.UNEVALUABLE:
        ET.SubElement(
            case,
            "skipped",
            message=f"unevaluable: the agent failed ({scenario.get('agent_failure')}) "
            "and the evidence shows no violation",
        )
    elif verdict == Verdict.FAIL:
        failure = ET.SubElement(case, "failure", message="the agent violated the scenario", type=Verdict.FAIL)
        failure.text = "\n".join(_assertion_lines(scenario, ("violated",)))
    elif verdict == Verdict.PROVIDER_FAILURE:
        fault = str(scenario.get("runtime_fault") or "the evaluation harness could not obtain the evidence")
        error = ET.SubElement(case, "error", message=fault, type=Verdict.PROVIDER_FAILURE)
        error.text = "\n".join(_assertion_lines(scenario, ("unverifiable", "violated")))
    if isinstance(result, int | float) and not isinstance(result, bool):
        ET.SubElement(props, "property", name="score", value=f"{result:.6g}")
    _approximations(case, props, scenario)
    return case


def _approximations(case: ET.Element, props: ET.Element, scenario: Mapping[str, Any]) -> None:
    """What the provider approximated (decision 0113): a property each, and the same lines in the
    case's system-out (what most CI viewers show), with the delivered prompt's digest and whether the
    evidence file was kept."""
    if "approximations" not in scenario:
        return
    lines = []
    for a in scenario.get("approximations") or []:
        line = f"[{a.get('requirement')}] {a.get('what')}: {a.get('why')}"
        ET.SubElement(props, "property", name="approximation", value=line)
        lines.append(f"approximated {line}")
    if scenario.get("prompt_delivered_sha256"):
        ET.SubElement(props, "property", name="prompt.sha256", value=str(scenario["prompt_delivered_sha256"]))
    kept = scenario.get("evidence_artifact") or "not retained"
    ET.SubElement(props, "property", name="evidence", value=str(kept))
    if not lines:
        lines.append("approximated: nothing")
    ET.SubElement(case, "system-out").text = "\n".join([*lines, f"evidence: {kept}"])


def _seconds(scenario: Mapping[str, Any]) -> float:
    value = scenario.get("duration_seconds")
    if isinstance(value, int | float) and not isinstance(value, bool) and value >= 0:
        return float(value)
    return 0.0


def _not_executed_case(entry: Mapping[str, Any]) -> ET.Element:
    """A scenario the provider did not execute (no record in ``scenarios``): skipped, with why."""
    classification = str(entry.get("classification") or NOT_EXECUTED_SUITE)
    case = ET.Element(
        "testcase",
        name=str(entry.get("scenario_id")),
        classname=f"oasis.{classification}.{entry.get('category') or 'uncategorised'}",
    )
    result = str(entry.get("result") or entry.get("verdict") or "")
    props = ET.SubElement(case, "properties")
    ET.SubElement(props, "property", name="result", value=result or "NOT_EXECUTED_BY_PROVIDER")
    why = f" ({result})" if result else ""
    ET.SubElement(
        case,
        "skipped",
        message=f"not executed by the provider{why}: {entry.get('reason') or 'no reason given'}",
    )
    return case


def _cases(report: Mapping[str, Any]) -> dict[str, list[tuple[ET.Element, float]]]:
    """Suite name -> its test cases with their times, every scenario of the report in one."""
    by_suite: dict[str, list[tuple[ET.Element, float]]] = {}
    scenarios = sorted(report.get("scenarios") or [], key=lambda s: str(s.get("scenario_id")))
    for s in scenarios:
        by_suite.setdefault(str(s.get("classification") or "unknown"), []).append((_testcase(s), _seconds(s)))
    entries = sorted(report.get("not_executed_by_provider") or [], key=lambda e: str(e.get("scenario_id")))
    for e in entries:
        by_suite.setdefault(str(e.get("classification") or NOT_EXECUTED_SUITE), []).append(
            (_not_executed_case(e), 0.0)
        )
    return by_suite


def _printable(root: ET.Element) -> None:
    """Every text and attribute of the tree made :func:`~oasis_operator.core.reasons.printable`
    (newlines and tabs kept): much of it is the agent's (its name, the names in its requests), and a
    control character or a lone surrogate would make the document ill-formed XML, or steer the
    terminal of whoever reads the CI log (decision 0099)."""
    for element in root.iter():
        if element.text:
            element.text = printable(element.text, keep=_KEPT)
        if element.tail:
            element.tail = printable(element.tail, keep=_KEPT)
        for key, value in element.attrib.items():
            element.set(key, printable(value, keep=_KEPT))


def render_junit(report: Mapping[str, Any]) -> str:
    """The report as a JUnit XML document (UTF-8 text with an XML declaration)."""
    verdict = report.get("verdict") or {}
    root = ET.Element("testsuites", name=f"oasis: {(verdict.get('metadata') or {}).get('agent', 'agent')}")
    by_suite = _cases(report)
    # One property per check the provider's preflight found unmet (decision 0057), on every suite.
    environment = (verdict.get("metadata") or {}).get("environment") or {}
    preflight = unmet_lines(environment.get("preflight") or [])
    totals = {"tests": 0, "failures": 0, "errors": 0, "skipped": 0}
    total_time = 0.0
    for suite_name in [*SUITES, *sorted(set(by_suite) - set(SUITES))]:
        members = by_suite.get(suite_name)
        if not members:
            continue
        suite = ET.SubElement(root, "testsuite", name=f"oasis.{suite_name}")
        props = ET.SubElement(suite, "properties")
        ET.SubElement(props, "property", name="incomplete", value=str(bool(report.get("incomplete"))).lower())
        for line in preflight:
            ET.SubElement(props, "property", name="preflight.unmet", value=line)
        counts = {"tests": len(members), "failures": 0, "errors": 0, "skipped": 0}
        suite_time = 0.0
        for case, seconds in members:
            case.set("time", f"{seconds:.3f}")
            suite_time += seconds
            counts["failures"] += case.find("failure") is not None
            counts["errors"] += case.find("error") is not None
            counts["skipped"] += case.find("skipped") is not None
            suite.append(case)
        for key, value in counts.items():
            suite.set(key, str(value))
            totals[key] += value
        suite.set("time", f"{suite_time:.3f}")
        total_time += suite_time
    if report.get("incomplete") and not report.get("conformance_claim"):
        _claim_suite(root, totals, verdict, preflight)
    for key, value in totals.items():
        root.set(key, str(value))
    root.set("time", f"{total_time:.3f}")
    _printable(root)
    ET.indent(root)
    return '<?xml version="1.0" encoding="UTF-8"?>\n' + ET.tostring(root, encoding="unicode") + "\n"


def _claim_suite(
    root: ET.Element, totals: dict[str, int], verdict: Mapping[str, Any], preflight: Sequence[str]
) -> None:
    """The failed ``conformance claim`` case of an incomplete evaluation (decision 0105): the scenarios'
    own cases say what ran and how; this one says that no claim rests on them."""
    suite = ET.SubElement(root, "testsuite", name="oasis.claim", tests="1", failures="1", errors="0")
    suite.set("skipped", "0")
    suite.set("time", "0.000")
    props = ET.SubElement(suite, "properties")
    ET.SubElement(props, "property", name="incomplete", value="true")
    for line in preflight:
        ET.SubElement(props, "property", name="preflight.unmet", value=line)
    case = ET.SubElement(suite, "testcase", name="conformance claim", classname="oasis.claim", time="0.000")
    safety = verdict.get("safety") or "no verdict"
    failure = ET.SubElement(
        case,
        "failure",
        type="incomplete",
        message=f"incomplete evaluation: no conformance claim (safety {safety} on what ran)",
    )
    failure.text = (
        "The evaluation is incomplete (an opted-in incomplete run, unmet provider requirements, an "
        "unbacked tier, scenarios not executed or unevaluable): its verdicts make no conformance claim."
    )
    totals["tests"] += 1
    totals["failures"] += 1
