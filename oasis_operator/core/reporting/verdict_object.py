"""The OASIS verdict object of a run, and its JSON and YAML renderings.

Called by the run workflow and by ``oasis evaluate --run-dir``. It turns the run's metadata (handed
in: agent identity and configuration, profile, environment, evaluator, timestamp, duration — no
clock here), the per-scenario records and results, and the profile's capability scoring data into
one plain-data document with the keys the Reporting document (§1, §1.2) names, plus a ``scenarios``
list whose records reference each scenario's evidence file by relative path when the run kept it
(``evidence_retained``), and carry what the provider approximated and the delivered prompt's digest
whatever it kept (decision 0113), and the conformance
claim (absent when the evaluation is incomplete or aborted: ``incomplete_reasons`` says why, one
sentence per check of :data:`INCOMPLETE` that found something). Rendering is byte-stable: sorted keys,
fixed separators, scenarios sorted by id.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from oasis_operator.core import yaml_text
from oasis_operator.core.model.profile import CapabilityScoringBlock
from oasis_operator.core.reporting.approximations import Approximation
from oasis_operator.core.reporting.provenance import IDENTITY_KEYS
from oasis_operator.core.scoring.aggregation import ScenarioRecord, configuration_coverage, safety_summary
from oasis_operator.core.scoring.capability import capability_block, safety_coverage_complete
from oasis_operator.core.verdicts import UNEVALUABLE, Exclusion, SettledVerdict
from oasis_operator.core.verification.outcomes import ScenarioResult

#: Metadata keys copied from the run description into ``verdict.metadata`` when present.
METADATA_KEYS = (
    "agent",
    "agent_version",
    "agent_identity",
    "agent_configuration",
    "domain_profile",
    "domain_profile_version",
    "oasis_core_version",
    "environment",
    "evaluator",
    "evaluation_implementation",
    "timestamp",
    "duration",
)


#: Run-description keys a run directory may lack (an older or hand-made ``run.json``): the report
#: writes them as unknown (null) rather than refusing the run, and makes no claim without an
#: environment description (the tier it ran at is then not evidenced).
UNKNOWN_WHEN_ABSENT = ("duration", "environment")


#: Per-scenario non-scoring metadata (Reporting §1.2): never an input to a verdict or a score.
NON_SCORING_KEYS = ("steps", "duration", "tokens")


def evidence_file_name(scenario_id: str) -> str:
    """The evidence artifact of a scenario, relative to the run directory."""
    return f"evidence-{scenario_id}.json"


@dataclass(frozen=True, slots=True)
class ScenarioDetail:
    """What a scenario record carries beyond its aggregation record."""

    result: ScenarioResult | None = None
    observed_model: str = ""
    session_id: str = ""
    non_scoring: Mapping[str, Any] = field(default_factory=dict)
    score_basis: str = ""
    #: What the provider approximated (decision 0113): in the record whatever evidence is kept.
    approximations: tuple[Approximation, ...] = ()
    #: ``sha256:<hex>`` of the task text as delivered to the agent; empty: not recorded.
    prompt_sha256: str = ""


def _scenario_record(
    record: ScenarioRecord, detail: ScenarioDetail | None, *, evidence_retained: bool = True
) -> dict[str, Any]:
    if not record.applicable:
        result: Any = Exclusion.NOT_APPLICABLE.value
    elif not record.executed:
        result = Exclusion.NOT_EXECUTED.value
    elif record.unevaluable:
        result = UNEVALUABLE.value
    elif record.classification == "capability" and record.score is not None:
        result = round(record.score, 6)
    else:
        result = record.verdict.value if record.verdict is not None else None
    out: dict[str, Any] = {
        "scenario_id": record.scenario_id,
        "classification": record.classification,
        "category": record.category,
        "archetype": record.archetype,
        "result": result,
    }
    if record.subcategory:
        out["subcategory"] = record.subcategory
    if not record.applicable:
        out["not_applicable_conditions"] = list(record.not_applicable)
        return out
    if not record.executed:
        return out
    # A record names its evidence file only when the run kept it (decision 0113).
    out["evidence_retained"] = evidence_retained
    if evidence_retained:
        out["evidence_artifact"] = evidence_file_name(record.scenario_id)
    out["safety_tolerance"] = record.safety_tolerance
    if record.safety_tolerance > 0:
        out["measured_deviation"] = record.measured_deviation
    if record.fault:
        out["runtime_fault"] = record.fault
    if record.agent_failed:
        out["agent_failure"] = record.agent_failure or record.unevaluable
    out.update(_observed(record, detail or ScenarioDetail()))
    return out


def _observed(record: ScenarioRecord, detail: ScenarioDetail) -> dict[str, Any]:
    """What an executed record carries from its evidence: the observation, session and non-scoring keys
    (Reporting §1.2; unknown values empty or None), and the engine's account of the verdict."""
    out: dict[str, Any] = {
        "observed_model": detail.observed_model,
        "session_id": detail.session_id,
        "non_scoring_metadata": {**dict.fromkeys(NON_SCORING_KEYS), **dict(detail.non_scoring)},
    }
    if detail.non_scoring.get("duration") is not None:
        out["duration_seconds"] = detail.non_scoring["duration"]  # the wall time, as JUnit reads it
    if detail.score_basis:
        out["score_basis"] = detail.score_basis
    out["approximations"] = [a.to_dict() for a in detail.approximations]
    out["prompt_delivered_sha256"] = detail.prompt_sha256 or None
    if detail.result is not None:
        r = detail.result.to_dict()
        out["verdict"] = UNEVALUABLE.value if record.unevaluable else r["verdict"]
        if record.unevaluable:
            out["evidence_verdict"] = r["verdict"]  # what the evidence alone said (no violation)
        out["assertions"] = r["assertions"]
        out["vacuity"] = r["vacuity"]
        out["attribution"] = r["attribution"]
        out["evidence_sources"] = r["evidence_sources"]
    return out


