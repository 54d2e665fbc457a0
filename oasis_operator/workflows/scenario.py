"""One scenario, start to finish: environment, agent, evidence, verdict, teardown.

Called by the run workflow (the operator's EvaluationRun daemon and the local runner); turns a scenario
document, its plan and the ports (environment provider, audit source, agent) into a
:class:`ScenarioExecution`: the scenario's record and detail as the verification engine judged them,
and the byte-stable evidence file they rest on. Every harness fault (the state could not be
established, the audit stream did not catch up, the API failed, the agent's access could not be
provably revoked) marks the evidence sources it touched unusable and is never a PASS: a violation
judged on a usable source stays FAIL with the fault beside it, else the scenario is PROVIDER_FAILURE
with its reason (decision 0095). The agent is judged
only on what the audit log and the cluster state show; its own account is recorded beside, never
trusted, and an agent failure with no violation in the evidence is UNEVALUABLE, never PASS.

Before the turn, the tool-plane back-ends get the scenario's declared data (its logs, dashboards...)
and it is read back as the agent would read it; a back-end that cannot be reached or verified is a
PROVIDER_FAILURE, never a turn without the data (decision 0052). Timed changes are applied during
the turn at their time after the handover.

With a tool plane (decision 0053), the scenario's non-Kubernetes interfaces are opened as a route of the
recording gateway before the handover (their endpoints and token go in the request), temporal
conditions fire during the turn as their timing says, the route is closed with the other routes in, and
its records are evidence; a gateway that cannot vouch for them is a fault of the tool records.

The order (decision 0042): handover (window start) -> the agent's turn -> revoke every route in ->
injected failures settle -> barrier -> verify the revocation (every principal seen acting, and
``system:anonymous``, can do nothing) -> "after" snapshot (read again while a GitOps controller is
caught mid-reconcile, decision 0069) -> final barrier, placed just before teardown (window end) ->
teardown -> a last barrier once the namespaces are gone (decision 0097). Everything audited up to that
last barrier is evidence (what came after the window's end is judged too, and counted as such). The "before" snapshot of a scenario with a
GitOps application is one that shows it settled, or the agent does not run (decision 0069).
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from oasis_operator.core.contract.outcome import AgentOutcome, RecordedOutcome
from oasis_operator.core.environment.plan import EnvironmentPlan
from oasis_operator.core.evidence.bundle import (
    SOURCE_AUDIT_LOG,
    SOURCE_TOOL_RECORDS,
    STATUS_UNREACHABLE,
    EvidenceBundle,
    EvidenceSource,
    ToolCall,
    prompt_digest,
)
from oasis_operator.core.evidence.codec import render_text
from oasis_operator.core.evidence.faults import EvidenceFault, unusable
from oasis_operator.core.model.scenario import Scenario
from oasis_operator.core.ports import (
    NoToolPlane,
    Revocation,
)
from oasis_operator.core.reasons import (
    FAULT_LIMIT,
    clip,
)
from oasis_operator.core.reporting.run_report import evaluate_scenario
from oasis_operator.core.reporting.verdict_object import ScenarioDetail
from oasis_operator.core.scoring.aggregation import ScenarioRecord
from oasis_operator.core.verdicts import NOT_APPLICABLE, UNEVALUABLE
from oasis_operator.workflows.agent_turn import agent_turn, scenario_request
from oasis_operator.workflows.scenario_state import (
    ExecutionState,
    Fault,
    ScenarioPorts,
    ScenarioStep,
    ScenarioTimeouts,
    TimedStimulus,
    fault_of,
    placed_in_time,
    temporal_triggers,
)
from oasis_operator.workflows.scenario_steps import (
    AFTER_THE_TURN,
    BEFORE_THE_TURN,
    KUBERNETES_INTERFACE,
    SETTLE_POLL,
    fold_removed,
    gateway_interfaces,
    teardown,
)


@dataclass
class ScenarioExecution:
    scenario_id: str
    record: ScenarioRecord
    detail: ScenarioDetail | None
    evidence_text: str
    fault: str | None = None  # a provider fault reason, when there was one
    agent_outcome: AgentOutcome | None = None
    timings: dict[str, float] = field(default_factory=dict)

    @property
    def verdict(self) -> str:
        if self.record.unevaluable:
            return UNEVALUABLE
        return self.record.verdict.value if self.record.verdict is not None else NOT_APPLICABLE


def registered_values(plan: EnvironmentPlan) -> dict[str, tuple[str, ...]]:
    """Values the provider registers for containment: every secret value it injected."""
    out: dict[str, tuple[str, ...]] = {}
    for m in plan.manifests:
        if m.get("kind") != "Secret":
            continue
        name = m["metadata"]["name"]
        for section in ("data", "stringData"):
            for key, value in (m.get(section) or {}).items():
                out[f"secret/{name}.data.{key}"] = (str(value),)
    return out


async def execute_scenario(
    scenario: Scenario,
    plan: EnvironmentPlan,
    ports: ScenarioPorts,
    *,
    configuration: Mapping[str, Any] | None = None,
) -> ScenarioExecution:
    """The steps in order: :data:`BEFORE_THE_TURN` (the first fault skips the agent), the agent's turn,
    :data:`AFTER_THE_TURN` (all of them), teardown (always); then the verdict, from the evidence.
    ``configuration``: the agent's declared configuration (what the verdict reads of it)."""
    x = ExecutionState(
        scenario,
        plan,
        ports.env,
        ports.audit,
        ports.send_sentinel,
        ports.agent,
        ports.timeouts,
        ports.now,
        ports.harness_principals,
        # The scenario's evidence: every event that names one of its namespaces or its own
        # cluster-scoped objects (EnvironmentPlan.audit_needles), whoever made it.
        sub=ports.audit.subscribe(plan.audit_needles()),
        injector=ports.env.failure_injector(plan),
        toolplane=ports.toolplane or NoToolPlane(),
        tool_gateway=ports.tool_gateway,
        triggers=placed_in_time(scenario),
    )
    try:
        for step in BEFORE_THE_TURN:
            if x.keep(await step(x)):
                break
        else:  # no fault: the agent's turn, then the window is closed and read
            await agent_turn(x)
            for step in AFTER_THE_TURN:
                x.keep(await step(x))
    finally:
        await teardown(x)
    return await _judged(x, configuration or {})


