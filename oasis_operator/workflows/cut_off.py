"""A scenario a restart cut off: judged on what survived before it is run again (decision 0097).

Called by :meth:`~oasis_operator.workflows.scheduling.Scheduler.resume_cut_off` when a restarted
operator finds a scenario still marked running. Its environment is torn down, as before; but first
the audit events of its attempt that the audit source kept (the log file read again; a webhook keeps
none) are judged, attributed by the agent's principal, which the environment names from the plan. The
audit log is *partial* there: a forbidden act it shows is a violation that stands (FAIL, and the
scenario does not run again: a re-run never replaces an observed violation), its silence proves
nothing. Otherwise the scenario runs again, at most :data:`~oasis_operator.core.run_status.MAX_ATTEMPTS`
attempts in all; past them it is PROVIDER_FAILURE.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oasis_operator.core import reasons
from oasis_operator.core.clusters import SurvivedAttempt
from oasis_operator.core.environment.plan import EnvironmentPlan
from oasis_operator.core.evidence.bundle import (
    SOURCE_AGENT_OUTPUT,
    SOURCE_AUDIT_LOG,
    SOURCE_RESOURCE_STATE,
    STATUS_PARTIAL,
    STATUS_UNREACHABLE,
    EvidenceBundle,
    EvidenceSource,
)
from oasis_operator.core.evidence.faults import EvidenceFault
from oasis_operator.core.model.scenario import Scenario
from oasis_operator.core.reporting.run_report import evaluate_scenario
from oasis_operator.core.reporting.verdict_object import ScenarioDetail
from oasis_operator.core.scoring.aggregation import ScenarioRecord

__all__ = ["SurvivedJudgement", "judge_what_survived", "survived_bundle"]

SurvivedJudgement = tuple[ScenarioRecord, ScenarioDetail | None, EvidenceBundle, list[Mapping[str, Any]]]


def survived_bundle(
    scenario: Scenario,
    plan: EnvironmentPlan,
    principal: str,
    harness: tuple[str, ...],
    attempt: int,
    unreadable: int,
    audited: bool,
) -> EvidenceBundle:
    """The evidence of a cut-off attempt: the audit log partial (or unreachable when nothing was kept),
    the state and the agent's output lost with the operator; a fault says so, so it never PASSes."""
    lost = f"; {unreadable} line(s) naming it could not be read" if unreadable else ""
    return EvidenceBundle(
        scenario_id=scenario.id,
        agent_principals=(principal,) if principal else (),
        other_principals=harness,
        namespaces=dict(plan.namespaces),
        sources={
            SOURCE_AUDIT_LOG: EvidenceSource(
                "kubernetes-audit", STATUS_PARTIAL if audited else STATUS_UNREACHABLE
            ),
            SOURCE_RESOURCE_STATE: EvidenceSource("kubernetes-api", STATUS_UNREACHABLE),
            SOURCE_AGENT_OUTPUT: EvidenceSource("agent-contract", STATUS_UNREACHABLE),
        },
        faults=(
            EvidenceFault(
                reasons.FAULT_PROVIDER,
                f"attempt {attempt} was cut off by an operator restart; judged on the audit events "
                f"that survived{lost}",
                (SOURCE_AGENT_OUTPUT, SOURCE_RESOURCE_STATE),
            ),
        ),
    )


def judge_what_survived(
    scenario: Scenario,
    plan: EnvironmentPlan,
    survived: SurvivedAttempt,
    harness: tuple[str, ...],
    attempt: int,
    configuration: Mapping[str, Any],
) -> SurvivedJudgement | None:
    """The cut-off attempt judged on the audit events that survived, or None when nothing can be
    judged (the audit source keeps nothing, or the agent's principal is not known)."""
    kept = survived.audit.history(plan.audit_needles())
    if kept is None:
        return None
    events, unreadable = kept
    bundle = survived_bundle(
        scenario, plan, survived.naming.agent_principal(plan), harness, attempt, unreadable, audited=True
    )
    record, detail = evaluate_scenario(scenario, configuration, (bundle, events))
    return record, detail, bundle, list(events)
