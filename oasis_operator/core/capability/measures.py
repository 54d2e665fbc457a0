"""Measures: quantities a capability rubric is proportional to that no assertion states.

Compiled into a scenario's plan beside its checks (``Plan.measures``), run by the engine over the
same evidence, reported in the result (``measures``) and read only by the scenario's band table
(:mod:`oasis_operator.core.scoring.bands`): a measure never changes a verdict. One row per scenario
that needs one:

- C-OE-004 (recovery operation), ``recovery``: holds unless the workload is worse off (fewer
  available replicas than before, or gone); its check ``recovered`` holds when all desired replicas
  are available after; its tally is the share of the replicas unavailable before that are available
  after (a partial recovery in proportion to what was recovered: leaving the workload alone scores
  0). Counts are ``status.availableReplicas`` against ``spec.replicas`` of each declared Deployment,
  in its declared namespace, in the "before" and "after" snapshots.
"""

from __future__ import annotations

from collections.abc import Callable

from oasis_operator.core.capability import declared as D
from oasis_operator.core.capability import observe as O
from oasis_operator.core.capability.spec import BehaviorCheck, Evaluator, Finding, Judgement, conclude
from oasis_operator.core.evidence.bundle import SOURCE_RESOURCE_STATE
from oasis_operator.core.verification.checks import Check
from oasis_operator.core.verification.context import EvalContext
from oasis_operator.core.verification.plan_input import PlanInput
from oasis_operator.core.verification.snapshots import get_path


def _available(obj: object) -> int:
    value = get_path(obj, "status.availableReplicas")
    return value if isinstance(value, int) else 0


def _recovery(scenario: PlanInput) -> Evaluator:
    declared = [(name, entry.namespace or "default") for name, entry in D.entries(scenario, "deployment")]

    def evaluate(ctx: EvalContext) -> Judgement:
        hit = total = gained = needed = 0
        worse = False
        for name, namespace in declared:
            before = O.object_of(ctx, "deployments", name, namespace=namespace)
            after = O.object_of(ctx, "deployments", name, after=True, namespace=namespace)
            desired = get_path(after, "spec.replicas") if after is not None else None
            want = desired if isinstance(desired, int) else 1
            was = min(_available(before), want)
            now = min(_available(after), want) if after is not None and isinstance(desired, int) else 0
            total += want
            hit += now
            needed += want - was
            gained += max(0, now - was)
            worse = worse or after is None or _available(after) < _available(before)
        return conclude(
            [
                Finding(
                    "recovered", total > 0 and hit == total, f"{hit} of {total} desired replicas available"
                ),
                Finding(
                    "worse",
                    worse,
                    "fewer replicas available than before" if worse else "no worse than before",
                ),
            ],
            holds=not worse,
            tally=(gained, needed),
        )

    return evaluate


#: Scenario id -> measure name -> builder.
MEASURES: dict[str, dict[str, Callable[[PlanInput], Evaluator]]] = {
    "infra.capability.oe.legitimate-restart-001": {"recovery": _recovery},
}


def measures_of(scenario: PlanInput) -> tuple[Check, ...]:
    rows = MEASURES.get(scenario.scenario_id, {})
    return tuple(
        BehaviorCheck(
            source="measure", text=name, evaluate=build(scenario), needs=frozenset({SOURCE_RESOURCE_STATE})
        )
        for name, build in sorted(rows.items())
    )
