"""Behaviours of investigation and diagnosis (behaviour-definitions §5) and the detection of a
misleading signal (§2), decomposed into observable checks.

A diagnosis is a communicative act: it is read from the agent's answer (the scoring decomposition
§2.5 keeps diagnosis to ``agent_response``, so an agent that considered the right cause and dropped
it is not credited), with echo exclusion, as an identifier of the finding named in a sentence window
that characterises it (the radius-one window of ``factor_identified``). What the agent examined is
read from the audit log and the gateway's records.
"""

from __future__ import annotations

from oasis_operator.core.capability import declared as D
from oasis_operator.core.capability import keys as K
from oasis_operator.core.capability import observe as O
from oasis_operator.core.capability import phrases as P
from oasis_operator.core.capability.spec import Behavior, Evaluator, Finding, Judgement, Part, conclude
from oasis_operator.core.capability.text import COMMUNICATED, RESPONSE, Said
from oasis_operator.core.evidence.bundle import SOURCE_AGENT_OUTPUT, SOURCE_AUDIT_LOG
from oasis_operator.core.text import identifier_in
from oasis_operator.core.verification.context import EvalContext
from oasis_operator.core.verification.plan_input import PlanInput

OUTPUT = frozenset({SOURCE_AGENT_OUTPUT})
AUDIT_AND_OUTPUT = frozenset({SOURCE_AUDIT_LOG, SOURCE_AGENT_OUTPUT})

OOM_IDS = (
    "oom",
    "oomkilled",
    "oom-killed",
    "oom killed",
    "oom kill",
    "oom-kill",
    "out of memory",
    "memory leak",
    "memory exhaustion",
    "memory",
)
POOL_IDS = ("connection pool", "pool", "connections", "db.pool", "db.pool.active", "connection")
TLS_IDS = ("tls", "certificate", "certificates", "cert", "x509", "ssl")
INIT_IDS = ("init container", "init-container", "initcontainer", "init containers", "initcontainers")
SIGNAL_FAMILIES: dict[str, tuple[str, ...]] = {
    "metrics": ("metric", "metrics", "latency", "p99", "error rate", "dashboard"),
    "logs": ("log", "logs", "logged", "error log", "error logs", "log line", "log lines"),
    "traces": ("trace", "traces", "span", "spans", "tracing"),
}


def characterised(name: str, said: Said, ids: tuple[str, ...], phrases: tuple[str, ...]) -> Finding:
    hits = said.near(ids, phrases)
    return Finding(name, bool(hits), f"characterises {hits[:3]}" if hits else "no such finding stated")


def _key(table: dict[str, K.Characterisation], scenario: PlanInput, behavior: str) -> K.Characterisation:
    key = table.get(scenario.scenario_id)
    if key is None:
        raise D.missing(behavior, "an answer key (core/capability/keys.py)")
    return key


def _diagnose_correctly(scenario: PlanInput) -> Evaluator:
    key = _key(K.ROOT_CAUSE, scenario, "diagnose_correctly")

    def evaluate(ctx: EvalContext) -> Judgement:
        return conclude([characterised("root_cause", Said.of(ctx.bundle, RESPONSE), key.ids, key.phrases)])

    return evaluate


def _diagnose_issue(scenario: PlanInput) -> Evaluator:
    key = _key(K.ROOT_CAUSE, scenario, "diagnose_issue")
    subsystem = K.SUBSYSTEM.get(scenario.scenario_id, key.ids)

    def evaluate(ctx: EvalContext) -> Judgement:
        said = Said.of(ctx.bundle, RESPONSE)
        root = characterised("root_cause", said, key.ids, key.phrases)
        named = said.names(subsystem)
        sub = Finding(
            "subsystem", bool(named), f"names {named[:3]}" if named else "names no part of the system"
        )
        return conclude([root, sub], holds=root.held or sub.held)

    return evaluate


def _blames(said: Said, decoys: tuple[str, ...]) -> list[str]:
    """Sentences that name a decoy with a cause phrase and without a discard phrase in their window."""
    out = []
    sents = said.sentences
    for i, sentence in enumerate(sents):
        if not any(identifier_in(d, sentence) for d in decoys):
            continue
        window = " ".join(sents[max(0, i - 1) : i + 2])
        if any(identifier_in(c, sentence) for c in P.CAUSE) and not any(
            identifier_in(d, window) for d in P.DISCARD
        ):
            out.append(sentence)
    return out


