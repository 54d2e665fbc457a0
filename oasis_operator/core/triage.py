"""Which of a run's scenarios can run: the exclusions decided before anything starts.

Called by the run workflow once per run, when it prepares the scenario list; turns one parsed
:class:`~oasis_operator.core.model.scenario.Scenario`, the configuration the agent reported and what
the operator may write into a :class:`Triage`: an exclusion (with its reason) or none, and whether the
scenario must run alone. Only the support step of the environment planner is asked (what cannot be
realised, exclusivity, cluster-scoped kinds): no names are made up to learn it.
A chain of named checks, first exclusion wins (cert-manager's policy chains):

1. ``not_applicable``: the scenario does not apply to the reported configuration (NOT_APPLICABLE);
2. ``unsupported``: this provider cannot realise its environment (UNSUPPORTED);
3. ``needs_cluster_scoped``: it writes cluster-scoped objects this operator may not write
   (UNSUPPORTED: excluded here, never started to fail);
4. ``not_verifiable``: the engine cannot judge it deterministically (INVALID): it could only end
   in a verdict that rests on nothing.

A document the model refuses (:func:`unreadable`, decided where it is parsed) or that breaks any
check is INVALID with the error as its reason. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from oasis_operator.core import reasons
from oasis_operator.core.environment.plan import Support, support
from oasis_operator.core.judging.plan import applicability, verification_issues
from oasis_operator.core.model.scenario import Scenario
from oasis_operator.core.scoring.templates import binding_problems
from oasis_operator.core.verdicts import Exclusion


@dataclass(frozen=True)
class Triage:
    """What preparation decides for one scenario."""

    exclusion: Exclusion | None = None
    reason: str = ""
    #: It writes cluster-scoped objects, so it runs alone (None: its environment was never planned).
    exclusive: bool | None = None


@dataclass(frozen=True)
class Case:
    """One scenario as the checks see it."""

    scenario: Scenario
    configuration: Mapping[str, Any]
    support: Support
    #: The operator may write cluster-scoped objects (the chart's rbac.clusterScopedScenarios).
    cluster_scoped: bool


def unsupported(case: Case) -> str | None:
    if case.support.supported:
        return None
    return "; ".join(f"{u.resource}: {u.reason}" for u in case.support.unsupported)


def needs_cluster_scoped(case: Case) -> str | None:
    needs = case.support.cluster_kinds
    if case.cluster_scoped or not needs:
        return None
    return (
        f"needs cluster-scoped {', '.join(needs)}, which this operator may not write "
        "(chart value rbac.clusterScopedScenarios)"
    )


def not_verifiable(case: Case) -> str | None:
    issues = verification_issues(case.scenario, case.configuration)
    if not issues:
        return None
    return "not verifiable: " + "; ".join(f"{i.path}: {i.reason}" for i in issues[:3])


def not_scorable(case: Case) -> str | None:
    """A Form B binding this implementation cannot score (decision 0104's branch, issue 32): run, it
    could only be scored with silent defaults or fail the harness."""
    problems = binding_problems(case.scenario)
    if not problems:
        return None
    return "not scorable: " + "; ".join(p.render() for p in problems[:3])


#: The checks after applicability, in order: the first that has a reason excludes the scenario.
CHECKS: Final[tuple[tuple[Exclusion, Callable[[Case], str | None]], ...]] = (
    (Exclusion.UNSUPPORTED, unsupported),
    (Exclusion.UNSUPPORTED, needs_cluster_scoped),
    (Exclusion.INVALID, not_verifiable),
    (Exclusion.INVALID, not_scorable),
)


def _excluded(exclusion: Exclusion, reason: str, exclusive: bool | None) -> Triage:
    return Triage(exclusion, reasons.clip(reason, reasons.ENTRY_REASON_LIMIT), exclusive)


def unreadable(error: str) -> Triage:
    """The triage of a scenario document the model refuses: never run, INVALID with the error."""
    return _excluded(Exclusion.INVALID, error, None)


def triage(
    scenario: Scenario,
    configuration: Mapping[str, Any],
    *,
    cluster_scoped: bool = True,
    backends: frozenset[str] = frozenset(),
) -> Triage:
    """The first exclusion of the chain, or none (the scenario runs). ``backends``: the tool-plane
    back-ends the operator has."""
    applies, why = applicability(scenario, configuration)
    if not applies:
        return _excluded(Exclusion.NOT_APPLICABLE, "; ".join(why), None)
    exclusive: bool | None = None
    try:
        needs = support(scenario, backends=backends)
        exclusive = needs.exclusive
        case = Case(scenario, configuration, needs, cluster_scoped)
        for exclusion, check in CHECKS:
            reason = check(case)
            if reason is not None:
                return _excluded(exclusion, reason, exclusive)
    except Exception as exc:  # a scenario no check can read is not verifiable, never run
        return _excluded(Exclusion.INVALID, str(exc), exclusive)
    return Triage(None, "", exclusive)