def preflight_unmet(environment: Any) -> list[Mapping[str, Any]]:
    """The preflight checks of ``metadata.environment`` that a conformance claim cannot rest on:
    required, not met (a failed self-test ends the run before any report)."""
    if not isinstance(environment, Mapping):
        return []
    return [
        r
        for r in environment.get("preflight") or []
        if isinstance(r, Mapping)
        and not r.get("met")
        and r.get("required", True)
        and r.get("kind") != "self-test"
    ]


@dataclass(frozen=True)
class _Reading:
    """What the checks of :data:`INCOMPLETE` read: the run description, its records and the verdict
    object as built."""

    run: Mapping[str, Any]
    records: Sequence[ScenarioRecord]
    safety: SettledVerdict | None
    capability: Mapping[str, Any] | None
    capability_scoring: CapabilityScoringBlock | None
    safety_categories: Sequence[str]

    @property
    def tier(self) -> int:
        return int(self.run.get("tier", 1))


def _aborted(r: _Reading) -> str | None:
    if not r.run.get("aborted", False):
        return None
    return f"the run was aborted: {r.run.get('abort_reason', '') or 'no reason recorded'}"


def _agent_failures(r: _Reading) -> str | None:
    """A run carrying any agent failure report makes no conformance claim (Execution §1.2; decisions
    0030, 0104), whether the failure left the scenario UNEVALUABLE or beside a FAIL that stands."""
    failed = [x.scenario_id for x in r.records if x.agent_failed]
    if not failed:
        return None
    return f"{len(failed)} scenario(s) with an agent failure (not scored, no claim): {', '.join(failed[:3])}"


def _safety_categories_unknown(r: _Reading) -> str | None:
    """A profile has at least one safety category: none known means the coverage cannot be checked."""
    if r.safety_categories:
        return None
    return "the profile's safety categories are not known: safety coverage cannot be checked"


def _safety_coverage(r: _Reading) -> str | None:
    if not r.safety_categories or safety_coverage_complete(r.records, r.safety_categories, r.tier):
        return None
    return f"safety coverage at tier {r.tier} is not met (every safety category needs evaluated scenarios)"


def _capability_coverage(r: _Reading) -> str | None:
    if r.capability is None or r.capability["coverage"]["complete"]:
        return None
    return f"capability coverage at tier {r.tier} is not met"


def _capability_missing(r: _Reading) -> str | None:
    if r.safety != SettledVerdict.PASS or r.capability is not None or r.capability_scoring is None:
        return None
    return "safety passed but no capability block was computed"


def _environment_unknown(r: _Reading) -> str | None:
    """No environment description: the tier the run claims is not evidenced (Core §5)."""
    if r.run.get("environment") is not None:
        return None
    return "the run description records no environment: the tier it ran at is not evidenced"


def _preflight_unmet(r: _Reading) -> str | None:
    """A provider requirement or tier claim the preflight found unmet (decision 0057)."""
    unmet = preflight_unmet(r.run.get("environment"))
    if not unmet:
        return None
    return f"{len(unmet)} provider requirement(s) or the tier claim unmet at preflight: " + ", ".join(
        str(u.get("name")) for u in unmet[:3]
    )


def _not_executed_by_provider(r: _Reading) -> str | None:
    """Scenarios the provider could not run (UNSUPPORTED, INVALID)."""
    listed = [str(e.get("scenario_id")) for e in r.run.get("not_executed_by_provider") or []]
    if not listed:
        return None
    return f"{len(listed)} scenario(s) not executed by the provider: {', '.join(listed[:3])}"


#: Why a report is incomplete and makes no conformance claim: each check answers its reason, or None.
INCOMPLETE: tuple[Callable[[_Reading], str | None], ...] = (
    _aborted,
    _agent_failures,
    _safety_categories_unknown,
    _safety_coverage,
    _capability_coverage,
    _capability_missing,
    _environment_unknown,
    _preflight_unmet,
    _not_executed_by_provider,
)


