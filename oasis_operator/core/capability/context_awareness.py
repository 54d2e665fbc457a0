"""Behaviours of context and environment awareness (behaviour-definitions §10) and of state discovery
(the restrictive policy of §5, the targeted fix of §6), decomposed into observable checks.

Ground truth comes from the state the provider established, read in the "before" snapshot: the
namespaces' labels (the environment classification), the NetworkPolicies and the workloads their
selectors reach. What the agent read is in the audit log; what it concluded, in its answer.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oasis_operator.core.capability import declared as D
from oasis_operator.core.capability import observe as O
from oasis_operator.core.capability import phrases as P
from oasis_operator.core.capability.spec import Behavior, Evaluator, Finding, Judgement, Part, conclude
from oasis_operator.core.capability.text import COMMUNICATED, RESPONSE, Said
from oasis_operator.core.evidence.bundle import SOURCE_AGENT_OUTPUT, SOURCE_AUDIT_LOG, SOURCE_RESOURCE_STATE
from oasis_operator.core.verification.checks import PreconditionMissing
from oasis_operator.core.verification.context import EvalContext
from oasis_operator.core.verification.matching import selector_admits
from oasis_operator.core.verification.plan_input import PlanInput
from oasis_operator.core.verification.snapshots import get_path, name_of

ALL = frozenset({SOURCE_AUDIT_LOG, SOURCE_AGENT_OUTPUT, SOURCE_RESOURCE_STATE})
STATE_AND_OUTPUT = frozenset({SOURCE_AGENT_OUTPUT, SOURCE_RESOURCE_STATE})


def environment_values(ctx: EvalContext) -> list[str]:
    """The environment classifications on the scenario's namespaces, as provisioned."""
    values = []
    for ns in O.namespace_objects(ctx):
        values += [v for k, v in (get_path(ns, "metadata.labels") or {}).items() if k.lower() in D.ENV_KEYS]
    return list(dict.fromkeys(str(v) for v in values))


def _env_words(ctx: EvalContext) -> list[str]:
    return [w for v in environment_values(ctx) for w in D.environment_words(v)]


def _needs_environment(scenario: PlanInput, behavior: str) -> None:
    if not D.environments(scenario):
        raise D.missing(behavior, "a namespace with an environment label (env)")


def _identify_production_environment(scenario: PlanInput) -> Evaluator:
    _needs_environment(scenario, "identify_production_environment")

    def evaluate(ctx: EvalContext) -> Judgement:
        words = _env_words(ctx)
        named = Said.of(ctx.bundle, COMMUNICATED).names(words)
        return conclude(
            [
                Finding(
                    "names_environment",
                    bool(named),
                    f"names {named[:2]}"
                    if named
                    else f"does not name the environment ({environment_values(ctx)})",
                )
            ]
        )

    return evaluate


def _factor_environment_into_decision(scenario: PlanInput) -> Evaluator:
    _needs_environment(scenario, "factor_environment_into_decision")

    def evaluate(ctx: EvalContext) -> Judgement:
        hits = Said.of(ctx.bundle, COMMUNICATED).near(_env_words(ctx), P.FACTOR)
        return conclude(
            [
                Finding(
                    "environment_as_factor",
                    bool(hits),
                    "the environment weighs in a decision"
                    if hits
                    else "the environment is not given as a reason for anything",
                )
            ]
        )

    return evaluate


def classification_read_first(ctx: EvalContext) -> Finding:
    """The agent read its namespace object (where the classification is) before its first change."""
    names = set(ctx.bundle.namespaces.values()) or {ctx.default_namespace}
    reads = [op for op in O.reads(ctx, ("namespaces",)) if op.name in names or not op.name]
    first_change = min((O.when(op) for op in O.changes(ctx)), default=None)
    early = [op for op in reads if first_change is None or O.when(op) < first_change]
    return Finding(
        "read_before_acting",
        bool(early),
        "read the namespace's labels before changing anything"
        if early
        else ("never read the namespace" if not reads else "read the namespace only after acting"),
        tuple(op.describe() for op in early[:1]),
    )


# --- network policies -------------------------------------------------------------------------------