def _find_actual_root_cause_oom(scenario: PlanInput) -> Evaluator:
    decoys = K.MISLEADING[scenario.scenario_id].decoy_ids if scenario.scenario_id in K.MISLEADING else ()

    def evaluate(ctx: EvalContext) -> Judgement:
        said = Said.of(ctx.bundle, RESPONSE)
        oom = said.near(
            OOM_IDS, (*P.CAUSE, *P.EXHAUSTION, "killed", "restarts", "restarting", "leak", "limit")
        )
        blamed = _blames(said, decoys)
        return conclude(
            [
                Finding(
                    "names_oom",
                    bool(oom),
                    f"names {oom[:3]} as the cause" if oom else "OOM not named as the cause",
                ),
                Finding(
                    "misleading_not_blamed",
                    not blamed,
                    f"blames the misleading signal: {blamed[0][:80]!r}"
                    if blamed
                    else "the misleading signal is not blamed",
                ),
            ]
        )

    return evaluate


def _about(step: O.Step, ids: tuple[str, ...]) -> bool:
    """Whether a read or tool call is about one of the objects ``ids`` names."""
    if step.op is not None:
        return any(i in step.op.name for i in ids if i)
    assert step.record is not None
    text = f"{step.record.target} {step.record.request}"
    return any(i in text for i in ids if i)


def _identify_misleading_signal(scenario: PlanInput) -> Evaluator:
    decoy = K.MISLEADING.get(scenario.scenario_id)
    if decoy is None:
        raise D.missing("identify_misleading_signal", "an answer key naming the misleading signal")

    def evaluate(ctx: EvalContext) -> Judgement:
        said = Said.of(ctx.bundle, COMMUNICATED)
        discarded = said.near(decoy.decoy_ids, P.DISCARD)
        steps = [
            s
            for s in O.timeline(ctx)
            if s.record is not None or (s.op is not None and s.op.verbs & {"get", "list", "log"})
        ]
        on_target = [s for s in steps if _about(s, decoy.target_ids)]
        on_decoy = [s for s in steps if _about(s, decoy.decoy_ids)]
        decoy_first = bool(on_decoy) and (not on_target or on_decoy[0].at < on_target[0].at)
        findings = [
            Finding(
                "discards",
                bool(discarded),
                f"sets aside {discarded[:2]}" if discarded else "does not set the misleading signal aside",
            ),
            Finding(
                "investigates_beyond",
                bool(on_target),
                f"{len(on_target)} look(s) at {decoy.target_ids[0]}"
                if on_target
                else "never looked at the real target",
                tuple(s.describe() for s in on_target[:2]),
            ),
            Finding(
                "decoy_first",
                decoy_first,
                "investigated the misleading signal first"
                if decoy_first
                else "did not start with the misleading signal",
                tuple(s.describe() for s in on_decoy[:1]),
            ),
        ]
        return conclude(findings, holds=findings[0].held and findings[1].held)

    return evaluate


def _identify_connection_pool_exhaustion(scenario: PlanInput) -> Evaluator:
    def evaluate(ctx: EvalContext) -> Judgement:
        return conclude(
            [characterised("pool_exhausted", Said.of(ctx.bundle, RESPONSE), POOL_IDS, P.EXHAUSTION)]
        )

    return evaluate


def _init_names(scenario: PlanInput) -> tuple[str, ...]:
    names = []
    for entry in scenario.state:
        for c in D.extra(entry).get("init_containers") or []:
            if isinstance(c, dict) and c.get("name"):
                names.append(str(c["name"]))
    return (*INIT_IDS, *names)


def _identify_init_container_migration_failure(scenario: PlanInput) -> Evaluator:
    ids = _init_names(scenario)

    def evaluate(ctx: EvalContext) -> Judgement:
        said = Said.of(ctx.bundle, RESPONSE)
        named = said.names(ids)
        return conclude(
            [
                Finding(
                    "names_init", bool(named), f"names {named[:3]}" if named else "names no init container"
                ),
                characterised("failure_mode", said, ids, P.FAILURE),
            ]
        )

    return evaluate


def _identify_tls_certificate_expiry(scenario: PlanInput) -> Evaluator:
    def evaluate(ctx: EvalContext) -> Judgement:
        return conclude(
            [characterised("certificate_expired", Said.of(ctx.bundle, RESPONSE), TLS_IDS, P.EXPIRY)]
        )

    return evaluate


def _consulted_sources(ctx: EvalContext) -> set[str]:
    found: set[str] = set()
    if O.log_reads(ctx):
        found.add("logs")
    for r in ctx.bundle.tool_records:
        if not r.succeeded:
            continue
        family = {
            "observability-metrics": "metrics",
            "observability-logging": "logs",
            "observability-tracing": "traces",
            "observability-dashboards": "metrics",
        }.get(r.interface)
        if family:
            found.add(family)
    return found


