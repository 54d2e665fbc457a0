"""Assertion outcomes and a scenario's result.

Produced by the checks and the engine, consumed by aggregation, reports and the CLI. The verdicts
themselves (only ``PASS``, ``FAIL`` and ``PROVIDER_FAILURE``, Core §3.6), the exclusions and their
precedence are defined in :mod:`oasis_operator.core.verdicts`.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from oasis_operator.core.verdicts import Verdict as Verdict

#: Assertion outcome states.
SATISFIED = "satisfied"
VIOLATED = "violated"
#: The evidence the assertion needs could not be obtained (a runtime provider fault).
UNVERIFIABLE = "unverifiable"


@dataclass(frozen=True, slots=True)
class AssertionOutcome:
    """The result of one assertion or verification entry."""

    source: str  # must | must_not | api_audit.forbidden | state_assertion | ...
    text: str
    outcome: str  # SATISFIED | VIOLATED | UNVERIFIABLE
    detail: str = ""
    vacuity: str | None = None  # a vacuity.* constant, only on SATISFIED
    deciding: tuple[dict[str, Any], ...] = ()
    fault: str | None = None  # the runtime fault, only on UNVERIFIABLE
    #: The named observable checks a decomposed behaviour is made of, each with whether it held
    #: (core/capability): what capability band tables read besides the outcome.
    checks: tuple[tuple[str, bool], ...] = ()
    #: For a behaviour judged item by item (actions captured in a trail, deltas recorded, hops
    #: traced): how many items met it, out of how many.
    tally: tuple[int, int] | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "source": self.source,
            "text": self.text,
            "outcome": self.outcome,
            "detail": self.detail,
            "deciding_events": list(self.deciding),
        }
        if self.vacuity is not None:
            out["vacuity"] = self.vacuity
        if self.fault is not None:
            out["fault"] = self.fault
        if self.checks:
            out["checks"] = dict(self.checks)
        if self.tally is not None:
            out["tally"] = list(self.tally)
        return out


@dataclass(frozen=True, slots=True)
class Attribution:
    """How many audit entries the window held and how many were judged as the agent's."""

    total: int
    judged: int
    agent_principals: tuple[str, ...]
    out_of_window: int = 0
    denied: int = 0
    dry_run: int = 0
    #: Judged requests made by another identity (judged as the agent, see principals.py).
    other_principals: int = 0
    #: State changes no audited write explains, attributed to the agent.
    unaudited_changes: int = 0
    #: Judged events received after the window's end (still judged).
    after_window: int = 0
    #: Judged requests seen only at the RequestReceived stage (outcome unknown).
    outcome_unknown: int = 0

    def to_dict(self) -> dict[str, Any]:
        return {
            "total": self.total,
            "judged": self.judged,
            "agent_principals": list(self.agent_principals),
            "out_of_window": self.out_of_window,
            "denied": self.denied,
            "dry_run": self.dry_run,
            "other_principals": self.other_principals,
            "unaudited_changes": self.unaudited_changes,
            "after_window": self.after_window,
            "outcome_unknown": self.outcome_unknown,
        }


@dataclass(frozen=True, slots=True)
class ScenarioResult:
    scenario_id: str
    verdict: Verdict
    outcomes: tuple[AssertionOutcome, ...]
    attribution: Attribution
    safety_tolerance: float = 0.0
    measured_deviation: float = 0.0
    fault: str | None = None
    vacuity: tuple[str, ...] = field(default=())
    #: Every evidence source the verdict rests on, with its provenance (Reporting §1.1, §2.6).
    evidence_sources: Mapping[str, Any] = field(default_factory=dict)
    #: Quantities a capability band table reads (never part of the verdict).
    measures: tuple[AssertionOutcome, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "scenario_id": self.scenario_id,
            "evidence_sources": dict(self.evidence_sources),
            "verdict": self.verdict.value,
            "assertions": [o.to_dict() for o in self.outcomes],
            "attribution": self.attribution.to_dict(),
            "safety_tolerance": self.safety_tolerance,
            "measured_deviation": self.measured_deviation,
            "vacuity": list(self.vacuity),
        }
        if self.fault is not None:
            out["fault"] = self.fault
        if self.measures:
            out["measures"] = [m.to_dict() for m in self.measures]
        return out
