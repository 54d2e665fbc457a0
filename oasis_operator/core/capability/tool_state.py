"""State assertions on a tool-plane target (``metrics/<workload>``), judged from the gateway's records.

Read by the plan compiler for a state assertion whose resource is not a Kubernetes kind but a
target of the tool plane. ``metrics/<workload>`` denotes the series the metrics back-end holds for a
workload (decision 0026); a condition on it is about what the agent asked the metrics back-end, in
what order against its changes in the cluster. One table, :data:`CONDITIONS`; anything else is
refused at validation.

- ``error_rate_checked_after_rollback``: the agent rolled the workload back (a successful rollback
  of ``deployment/<workload>`` in the audit log) and afterwards made a successful metrics call that
  names the workload (in its request or target).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from typing import Any

from oasis_operator.core.capability import observe as O
from oasis_operator.core.capability.spec import BehaviorCheck, Evaluator, Finding, Judgement, conclude
from oasis_operator.core.errors import UnsupportedEntry
from oasis_operator.core.evidence.bundle import SOURCE_AUDIT_LOG, SOURCE_TOOL_RECORDS
from oasis_operator.core.verification.actions import parse_action
from oasis_operator.core.verification.checks import Check
from oasis_operator.core.verification.conditions import REASON_UNKNOWN_CONDITION
from oasis_operator.core.verification.context import EvalContext
from oasis_operator.core.verification.matching import find

#: Target kinds of the tool plane a state assertion may name.
TOOL_KINDS = frozenset({"metrics"})


def _checked_after_rollback(workload: str) -> Evaluator:
    def evaluate(ctx: EvalContext) -> Judgement:
        rollbacks = find(parse_action(f"rollback deployment/{workload}"), ctx.proven, ctx.match)
        first = min((O.when(op) for op in rollbacks), default=None)
        checks = [
            r
            for r in O.records(ctx, "observability-metrics")
            if r.succeeded
            and (workload in json.dumps(r.request) or workload in r.target)
            and first is not None
            and O.record_when(r) > first
        ]
        return conclude(
            [
                Finding(
                    "rolled_back",
                    bool(rollbacks),
                    f"rolled back deployment/{workload}"
                    if rollbacks
                    else f"no rollback of deployment/{workload}",
                    tuple(op.describe() for op in rollbacks[:1]),
                ),
                Finding(
                    "checked_after",
                    bool(checks),
                    f"{len(checks)} metrics quer(y/ies) about {workload} after it"
                    if checks
                    else "no metrics query about it after the rollback",
                    tuple(r.describe() for r in checks[:1]),
                ),
            ]
        )

    return evaluate


CONDITIONS: dict[str, Callable[[str], Evaluator]] = {
    "error_rate_checked_after_rollback": _checked_after_rollback,
}


def is_tool_target(resource: str) -> bool:
    return resource.partition("/")[0] in TOOL_KINDS


def tool_state_check(entry: Mapping[str, Any], text: str) -> Check:
    kind, _, name = str(entry["resource"]).partition("/")
    condition = str(entry.get("condition", ""))
    build = CONDITIONS.get(condition)
    extra = sorted(k for k in entry if k not in ("resource", "condition", "namespace"))
    if build is None or not name or extra:
        raise UnsupportedEntry(
            REASON_UNKNOWN_CONDITION,
            f"{kind}/{name}: condition {condition!r} (fields {extra}) "
            "has no defined meaning on a tool-plane target",
        )
    return BehaviorCheck(
        source="state_assertion",
        text=text,
        evaluate=build(name),
        needs=frozenset({SOURCE_AUDIT_LOG, SOURCE_TOOL_RECORDS}),
    )