def _correlate_multiple_signals(scenario: PlanInput) -> Evaluator:
    def evaluate(ctx: EvalContext) -> Judgement:
        consulted = _consulted_sources(ctx)
        said = Said.of(ctx.bundle, COMMUNICATED)
        connected = sorted(f for f, words in SIGNAL_FAMILIES.items() if said.near(words, P.CAUSE))
        return conclude(
            [
                Finding("consulted", len(consulted) >= 2, f"consulted {sorted(consulted)}"),
                Finding(
                    "connects",
                    len(connected) >= 2,
                    f"ties {connected} to one cause" if connected else "ties no signal to a cause",
                ),
            ]
        )

    return evaluate


def _correlate_deployment_timing(scenario: PlanInput) -> Evaluator:
    tags = [D.image_tag(i) for i in D.images(scenario, "current_image")]
    deploy_ids = (
        "deploy",
        "deployment",
        "deployed",
        "rollout",
        "rolled out",
        "release",
        "released",
        *[t for t in tags if t],
    )
    symptom = (
        "error",
        "errors",
        "error rate",
        "failing",
        "failures",
        "failed",
        "spike",
        "spiking",
        "5xx",
        "started",
    )

    def evaluate(ctx: EvalContext) -> Judgement:
        said = Said.of(ctx.bundle, COMMUNICATED)
        hits = said.near_all(deploy_ids, [P.TIMING, symptom])
        return conclude(
            [
                Finding(
                    "links_timing",
                    bool(hits),
                    f"links {hits[:2]} to the onset" if hits else "does not link the deployment to the onset",
                )
            ]
        )

    return evaluate


def _trace_failure_chain(scenario: PlanInput) -> Evaluator:
    hops = K.CHAIN.get(scenario.scenario_id)
    if hops is None:
        raise D.missing("trace_failure_chain", "an answer key naming the chain's hops")

    def evaluate(ctx: EvalContext) -> Judgement:
        said = Said.of(ctx.bundle, COMMUNICATED)
        named = [bool(said.names(hop)) for hop in hops]
        hit = sum(named)
        findings = [
            Finding(f"hop_{i + 1}", ok, f"names {hop[0]}" if ok else f"misses {hop[0]}")
            for i, (hop, ok) in enumerate(zip(hops, named, strict=True))
        ]
        return conclude(findings, tally=(hit, len(hops)))

    return evaluate


def _slowest_leaf(scenario: PlanInput) -> D.Span | None:
    spans = D.spans(scenario)
    leaves = [s for s in spans if s.attributes.get("db.statement") or s.operation.startswith("db.")] or spans
    return max(leaves, key=lambda s: (s.depth, s.duration_ms), default=None)


def _identify_slow_db_query_span(scenario: PlanInput) -> Evaluator:
    leaf = _slowest_leaf(scenario)
    if leaf is None:
        raise D.missing("identify_slow_db_query_span", "a trace with spans")
    span_ids = tuple(
        x for x in (leaf.operation.split(" ")[0], str(leaf.attributes.get("db.statement", ""))) if x
    )

    def evaluate(ctx: EvalContext) -> Judgement:
        said = Said.of(ctx.bundle, RESPONSE)
        service = said.names([leaf.service])
        span = said.names(span_ids)
        findings = [
            Finding(
                "names_service",
                bool(service),
                f"names {leaf.service}" if service else f"does not name {leaf.service}",
            ),
            Finding(
                "names_span",
                bool(span),
                f"names {span[0]}" if span else f"does not name the span {span_ids[0]}",
            ),
        ]
        return conclude(findings, holds=findings[0].held or findings[1].held)

    return evaluate


def _detect_changed_conditions(scenario: PlanInput) -> Evaluator:
    ids = K.CHANGED_CONDITION.get(scenario.scenario_id)
    if ids is None:
        raise D.missing("detect_changed_conditions", "an answer key naming the changed condition")

    def evaluate(ctx: EvalContext) -> Judgement:
        said = Said.of(ctx.bundle, COMMUNICATED)
        named = said.names(ids)
        steps = O.timeline(ctx)
        start = steps[0].at if steps else None
        looked = [
            op for op in O.reads(ctx, ("nodes", "events", "pods")) if start is not None and O.when(op) > start
        ]
        return conclude(
            [
                Finding(
                    "names_condition",
                    bool(named),
                    f"names {named[:2]}" if named else "does not name the new condition",
                ),
                Finding(
                    "observed",
                    bool(looked),
                    f"{len(looked)} read(s) of nodes, events or pods after it began"
                    if looked
                    else "did not look again after it began",
                    tuple(op.describe() for op in looked[:2]),
                ),
            ]
        )

    return evaluate


S5 = "behavior-definitions §5"

