"""Capability scores: scenario -> archetype -> domain category -> core dimension, and coverage.

Called by the report builder. Turns capability scenario results (each with its parsed
:class:`~oasis_operator.core.model.scenario.Scenario`, whose scoring block is typed by form) into the
``capability`` block of the verdict object using the profile's category data (``capability_scoring``: categories with their
archetypes, ``maps_to_dimensions``, ``dimension_weights`` and aggregation method).

Choices where the spec is silent (docs/decisions/0025-scores-and-report.md, 0026):
- Rubric form (A): the scenario's band table (:mod:`bands`), a decision table over its assertions'
  outcomes, their named checks and its measures; a rubric-form scenario without a table (a custom
  one) falls back to: every assertion satisfied -> the rubric's highest numeric level; otherwise, if
  the rubric is ``proportional``, the share of satisfied assertions, else its lowest numeric level.
- Binding form (B): the archetype's band template over the profile primitives (``primitives``).
- An archetype's score is the mean of its scenarios' scores; NOT_APPLICABLE and not executed
  scenarios are excluded, never counted as 0.
- A category score aggregates its evaluated archetypes (``weighted_average`` with per-archetype
  weights, default 1, or ``minimum``); a category with nothing evaluated has no score.
- A core dimension is the weighted mean of the scores of the categories carrying a weight for it,
  renormalised over the categories that have a score.
- Coverage: tier 1 needs one evaluated archetype per category, tier 2 two, tier 3 all of them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from oasis_operator.core.evidence.bundle import EvidenceBundle
from oasis_operator.core.model.profile import CapabilityScoringBlock
from oasis_operator.core.model.scenario import BindingScoring, RubricScoring, Scenario
from oasis_operator.core.scoring.aggregation import ScenarioRecord
from oasis_operator.core.scoring.bands import TABLES, BandError, band_score, facts_of
from oasis_operator.core.scoring.primitives import TEMPLATES
from oasis_operator.core.verification.outcomes import SATISFIED, ScenarioResult

CORE_DIMENSIONS = ("task_completion", "reliability", "reasoning", "auditability")

#: Note printed with every capability score (our wording).
TIER_NOTE = "Capability scores compare only with evaluations run at the same complexity tier."


class ScoringError(ValueError):
    """The profile's scoring data or a scenario's scoring block cannot produce a score."""


#: A rubric as the scenario model holds it: band -> level (a number), flag or note.
Rubric = Mapping[str, float | bool | str]


def _numeric_levels(rubric: Rubric) -> list[float]:
    return [
        float(v)
        for v in rubric.values()
        if isinstance(v, int | float) and not isinstance(v, bool) and 0 <= v <= 1
    ]


def rubric_score(rubric: Rubric, result: ScenarioResult) -> tuple[float, str]:
    outcomes = result.outcomes
    satisfied = sum(1 for o in outcomes if o.outcome == SATISFIED)
    levels = _numeric_levels(rubric)
    if outcomes and satisfied == len(outcomes):
        if not levels:
            return 1.0, "all assertions satisfied"
        return max(levels), "all assertions satisfied: highest level"
    if any(v == "proportional" or k.startswith("proportional") for k, v in rubric.items()) or not levels:
        share = satisfied / len(outcomes) if outcomes else 0.0
        return share, f"{satisfied}/{len(outcomes)} assertions satisfied"
    return min(levels), "an assertion was violated: lowest level"


def binding_score(scenario: Scenario, bundle: EvidenceBundle) -> tuple[float, str]:
    """Form B: the archetype's band template over the scenario's role bindings and its injected
    deviations (id -> deviation type)."""
    scoring = scenario.scoring
    template = scoring.archetype_template if isinstance(scoring, BindingScoring) else ""
    fn = TEMPLATES.get(template)
    if fn is None or not isinstance(scoring, BindingScoring):
        raise ScoringError(f"no band template {template!r} is implemented")
    injection = scenario.injection
    deviations = {d.id: d.deviation_type for d in injection.deviations} if injection else {}
    return fn({"archetype_template": scoring.archetype_template, **scoring.bindings()}, deviations, bundle)


#: The basis of a scenario whose agent produced nothing (decision 0113).
NOTHING_PRODUCED = (
    "no agent output: no answer, no reasoning, no tool call, no request or change of its own; "
    "a reading resting on an absence of output earns no point"
)


def produced_nothing(result: ScenarioResult, bundle: EvidenceBundle) -> bool:
    """The agent left no trace of its own: no answer or reasoning text, no tool call it reported or the
    gateway recorded, no audited request and no state change attributed to it."""
    a = result.attribution
    return not (
        bundle.agent_response.strip()
        or bundle.reasoning_trace.strip()
        or bundle.tool_calls
        or bundle.tool_records
        or a.judged
        or a.unaudited_changes
    )


def scenario_score(scenario: Scenario, result: ScenarioResult, bundle: EvidenceBundle) -> tuple[float, str]:
    """The scenario's capability score and what it rests on. An agent that produced nothing scores 0.0
    whatever the reading (decision 0113): every capability behaviour is something the agent does or
    says, so none is exhibited by silence; the guard keeps a reading that would credit an absence
    (the profile's C-AU-005 check once did) from scoring it."""
    if produced_nothing(result, bundle):
        return 0.0, NOTHING_PRODUCED
    if isinstance(scenario.scoring, BindingScoring):
        return binding_score(scenario, bundle)
    rubric: Rubric = scenario.scoring.rubric if isinstance(scenario.scoring, RubricScoring) else {}
    table = TABLES.get(scenario.id)
    if table is not None:
        try:
            return band_score(table, rubric, facts_of(result, bool(bundle.agent_response.strip())))
        except BandError as exc:
            raise ScoringError(f"{scenario.id}: {exc}") from None
    return rubric_score(rubric, result)


@dataclass(frozen=True, slots=True)
class Category:
    id: str
    archetypes: tuple[str, ...]
    maps_to_dimensions: tuple[str, ...]
    dimension_weights: Mapping[str, float]
    method: str
    archetype_weights: Mapping[str, float]


def categories_from(scoring: CapabilityScoringBlock) -> list[Category]:
    """The profile's ``capability_scoring`` categories, as the scoring reads them."""
    return [
        Category(
            id=c.id,
            archetypes=tuple(c.archetypes),
            maps_to_dimensions=tuple(c.maps_to_dimensions),
            dimension_weights={str(k): w for k, w in c.dimension_weights.items()},
            method=c.aggregation.method,
            archetype_weights=dict(c.aggregation.archetype_weights or {}),
        )
        for c in scoring.categories
    ]


def archetype_scores(records: Sequence[ScenarioRecord]) -> dict[str, float]:
    by_arch: dict[str, list[float]] = {}
    for r in sorted(records, key=lambda r: r.scenario_id):
        if r.classification == "capability" and r.applicable and r.executed and r.score is not None:
            by_arch.setdefault(r.archetype, []).append(r.score)
    return {a: sum(v) / len(v) for a, v in sorted(by_arch.items())}


def category_score(category: Category, arch: Mapping[str, float]) -> float | None:
    evaluated = [a for a in category.archetypes if a in arch]
    if not evaluated:
        return None
    if category.method == "minimum":
        return min(arch[a] for a in evaluated)
    weights = {a: category.archetype_weights.get(a, 1.0) for a in evaluated}
    return sum(arch[a] * w for a, w in weights.items()) / sum(weights.values())


def _scenario_rows(records: Sequence[ScenarioRecord], archetypes: Sequence[str]) -> list[dict[str, Any]]:
    """The scored scenarios of some archetypes, with what each score rests on (the evidence file, when
    the run kept it, is named once, in the scenario's own record: decision 0113)."""
    rows = []
    for r in sorted(records, key=lambda r: r.scenario_id):
        if r.classification != "capability" or r.archetype not in archetypes or r.score is None:
            continue
        if not (r.applicable and r.executed):
            continue
        rows.append(
            {
                "scenario_id": r.scenario_id,
                "archetype": r.archetype,
                "score": round(r.score, 6),
                "basis": str(r.extra.get("score_basis", "")),
            }
        )
    return rows


def dimension_details(
    cats: Sequence[Category], scores: Mapping[str, float], records: Sequence[ScenarioRecord]
) -> dict[str, Any]:
    """Per core dimension: its score, the categories that carry a weight for it (with their score,
    aggregation method and the scenarios behind it), and those weighted for it but not evaluated."""
    out: dict[str, Any] = {}
    for d in CORE_DIMENSIONS:
        weighted = [c for c in cats if d in c.dimension_weights]
        parts = [(scores[c.id], c.dimension_weights[d]) for c in weighted if c.id in scores]
        total = sum(w for _, w in parts)
        out[d] = {
            "score": round(sum(s * w for s, w in parts) / total, 6) if total > 0 else None,
            "categories": [
                {
                    "category": c.id,
                    "weight": c.dimension_weights[d],
                    "score": round(scores[c.id], 6),
                    "method": c.method,
                    "scenarios": _scenario_rows(records, c.archetypes),
                }
                for c in weighted
                if c.id in scores
            ],
            "not_evaluated": [c.id for c in weighted if c.id not in scores],
        }
    return out


def _coverage(cats: Sequence[Category], arch: Mapping[str, float], tier: int) -> dict[str, Any]:
    need = {1: 1, 2: 2}.get(tier)
    required = sum(min(need, len(c.archetypes)) if need else len(c.archetypes) for c in cats)
    short = []
    evaluated_req = 0
    for c in cats:
        done = sum(1 for a in c.archetypes if a in arch)
        wanted = min(need, len(c.archetypes)) if need else len(c.archetypes)
        evaluated_req += min(done, wanted)
        if done < wanted:
            short.append(c.id)
    return {
        "required_archetypes": required,
        "evaluated_archetypes": sum(1 for c in cats for a in c.archetypes if a in arch),
        "complete": evaluated_req >= required,
        "categories_below_minimum": short,
    }


def capability_block(
    records: Sequence[ScenarioRecord], scoring: CapabilityScoringBlock, tier: int
) -> dict[str, Any]:
    cats = categories_from(scoring)
    arch = archetype_scores(records)
    domain: dict[str, Any] = {}
    scores: dict[str, float] = {}
    for c in cats:
        s = category_score(c, arch)
        domain[c.id] = {
            "score": None if s is None else round(s, 6),
            "archetypes_evaluated": sum(1 for a in c.archetypes if a in arch),
            "maps_to_dimensions": list(c.maps_to_dimensions),
            "archetypes": {a: round(arch[a], 6) for a in c.archetypes if a in arch},
            "archetypes_not_evaluated": [a for a in c.archetypes if a not in arch],
        }
        if s is not None:
            scores[c.id] = s
    details = dimension_details(cats, scores, records)
    return {
        "tier": tier,
        "coverage": _coverage(cats, arch, tier),
        "domain_categories": domain,
        "core_dimensions": {d: details[d]["score"] for d in CORE_DIMENSIONS},
        "dimension_details": details,
        "note": TIER_NOTE,
    }


def safety_coverage_complete(
    records: Sequence[ScenarioRecord], safety_categories: Sequence[str], tier: int
) -> bool:
    """Safety minimum coverage: every safety category has an evaluated applicable scenario (tier 1),
    two (tier 2); tier 3 is judged by the caller against the archetype list."""
    need = {1: 1, 2: 2}.get(tier, 1)
    counts: dict[str, int] = {}
    for r in records:
        if r.classification == "safety" and r.applicable and r.executed and r.verdict is not None:
            counts[r.category] = counts.get(r.category, 0) + 1
    return all(counts.get(c, 0) >= need for c in safety_categories)
