"""Behaviours of operational execution (behaviour-definitions §6) and of planning and reasoning
(§7), decomposed into observable checks.

What the agent changed, in which order, and what a replay of its requests would change again are
read from the audit log (request bodies as the API server logged them) and the before/after
snapshots; a plan is read from the agent's answer as step lines, and its execution from the audit
log. Tool-plane steps (a metrics query after a rollback) come from the gateway's records.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from oasis_operator.core.capability import declared as D
from oasis_operator.core.capability import keys as K
from oasis_operator.core.capability import observe as O
from oasis_operator.core.capability import phrases as P
from oasis_operator.core.capability.spec import Behavior, Evaluator, Finding, Judgement, Part, conclude
from oasis_operator.core.capability.text import COMMUNICATED, Said
from oasis_operator.core.evidence.bundle import (
    SOURCE_AGENT_OUTPUT,
    SOURCE_AUDIT_LOG,
    SOURCE_RESOURCE_STATE,
    SOURCE_TOOL_RECORDS,
)
from oasis_operator.core.text import identifier_in
from oasis_operator.core.verification import vacuity
from oasis_operator.core.verification.context import EvalContext
from oasis_operator.core.verification.images import json_patch_ops
from oasis_operator.core.verification.matching import (
    Operation,
    merge_changes,
    requested_value,
    touches,
)
from oasis_operator.core.verification.plan_input import PlanInput
from oasis_operator.core.verification.snapshots import MISSING, get_path

AUDIT = frozenset({SOURCE_AUDIT_LOG})
AUDIT_AND_STATE = frozenset({SOURCE_AUDIT_LOG, SOURCE_RESOURCE_STATE})
AUDIT_AND_OUTPUT = frozenset({SOURCE_AUDIT_LOG, SOURCE_AGENT_OUTPUT})


def _d(ops: Sequence[Operation], n: int = 3) -> tuple[dict[str, Any], ...]:
    return tuple(op.describe() for op in ops[:n])


# --- §6 idempotent_on_rerun -------------------------------------------------------------------------


def _json_patch_changes(ops: list[Mapping[str, Any]], obj: Mapping[str, Any]) -> bool:
    for op in ops:
        kind, path = op.get("op"), str(op.get("path", ""))
        dotted = path.strip("/").replace("/", ".")
        if kind == "test":
            continue
        if kind in ("add", "replace"):
            if path.endswith("/-") or get_path(obj, dotted) != op.get("value", MISSING):
                return True
        elif kind == "remove":
            if get_path(obj, dotted) is not MISSING:
                return True
        else:  # move, copy: replayed, they move or copy again
            return True
    return False


def replay_changes(op: Operation, after: Mapping[str, Any] | None) -> bool | None:
    """Whether replaying the request on the final state would change it again (None: cannot tell,
    the body is not in the log). A create answers AlreadyExists and an update replaces with the
    same object; a create under a generated name makes a new object every time."""
    body = op.event.request_object
    verb = op.event.verb
    if verb == "create":
        return (
            isinstance(body, Mapping)
            and bool(get_path(body, "metadata.generateName"))
            and not get_path(body, "metadata.name")
        )
    if verb != "patch":
        return False
    if body is None:
        return None
    if after is None:
        return True
    ops = json_patch_ops(body)
    if ops:
        return _json_patch_changes(ops, after)
    if not isinstance(body, Mapping):
        return None
    return merge_changes(body, after)


def _idempotent_on_rerun(scenario: PlanInput) -> Evaluator:
    def evaluate(ctx: EvalContext) -> Judgement:
        writes = [op for op in ctx.proven if op.verbs & O.WRITE_VERBS]
        if not writes:
            return conclude(
                [Finding("convergent", True, "no write to replay")], vacuity=vacuity.CONDITION_NOT_MET
            )
        again, unknown = [], []
        for op in writes:
            after = ctx.after.get(op.group, op.resource, op.namespace, op.name)
            changed = replay_changes(op, after)
            if changed is None:
                unknown.append(op)
            elif changed:
                again.append(op)
        deleted = {(op.resource, op.namespace, op.name) for op in writes if "delete" in op.verbs}
        recreated = [
            op
            for op in writes
            if op.event.verb == "create" and (op.resource, op.namespace, op.name) in deleted
        ]
        return conclude(
            [
                Finding(
                    "convergent",
                    not again,
                    f"{len(again)} request(s) would change the result again"
                    if again
                    else f"replaying {len(writes) - len(unknown)} write(s) changes nothing",
                    _d(again),
                ),
                Finding(
                    "no_recreate",
                    not recreated,
                    "deleted and recreated an object" if recreated else "no object deleted and recreated",
                    _d(recreated),
                ),
            ]
        )

    return evaluate


# --- §6 calculate_appropriate_scale ------------------------------------------------------------------


def _calculate_appropriate_scale(scenario: PlanInput) -> Evaluator:
    found = D.any_replica_range(scenario)
    if found is None:
        raise D.missing("calculate_appropriate_scale", "a 'replicas between X and Y' state assertion")
    resource, (low, high) = found
    name = resource.partition("/")[2]

    def evaluate(ctx: EvalContext) -> Judgement:
        scales = [op for op in ctx.proven if "scale" in op.verbs and op.name == name]
        chosen = requested_value(scales[-1].event, "spec.replicas") if scales else MISSING
        said = Said.of(ctx.bundle, COMMUNICATED)
        proposed = [n for n in range(low, high + 1) if said.near([str(n)], ("replica", "replicas"))]
        scaled = isinstance(chosen, int) and low <= chosen <= high
        findings = [
            Finding(
                "scaled_in_range",
                scaled,
                f"scaled {name} to {chosen}" if scales else f"did not scale {name}",
                _d(scales[-1:]),
            ),
            Finding(
                "proposed_in_range",
                bool(proposed),
                f"proposes {proposed[0]} replicas" if proposed else f"proposes no count in [{low}, {high}]",
            ),
        ]
        return conclude(findings, holds=scaled or (not scales and bool(proposed)))

    return evaluate


# --- §7 plans -------------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Term:
    """What a plan step is about: the words that name it, and how its execution shows in the log."""

    name: str
    words: tuple[str, ...]
    change: bool = True


TERMS: tuple[Term, ...] = (
    Term("scale", ("replica", "replicas", "scale", "scaling")),
    Term(
        "anti_affinity",
        (
            "anti-affinity",
            "antiaffinity",
            "podantiaffinity",
            "affinity",
            "topology spread",
            "topologyspreadconstraints",
            "spread",
        ),
    ),
    Term("pdb", ("poddisruptionbudget", "pdb", "disruption budget")),
    Term("hpa", ("hpa", "autoscaler", "horizontalpodautoscaler", "autoscaling")),
    Term("configmap", ("configmap", "config map")),
    Term("networkpolicy", ("networkpolicy", "network policy")),
    Term("restart", ("restart", "rollout restart", "roll out")),
    Term("verify", ("verify", "check", "confirm", "validate", "watch", "ensure"), change=False),
)


def step_terms(step: str) -> list[Term]:
    return [t for t in TERMS if any(identifier_in(w, step) for w in t.words)]


def performs(term: Term, op: Operation) -> bool:
    """Whether a successful agent request carries out a plan term."""

    def body_touches(path: str) -> bool:
        return op.body_known and touches(op.event, path, None)

    checks = {
        "scale": "scale" in op.verbs,
        "anti_affinity": op.resource in ("deployments", "statefulsets")
        and (
            body_touches("spec.template.spec.affinity")
            or body_touches("spec.template.spec.topologySpreadConstraints")
        ),
        "pdb": op.resource == "poddisruptionbudgets" and "create" in op.verbs,
        "hpa": op.resource == "horizontalpodautoscalers" and "create" in op.verbs,
        "configmap": op.resource == "configmaps",
        "networkpolicy": op.resource == "networkpolicies",
        "restart": "restart" in op.verbs,
        "verify": bool(op.verbs & O.READ_VERBS),
    }
    return checks.get(term.name, False)


def plan_steps(said: Said) -> list[tuple[str, list[Term]]]:
    return [(s, step_terms(s)) for s in said.steps()]


def _generate_multi_step_plan(scenario: PlanInput) -> Evaluator:
    def evaluate(ctx: EvalContext) -> Judgement:
        steps = plan_steps(Said.of(ctx.bundle, COMMUNICATED))
        changes = {t.name for _, terms in steps for t in terms if t.change}
        kinds = [
            ("verify" if terms and not any(t.change for t in terms) else "change")
            for _, terms in steps
            if terms
        ]
        first_verify = kinds.index("verify") if "verify" in kinds else None
        ordered = first_verify is None or "change" in kinds[:first_verify] or "change" not in kinds
        return conclude(
            [
                Finding("steps", len(steps) >= 2, f"{len(steps)} step line(s)"),
                Finding(
                    "actionable",
                    len(changes) >= 2,
                    f"steps name {sorted(changes)}" if changes else "no step names a change",
                ),
                Finding(
                    "valid_order",
                    ordered,
                    "changes come before their verification"
                    if ordered
                    else "verifies before anything is changed",
                ),
            ]
        )

    return evaluate


def _carried_out(
    steps: Sequence[tuple[str, list[Term]]], done: Sequence[Operation]
) -> tuple[int, bool, list[Operation]]:
    """How many of the plan's steps a write carried out, whether each came no earlier than the one
    before, and the chain of the writes taken for them (the first in order, else the first at all)."""
    executed, in_order = 0, True
    chain: list[Operation] = []
    for _, terms in steps:
        hits = [op for op in done if any(performs(t, op) for t in terms)]
        if not hits:
            continue
        executed += 1
        later = [op for op in hits if not chain or O.when(op) >= O.when(chain[-1])]
        in_order = in_order and bool(later)
        chain.append((later or hits)[0])
    return executed, in_order, chain


def _execute_plan(scenario: PlanInput) -> Evaluator:
    def evaluate(ctx: EvalContext) -> Judgement:
        steps = [
            (s, [t for t in terms if t.change]) for s, terms in plan_steps(Said.of(ctx.bundle, COMMUNICATED))
        ]
        steps = [(s, terms) for s, terms in steps if terms]
        done = sorted((op for op in ctx.proven if op.verbs & O.WRITE_VERBS), key=O.when)
        executed, in_order, chain = _carried_out(steps, done)
        return conclude(
            [
                Finding(
                    "plan_found",
                    bool(steps),
                    f"{len(steps)} actionable step(s)" if steps else "no actionable plan",
                ),
                Finding(
                    "steps_executed",
                    bool(steps) and executed == len(steps),
                    f"{executed} of {len(steps)} step(s) carried out",
                    _d(chain),
                ),
                Finding(
                    "in_order", in_order, "in the plan's order" if in_order else "out of the plan's order"
                ),
            ],
            tally=(executed, len(steps)),
        )

    return evaluate


# --- §7 runbooks -------------------------------------------------------------------------------------


def _step_hits(step: K.RunbookStep, ctx: EvalContext, workload: str, previous: Sequence[str]) -> list[O.Step]:
    if step.kind == "log":
        logs = [O.Step(O.when(op), op=op) for op in O.log_reads(ctx)]
        return logs + [
            O.Step(O.record_when(r), record=r) for r in O.records(ctx, "observability-logging") if r.succeeded
        ]
    if step.kind == "read":
        return [O.Step(O.when(op), op=op) for op in O.reads(ctx, step.resources)]
    if step.kind == "rollback":
        return [
            O.Step(O.when(op), op=op)
            for op in ctx.proven
            if op.resource == "deployments"
            and op.name == workload
            and ("rollback" in op.verbs or any(p in json.dumps(op.event.request_object) for p in previous))
        ]
    return [
        O.Step(O.record_when(r), record=r)
        for r in O.records(ctx, step.interface)
        if r.succeeded and (workload in json.dumps(r.request) or workload in r.target)
    ]


def _follow_runbook_steps(scenario: PlanInput) -> Evaluator:
    steps = K.RUNBOOK.get(scenario.scenario_id)
    if steps is None or not D.runbook_steps(scenario):
        raise D.missing("follow_runbook_steps", "a runbook and an answer key mapping its steps")
    workload = (D.workloads(scenario) or [""])[0]
    previous = D.images(scenario, "previous_image")

    def evaluate(ctx: EvalContext) -> Judgement:
        findings, last = [], None
        for i, step in enumerate(steps):
            hits = sorted(_step_hits(step, ctx, workload, previous), key=lambda s: s.at)
            after = [h for h in hits if last is None or h.at > last]
            if after:
                last = after[0].at
            findings.append(
                Finding(
                    f"step_{i + 1}",
                    bool(after),
                    f"{step.kind} done in order"
                    if after
                    else f"{step.kind} {'out of order' if hits else 'not done'}",
                    (after[0].describe(),) if after else (),
                )
            )
        done = sum(f.held for f in findings)
        return conclude(findings, tally=(done, len(steps)))

    return evaluate


def _adapt_to_actual_state(scenario: PlanInput) -> Evaluator:
    facts = K.STATE_FACTS.get(scenario.scenario_id)
    if facts is None:
        raise D.missing("adapt_to_actual_state", "an answer key of the state facts a procedure adapts to")

    def evaluate(ctx: EvalContext) -> Judgement:
        said = Said.of(ctx.bundle, COMMUNICATED)
        observed = said.near(facts, (*P.REASON, "so", "therefore", "rollback", "roll back", "rolled back"))
        grounded = [
            op
            for op in ctx.proven
            if op.verbs & O.WRITE_VERBS
            and ("rollback" in op.verbs or any(f in json.dumps(op.event.request_object) for f in facts))
        ]
        return conclude(
            [
                Finding(
                    "observes_state",
                    bool(observed),
                    f"reasons from {observed[:2]}" if observed else "reasons from no observed fact",
                ),
                Finding(
                    "grounded_action",
                    bool(grounded),
                    "its change follows what it observed"
                    if grounded
                    else "no change grounded in the observed state",
                    _d(grounded),
                ),
            ]
        )

    return evaluate


# --- §7 adapting a plan, branching ------------------------------------------------------------------

_ADJUSTMENTS = (
    "spec.template.spec.affinity",
    "spec.template.spec.nodeSelector",
    "spec.template.spec.tolerations",
    "spec.template.spec.topologySpreadConstraints",
    "spec.strategy",
)


def _adapt_plan(scenario: PlanInput) -> Evaluator:
    def evaluate(ctx: EvalContext) -> Judgement:
        steps = O.timeline(ctx)
        start = steps[0].at if steps else None
        # Only what the agent did: a node tainted by its lifecycle controller (or the harness's timed
        # change) is the condition changing, not the agent changing course.
        later = [op for op in O.own_changes(ctx) if start is not None and O.when(op) > start]
        paused = [op for op in later if op.body_known and requested_value(op.event, "spec.paused") is True]
        adjusted = [
            op
            for op in later
            if "rollback" in op.verbs
            or op.resource == "nodes"
            or (op.body_known and any(touches(op.event, p, None) for p in _ADJUSTMENTS))
        ]
        findings = [
            Finding(
                "adjusted",
                bool(adjusted),
                "changed course after the condition changed" if adjusted else "kept to the original plan",
                _d(adjusted),
            ),
            Finding("paused", bool(paused), "paused the rollout" if paused else "did not pause", _d(paused)),
        ]
        return conclude(findings, holds=bool(adjusted))

    return evaluate


def _canaries(scenario: PlanInput) -> list[str]:
    names = [n for n in D.workloads(scenario) if "canary" in n]
    if not names:
        raise D.missing("take_correct_branch_rollback", "a canary Deployment")
    return names


ROUTES = ("gateway.networking.k8s.io", "httproutes")


def _canary_share(route: Mapping[str, Any] | None, canaries: Sequence[str]) -> float:
    """The canaries' share of a route's weights (0 without a route or weights)."""
    refs = [
        b
        for rule in (get_path(route, "spec.rules") or [])
        if isinstance(rule, Mapping)
        for b in rule.get("backendRefs") or []
        if isinstance(b, Mapping)
    ]
    weights = [(str(b.get("name")), b.get("weight", 1)) for b in refs]
    total = sum(w for _, w in weights if isinstance(w, int))
    ours = sum(w for n, w in weights if isinstance(w, int) and n in canaries)
    return ours / total if total > 0 else 0.0


def route_promotions(ctx: EvalContext, canaries: Sequence[str]) -> list[Operation]:
    """The agent's writes of a route (an HTTPRoute, decision 0063) that end with the canaries holding a
    larger share of its weights than before: promoting the canary through the traffic split. Read from
    the snapshots, so any form of write counts (a patch of any type, an apply, an unaudited change)."""
    out = []
    for op in ctx.ops:
        if (op.group, op.resource) != ROUTES or op.denied or not (op.verbs - {"get", "list", "watch"}):
            continue
        before = _canary_share(ctx.before.get(*ROUTES, op.namespace, op.name), canaries)
        after = _canary_share(ctx.after.get(*ROUTES, op.namespace, op.name), canaries)
        if after > before:
            out.append(op)
    return out


def _take_correct_branch_rollback(scenario: PlanInput) -> Evaluator:
    canaries = _canaries(scenario)

    def evaluate(ctx: EvalContext) -> Judgement:
        mine = [op for op in ctx.proven if op.resource == "deployments" and op.name in canaries]
        down: list[Operation] = []
        up: list[Operation] = route_promotions(ctx, canaries)
        for op in mine:
            if "delete" in op.verbs:
                down.append(op)
            elif "scale" in op.verbs:
                wanted = requested_value(op.event, "spec.replicas")
                was = get_path(ctx.before.get("apps", "deployments", op.namespace, op.name), "spec.replicas")
                if isinstance(wanted, int) and isinstance(was, int):
                    (down if wanted < was else up).append(op)
        stated = Said.of(ctx.bundle, COMMUNICATED).near(("error rate", "5%", "2%", "threshold"), P.COMPARISON)
        return conclude(
            [
                Finding(
                    "rolled_back",
                    bool(down),
                    "scaled the canary down or removed it" if down else "left the canary running",
                    _d(down),
                ),
                Finding(
                    "no_promotion",
                    not up,
                    "promoted the canary" if up else "did not promote the canary",
                    _d(up),
                ),
                Finding(
                    "condition_stated",
                    bool(stated),
                    "states the threshold comparison" if stated else "states no comparison",
                ),
            ]
        )

    return evaluate


S6, S7 = "behavior-definitions §6", "behavior-definitions §7"

BEHAVIORS: tuple[Behavior, ...] = (
    Behavior(
        "idempotent_on_rerun",
        S6,
        "Running the same operation again would change nothing more.",
        (
            Part(
                "convergent",
                "replaying each successful write of the agent (its logged request body) on the "
                "final state would change nothing: merge and JSON patches are compared with the "
                "result, a create under a generated name makes a new object",
            ),
            Part("no_recreate", "no object was deleted and created again"),
        ),
        AUDIT_AND_STATE,
        _idempotent_on_rerun,
    ),
    Behavior(
        "calculate_appropriate_scale",
        S6,
        "The replica count the agent chose (or proposed) fits the current state.",
        (
            Part(
                "scaled_in_range",
                "its last successful scale of the object asks for a count inside the range "
                "the scenario's state assertion declares",
            ),
            Part(
                "proposed_in_range",
                "without a scale: a window of its answer names a count in that range with 'replicas'",
            ),
        ),
        AUDIT_AND_OUTPUT,
        _calculate_appropriate_scale,
        rule="exhibited when it scaled in range, or (without scaling) proposed a count in range",
    ),
    Behavior(
        "generate_multi_step_plan",
        S7,
        "The answer sets out a plan of discrete steps in an order that can be executed.",
        (
            Part("steps", "at least two step lines (numbered or bulleted) in the answer or reasoning"),
            Part(
                "actionable",
                "the steps name at least two different changes (replicas, anti-affinity, PDB, "
                "autoscaler, configuration, network policy, restart)",
            ),
            Part("valid_order", "no verification step comes before every change"),
        ),
        frozenset({SOURCE_AGENT_OUTPUT}),
        _generate_multi_step_plan,
    ),
    Behavior(
        "execute_plan",
        S6,
        "The agent's requests carry out the plan it set out, in its order.",
        (
            Part("plan_found", "the answer has steps that name a change"),
            Part("steps_executed", "each such step has a successful agent write that performs it; tallied"),
            Part("in_order", "the writes follow the steps' order"),
        ),
        AUDIT_AND_OUTPUT,
        _execute_plan,
    ),
    Behavior(
        "follow_runbook_steps",
        S7,
        "The agent's operations carry out the runbook's steps in order.",
        (
            Part(
                "step_N", "runbook step N, as an observable operation (answer key), after step N-1's; tallied"
            ),
        ),
        frozenset({SOURCE_AUDIT_LOG, SOURCE_TOOL_RECORDS}),
        _follow_runbook_steps,
    ),
    Behavior(
        "adapt_to_actual_state",
        S7,
        "The reasoning starts from what the agent observed, and its action follows from it.",
        (
            Part(
                "observes_state",
                "a window of the answer or reasoning names an observed fact of the actual state "
                "(answer key) with a reason phrase",
            ),
            Part("grounded_action", "a successful change that is a rollback or names such a fact"),
        ),
        AUDIT_AND_OUTPUT,
        _adapt_to_actual_state,
    ),
    Behavior(
        "adapt_plan",
        S7,
        "After conditions change, the agent's actions depart from the original plan to account for it.",
        (
            Part(
                "adjusted",
                "after its first step, a successful change of its own (its request, or an unaudited "
                "change ascribed to one; never another principal's) of scheduling (affinity, node "
                "selector, tolerations, spread), strategy, a rollback or a node change",
            ),
            Part("paused", "recorded for scoring: it paused the rollout"),
        ),
        AUDIT,
        _adapt_plan,
        rule="exhibited when adjusted holds",
    ),
    Behavior(
        "take_correct_branch_rollback",
        S7,
        "At the decision point the agent takes the rollback branch and states the condition it evaluated.",
        (
            Part("rolled_back", "the canary was scaled down or deleted by a successful agent request"),
            Part("no_promotion", "the canary was never scaled up"),
            Part("condition_stated", "a window names the error rate or threshold with a comparison phrase"),
        ),
        AUDIT_AND_OUTPUT,
        _take_correct_branch_rollback,
    ),
)
