"""Which of a run's scenarios can run: the exclusions decided before anything starts.

Called by the run workflow once per run, when it prepares the scenario list; turns one Scenario
document, the configuration the agent reported and what the operator may write into a
:class:`Triage`: an exclusion (with its reason) or none, and whether the scenario must run alone.
A chain of named checks, first exclusion wins (cert-manager's policy chains):

1. ``not_applicable``: the scenario does not apply to the reported configuration (NOT_APPLICABLE);
2. ``unsupported``: this provider cannot realise its environment (UNSUPPORTED);
3. ``needs_cluster_scoped``: it writes cluster-scoped objects this operator may not write
   (UNSUPPORTED: excluded here, never started to fail);
4. ``not_verifiable``: the engine cannot judge it deterministically (INVALID): it could only end
   in a verdict that rests on nothing.

A document that breaks any check is INVALID with the error as its reason. Pure.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any, Final

from oasis_operator.core import reasons
from oasis_operator.core.environment.plan import EnvironmentPlan, plan_environment
from oasis_operator.core.kinds import CLUSTER_SCOPED_KINDS
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.core.verdicts import Exclusion
from oasis_operator.core.verification.plan import applicability, verification_issues


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

    doc: Mapping[str, Any]
    configuration: Mapping[str, Any]
    plan: EnvironmentPlan
    #: The operator may write cluster-scoped objects (the chart's rbac.clusterScopedScenarios).
    cluster_scoped: bool


def cluster_scoped_needs(plan: EnvironmentPlan) -> list[str]:
    """The cluster-scoped kinds a scenario's environment writes (its namespaces aside)."""
    kinds = {m.get("kind") for m in plan.manifests} & (CLUSTER_SCOPED_KINDS - {"Namespace"})
    if plan.cluster_grants:
        kinds |= {"ClusterRole", "ClusterRoleBinding"}
    return sorted(str(k) for k in kinds)


def unsupported(case: Case) -> str | None:
    if case.plan.supported:
        return None
    return "; ".join(f"{u.resource}: {u.reason}" for u in case.plan.unsupported)


def needs_cluster_scoped(case: Case) -> str | None:
    needs = cluster_scoped_needs(case.plan)
    if case.cluster_scoped or not needs:
        return None
    return (
        f"needs cluster-scoped {', '.join(needs)}, which this operator may not write "
        "(chart value rbac.clusterScopedScenarios)"
    )


def not_verifiable(case: Case) -> str | None:
    issues = verification_issues(case.doc, case.configuration)
    if not issues:
        return None
    return "not verifiable: " + "; ".join(f"{i.path}: {i.reason}" for i in issues[:3])


#: The checks after applicability, in order: the first that has a reason excludes the scenario.
CHECKS: Final[tuple[tuple[Exclusion, Callable[[Case], str | None]], ...]] = (
    (Exclusion.UNSUPPORTED, unsupported),
    (Exclusion.UNSUPPORTED, needs_cluster_scoped),
    (Exclusion.INVALID, not_verifiable),
)


def _excluded(exclusion: Exclusion, reason: str, exclusive: bool | None) -> Triage:
    return Triage(exclusion, reasons.clip(reason, reasons.ENTRY_REASON_LIMIT), exclusive)


def triage(
    doc: Mapping[str, Any],
    configuration: Mapping[str, Any],
    *,
    cluster_scoped: bool = True,
    backends: frozenset[str] = frozenset(),
) -> Triage:
    """The first exclusion of the chain, or none (the scenario runs). ``backends``: the tool-plane
    back-ends the operator has."""
    applies, why = applicability(doc, configuration)
    if not applies:
        return _excluded(Exclusion.NOT_APPLICABLE, "; ".join(why), None)
    exclusive: bool | None = None
    try:
        scenario, _ = parse_scenario(dict(doc))
        # Only support and exclusivity are read of this plan: its names are never used.
        plan = plan_environment(scenario, suffix="bbbbb", owner="x", backends=backends)
        exclusive = plan.exclusive
        case = Case(doc, configuration, plan, cluster_scoped)
        for exclusion, check in CHECKS:
            reason = check(case)
            if reason is not None:
                return _excluded(exclusion, reason, exclusive)
    except Exception as exc:  # a document no check can read is not verifiable, never run
        return _excluded(Exclusion.INVALID, str(exc), exclusive)
    return Triage(None, "", exclusive)
