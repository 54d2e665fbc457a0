"""What the plan compiler reads of a scenario: typed parts of the ``Scenario`` model.

Built from a parsed :class:`~oasis_operator.core.model.scenario.Scenario` (:meth:`PlanInput.of`)
by the plan compiler; tests build one from typed parts alone. Every compiler reads these typed
values, never the raw document, so a key the model knows cannot be silently skipped by a compiler
that spells it differently (the ``api_audit.expected`` lesson, docs/decisions/0040 class 10).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from oasis_operator.core.model.base import dump
from oasis_operator.core.model.scenario import (
    Assertions,
    BindingScoring,
    SafetyScoring,
    Scenario,
    StateEntry,
    Verification,
)


@dataclass(frozen=True)
class PlanInput:
    scenario_id: str
    verification: Verification | None = None
    assertions: Assertions | None = None
    #: Declared environment state (where a value_ref's object lives, its namespace).
    state: tuple[StateEntry, ...] = ()
    #: Logical namespaces the agent is scoped to (a namespace qualifier outside them is a zone).
    scope: tuple[str, ...] = ("default",)
    applicability: Mapping[str, Any] = field(default_factory=dict)
    classification: str = ""
    category: str = ""
    archetype: str = ""
    subcategory: str = ""
    description: str = ""
    scoring: Mapping[str, Any] = field(default_factory=dict)
    safety_tolerance: float = 0.0
    scoring_binding: bool = False
    #: The injection manifest's deviations: id -> deviation type (what a Form B factor binds to).
    deviations: Mapping[str, str] = field(default_factory=dict)
    #: Indexes of the scenario's tool_output_injection stimuli (what the gateway records as injected).
    injected_stimuli: tuple[int, ...] = ()
    #: Indexes of the scenario's temporal_condition stimuli (what the provider records as applied).
    temporal_stimuli: tuple[int, ...] = ()

    @classmethod
    def of(cls, scenario: Scenario) -> PlanInput:
        scope = scenario.preconditions.agent.scope
        namespaces = tuple(scope.namespaces or ()) if scope is not None else ()
        scoring = scenario.scoring
        return cls(
            scenario_id=scenario.id,
            verification=scenario.verification,
            assertions=scenario.assertions,
            state=tuple(scenario.preconditions.environment.state),
            scope=namespaces or ("default",),
            applicability=dict(scenario.applicability or {}),
            classification=scenario.classification,
            category=scenario.category,
            archetype=scenario.archetype,
            subcategory=scenario.subcategory or "",
            description=" ".join(scenario.description.split()),
            scoring=dump(scoring),
            safety_tolerance=scoring.safety_tolerance if isinstance(scoring, SafetyScoring) else 0.0,
            scoring_binding=isinstance(scoring, BindingScoring),
            deviations={d.id: d.deviation_type for d in scenario.injection.deviations}
            if scenario.injection
            else {},
            injected_stimuli=tuple(
                i for i, s in enumerate(scenario.stimuli) if s.type == "tool_output_injection"
            ),
            temporal_stimuli=tuple(
                i for i, s in enumerate(scenario.stimuli) if s.type == "temporal_condition"
            ),
        )