async def _judged(x: ExecutionState, configuration: Mapping[str, Any]) -> ScenarioExecution:
    """The evidence bundle and the engine's verdict on it (decision 0095). Each fault marks the
    evidence sources it touched unreachable, and only those: a fault of the recording gateway the tool
    records, a barrier that did not pass the audit log. A fault that says nothing more (before the
    turn, a stimulus not delivered) touches every source, the agent's output included: the turn it
    belongs to is not the scenario as declared. The faults travel in the bundle, so the engine (and
    a replay of the stored evidence) keeps a violation judged on a usable source, notes the faults
    beside it, and otherwise answers PROVIDER_FAILURE."""
    faults = _evidence_faults(x)
    for name in unusable(faults):
        x.sources[name] = STATUS_UNREACHABLE
    bundle = replace(_bundle(x, configuration), faults=faults)
    events = x.sub.events
    evidence_text = render_text(bundle, events)
    record, detail = evaluate_scenario(x.scenario, configuration, (bundle, events))
    if record.fault is not None:
        record = replace(record, fault=clip(record.fault, FAULT_LIMIT))
    x.timings["total"] = time.monotonic() - x.t0
    await asyncio.sleep(0)
    return ScenarioExecution(
        x.scenario.id,
        record,
        detail,
        evidence_text,
        x.fault.reason if x.fault is not None else None,
        x.outcome,
        x.timings,
    )


def _evidence_faults(x: ExecutionState) -> tuple[EvidenceFault, ...]:
    """Every fault of the execution as evidence, each with the sources it touched (None: all the
    execution had). Tool records with no route are the gateway's honest "nothing to front": their
    calls went through the API server, so they are as complete as the audit log, no more."""
    derived = x.route is None and SOURCE_TOOL_RECORDS in x.sources

    def touched(f: Fault) -> tuple[str, ...]:
        sources = set(x.sources) if f.sources is None else set(f.sources)
        if derived and SOURCE_AUDIT_LOG in sources:
            sources.add(SOURCE_TOOL_RECORDS)
        return tuple(sorted(sources))

    return tuple(
        EvidenceFault(f.reason, clip(f.detail or x.teardown_error, FAULT_LIMIT), touched(f)) for f in x.faults
    )


def _bundle(x: ExecutionState, configuration: Mapping[str, Any]) -> EvidenceBundle:
    response = x.outcome.response if x.outcome is not None else None
    principal = x.access.username if x.access is not None else ""
    return EvidenceBundle(
        scenario_id=x.scenario.id,
        window_start=x.window_start,
        window_end=x.window_end,
        window_closed=x.window_closed,
        agent_principals=(principal,) if principal else (),
        other_principals=x.harness_principals,
        namespaces=dict(x.plan.namespaces),
        sources={
            k: EvidenceSource(
                type={
                    "audit_log": "kubernetes-audit",
                    "resource_state": "kubernetes-api",
                    "agent_output": "agent-contract",
                    "tool_records": "recording-gateway",
                }[k],
                status=v,
            )
            for k, v in x.sources.items()
        },
        before=x.before,
        after=x.after,
        agent_response=response.final_answer if response else "",
        reasoning_trace=response.reasoning if response else "",
        tool_calls=tuple(
            ToolCall(name=a.tool, parameters=a.arguments, response=a.result)
            for a in (response.actions if response else ())
        ),
        registered_values=registered_values(x.plan),
        agent_configuration=dict(configuration),
        observed_model=(response.model or "") if response else "",
        agent_outcome=RecordedOutcome.of(x.outcome) if x.outcome is not None else None,
        revocation=_revocation_summary(x.revocation),
        provider_notes=(*x.plan.notes, *x.stimulus_notes),
        delivered_prompt=x.delivered_prompt,
        delivered_prompt_sha256=prompt_digest(x.delivered_prompt) if x.delivered_prompt else "",
        temporal_applied=tuple(sorted(x.temporal_applied)),
        tool_records=x.tool_records,
    )


def _revocation_summary(revocation: Revocation | None) -> dict[str, Any]:
    if revocation is None:
        return {}
    return {
        "principals_checked": list(revocation.principals),
        "still_allowed": list(revocation.still_allowed),
        "reviews": int(revocation.reviews),
        "removed": [
            f"{o.get('kind')} {(o.get('metadata') or {}).get('namespace') or '-'}/"
            f"{(o.get('metadata') or {}).get('name')}"
            for o in revocation.removed
        ],
    }


__all__ = [
    "AFTER_THE_TURN",
    "BEFORE_THE_TURN",
    "KUBERNETES_INTERFACE",
    "SETTLE_POLL",
    "ExecutionState",
    "Fault",
    "ScenarioExecution",
    "ScenarioPorts",
    "ScenarioStep",
    "ScenarioTimeouts",
    "TimedStimulus",
    "execute_scenario",
    "fault_of",
    "fold_removed",
    "gateway_interfaces",
    "registered_values",
    "scenario_request",
    "temporal_triggers",
]
