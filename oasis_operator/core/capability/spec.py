"""A behaviour of the profile, decomposed into named observable checks, and the check that runs it.

Every entry of the behaviour table (:mod:`table`) is a :class:`Behavior`: the profile behaviour id,
the section of the behaviour-definitions document that defines it, our paraphrase of the sentence
it decomposes (the project never copies the profile's words), the :class:`Part` checks it is made
of and how they combine, the evidence sources it needs, and a builder that turns a scenario into an
evaluator — a pure function of the evaluation context returning a :class:`Judgement`.

The named checks travel into the verdict (``AssertionOutcome.checks``) so that a capability band
table can read them (an agent that acted *and* escalated is a different band from one that acted
alone), and so that a reader sees which observable decided the outcome.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from oasis_operator.core.verification.checks import Check, PreconditionMissing
from oasis_operator.core.verification.context import EvalContext
from oasis_operator.core.verification.outcomes import SATISFIED, UNVERIFIABLE, VIOLATED, AssertionOutcome
from oasis_operator.core.verification.plan_input import PlanInput


@dataclass(frozen=True, slots=True)
class Part:
    """One observable check of a decomposition: its name and what it looks at, in words."""

    name: str
    meaning: str


@dataclass(frozen=True, slots=True)
class Judgement:
    """What an evaluator concluded: whether the behaviour was exhibited, why, its named checks, the
    evidence that decided it, an optional item tally, and a vacuity note for a satisfaction that
    rests on an absence."""

    holds: bool
    detail: str
    checks: tuple[tuple[str, bool], ...] = ()
    deciding: tuple[dict[str, Any], ...] = ()
    tally: tuple[int, int] | None = None
    vacuity: str | None = None


Evaluator = Callable[[EvalContext], Judgement]


@dataclass(frozen=True, slots=True)
class Finding:
    """The result of one part: whether it held, a short note, and the evidence behind it."""

    name: str
    held: bool
    note: str
    deciding: tuple[dict[str, Any], ...] = ()


def conclude(
    findings: Sequence[Finding],
    *,
    holds: bool | None = None,
    tally: tuple[int, int] | None = None,
    vacuity: str | None = None,
) -> Judgement:
    """A judgement from its parts: exhibited when every part held (unless ``holds`` says otherwise);
    the detail names the parts that did not hold, or all of them when they did."""
    ok = all(f.held for f in findings) if holds is None else holds
    failing = [f for f in findings if not f.held]
    shown = failing if failing and not ok else findings
    detail = "; ".join(f"{f.name}: {f.note}" for f in shown)
    deciding: list[dict[str, Any]] = []
    for f in findings:
        for d in f.deciding:
            if d not in deciding:
                deciding.append(d)
    return Judgement(
        holds=ok,
        detail=detail,
        checks=tuple((f.name, f.held) for f in findings),
        deciding=tuple(deciding[:6]),
        tally=tally,
        vacuity=vacuity if ok else None,
    )


@dataclass(frozen=True)
class BehaviorCheck(Check):
    """A behaviour of the table, built for one scenario."""

    source: str
    text: str
    evaluate: Evaluator
    needs: frozenset[str] = frozenset()

    def run(self, ctx: EvalContext) -> AssertionOutcome:
        try:
            j = self.evaluate(ctx)
        except PreconditionMissing as exc:
            return self.outcome(UNVERIFIABLE, "precondition not established", fault=str(exc))
        return self.outcome(
            SATISFIED if j.holds else VIOLATED,
            j.detail,
            deciding=j.deciding,
            vacuity=j.vacuity if j.holds else None,
            checks=j.checks,
            tally=j.tally,
        )


@dataclass(frozen=True)
class Behavior:
    """One row of the behaviour table (see the module docstring)."""

    id: str
    section: str
    paraphrase: str
    parts: tuple[Part, ...]
    needs: frozenset[str]
    build: Callable[[PlanInput], Evaluator] | None = None
    #: How the parts make the outcome, when it is not "every part holds".
    rule: str = "exhibited when every part holds"
    #: For behaviours whose check is built another way (the older evaluators of
    #: core/verification/behaviors.py): the check builder itself.
    make: Callable[[str, PlanInput], Check] | None = field(default=None)

    def check(self, source: str, scenario: PlanInput) -> Check:
        """The check of this behaviour for a scenario; raises ``UnsupportedEntry`` when the scenario
        does not declare what the behaviour needs to be judged."""
        if self.make is not None:
            return self.make(source, scenario)
        assert self.build is not None
        return BehaviorCheck(source=source, text=self.id, evaluate=self.build(scenario), needs=self.needs)
