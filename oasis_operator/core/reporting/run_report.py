"""Recomputing a whole run's report from its scenarios and stored evidence.

Called by ``oasis evaluate --run-dir`` and by the run workflow, so that both produce the report the
same way. It turns the run description, the parsed scenarios
(:class:`~oasis_operator.core.model.scenario.Scenario`; the caller parses the documents) and, per
scenario, its evidence
(a bundle plus an iterator of audit events, obtained through the ``evidence`` callable the caller
supplies — the I/O stays with the caller) into the verdict object of :mod:`verdict_object`.

A scenario whose ``applicability`` excludes the agent configuration is NOT_APPLICABLE and needs no
evidence; an applicable scenario without evidence was not executed (the run aborted before it).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from oasis_operator.core.contract.outcome import UNEVALUABLE, settle_verdict
from oasis_operator.core.evidence.bundle import BundleError, EvidenceBundle
from oasis_operator.core.judging.engine import evaluate
from oasis_operator.core.judging.plan import applicability, compile_plan
from oasis_operator.core.model.profile import CapabilityScoringBlock
from oasis_operator.core.model.scenario import Scenario, operator_prompt
from oasis_operator.core.reporting.approximations import Approximation, approximations
from oasis_operator.core.reporting.verdict_object import ScenarioDetail, build_report
from oasis_operator.core.scoring.aggregation import ScenarioRecord
from oasis_operator.core.scoring.capability import scenario_score
from oasis_operator.core.verification.outcomes import UNVERIFIABLE, Verdict

#: Loads one scenario's evidence, or returns None when the scenario has none (not executed).
EvidenceSource = Callable[[str], tuple[EvidenceBundle, Iterator[str]] | None]


def evaluate_scenario(
    scenario: Scenario,
    configuration: Mapping[str, Any],
    evidence: tuple[EvidenceBundle, Iterable[str | Mapping[str, Any]]] | None,
) -> tuple[ScenarioRecord, ScenarioDetail | None]:
    sid = scenario.id
    classification = scenario.classification
    base: dict[str, Any] = {
        "scenario_id": sid,
        "classification": classification,
        "category": scenario.category,
        "subcategory": scenario.subcategory or "",
        "archetype": scenario.archetype,
        "description": " ".join(scenario.description.split()),
    }
    applies, reasons = applicability(scenario, configuration)
    if not applies:
        return ScenarioRecord(**base, not_applicable=tuple(reasons)), None
    if evidence is None:
        return ScenarioRecord(**base, executed=False), None
    bundle, events = evidence
    if bundle.scenario_id != sid:
        raise BundleError(
            "bundle.scenario_id", f"evidence of scenario {bundle.scenario_id!r}, not of {sid!r}"
        )
    plan = compile_plan(scenario, configuration)
    result = evaluate(plan, bundle, events)
    seen = _seen(scenario, bundle)
    outcome = bundle.agent_outcome
    if outcome is not None and not outcome.answered:
        base["agent_failure"] = outcome.summary()  # counted whatever the scenario settles to
    if (
        outcome is not None
        and settle_verdict(result.verdict, outcome, classification=classification) == UNEVALUABLE
    ):
        # The agent failed and its failure settles the scenario: nothing to judge or score it on
        # (decisions 0030, 0104).
        record = ScenarioRecord(
            **base, safety_tolerance=result.safety_tolerance, unevaluable=outcome.summary()
        )
        return record, dataclasses.replace(
            seen, result=result, observed_model=bundle.observed_model, non_scoring=_non_scoring(bundle)
        )
    score: float | None = None
    basis = ""
    unverified = [o.text for o in result.outcomes if o.outcome == UNVERIFIABLE]
    if classification == "capability" and result.verdict is not Verdict.PROVIDER_FAILURE:
        # A scenario whose evidence could not be gathered has no score (it is not a 0); nor has one
        # with an assertion that could not be verified beside a violation: its band is not known.
        if unverified:
            basis = f"incomplete: {len(unverified)} assertion(s) could not be verified ({unverified[0][:80]})"
        elif bundle.faults:
            # A violation beside a harness fault (decision 0095): the band is not known either.
            basis = f"incomplete: a harness fault beside the violation ({bundle.faults[0].text[:80]})"
        else:
            score, basis = scenario_score(scenario, result, bundle)
    record = ScenarioRecord(
        **base,
        verdict=result.verdict,
        safety_tolerance=result.safety_tolerance,
        measured_deviation=result.measured_deviation,
        fault=result.fault,
        score=score,
        extra={"score_basis": basis} if basis else {},
    )
    return record, dataclasses.replace(
        seen,
        result=result,
        observed_model=bundle.observed_model,
        score_basis=basis,
        non_scoring=_non_scoring(bundle),
    )


def behaviours(scenario: Scenario) -> list[str]:
    """Every behaviour the scenario's assertions name, conditional branches included."""
    a = scenario.assertions
    if a is None:
        return []
    entries = [*(a.must or []), *(a.must_not or [])]
    for c in a.conditional or []:
        entries += [*(c.must or []), *(c.must_not or [])]
    return [e.behavior for e in entries if e.behavior is not None]


def scenario_approximations(scenario: Scenario, bundle: EvidenceBundle) -> tuple[Approximation, ...]:
    """What the provider approximated in this scenario (decision 0113)."""
    return approximations(
        bundle.provider_notes,
        declared_prompt=operator_prompt(scenario),
        delivered_prompt=bundle.delivered_prompt,
        behaviours=behaviours(scenario) if scenario.classification == "capability" else (),
    )


def _seen(scenario: Scenario, bundle: EvidenceBundle) -> ScenarioDetail:
    """What a record shows of the scenario's execution whatever evidence the run keeps."""
    return ScenarioDetail(
        approximations=scenario_approximations(scenario, bundle),
        prompt_sha256=bundle.delivered_prompt_sha256,
    )


def _non_scoring(bundle: EvidenceBundle) -> dict[str, Any]:
    """What the evidence says about the agent's turn that no verdict or score reads (Reporting §1.2):
    its step count (the tool calls it reported). The wall time comes from the run description; token
    usage is not part of our agent contract: both unknown here."""
    return {"steps": len(bundle.tool_calls), "duration": None, "tokens": None}


def run_report(
    run: Mapping[str, Any],
    scenarios: Sequence[Scenario],
    evidence: EvidenceSource,
    capability_scoring: CapabilityScoringBlock | None,
    safety_categories: Sequence[str],
) -> dict[str, Any]:
    configuration = dict(run.get("agent_configuration") or {})
    records: list[ScenarioRecord] = []
    details: dict[str, ScenarioDetail] = {}
    non_scoring = run.get("non_scoring_metadata") or {}
    sessions = run.get("session_ids") or {}
    for scenario in scenarios:
        sid = scenario.id
        applies, _ = applicability(scenario, configuration)
        loaded = evidence(sid) if applies else None
        record, detail = evaluate_scenario(scenario, configuration, loaded)
        records.append(record)
        if detail is not None:
            details[sid] = dataclasses.replace(
                detail,
                session_id=str(sessions.get(sid, "")),
                non_scoring={**detail.non_scoring, **dict(non_scoring.get(sid) or {})},
            )
    return build_report(run, records, details, capability_scoring, safety_categories)
