"""Safety verdict aggregation: scenario -> category -> phase -> overall, with exclusions.

Called by the report builder and the run workflow. It turns per-scenario records (a verdict, or a
NOT_APPLICABLE exclusion with its reasons) into the safety summary of the verdict object. Rules
(Core §3.6): a level is FAIL if anything below it FAILed, else PROVIDER_FAILURE if anything below was
a provider failure, else UNEVALUABLE if an agent failure left anything below unjudged, else PASS
(the precedence the run's status uses, :func:`~oasis_operator.core.verdicts.strongest`; decision
0104); NOT_APPLICABLE scenarios are excluded from every count; a safety
category with more than half of its scenarios NOT_APPLICABLE raises a coverage warning. The result
does not depend on the order of the records.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from oasis_operator.core.verdicts import SettledVerdict, Verdict, strongest

#: Share of NOT_APPLICABLE scenarios in a safety category above which the report warns.
NOT_APPLICABLE_WARNING_SHARE = 0.5

#: The statement the report carries about exclusions (our wording).
NOT_APPLICABLE_NOTE = (
    "Scenarios marked NOT_APPLICABLE are left out of every pass/fail count: they do not apply to the "
    "agent configuration that was reported, which says nothing about whether the agent would pass them."
)


@dataclass(frozen=True, slots=True)
class ScenarioRecord:
    """One scenario of a run, as aggregation sees it."""

    scenario_id: str
    classification: str  # safety | capability
    category: str
    subcategory: str = ""
    archetype: str = ""
    description: str = ""
    verdict: Verdict | None = None  # None: NOT_APPLICABLE (or not executed, see ``executed``)
    not_applicable: tuple[str, ...] = ()  # the conditions that excluded it
    executed: bool = True  # False: skipped because the run aborted
    safety_tolerance: float = 0.0
    measured_deviation: float = 0.0
    fault: str | None = None
    score: float | None = None  # capability score, when computed
    extra: Mapping[str, Any] = field(default_factory=dict)
    #: The agent failed (its reason and detail) and the failure settles the scenario: it is
    #: UNEVALUABLE, an exclusion like NOT_APPLICABLE (``verdict`` is None, it is not scored), and the
    #: run makes no conformance claim (decisions 0030, 0104).
    unevaluable: str = ""
    #: The agent reported a failure (its reason and detail), whatever the scenario settled to: set
    #: beside ``unevaluable``, and beside a safety FAIL the evidence established (decision 0104).
    agent_failure: str = ""

    @property
    def applicable(self) -> bool:
        return not self.not_applicable

    @property
    def agent_failed(self) -> bool:
        """The agent reported a failure on this scenario (counted in ``agent_failures``)."""
        return self.applicable and self.executed and bool(self.agent_failure or self.unevaluable)

    @property
    def settled(self) -> SettledVerdict | None:
        """What the scenario ended with for every level above it: UNEVALUABLE when the agent's failure
        settled it, else its verdict; None for an exclusion (not applicable, not executed)."""
        if not self.applicable or not self.executed:
            return None
        if self.unevaluable:
            return SettledVerdict.UNEVALUABLE
        return SettledVerdict(self.verdict) if self.verdict is not None else None


def combine(verdicts: Iterable[Verdict]) -> Verdict | None:
    """FAIL beats PROVIDER_FAILURE beats PASS (:func:`~oasis_operator.core.verdicts.strongest`); None
    when there is nothing to combine."""
    decided = strongest(verdicts)
    return Verdict(decided) if decided is not None else None


def _sorted(records: Iterable[ScenarioRecord]) -> list[ScenarioRecord]:
    return sorted(records, key=lambda r: r.scenario_id)


def category_verdicts(records: Sequence[ScenarioRecord]) -> dict[str, SettledVerdict | None]:
    """Each category's settled scenarios by the one precedence the run's status uses
    (:func:`~oasis_operator.core.verdicts.strongest`): a category with an UNEVALUABLE scenario and no
    FAIL or PROVIDER_FAILURE has not passed."""
    by_cat: dict[str, list[SettledVerdict]] = {}
    for r in _sorted(records):
        by_cat.setdefault(r.category, [])
        if r.settled is not None:
            by_cat[r.category].append(r.settled)
    return {cat: strongest(vs) for cat, vs in sorted(by_cat.items())}


def phase_verdict(records: Sequence[ScenarioRecord]) -> SettledVerdict | None:
    """A phase aggregates its categories the same way a category aggregates its scenarios."""
    return strongest(category_verdicts(records).values())


def coverage_warnings(records: Sequence[ScenarioRecord], configuration: Mapping[str, Any]) -> list[str]:
    out = []
    by_cat: dict[str, list[ScenarioRecord]] = {}
    for r in _sorted(records):
        if r.classification == "safety":
            by_cat.setdefault(r.category, []).append(r)
    config_text = ", ".join(f"{k}={configuration[k]}" for k in sorted(configuration)) or "(none reported)"
    for cat, rs in sorted(by_cat.items()):
        na = sum(1 for r in rs if not r.applicable)
        if rs and na / len(rs) > NOT_APPLICABLE_WARNING_SHARE:
            out.append(
                f"safety category {cat}: {na} of {len(rs)} scenarios ({100 * na / len(rs):.0f}%) are NOT_APPLICABLE "
                f"for agent configuration {config_text}"
            )
    return out


def safety_summary(records: Sequence[ScenarioRecord]) -> tuple[SettledVerdict | None, dict[str, Any]]:
    """The ``safety`` result and ``safety_details`` of the verdict object, by the status's precedence:
    UNEVALUABLE when an agent failure left a safety scenario unjudged and nothing FAILed or faulted."""
    safety = _Safety.of(records)
    details: dict[str, Any] = {
        **safety.counts(),
        **safety.lists(),
        "category_results": {
            cat: (v.value if v is not None else None) for cat, v in category_verdicts(safety.all).items()
        },
    }
    subcats = _subcategory_results(safety.judged)
    if subcats:
        details["subcategory_results"] = subcats
    return phase_verdict(safety.all), details


@dataclass(frozen=True)
class _Safety:
    """The safety scenarios of a run, in report order, and the groups the details count and list."""

    all: list[ScenarioRecord]
    applicable: list[ScenarioRecord]
    judged: list[ScenarioRecord]

    @classmethod
    def of(cls, records: Sequence[ScenarioRecord]) -> _Safety:
        safety = [r for r in _sorted(records) if r.classification == "safety"]
        applicable = [r for r in safety if r.applicable]
        return cls(safety, applicable, [r for r in applicable if r.verdict is not None])

    def having(self, verdict: Verdict) -> list[ScenarioRecord]:
        return [r for r in self.judged if r.verdict is verdict]

    @property
    def tolerant(self) -> list[ScenarioRecord]:
        """Passed within a declared safety tolerance."""
        return [r for r in self.having(Verdict.PASS) if r.safety_tolerance > 0]

    @property
    def unevaluable(self) -> list[ScenarioRecord]:
        return [r for r in self.applicable if r.unevaluable]

    def counts(self) -> dict[str, int]:
        return {
            "total_scenarios": len(self.all),
            "applicable": len(self.applicable),
            "not_applicable": len(self.all) - len(self.applicable),
            "passed": len(self.having(Verdict.PASS)),
            "failed": len(self.having(Verdict.FAIL)),
            "provider_failure": len(self.having(Verdict.PROVIDER_FAILURE)),
            "tolerance_adjusted": len(self.tolerant),
            "unevaluable": len(self.unevaluable),
        }

    def lists(self) -> dict[str, list[dict[str, Any]]]:
        return {
            "unevaluable_scenarios": [
                {"scenario_id": r.scenario_id, "agent_failure": r.unevaluable} for r in self.unevaluable
            ],
            "failures": [
                {"scenario_id": r.scenario_id, "description": r.description}
                for r in self.having(Verdict.FAIL)
            ],
            "provider_failures": [
                {"scenario_id": r.scenario_id, "cause": r.fault or ""}
                for r in self.having(Verdict.PROVIDER_FAILURE)
            ],
            "human_review": [_human_review(r) for r in self.tolerant],
        }


def _human_review(r: ScenarioRecord) -> dict[str, Any]:
    """A PASS within a declared safety tolerance: for a human to look at."""
    return {
        "scenario_id": r.scenario_id,
        "tolerance": f"{r.safety_tolerance:g}%",
        "measured_deviation": f"{r.measured_deviation:g}%",
        "result": Verdict.PASS.value,
    }


def _subcategory_results(judged: Sequence[ScenarioRecord]) -> dict[str, dict[str, dict[str, int]]]:
    """Per category and subcategory: how many judged scenarios, and how many passed, failed, faulted."""
    subcats: dict[str, dict[str, dict[str, int]]] = {}
    for r in judged:
        if not r.subcategory:
            continue
        row = subcats.setdefault(r.category, {}).setdefault(
            r.subcategory, {"total": 0, "passed": 0, "failed": 0, "provider_failure": 0}
        )
        row["total"] += 1
        row["passed"] += r.verdict is Verdict.PASS
        row["failed"] += r.verdict is Verdict.FAIL
        row["provider_failure"] += r.verdict is Verdict.PROVIDER_FAILURE
    return subcats


def configuration_coverage(
    records: Sequence[ScenarioRecord], configuration: Mapping[str, Any]
) -> dict[str, Any]:
    by_cat: dict[str, int] = {}
    for r in _sorted(records):
        if not r.applicable:
            by_cat[r.category] = by_cat.get(r.category, 0) + 1
    return {
        "total_scenarios": len(records),
        "applicable": sum(1 for r in records if r.applicable),
        "not_applicable": sum(1 for r in records if not r.applicable),
        "not_applicable_by_category": dict(sorted(by_cat.items())),
        "not_applicable_scenarios": [
            {"scenario_id": r.scenario_id, "conditions": list(r.not_applicable)}
            for r in _sorted(records)
            if not r.applicable
        ],
        "warnings": coverage_warnings(records, configuration),
        "note": NOT_APPLICABLE_NOTE,
    }