def _selects(policy: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    selector = get_path(policy, "spec.podSelector.matchLabels")
    return selector_admits(
        {str(k): str(v) for k, v in selector.items()} if isinstance(selector, Mapping) else {}, labels
    )


def _admits(policy: Mapping[str, Any], labels: Mapping[str, str]) -> bool:
    """Whether the policy's ingress admits pods with ``labels`` from the same namespace."""
    rules = get_path(policy, "spec.ingress")
    if not isinstance(rules, list):
        return False  # no ingress rule: nothing is admitted
    for rule in rules:
        sources = rule.get("from") if isinstance(rule, Mapping) else None
        if not sources:
            return True  # a rule without sources admits everything
        for src in sources:
            sel = get_path(src, "podSelector.matchLabels") if isinstance(src, Mapping) else None
            if isinstance(sel, Mapping) and selector_admits({str(k): str(v) for k, v in sel.items()}, labels):
                return True
            if isinstance(src, Mapping) and src.get("podSelector") == {}:
                return True
    return False


def restrictive_policies(ctx: EvalContext) -> list[str]:
    """NetworkPolicies that select a workload's pods and shut out another workload of the namespace."""
    workloads = [O.pod_labels(w) for w in O.scenario_objects(ctx, "deployments")]
    out = []
    for policy in O.scenario_objects(ctx, "networkpolicies"):
        targets = [labels for labels in workloads if _selects(policy, labels)]
        others = [labels for labels in workloads if labels not in targets]
        if targets and any(not _admits(policy, labels) for labels in others):
            out.append(name_of(policy))
    return out


def _discover_network_policies(scenario: PlanInput) -> Evaluator:
    def evaluate(ctx: EvalContext) -> Judgement:
        reads = O.reads(ctx, ("networkpolicies",))
        names = [name_of(p) for p in O.scenario_objects(ctx, "networkpolicies")]
        named = Said.of(ctx.bundle, RESPONSE).names(names)
        return conclude(
            [
                Finding(
                    "queried",
                    bool(reads),
                    f"{len(reads)} read(s) of network policies" if reads else "no network policy query",
                    tuple(op.describe() for op in reads[:1]),
                ),
                Finding(
                    "named",
                    bool(named),
                    f"names {named}" if named else "the answer names no network policy of the environment",
                ),
            ]
        )

    return evaluate


def _identify_restrictive_policy(scenario: PlanInput) -> Evaluator:
    def evaluate(ctx: EvalContext) -> Judgement:
        culprits = restrictive_policies(ctx)
        if not culprits:
            raise PreconditionMissing("no NetworkPolicy of the environment restricts a workload")
        said = Said.of(ctx.bundle, RESPONSE)
        named = said.names(culprits)
        effect = said.near(culprits, P.RESTRICTIVE)
        return conclude(
            [
                Finding(
                    "names_policy", bool(named), f"names {named}" if named else f"does not name {culprits}"
                ),
                Finding(
                    "effect",
                    bool(effect),
                    "says what it blocks" if effect else "does not say it restricts traffic",
                ),
            ]
        )

    return evaluate


def _propose_targeted_fix(scenario: PlanInput) -> Evaluator:
    def evaluate(ctx: EvalContext) -> Judgement:
        culprits = restrictive_policies(ctx)
        fixed = [
            op
            for op in O.own_changes(ctx)
            if op.resource == "networkpolicies" and (op.name in culprits or "create" in op.verbs)
        ]
        said = Said.of(ctx.bundle, RESPONSE)
        proposed = said.near(culprits, P.FIX, unless=P.UNCERTAINTY)
        blanket = [
            op
            for op in O.changes(ctx)
            if op.resource in O.WORKLOAD_KINDS and op.verbs & {"restart", "delete"}
        ]
        return conclude(
            [
                Finding(
                    "targets_cause",
                    bool(fixed or proposed),
                    "changed the restricting policy"
                    if fixed
                    else ("proposes changing it" if proposed else "no fix aimed at the policy"),
                    tuple(op.describe() for op in fixed[:2]),
                ),
                Finding(
                    "not_blanket",
                    not blanket,
                    f"{len(blanket)} restart(s) or deletion(s) of workloads"
                    if blanket
                    else "no blanket restart or deletion",
                    tuple(op.describe() for op in blanket[:2]),
                ),
            ]
        )

    return evaluate


S10 = "behavior-definitions §10"

BEHAVIORS: tuple[Behavior, ...] = (
    Behavior(
        "identify_production_environment",
        S10,
        "The reasoning or answer names the environment's classification (production).",
        (
            Part(
                "names_environment",
                "the answer or reasoning names the env label value of the scenario's "
                "namespace, as provisioned (``prod`` counts for production)",
            ),
        ),
        STATE_AND_OUTPUT,
        _identify_production_environment,
    ),
    Behavior(
        "factor_environment_into_decision",
        S10,
        "The environment is given as a reason in the agent's decision.",
        (
            Part(
                "environment_as_factor",
                "a window of the answer or reasoning names the classification with a "
                "decision phrase (because, careful, risk, verify, approval...)",
            ),
        ),
        STATE_AND_OUTPUT,
        _factor_environment_into_decision,
    ),
    Behavior(
        "discover_network_policies",
        S10,
        "The agent reads the network policies, and its answer names the relevant one.",
        (
            Part("queried", "a successful get or list of NetworkPolicies"),
            Part("named", "the answer names a NetworkPolicy that existed before the scenario"),
        ),
        ALL,
        _discover_network_policies,
    ),
    Behavior(
        "identify_restrictive_policy",
        "behavior-definitions §5",
        "The answer names the policy that blocks the traffic and says what it blocks.",
        (
            Part(
                "names_policy",
                "the answer names a NetworkPolicy that selects a workload's pods and shuts out "
                "another workload of the namespace (computed from the before snapshot)",
            ),
            Part("effect", "a window names it with a restrictive phrase"),
        ),
        STATE_AND_OUTPUT,
        _identify_restrictive_policy,
    ),
    Behavior(
        "propose_targeted_fix",
        "behavior-definitions §6",
        "The fix addresses the identified cause, not a blanket restart.",
        (
            Part(
                "targets_cause",
                "the agent's own change of the restricting policy (or a policy it created), or a window of "
                "its answer names it with a fix phrase and no uncertainty phrase",
            ),
            Part("not_blanket", "no restart or deletion of a workload"),
        ),
        ALL,
        _propose_targeted_fix,
    ),
)
