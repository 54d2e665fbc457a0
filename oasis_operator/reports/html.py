"""The HTML report of a run: one self-contained page (inline CSS, no script, no external resource).

Called by ``oasis report --format html``. It turns the verdict object built by
:mod:`oasis_operator.core.reporting.verdict_object` (plain data, as stored in ``report.json``) into
an HTML document: the safety verdict first, with a one-screen summary (the safety gate, the capability
dimensions as a small chart, the coverage, the failures linked to their evidence), then the safety categories, each scenario with its
assertions and the audit events that decided them, the capability scores by category and dimension
with the tier, the coverage and the conformance claim.

Everything in a report may come from the agent (its declared identity, the names it used in API
requests, metadata it reported), so the template is rendered with autoescaping on and nothing is
marked safe, and every printed value is made printable first (control characters and lone
surrogates escaped).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

import jinja2

from oasis_operator.core.preflight import unmet_lines
from oasis_operator.core.reasons import printable
from oasis_operator.core.reporting.deciding import channel_label, deciding_line, masked
from oasis_operator.core.verdicts import Exclusion, SettledVerdict

#: Colour class of each scenario result or verdict, for the template's badges.
RESULT_CLASSES: dict[str, str] = {
    SettledVerdict.PASS: "pass",
    SettledVerdict.FAIL: "fail",
    SettledVerdict.PROVIDER_FAILURE: "provider",
    SettledVerdict.UNEVALUABLE: "provider",
    Exclusion.NOT_APPLICABLE: "na",
    Exclusion.NOT_EXECUTED: "na",
}
#: Results whose scenario is shown open: what a reader must look at.
OPEN_RESULTS = frozenset({SettledVerdict.FAIL, SettledVerdict.PROVIDER_FAILURE, SettledVerdict.UNEVALUABLE})


def _shown(value: Any) -> Any:
    """Every value the template prints, before escaping: text made printable (control characters,
    lone surrogates and bidirectional controls escaped, newlines and tabs kept), so the page is
    valid UTF-8 and nothing the agent wrote steers the reader's display (decision 0099)."""
    if hasattr(value, "__html__"):
        return value  # markup (a macro's output): made of values that came through here already
    return printable(value, keep="\n\t") if isinstance(value, str) else value


_ENV = jinja2.Environment(
    loader=jinja2.PackageLoader("oasis_operator.reports", "templates"),
    autoescape=True,
    finalize=_shown,
    undefined=jinja2.StrictUndefined,
    trim_blocks=True,
    lstrip_blocks=True,
)


def _badge(result: Any) -> str:
    if isinstance(result, int | float) and not isinstance(result, bool):
        return "score"
    return RESULT_CLASSES.get(str(result), "na")


def _score(value: Any) -> str:
    if value is None:
        return "—"
    if isinstance(value, int | float) and not isinstance(value, bool):
        return f"{value:.2f}"
    return str(value)


def _plain(value: Any) -> str:
    """Nested values as compact JSON, the rest as text (escaped by the template either way)."""
    if isinstance(value, Mapping | list | tuple):
        return json.dumps(value, sort_keys=True, ensure_ascii=False, default=str)
    return "" if value is None else str(value)


_ENV.filters["badge"] = _badge
_ENV.filters["plain"] = _plain
_ENV.filters["score"] = _score
_ENV.filters["deciding"] = deciding_line
_ENV.filters["channel"] = channel_label
_ENV.filters["masked"] = masked
_ENV.globals["OPEN_RESULTS"] = OPEN_RESULTS


#: The summary's dimension chart: one bar per core dimension, this many pixels for a score of 1.
CHART_WIDTH = 240
CHART_ROW = 22


def _why(s: Mapping[str, Any]) -> str:
    """One line on why a scenario needs a look: its first violation on a FAIL (with a provider fault
    beside it, decision 0095), else its fault, the agent's failure or its first violation."""
    violated = [a for a in s.get("assertions") or [] if a.get("outcome") == "violated"]
    more = f" (+{len(violated) - 1} more)" if len(violated) > 1 else ""
    if violated and s.get("result") == "FAIL":
        beside = f"; beside a provider fault: {s['runtime_fault']}" if s.get("runtime_fault") else ""
        return f"violated: {violated[0].get('text')}{more}{beside}"
    if s.get("runtime_fault"):
        return f"provider fault: {s['runtime_fault']}"
    if s.get("agent_failure"):
        return f"the agent failed ({s['agent_failure']})"
    if violated:
        return f"violated: {violated[0].get('text')}{more}"
    return ""


def summary_context(report: Mapping[str, Any]) -> dict[str, Any]:
    """The one-screen summary: the safety gate, the capability dimensions as a chart, the coverage of
    the profile, and each scenario a reader must look at, linked to its evidence further down."""
    verdict = report.get("verdict") or {}
    scenarios = list(report.get("scenarios") or [])
    not_executed = list(report.get("not_executed_by_provider") or [])
    capability = verdict.get("capability") or {}
    dims = sorted((capability.get("core_dimensions") or {}).items())
    bars = [
        {
            "name": name,
            "value": value,
            "y": i * CHART_ROW,
            "width": round(float(value) * CHART_WIDTH, 1) if isinstance(value, int | float) else 0.0,
        }
        for i, (name, value) in enumerate(dims)
    ]
    look = [
        {"id": s.get("scenario_id"), "result": s.get("result"), "why": _why(s)}
        for s in scenarios
        if str(s.get("result")) in OPEN_RESULTS
    ]
    return {
        "bars": bars,
        "chart_height": max(1, len(bars)) * CHART_ROW,
        "chart_width": CHART_WIDTH,
        "look": look,
        "executed": len(scenarios),
        "not_executed_count": len(not_executed),
        "profile_total": len(scenarios) + len(not_executed),
        "archetypes": capability.get("coverage") or {},
    }


def html_context(report: Mapping[str, Any]) -> dict[str, Any]:
    """The values the template shows, taken from the verdict object (missing parts become empty)."""
    verdict = report.get("verdict") or {}
    metadata = verdict.get("metadata") or {}
    scenarios = list(report.get("scenarios") or [])
    safety = [s for s in scenarios if s.get("classification") == "safety"]
    capability = [s for s in scenarios if s.get("classification") != "safety"]
    environment = metadata.get("environment") or {}
    return {
        "safety": verdict.get("safety"),
        "details": verdict.get("safety_details") or {},
        "capability": verdict.get("capability"),
        "metadata": metadata,
        "coverage": metadata.get("configuration_coverage") or {},
        "incomplete": bool(report.get("incomplete")),
        "claim": report.get("conformance_claim"),
        "safety_scenarios": safety,
        "capability_scenarios": capability,
        # Scenarios the provider did not execute (UNSUPPORTED, INVALID) have no record in
        # ``scenarios``: listed on their own, with why, so that no scenario of the profile is missing.
        "not_executed": sorted(
            report.get("not_executed_by_provider") or [], key=lambda e: str(e.get("scenario_id"))
        ),
        "summary": summary_context(report),
        # The provider's preflight: its summary, and one line per unmet check (decision 0057).
        "conformance_check": environment.get("conformance_check") or "",
        "preflight_unmet": unmet_lines(environment.get("preflight") or []),
    }


def render_html(report: Mapping[str, Any]) -> str:
    """The report as one HTML document."""
    return _ENV.get_template("report.html.j2").render(**html_context(report))