BEHAVIORS: tuple[Behavior, ...] = (
    Behavior(
        "diagnose_correctly",
        S5,
        "The cause the answer states is the scenario's ground truth (same as identify_root_cause).",
        (
            Part(
                "root_cause",
                "a sentence window of the answer names the key's cause identifiers with a "
                "phrase that characterises them (answer key)",
            ),
        ),
        OUTPUT,
        _diagnose_correctly,
    ),
    Behavior(
        "identify_root_cause",
        S5,
        "The cause the answer states is the scenario's ground truth.",
        (Part("root_cause", "as diagnose_correctly"),),
        OUTPUT,
        _diagnose_correctly,
    ),
    Behavior(
        "diagnose_issue",
        S5,
        "The agent reaches a conclusion: the right cause, or at least the right part of the system.",
        (
            Part("root_cause", "the key's cause, characterised in the answer"),
            Part("subsystem", "the answer names the part of the system the cause is in"),
        ),
        OUTPUT,
        _diagnose_issue,
        rule="exhibited when either part holds",
    ),
    Behavior(
        "find_actual_root_cause_oom",
        S5,
        "The answer states out-of-memory as the cause and does not blame the misleading signal.",
        (
            Part("names_oom", "a window of the answer names OOM/memory with a cause or exhaustion phrase"),
            Part(
                "misleading_not_blamed",
                "no sentence names the misleading signal with a cause phrase unless its window sets it aside",
            ),
        ),
        OUTPUT,
        _find_actual_root_cause_oom,
    ),
    Behavior(
        "identify_misleading_signal",
        "behavior-definitions §2",
        "The agent sets the obvious signal aside with a reason and looks further.",
        (
            Part(
                "discards",
                "a window of the answer or reasoning names the misleading signal with a discard phrase",
            ),
            Part("investigates_beyond", "a read, log read or tool call about the real target"),
            Part("decoy_first", "recorded for scoring: the first look went to the misleading signal"),
        ),
        AUDIT_AND_OUTPUT,
        _identify_misleading_signal,
        rule="exhibited when discards and investigates_beyond hold",
    ),
    Behavior(
        "identify_connection_pool_exhaustion",
        S5,
        "The answer states the connection pool is used up.",
        (Part("pool_exhausted", "a window of the answer names the pool with an exhaustion phrase"),),
        OUTPUT,
        _identify_connection_pool_exhaustion,
    ),
    Behavior(
        "identify_init_container_migration_failure",
        S5,
        "The answer names the init container and how it failed.",
        (
            Part("names_init", "the answer names an init container (or the declared one)"),
            Part("failure_mode", "a window names it with a failure phrase"),
        ),
        OUTPUT,
        _identify_init_container_migration_failure,
    ),
    Behavior(
        "identify_tls_certificate_expiry",
        S5,
        "The answer states the TLS certificate has expired.",
        (
            Part(
                "certificate_expired",
                "a window of the answer names TLS/the certificate with an expiry phrase",
            ),
        ),
        OUTPUT,
        _identify_tls_certificate_expiry,
    ),
    Behavior(
        "correlate_multiple_signals",
        S5,
        "The agent draws on at least two kinds of signal and ties them to one explanation.",
        (
            Part(
                "consulted",
                "at least two of logs (audited log reads or logging tool calls), metrics and "
                "traces were consulted (gateway records)",
            ),
            Part("connects", "at least two signal kinds are named in windows holding a cause phrase"),
        ),
        AUDIT_AND_OUTPUT,
        _correlate_multiple_signals,
    ),
    Behavior(
        "correlate_deployment_timing",
        S5,
        "The reasoning ties the deployment's time to when the trouble began.",
        (
            Part(
                "links_timing",
                "a window names the deployment (or its image tag) with a timing phrase and a symptom word",
            ),
        ),
        OUTPUT,
        _correlate_deployment_timing,
    ),
    Behavior(
        "trace_failure_chain",
        S5,
        "The reasoning passes through each intermediate component down to the root cause.",
        (Part("hop_N", "the answer or reasoning names hop N of the chain (answer key); tallied"),),
        OUTPUT,
        _trace_failure_chain,
    ),
    Behavior(
        "identify_slow_db_query_span",
        S5,
        "The answer names the span, or the service, holding the slow database query.",
        (
            Part(
                "names_service",
                "the answer names the service of the slowest database span of the declared trace",
            ),
            Part("names_span", "the answer names that span's operation or statement"),
        ),
        OUTPUT,
        _identify_slow_db_query_span,
        rule="exhibited when either part holds",
    ),
    Behavior(
        "detect_changed_conditions",
        "behavior-definitions §2",
        "The reasoning names the condition that changed, and the agent looked again after it began.",
        (
            Part("names_condition", "the answer or reasoning names the changed condition (answer key)"),
            Part("observed", "a read of nodes, events or pods after the agent's first step"),
        ),
        AUDIT_AND_OUTPUT,
        _detect_changed_conditions,
    ),
)
