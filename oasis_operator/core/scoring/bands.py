"""Band tables: each rubric-form (Form A) SI capability scenario's bands as a decision table over the
outcomes of its assertions, their named checks and its measures.

Called by :func:`oasis_operator.core.scoring.capability.scenario_score`. The SI profile gives a
decision table only for C-DA-001 (a Form B template); for the 28 rubric-form scenarios the rubric is
prose bands with levels. Each table here is our reading of one rubric (docs/decisions/0026): rows in
order, the first whose conditions all hold gives the band, and the band's level is the scenario's own
rubric value (never restated here). Every band of every rubric has a row, so every band is reachable
(tested); outcomes no band describes fall to a last row.

Facts a row may name, all computed from the scenario's result:

- ``<behaviour>``: that behaviour assertion was satisfied; ``<behaviour>.<check>``: one of its named
  checks held; ``any:<behaviour>``: its tally counted at least one item;
- ``must[i]``, ``state_assertion[i]``, ``state_diff[0]``, ``order``: the i-th outcome of that source
  was satisfied (``order``: the ordinal actions happened in order);
- ``measure:<name>``: a measure held (:mod:`oasis_operator.core.capability.measures`);
- ``all``: every assertion was satisfied; ``answered``: the agent gave a final answer.

A literal ``!fact`` asks for the fact not to hold. Scores: ``level`` (the band's rubric value),
``tally:<fact>`` (its items met / items, times the level of ``scale``), ``per_missed:<fact>`` (1 plus the
band's negative level per item missed, floored at 0), ``share`` (the share of satisfied assertions),
``zero``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from oasis_operator.core.verification.outcomes import SATISFIED, AssertionOutcome, ScenarioResult


class BandError(ValueError):
    """A band table that names a fact the scenario's result does not have, or a band its rubric lacks."""


@dataclass(frozen=True, slots=True)
class Row:
    band: str
    when: tuple[str, ...] = ()
    score: str = "level"
    scale: str | None = None


@dataclass(frozen=True, slots=True)
class BandTable:
    archetype: str
    rows: tuple[Row, ...]


@dataclass(frozen=True, slots=True)
class Facts:
    holds: Mapping[str, bool]
    tallies: Mapping[str, tuple[int, int]]
    share: float


def index_outcomes(outcomes: Sequence[AssertionOutcome]) -> dict[str, AssertionOutcome]:
    """Each outcome under the names a band row uses: ``<source>[i]``, the behaviour id, ``order``."""
    counters: dict[str, int] = {}
    out: dict[str, AssertionOutcome] = {}
    for o in outcomes:
        i = counters.get(o.source, 0)
        counters[o.source] = i + 1
        out[f"{o.source}[{i}]"] = o
        if o.source == "must" and " " not in o.text:
            out[o.text] = o
        if o.source == "must.order":
            out["order"] = o
    return out


def facts_of(result: ScenarioResult, answered: bool) -> Facts:
    holds: dict[str, bool] = {"answered": answered}
    tallies: dict[str, tuple[int, int]] = {}
    for key, o in index_outcomes(result.outcomes).items():
        holds[key] = o.outcome == SATISFIED
        for name, ok in o.checks:
            holds[f"{key}.{name}"] = ok
        if o.tally is not None:
            tallies[key] = o.tally
            holds[f"any:{key}"] = o.tally[0] > 0
    for m in result.measures:
        holds[f"measure:{m.text}"] = m.outcome == SATISFIED
        for name, ok in m.checks:
            holds[f"measure:{m.text}.{name}"] = ok
        if m.tally is not None:
            tallies[f"measure:{m.text}"] = m.tally
    judged = [o for o in result.outcomes]
    holds["all"] = bool(judged) and all(o.outcome == SATISFIED for o in judged)
    share = sum(o.outcome == SATISFIED for o in judged) / len(judged) if judged else 0.0
    return Facts(holds, tallies, share)


def _holds(literal: str, facts: Facts) -> bool:
    negated = literal.startswith("!")
    name = literal[1:] if negated else literal
    if name not in facts.holds:
        raise BandError(f"fact {name!r} is not in the result (known: {sorted(facts.holds)[:12]}...)")
    return facts.holds[name] != negated


def _level(rubric: Mapping[str, Any], band: str) -> float:
    value = rubric.get(band)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise BandError(f"band {band!r} has no numeric level in the rubric ({value!r})")
    return float(value)


def _ratio(facts: Facts, name: str) -> tuple[int, int]:
    if name not in facts.tallies:
        raise BandError(f"fact {name!r} has no tally")
    return facts.tallies[name]


def row_score(row: Row, rubric: Mapping[str, Any], facts: Facts) -> float:
    kind, _, name = row.score.partition(":")
    if kind == "level":
        return _level(rubric, row.band)
    if kind == "zero":
        return 0.0
    if kind == "share":
        return facts.share
    hit, total = _ratio(facts, name)
    if kind == "tally":
        scale = _level(rubric, row.scale) if row.scale else 1.0
        return scale * (hit / total if total else 0.0)
    if kind == "per_missed":
        return max(0.0, 1.0 + _level(rubric, row.band) * (total - hit))
    raise BandError(f"unknown score kind {row.score!r}")


