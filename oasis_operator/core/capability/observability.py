"""Behaviours of observability interpretation (behaviour-definitions §9, the metric behaviours of §5
and §10, and ``evaluate_health_condition`` of §14), decomposed into observable checks.

These read the tool plane: the gateway's records of the agent's metric, trace and dashboard calls
(:mod:`oasis_operator.core.evidence.tool_records`) and, for container logs and dashboards served as
Kubernetes objects, the audit log. Ground truth comes from the declared state: the log lines (their
level tells signal from noise), the panels (their status tells which are concerning), the trace's
spans and the declared limits.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

from oasis_operator.core.capability import declared as D
from oasis_operator.core.capability import observe as O
from oasis_operator.core.capability import phrases as P
from oasis_operator.core.capability.spec import Behavior, Evaluator, Finding, Judgement, Part, conclude
from oasis_operator.core.capability.text import COMMUNICATED, RESPONSE, Said
from oasis_operator.core.evidence.bundle import SOURCE_AGENT_OUTPUT, SOURCE_AUDIT_LOG, SOURCE_TOOL_RECORDS
from oasis_operator.core.evidence.tool_records import ToolRecord
from oasis_operator.core.text import identifier_in
from oasis_operator.core.toolplane.plan import DASHBOARD_LABEL
from oasis_operator.core.verification.context import EvalContext
from oasis_operator.core.verification.matching import Operation, selector_admits
from oasis_operator.core.verification.plan_input import PlanInput
from oasis_operator.core.verification.resource_types import type_of_object
from oasis_operator.core.verification.snapshots import labels_of, name_of, namespace_of

OUTPUT = frozenset({SOURCE_AGENT_OUTPUT})
TOOLS_AND_OUTPUT = frozenset({SOURCE_TOOL_RECORDS, SOURCE_AGENT_OUTPUT})
ALL = frozenset({SOURCE_TOOL_RECORDS, SOURCE_AUDIT_LOG, SOURCE_AGENT_OUTPUT})

METRICS = "observability-metrics"
TRACING = "observability-tracing"
DASHBOARDS = "observability-dashboards"
MEMORY_IDS = ("memory", "memory usage", "working set", "container_memory_working_set_bytes", "rss", "heap")
ERROR_RATE_IDS = ("error rate", "errors", "5xx", "error-rate")
DISK_IDS = ("disk", "disk usage", "storage", "volume")
NORMAL = ("normal", "healthy", "fine", "ok", "okay", "nominal", "stable", "expected", "within")
_TOKEN = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.:/-]*[A-Za-z0-9]")


def request_text(record: ToolRecord) -> str:
    return json.dumps(record.request, sort_keys=True, ensure_ascii=False)


def is_range_query(record: ToolRecord) -> bool:
    """A metrics query over a span of time: a range query, or a range selector in the expression."""
    text = request_text(record)
    return (
        "query_range" in text
        or ('"start"' in text and '"end"' in text)
        or re.search(r"\[\d+[smhdw]\]", text) is not None
    )


# --- §5/§10 metrics ---------------------------------------------------------------------------------


def _identify_memory_growth_trend(scenario: PlanInput) -> Evaluator:
    def evaluate(ctx: EvalContext) -> Judgement:
        history = [r for r in O.records(ctx, METRICS) if r.succeeded and is_range_query(r)]
        trend = Said.of(ctx.bundle, COMMUNICATED).near(MEMORY_IDS, P.TREND)
        return conclude(
            [
                Finding(
                    "queried_history",
                    bool(history),
                    f"{len(history)} range quer(y/ies) of metrics" if history else "read no metric over time",
                    tuple(r.describe() for r in history[:2]),
                ),
                Finding(
                    "trend_stated",
                    bool(trend),
                    "states memory's trend over time" if trend else "states no trend",
                ),
            ]
        )

    return evaluate


def _assess_oom_risk(scenario: PlanInput) -> Evaluator:
    limits = D.memory_limits(scenario)
    limit_ids = (*limits, "limit", "memory limit", "limits")

    def evaluate(ctx: EvalContext) -> Judgement:
        said = Said.of(ctx.bundle, COMMUNICATED)
        usage = said.names(MEMORY_IDS)
        limit = said.names(limit_ids)
        relation = said.near(limit_ids, P.RELATION)
        return conclude(
            [
                Finding(
                    "usage", bool(usage), "names memory usage" if usage else "does not name memory usage"
                ),
                Finding("limit", bool(limit), f"names {limit[:2]}" if limit else "does not name the limit"),
                Finding(
                    "relation",
                    bool(relation),
                    "relates usage to the limit" if relation else "does not relate them",
                ),
            ]
        )

    return evaluate


def _evaluate_health_condition(scenario: PlanInput) -> Evaluator:
    names = tuple(D.workloads(scenario)) or ("canary",)

    def evaluate(ctx: EvalContext) -> Judgement:
        reads = O.reads(ctx, O.WORKLOAD_KINDS)
        queries = [r for r in O.records(ctx, METRICS) if r.succeeded]
        assessed = Said.of(ctx.bundle, RESPONSE).near((*names, "canary"), P.HEALTH)
        return conclude(
            [
                Finding(
                    "health_queries",
                    bool(reads or queries),
                    f"{len(reads)} workload read(s), {len(queries)} metric quer(y/ies)",
                    tuple(op.describe() for op in reads[:1]) + tuple(r.describe() for r in queries[:1]),
                ),
                Finding(
                    "assessment",
                    bool(assessed),
                    "states the workload's health" if assessed else "states no health assessment",
                ),
            ]
        )

    return evaluate


# --- §9 logs -------------------------------------------------------------------------------------------


def _tokens(message: str) -> set[str]:
    return {t.lower() for t in _TOKEN.findall(message) if len(t) >= 3}


def _filter_noise(scenario: PlanInput) -> Evaluator:
    entries = D.log_entries(scenario)
    signal = list(dict.fromkeys(e.message for e in entries if e.signal))
    noise = list(dict.fromkeys(e.message for e in entries if not e.signal))
    if not signal:
        raise D.missing("filter_noise", "log entries with an error or warning level")
    noise_tokens = set().union(*(_tokens(m) for m in noise)) if noise else set()

    def cited(message: str, text: str) -> bool:
        if message.lower() in text.lower():
            return True
        distinctive = [t for t in _tokens(message) if t not in noise_tokens]
        return sum(1 for t in distinctive if identifier_in(t, text)) >= min(2, len(distinctive))

    def evaluate(ctx: EvalContext) -> Judgement:
        text = Said.of(ctx.bundle, RESPONSE, echo=False).text
        relevant = [m for m in signal if cited(m, text)]
        quoted = [m for m in noise if m.lower() in text.lower()]
        findings = [
            Finding(
                "cites_relevant",
                len(relevant) == len(signal),
                f"{len(relevant)} of {len(signal)} relevant entr(y/ies) cited",
            ),
            Finding(
                "excludes_noise",
                not quoted,
                f"quotes noise: {quoted[0][:60]!r}" if quoted else "quotes no noise entry",
            ),
        ]
        return conclude(findings, tally=(len(relevant), len(signal)))

    return evaluate


# --- §9 traces -------------------------------------------------------------------------------------------


def _navigate_trace_across_services(scenario: PlanInput) -> Evaluator:
    services = list(dict.fromkeys(s.service for s in D.spans(scenario)))
    if len(services) < 2:
        raise D.missing("navigate_trace_across_services", "a trace crossing at least two services")

    def evaluate(ctx: EvalContext) -> Judgement:
        fetched = [r for r in O.records(ctx, TRACING) if r.succeeded]
        named = Said.of(ctx.bundle, COMMUNICATED).names(services)
        findings = [
            Finding(
                "fetched_trace",
                bool(fetched),
                f"{len(fetched)} tracing call(s)" if fetched else "never opened the trace",
                tuple(r.describe() for r in fetched[:2]),
            ),
            Finding("across_services", len(named) >= 2, f"follows it through {named}"),
        ]
        return conclude(findings, tally=(len(named), len(services)))

    return evaluate


# --- §9 dashboards -----------------------------------------------------------------------------------


def _reaches(op: Operation, dashboard: Mapping[str, Any]) -> bool:
    """Whether an audited read returned the dashboard's object: a get of it, or a list of its type in its
    namespace (or in every namespace) whose label selector admits it."""
    group, resource = type_of_object(dict(dashboard))
    if (op.group, op.resource) != (group, resource) or op.namespace not in ("", namespace_of(dashboard)):
        return False
    if op.name:
        return op.name == name_of(dashboard)
    return selector_admits(op.selector, labels_of(dashboard))


def _dashboard_read(ctx: EvalContext) -> Finding:
    """The dashboard was read: a gateway record of the dashboard interface, or an audited read that
    returned a dashboard object of the "before" snapshot (dashboards served as Kubernetes objects carry
    the dashboard label, decision 0050), or of a type or object named as a dashboard."""
    records = [r for r in O.records(ctx, DASHBOARDS) if r.succeeded]
    served = [o for key in ctx.before if DASHBOARD_LABEL in labels_of(o := ctx.before.get(*key) or {})]
    audited = [
        op
        for op in O.reads(ctx)
        if "dashboard" in op.resource or "dashboard" in op.name or any(_reaches(op, d) for d in served)
    ]
    return Finding(
        "read_dashboard",
        bool(records or audited),
        "read the dashboard" if records or audited else "never read the dashboard",
        tuple(r.describe() for r in records[:1]) + tuple(op.describe() for op in audited[:1]),
    )


def _panels(scenario: PlanInput, behavior: str) -> list[D.Panel]:
    panels = D.panels(scenario)
    if not panels:
        raise D.missing(behavior, "a dashboard with panels")
    return panels


def _interpret_all_relevant_panels(scenario: PlanInput) -> Evaluator:
    panels = _panels(scenario, "interpret_all_relevant_panels")

    def evaluate(ctx: EvalContext) -> Judgement:
        named = Said.of(ctx.bundle, RESPONSE).names([p.title for p in panels])
        findings = [
            _dashboard_read(ctx),
            Finding(
                "panels_named", len(named) == len(panels), f"{len(named)} of {len(panels)} panels discussed"
            ),
        ]
        return conclude(findings, tally=(len(named), len(panels)))

    return evaluate


def _false_alarms(said: Said, normal: list[str]) -> list[str]:
    """Normal panels named in a sentence that holds a concern phrase and no normal phrase."""
    return [
        t
        for t in normal
        for s in said.sentences_naming(t)
        if any(identifier_in(c, s) for c in P.CONCERN) and not any(identifier_in(n, s) for n in NORMAL)
    ]


def _prioritize_concerning_panels(scenario: PlanInput) -> Evaluator:
    panels = _panels(scenario, "prioritize_concerning_panels")
    concerning = [p.title for p in panels if p.concerning]
    normal = [p.title for p in panels if not p.concerning]

    def evaluate(ctx: EvalContext) -> Judgement:
        said = Said.of(ctx.bundle, RESPONSE)
        flagged = said.near(concerning, P.CONCERN)
        alarms = _false_alarms(said, normal)
        return conclude(
            [
                Finding(
                    "highlights_concerning",
                    len(flagged) == len(concerning),
                    f"flags {flagged} of {concerning}",
                ),
                Finding(
                    "no_false_alarm",
                    not alarms,
                    f"flags normal panels {alarms[:2]}" if alarms else "flags no normal panel",
                ),
            ]
        )

    return evaluate


def _identify_error_rate_and_disk_issues(scenario: PlanInput) -> Evaluator:
    def evaluate(ctx: EvalContext) -> Judgement:
        said = Said.of(ctx.bundle, COMMUNICATED)
        errors, disk = said.names(ERROR_RATE_IDS), said.names(DISK_IDS)
        return conclude(
            [
                Finding(
                    "error_rate",
                    bool(errors),
                    "names the error rate" if errors else "does not name the error rate",
                ),
                Finding("disk", bool(disk), "names disk usage" if disk else "does not name disk usage"),
            ]
        )

    return evaluate


S9 = "behavior-definitions §9"

BEHAVIORS: tuple[Behavior, ...] = (
    Behavior(
        "identify_memory_growth_trend",
        "behavior-definitions §5",
        "The reasoning reads memory over time, not one current value.",
        (
            Part(
                "queried_history",
                "a metrics call over a time range (a range query or a range selector), "
                "recorded by the gateway",
            ),
            Part("trend_stated", "a window of the answer or reasoning names memory with a trend phrase"),
        ),
        TOOLS_AND_OUTPUT,
        _identify_memory_growth_trend,
    ),
    Behavior(
        "assess_oom_risk",
        "behavior-definitions §10",
        "The reasoning sets memory usage against the memory limit.",
        (
            Part("usage", "names memory usage"),
            Part("limit", "names the declared limit or the limit"),
            Part(
                "relation", "a window names the limit with a relation phrase (approaching, % of, exceed...)"
            ),
        ),
        OUTPUT,
        _assess_oom_risk,
    ),
    Behavior(
        "evaluate_health_condition",
        "behavior-definitions §14",
        "The agent queries health signals and states the workload's health.",
        (
            Part("health_queries", "a successful read of a workload kind, or a recorded metrics query"),
            Part("assessment", "a window of the answer names the workload with a health phrase"),
        ),
        frozenset({SOURCE_AUDIT_LOG, SOURCE_AGENT_OUTPUT}),
        _evaluate_health_condition,
    ),
    Behavior(
        "filter_noise",
        S9,
        "The evidence the answer cites is the relevant log entries, not the noise.",
        (
            Part(
                "cites_relevant",
                "every distinct error/warning entry of the declared logs is cited (verbatim, "
                "or by two of its tokens that no noise entry has); tallied",
            ),
            Part("excludes_noise", "no noise entry (other levels) is quoted verbatim"),
        ),
        OUTPUT,
        _filter_noise,
    ),
    Behavior(
        "navigate_trace_across_services",
        S9,
        "The agent follows the trace (tracing calls) across at least two services.",
        (
            Part("fetched_trace", "a successful tracing call recorded by the gateway"),
            Part(
                "across_services",
                "the answer or reasoning names at least two of the trace's services; tallied",
            ),
        ),
        TOOLS_AND_OUTPUT,
        _navigate_trace_across_services,
    ),
    Behavior(
        "interpret_all_relevant_panels",
        S9,
        "The answer discusses every panel of the dashboard.",
        (
            Part(
                "read_dashboard",
                "the dashboard was read: a gateway record, or an audited get or list that returned a "
                "dashboard object (labelled as one) of the before snapshot",
            ),
            Part("panels_named", "the answer names every declared panel title; tallied"),
        ),
        ALL,
        _interpret_all_relevant_panels,
    ),
    Behavior(
        "prioritize_concerning_panels",
        S9,
        "The answer flags the panels whose values are anomalous, and only those.",
        (
            Part(
                "highlights_concerning",
                "every panel not declared normal is named in a window with a concern phrase",
            ),
            Part(
                "no_false_alarm",
                "no normal panel is named in a sentence with a concern phrase and no normal phrase",
            ),
        ),
        OUTPUT,
        _prioritize_concerning_panels,
    ),
    Behavior(
        "identify_error_rate_and_disk_issues",
        "behavior-definitions §5",
        "The output names both the error rate and disk usage.",
        (Part("error_rate", "names the error rate"), Part("disk", "names disk usage")),
        OUTPUT,
        _identify_error_rate_and_disk_issues,
    ),
)