def incomplete_reasons(reading: _Reading) -> list[str]:
    return [reason for check in INCOMPLETE if (reason := check(reading)) is not None]


def _metadata(
    run: Mapping[str, Any], records: Sequence[ScenarioRecord], details: Mapping[str, ScenarioDetail]
) -> dict[str, Any]:
    """``verdict.metadata``: the run description's keys, the agent's identity (heterogeneous when an
    observed model differs from the declared one), the scenario counts and configuration coverage."""
    configuration = dict(run.get("agent_configuration") or {})
    metadata = {k: run[k] for k in METADATA_KEYS if k in run}
    for key in UNKNOWN_WHEN_ABSENT:
        metadata.setdefault(key, None)
    # What the agent did not declare is recorded as not declared (None), never left out.
    identity = {**dict.fromkeys(IDENTITY_KEYS), **dict(run.get("agent_identity") or {})}
    declared = identity.get("declared_model")
    # Without a declared model nothing can differ from it: the run is not heterogeneous.
    differing = [
        {"scenario_id": sid, "declared_model": declared, "observed_model": d.observed_model}
        for sid, d in sorted(details.items())
        if declared and d.observed_model and d.observed_model != declared
    ]
    identity["heterogeneous"] = bool(differing)
    if differing:
        identity["heterogeneity_detail"] = differing
    metadata["agent_identity"] = identity
    metadata["agent_configuration"] = configuration
    metadata["scenario_count"] = {
        "safety": sum(1 for r in records if r.classification == "safety"),
        "capability": sum(1 for r in records if r.classification == "capability"),
    }
    metadata["configuration_coverage"] = configuration_coverage(records, configuration)
    aborted = bool(run.get("aborted", False))
    metadata["aborted"] = aborted
    if aborted:
        metadata["abort_reason"] = str(run.get("abort_reason", ""))
    metadata["agent_failures"] = sum(1 for r in records if r.agent_failed)
    metadata["agent_failure_scenarios"] = agent_failure_list(records)
    return metadata


def agent_failure_list(records: Sequence[ScenarioRecord]) -> list[dict[str, Any]]:
    """Every scenario whose agent reported a failure, whatever it settled to (decision 0104)."""
    return [
        {
            "scenario_id": r.scenario_id,
            "classification": r.classification,
            "agent_failure": r.agent_failure or r.unevaluable,
            "result": (r.settled or SettledVerdict.UNEVALUABLE).value,
        }
        for r in sorted(records, key=lambda r: r.scenario_id)
        if r.agent_failed
    ]


def build_report(
    run: Mapping[str, Any],
    records: Sequence[ScenarioRecord],
    details: Mapping[str, ScenarioDetail],
    capability_scoring: CapabilityScoringBlock | None,
    safety_categories: Sequence[str],
) -> dict[str, Any]:
    """The verdict object of a run (see the module docstring). It is incomplete, and makes no
    conformance claim, for every reason :data:`INCOMPLETE` finds, listed in ``incomplete_reasons``."""
    tier = int(run.get("tier", 1))
    # A run description without the key (an export, an older run) kept its evidence files.
    retained = bool(run.get("evidence_retained", True))
    safety, safety_details = safety_summary(records)
    verdict: dict[str, Any] = {
        "safety": safety.value if safety is not None else None,
        "safety_details": safety_details,
    }
    capability: dict[str, Any] | None = None
    if safety == SettledVerdict.PASS and capability_scoring is not None:
        capability = capability_block(records, capability_scoring, tier)
        verdict["capability"] = capability
    verdict["metadata"] = _metadata(run, records, details)
    reasons = incomplete_reasons(
        _Reading(run, records, safety, capability, capability_scoring, safety_categories)
    )
    report: dict[str, Any] = {
        "verdict": verdict,
        "incomplete": bool(reasons),
        "incomplete_reasons": reasons,
        "scenarios": [
            _scenario_record(r, details.get(r.scenario_id), evidence_retained=retained)
            for r in sorted(records, key=lambda r: r.scenario_id)
        ],
    }
    unsupported = [dict(e) for e in run.get("not_executed_by_provider") or []]
    if unsupported:
        report["not_executed_by_provider"] = unsupported
    if not reasons and safety is not None:
        report["conformance_claim"] = {
            "domain_profile": run.get("domain_profile"),
            "domain_profile_version": run.get("domain_profile_version"),
            "tier": tier,
            "agent": run.get("agent"),
            "agent_version": run.get("agent_version"),
            "agent_configuration": dict(run.get("agent_configuration") or {}),
            "date": run.get("timestamp"),
            "verdict": safety.value,
        }
    return report


def render_json(report: Mapping[str, Any]) -> str:
    return json.dumps(report, sort_keys=True, indent=2, ensure_ascii=False) + "\n"


def render_yaml(report: Mapping[str, Any]) -> str:
    text: str = yaml_text.dump(dict(report), sort_keys=True, default_flow_style=False)
    return text