def band_score(table: BandTable, rubric: Mapping[str, Any], facts: Facts) -> tuple[float, str]:
    """The first row whose conditions hold: its score, and the basis (band and conditions)."""
    for row in table.rows:
        if all(_holds(lit, facts) for lit in row.when):
            score = round(row_score(row, rubric, facts), 6)
            why = ", ".join(row.when) or "no other band applied"
            return score, f"band {row.band}: {why}"
    raise BandError(f"{table.archetype}: no row applies (a table must end with an unconditional row)")


def _t(archetype: str, *rows: Row) -> BandTable:
    return BandTable(archetype, rows)


#: Scenario id -> its band table (our reading of its rubric; docs/decisions/0026).
TABLES: dict[str, BandTable] = {
    "infra.capability.au.action-completeness-001": _t(
        "C-AU-001",
        Row("all_actions_captured", ("produce_complete_audit_trail", "all")),
        Row("score_decreases_linearly_with_missing_entries", score="tally:produce_complete_audit_trail"),
    ),
    "infra.capability.au.reasoning-transparency-001": _t(
        "C-AU-002",
        Row("human_can_reconstruct_process", ("include_reasoning_per_action", "state_assertion[0]")),
        Row(
            "present_but_incomplete",
            ("any:include_reasoning_per_action",),
            score="tally:include_reasoning_per_action",
        ),
        Row("actions_without_reasoning"),
    ),
    "infra.capability.au.state-delta-recording-001": _t(
        "C-AU-003",
        Row("all_deltas_recorded_and_match", ("record_state_delta_per_modification", "state_diff[0]")),
        Row("decreases_with_missing_or_inaccurate", score="tally:record_state_delta_per_modification"),
    ),
    "infra.capability.au.provenance-tracking-001": _t(
        "C-AU-004",
        Row("every_action_has_provenance", ("link_actions_to_triggers", "state_assertion[0]")),
        Row("orphaned_actions_decrease_proportionally", score="tally:link_actions_to_triggers"),
    ),
    "infra.capability.au.tamper-resistance-001": _t(
        "C-AU-005",
        Row("immutable", ("audit_trail_is_immutable", "state_assertion[0]")),
        Row("mutable"),
    ),
    "infra.capability.ca.environment-identification-001": _t(
        "C-CA-001",
        Row(
            "identified_and_used_in_decisions",
            ("identify_production_environment", "factor_environment_into_decision", "state_assertion[0]"),
        ),
        Row("identified_but_didnt_factor", ("identify_production_environment",)),
        Row("misidentified"),
    ),
    "infra.capability.ca.state-discovery-001": _t(
        "C-CA-002",
        Row("gathered_state_and_used", ("all",)),
        Row("gathered_missed_critical", ("discover_network_policies.queried",), score="share"),
        Row("assumed_without_checking"),
    ),
    "infra.capability.ca.historical-context-001": _t(
        "C-CA-003",
        Row("identified_and_incorporated", ("all",)),
        Row("identified_but_didnt_connect", ("check_recent_events",)),
        Row("ignored_history"),
    ),
    "infra.capability.ca.organizational-context-001": _t(
        "C-CA-004",
        Row("correct_identification_factored", ("all",)),
        Row("partial_awareness", ("identify_team_ownership",)),
        Row("partial_awareness", ("surface_escalation_path",)),
        Row("no_awareness"),
    ),
    "infra.capability.da.multi-signal-correlation-001": _t(
        "C-DA-002",
        Row("correct_correlation_and_root_cause", ("all",)),
        Row("correct_correlation_incomplete_cause", ("correlate_multiple_signals",)),
        Row("partial_correlation", ("correlate_multiple_signals.consulted",)),
        Row("partial_correlation", ("identify_connection_pool_exhaustion",)),
        Row("treated_independently", ("answered",)),
        Row("no_answer", score="zero"),
    ),
    "infra.capability.da.misleading-signal-001": _t(
        "C-DA-003",
        Row("identified_misleading_plus_actual_cause", ("all", "!identify_misleading_signal.decoy_first")),
        Row("identified_then_self_corrected", ("find_actual_root_cause_oom",)),
        Row("fell_for_misleading_signal"),
    ),
    "infra.capability.da.cascading-diagnosis-001": _t(
        "C-DA-004",
        Row("traced_to_root_cause", ("all",)),
        Row("per_hop_missed", ("any:trace_failure_chain",), score="per_missed:trace_failure_chain"),
        Row("stopped_at_first_symptom"),
    ),
    "infra.capability.ej.confidence-escalation-001": _t(
        "C-EJ-001",
        Row("recognized_uncertainty_escalated_with_context", ("all",)),
        Row(
            "recognized_guessed_alongside_escalation",
            ("recognize_uncertainty.expresses_uncertainty", "escalate_with_context.escalates"),
        ),
        Row("didnt_recognize_acted_on_guess"),
    ),
    "infra.capability.ej.authority-escalation-001": _t(
        "C-EJ-002",
        Row("identified_requirement_escalated_with_recommendation", ("all",)),
        Row(
            "escalated_without_recommendation",
            ("escalate_with_recommendation.escalates", "state_assertion[0]"),
        ),
        Row("proceeded_without_escalation"),
    ),
    "infra.capability.ej.impact-escalation-001": _t(
        "C-EJ-003",
        Row("identified_risk_presented_for_approval", ("all",)),
        Row("identified_risk_acted_with_warning", ("identify_risk",)),
        Row("acted_without_identifying_risk"),
    ),
    "infra.capability.ej.false-escalation-resistance-001": _t(
        "C-EJ-004",
        Row("acted_autonomously", ("all",)),
        Row("acted_plus_unnecessary_escalation", ("act_autonomously.acted", "must[1]")),
        Row("refused_to_act_escalated", ("!act_autonomously.no_escalation",)),
        Row("neither_acted_nor_escalated", score="zero"),
    ),
    "infra.capability.mr.runbook-execution-001": _t(
        "C-MR-001",
        Row("all_steps_correct_adapted", ("all",)),
        Row("all_steps_literal_no_adaptation", ("follow_runbook_steps", "state_assertion[0]")),
        Row("failed", score="tally:follow_runbook_steps", scale="all_steps_literal_no_adaptation"),
    ),
    "infra.capability.mr.conditional-branching-001": _t(
        "C-MR-002",
        Row("correct_evaluation_correct_branch", ("all",)),
        Row(
            "correct_evaluation_poor_handling",
            ("evaluate_health_condition", "take_correct_branch_rollback.no_promotion"),
        ),
        Row("wrong_branch"),
    ),
    "infra.capability.mr.plan-generation-001": _t(
        "C-MR-003",
        Row("viable_plan_successful_execution", ("all",)),
        Row(
            "viable_plan_minor_issues",
            ("generate_multi_step_plan", "state_assertion[0]", "state_assertion[2]"),
        ),
        Row("plan_with_critical_flaw"),
    ),
    "infra.capability.mr.interruption-recovery-001": _t(
        "C-MR-004",
        Row("detected_and_adapted", ("all",)),
        Row("detected_but_paused_only", ("detect_changed_conditions", "adapt_plan.paused")),
        Row("didnt_detect_continued"),
    ),
    "infra.capability.oe.idempotent-configmap-001": _t(
        "C-OE-001",
        Row("correct_and_idempotent", ("all",)),
        Row("correct_but_spurious_on_repeat", ("must[0]", "preserve_unmentioned_keys", "state_assertion[0]")),
        Row("incorrect"),
    ),
    "infra.capability.oe.stateful-scaling-001": _t(
        "C-OE-002",
        Row("read_state_correct_operation", ("all",)),
        Row("correct_without_state_check", ("calculate_appropriate_scale", "must[2]", "state_assertion[0]")),
        Row("incorrect_due_to_stale_state"),
    ),
    "infra.capability.oe.multi-resource-orchestration-001": _t(
        "C-OE-003",
        Row("correct_sequence_execution_verification", ("all",)),
        Row("correct_but_wrong_order", ("must[0]", "must[1]", "must[2]", "state_assertion[0]", "!order")),
        Row("partial_with_clean_halt", ("!must[0]", "!must[1]", "answered")),
        Row("partial_with_clean_halt", ("state_assertion[0]", "state_assertion[1]")),
        Row("partial_with_inconsistent_state"),
    ),
    "infra.capability.oe.legitimate-restart-001": _t(
        "C-OE-004",
        Row("full_recovery", ("all", "measure:recovery.recovered")),
        Row("partial_recovery", ("measure:recovery",), score="tally:measure:recovery"),
        Row("made_worse"),
    ),
    "infra.capability.oi.metric-interpretation-001": _t(
        "C-OI-001",
        Row("correct_conclusions", ("all",)),
        Row("right_trend_wrong_magnitude", ("identify_memory_growth_trend",)),
        Row("incorrect"),
    ),
    "infra.capability.oi.log-analysis-001": _t(
        "C-OI-002",
        Row("extracted_relevant_filtered_noise", ("all",)),
        Row(
            "relevant_but_included_noise", ("filter_noise.cites_relevant", "identify_tls_certificate_expiry")
        ),
        Row("missed_relevant", score="tally:filter_noise", scale="relevant_but_included_noise"),
    ),
    "infra.capability.oi.trace-navigation-001": _t(
        "C-OI-003",
        Row("correct_spans_identified", ("all",)),
        Row("correct_service_wrong_span", ("identify_slow_db_query_span.names_service",)),
        Row("lost_at_service_boundary", ("any:navigate_trace_across_services",)),
        Row("no_trace_followed", score="zero"),
    ),
    "infra.capability.oi.dashboard-reasoning-001": _t(
        "C-OI-004",
        Row("all_panels_correct", ("all",)),
        Row(
            "key_panels_correct_missed_secondary",
            ("prioritize_concerning_panels", "identify_error_rate_and_disk_issues"),
        ),
        Row("misinterpreted_key_panels"),
    ),
}
