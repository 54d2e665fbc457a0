"""Compiling a scenario into a verification plan, and validating it on the way.

Called by ``oasis evaluate``, by scenario validation, by the run report and by triage.
:func:`compile_plan` takes a parsed :class:`~oasis_operator.core.model.scenario.Scenario` (a caller
holding a document parses it first, with :func:`scenario_model` where the model's problems are to be
plan issues) plus the agent's effective configuration,
and returns a :class:`Plan`: the list of checks to run. The typed parts are compiled by one compiler
per ``verification`` key (:mod:`compilers`). Everything the engine cannot judge deterministically is
a :class:`PlanIssue` (field path, what was found, why) and :func:`compile_plan` raises
:class:`PlanError` — a scenario is never half-compiled, and nothing unjudgeable silently passes.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from oasis_operator.core.capability.measures import measures_of
from oasis_operator.core.judging.compilers import (
    REASON_BAD_SHAPE,
    REASON_BAD_VALUE_REF,
    REASON_BEHAVIOR_UNSUPPORTED,
    REASON_CONDITIONAL_AMBIGUOUS,
    REASON_CONTEXTUAL_SCOPE,
    REASON_INVALID_SCENARIO,
    REASON_NOTHING_TO_VERIFY,
    REASON_UNKNOWN_CHANNEL,
    VERIFICATION_COMPILERS,
    PlanBuilder,
    PlanIssue,
    compile_assertions,
    compile_visible_exposure,
    config_matches,
)
from oasis_operator.core.model.errors import ModelValidationError, format_path
from oasis_operator.core.model.scenario import Scenario, parse_scenario
from oasis_operator.core.verification.checks import Check
from oasis_operator.core.verification.plan_input import PlanInput

__all__ = [
    "REASON_BAD_SHAPE",
    "REASON_BAD_VALUE_REF",
    "REASON_BEHAVIOR_UNSUPPORTED",
    "REASON_CONDITIONAL_AMBIGUOUS",
    "REASON_CONTEXTUAL_SCOPE",
    "REASON_INVALID_SCENARIO",
    "REASON_NOTHING_TO_VERIFY",
    "REASON_UNKNOWN_CHANNEL",
    "Plan",
    "PlanError",
    "PlanInput",
    "PlanIssue",
    "applicability",
    "compile_input",
    "compile_plan",
    "config_matches",
    "scenario_model",
    "verification_issues",
]


class PlanError(ValueError):
    def __init__(self, scenario_id: str, issues: Sequence[PlanIssue]) -> None:
        lines = "\n".join(f"  - {i}" for i in issues)
        super().__init__(f"scenario {scenario_id!r} cannot be evaluated deterministically:\n{lines}")
        self.scenario_id = scenario_id
        self.issues = tuple(issues)


@dataclass(frozen=True, slots=True)
class Plan:
    scenario_id: str
    classification: str
    category: str
    archetype: str
    subcategory: str
    description: str
    checks: tuple[Check, ...]
    safety_tolerance: float
    scoring: Mapping[str, Any]
    #: Quantities a capability rubric needs that no assertion states (core/capability/measures):
    #: run over the same evidence, reported, never part of the verdict.
    measures: tuple[Check, ...] = ()
    #: Indexes of the scenario's tool_output_injection stimuli: a PASS without any of them in a tool
    #: record the agent received is vacuous (it never met the manipulated output).
    injected_stimuli: tuple[int, ...] = ()
    #: Indexes of the scenario's temporal_condition stimuli: a PASS with one of them not applied during
    #: the agent's turn (``EvidenceBundle.temporal_applied``) is vacuous.
    temporal_stimuli: tuple[int, ...] = ()


def applicability(scenario: Scenario, config: Mapping[str, Any]) -> tuple[bool, list[str]]:
    """Whether the scenario applies to the configuration, and the conditions that excluded it."""
    block = scenario.applicability or {}
    reasons = []
    for key, want in sorted(block.items()):
        if key not in config:
            reasons.append(f"{key} not reported and has no default")
        elif not config_matches({key: want}, config):
            reasons.append(f"{key}={config[key]!r} is not {want!r}")
    return (not reasons, reasons)


def scenario_model(scenario: Mapping[str, Any]) -> Scenario:
    """A scenario document parsed by the model; its problems are a :class:`PlanError` (plan issues)."""
    if not isinstance(scenario, Mapping):
        raise TypeError("a scenario is a Scenario model or a scenario document (a mapping)")
    try:
        model, _notes = parse_scenario(dict(scenario))
    except ModelValidationError as exc:
        issues = [
            PlanIssue(format_path(i.path) or "<document>", i.found or "", REASON_INVALID_SCENARIO, i.message)
            for i in exc.issues
        ]
        raise PlanError(str(scenario.get("id", "<no id>")), issues) from None
    return model


def compile_plan(scenario: Scenario, config: Mapping[str, Any] | None = None) -> Plan:
    """Compile a scenario; raise :class:`PlanError` listing every entry that cannot be judged."""
    return compile_input(PlanInput.of(scenario), config)


def compile_input(source: PlanInput, config: Mapping[str, Any] | None = None) -> Plan:
    """Compile the typed parts of a scenario (see :class:`PlanInput`)."""
    b = PlanBuilder(source=source, config=config or {})
    compile_assertions(b)
    verification = source.verification
    for key, compiler in VERIFICATION_COMPILERS:
        value = getattr(verification, key) if verification is not None else None
        if value is not None:
            compiler(b, value)
    compile_visible_exposure(b)
    if not b.checks and not b.issues and not source.scoring_binding:
        b.issue(
            "<document>",
            source.scenario_id,
            REASON_NOTHING_TO_VERIFY,
            "the scenario declares nothing to verify",
        )
    if b.issues:
        raise PlanError(source.scenario_id, b.issues)
    return Plan(
        scenario_id=source.scenario_id,
        classification=source.classification,
        category=source.category,
        archetype=source.archetype,
        subcategory=source.subcategory,
        description=source.description,
        checks=tuple(b.checks),
        safety_tolerance=source.safety_tolerance,
        scoring=dict(source.scoring),
        measures=measures_of(source),
        injected_stimuli=source.injected_stimuli,
        temporal_stimuli=source.temporal_stimuli,
    )


def verification_issues(
    scenario: Scenario | PlanInput, config: Mapping[str, Any] | None = None
) -> list[PlanIssue]:
    """What ``oasis validate`` reports for a scenario: every entry the engine cannot judge (empty
    when the scenario compiles). Conditional assertions are checked for every ``when`` branch."""
    source = scenario if isinstance(scenario, PlanInput) else PlanInput.of(scenario)
    configs: list[Mapping[str, Any]] = [config or {}]
    for cond in (source.assertions.conditional or []) if source.assertions else []:
        configs.append({k: (v[0] if isinstance(v, list) and v else v) for k, v in cond.when.items()})
    seen: dict[tuple[str, str], PlanIssue] = {}
    for cfg in configs:
        try:
            compile_input(source, cfg)
        except PlanError as exc:
            for issue in exc.issues:
                seen.setdefault((issue.path, issue.reason), issue)
    return [seen[k] for k in sorted(seen)]
