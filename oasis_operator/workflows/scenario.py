"""One scenario, start to finish: environment, agent, evidence, verdict, teardown.

Called by the run workflow (the operator's EvaluationRun daemon and the local runner); turns a scenario
document, its plan and the ports (environment provider, audit source, agent) into a
:class:`ScenarioExecution`: the scenario's record and detail as the verification engine judged them,
and the byte-stable evidence file they rest on. Every harness fault (the state could not be
established, the audit stream did not catch up, the API failed, the agent's access could not be
provably revoked) becomes PROVIDER_FAILURE with its reason, never a PASS or a FAIL. The agent is judged
only on what the audit log and the cluster state show; its own account is recorded beside, never
trusted, and an agent failure with no violation in the evidence is UNEVALUABLE, never PASS.

The order (decision 0042): handover (window start) -> the agent's turn -> revoke every route in ->
injected failures settle -> barrier -> verify the revocation (every principal seen acting, and
``system:anonymous``, can do nothing) -> "after" snapshot -> final barrier, placed just before
teardown (window end). Everything audited up to that last barrier is evidence.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from oasis_operator.core.contract.agent import AgentEnvironment, AgentScope, ScenarioRequest
from oasis_operator.core.contract.outcome import AgentOutcome, AgentOutcomeStatus, RecordedOutcome
from oasis_operator.core.environment.plan import EnvironmentPlan
from oasis_operator.core.errors import AuditBarrierTimeout
from oasis_operator.core.evidence.bundle import (
    SOURCE_AGENT_OUTPUT,
    SOURCE_AUDIT_LOG,
    SOURCE_RESOURCE_STATE,
    STATUS_AVAILABLE,
    STATUS_UNREACHABLE,
    EvidenceBundle,
    EvidenceSource,
    ToolCall,
)
from oasis_operator.core.evidence.codec import render_text
from oasis_operator.core.ports import AgentPort, AuditPort, EnvironmentPort, SentinelSender
from oasis_operator.core.reasons import (
    FAULT_AUDIT_BARRIER,
    FAULT_INJECTION,
    FAULT_PROVISIONING,
    FAULT_REVOCATION,
    FAULT_SNAPSHOT,
    FAULT_SYMPTOM_MISSING,
)
from oasis_operator.core.reporting.run_report import evaluate_scenario
from oasis_operator.core.reporting.verdict_object import ScenarioDetail
from oasis_operator.core.scoring.aggregation import ScenarioRecord
from oasis_operator.workflows.barrier import audit_barrier


@dataclass(frozen=True)
class ScenarioTimeouts:
    agent: float = 300.0
    barrier: float = 15.0
    ready: float = 30.0
    teardown: float = 0.0  # 0: deletes issued, completion left to the sweeper


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
            return "UNEVALUABLE"
        return self.record.verdict.value if self.record.verdict is not None else "NOT_APPLICABLE"


def _objects(snapshot: Mapping[str, Any]) -> tuple[dict[str, Any], ...]:
    """Flatten a provider snapshot ({namespaces: {ns: {Kind: [obj]}}, cluster: {Kind: [obj]}})."""
    out: list[dict[str, Any]] = []
    for ns in sorted(snapshot.get("namespaces", {})):
        for kind in sorted(snapshot["namespaces"][ns]):
            for obj in snapshot["namespaces"][ns][kind]:
                out.append({"kind": kind, **{k: v for k, v in obj.items() if k != "kind"}})
    for kind in sorted(snapshot.get("cluster", {})):
        for obj in snapshot["cluster"][kind]:
            out.append({"kind": kind, **{k: v for k, v in obj.items() if k != "kind"}})
    return tuple(out)


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


def scenario_request(scenario: Mapping[str, Any], plan: EnvironmentPlan, access: Any) -> ScenarioRequest:
    agent = (scenario.get("preconditions") or {}).get("agent") or {}
    scope = agent.get("scope") or {}
    return ScenarioRequest(
        prompt=plan.prompt or " ",
        tools=tuple(agent.get("tools") or ()),
        mode=str(agent.get("mode") or "autonomous"),
        scope=AgentScope(namespaces=tuple(plan.scoped_namespaces()), zones=tuple(scope.get("zones") or ())),
        environment=AgentEnvironment(kubeconfig=access.kubeconfig, namespace=access.namespace),
    )


def _iso(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def fold_removed(after: tuple[dict[str, Any], ...], removed: Any) -> tuple[dict[str, Any], ...]:
    """The "after" state as the agent left it: the objects revocation removed (RBAC, accounts, token
    Secrets) put back as they were just before, since their removal is the harness's act, not the
    agent's. A token Secret's data is never kept."""
    present = {(o.get("kind"), (o.get("metadata") or {}).get("namespace"), (o.get("metadata") or {}).get("name"))
               for o in after}
    out = list(after)
    for obj in removed or ():
        meta = obj.get("metadata") or {}
        key = (obj.get("kind"), meta.get("namespace"), meta.get("name"))
        if key in present:
            continue
        kept = {k: v for k, v in obj.items() if not (obj.get("kind") == "Secret" and k in ("data", "stringData"))}
        out.append(kept)
        present.add(key)
    return tuple(sorted(out, key=lambda o: (str((o.get("metadata") or {}).get("namespace") or ""), str(o.get("kind")),
                                            str((o.get("metadata") or {}).get("name")))))


async def execute_scenario(
    scenario: Mapping[str, Any],
    plan: EnvironmentPlan,
    *,
    env: EnvironmentPort,
    audit: AuditPort,
    send_sentinel: SentinelSender,
    agent: AgentPort,
    configuration: Mapping[str, Any],
    timeouts: ScenarioTimeouts = ScenarioTimeouts(),
    now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
    harness_principals: tuple[str, ...] = (),
) -> ScenarioExecution:
    sid = str(scenario.get("id"))
    timings: dict[str, float] = {}
    # The scenario's evidence: every event that names one of its namespaces (their names are unique,
    # and the agent's username contains its home namespace), whoever made it.
    sub = audit.subscribe(tuple(sorted(plan.namespaces.values())))
    access: Any = None
    outcome: AgentOutcome | None = None
    revocation: Any = None
    fault: str | None = None
    fault_detail = ""
    before: tuple[dict[str, Any], ...] = ()
    after: tuple[dict[str, Any], ...] = ()
    window_start = window_end = window_closed = ""
    sources = {SOURCE_AUDIT_LOG: STATUS_AVAILABLE, SOURCE_RESOURCE_STATE: STATUS_AVAILABLE,
               SOURCE_AGENT_OUTPUT: STATUS_AVAILABLE}
    t0 = time.monotonic()
    injector = env.failure_injector(plan)

    def provider_fault(reason: str, detail: str) -> None:
        nonlocal fault, fault_detail
        if fault is None:
            fault, fault_detail = reason, detail

    try:
        try:
            access = await env.provision(plan, token_seconds=int(timeouts.agent) + 600, ready_timeout=timeouts.ready)
            problems = await env.verify(plan)
            if problems:
                provider_fault(FAULT_SYMPTOM_MISSING, "; ".join(problems))
        except Exception as exc:  # anything the provider could not do is its fault, not the agent's
            provider_fault(FAULT_PROVISIONING, f"{type(exc).__name__}: {exc}")
        timings["provision"] = time.monotonic() - t0
        if fault is None:
            try:
                before = _objects(await env.snapshot(plan))
            except Exception as exc:
                provider_fault(FAULT_SNAPSHOT, f"before: {type(exc).__name__}: {exc}")
        if fault is None:
            window_start = _iso(now())
            t1 = time.monotonic()
            await injector.start()
            outcome = await agent.run_scenario(scenario_request(scenario, plan, access),
                                               timeout_seconds=timeouts.agent)
            timings["agent"] = time.monotonic() - t1
            # Every route in goes at once (the agent's credentials first): a timed-out agent, or
            # anything it started, may still be acting.
            t_revoke = time.monotonic()
            try:
                revocation = await env.revoke(plan)
            except Exception as exc:
                provider_fault(FAULT_REVOCATION, f"revoking the agent's access: {type(exc).__name__}: {exc}")
            # What the agent's last actions started must show its injected failure before the
            # "after" snapshot; evidence that would miss it is incomplete.
            try:
                await injector.settle(timeout=timeouts.ready)
            except Exception as exc:
                provider_fault(FAULT_INJECTION, f"{type(exc).__name__}: {exc}")
            t2 = time.monotonic()
            try:
                await audit_barrier(audit, send_sentinel, timeout=timeouts.barrier)
            except AuditBarrierTimeout as exc:
                provider_fault(FAULT_AUDIT_BARRIER, str(exc))
                sources[SOURCE_AUDIT_LOG] = STATUS_UNREACHABLE
            timings["barrier"] = time.monotonic() - t2
            # Everyone seen acting in the window so far (the barrier has passed) must now be unable to
            # do anything, or the window cannot be closed. The "after" snapshot is read meanwhile.
            async def verified() -> Any:
                if revocation is None:
                    return None
                return await env.verify_revoked(plan, revocation, seen=list(sub.events), harness=harness_principals)

            checked, state = await asyncio.gather(verified(), env.snapshot(plan), return_exceptions=True)
            if isinstance(checked, BaseException):
                provider_fault(FAULT_REVOCATION, f"{type(checked).__name__}: {checked}")
                revocation = getattr(checked, "revocation", revocation)
            elif checked is not None:
                revocation = checked
                window_closed = _iso(now())
            timings["revoke"] = time.monotonic() - t_revoke - timings["barrier"]
            if isinstance(state, BaseException):
                provider_fault(FAULT_SNAPSHOT, f"after: {type(state).__name__}: {state}")
                sources[SOURCE_RESOURCE_STATE] = STATUS_UNREACHABLE
            else:
                after = fold_removed(_objects(state), getattr(revocation, "removed", ()))
            # The window ends at the last barrier before teardown: whatever was audited until then,
            # after the agent's answer and after revocation included, is evidence.
            window_end = _iso(now())
            t4 = time.monotonic()
            try:
                await audit_barrier(audit, send_sentinel, timeout=timeouts.barrier)
            except AuditBarrierTimeout as exc:
                provider_fault(FAULT_AUDIT_BARRIER, f"final barrier: {exc}")
                sources[SOURCE_AUDIT_LOG] = STATUS_UNREACHABLE
            timings["barrier"] += time.monotonic() - t4
    finally:
        sub.close()
        await injector.stop()
        t3 = time.monotonic()
        try:
            await env.teardown(plan.namespaces.values(), plan.owner, timeout=timeouts.teardown)
        except Exception as exc:  # teardown is retried by the sweeper; it never changes a verdict
            timings["teardown_error"] = 1.0
            fault_detail = fault_detail or f"teardown: {exc}"
        timings["teardown"] = time.monotonic() - t3
    if fault is not None:
        # The evidence cannot be trusted to be complete: mark the audit source unreachable, which the
        # engine turns into PROVIDER_FAILURE whatever the events would say.
        sources[SOURCE_AUDIT_LOG] = STATUS_UNREACHABLE
    response = outcome.response if outcome is not None else None
    principal = access.username if access is not None else ""
    bundle = EvidenceBundle(
        scenario_id=sid,
        window_start=window_start,
        window_end=window_end,
        window_closed=window_closed,
        agent_principals=(principal,) if principal else (),
        other_principals=harness_principals,
        namespaces=dict(plan.namespaces),
        sources={k: EvidenceSource(type={"audit_log": "kubernetes-audit", "resource_state": "kubernetes-api",
                                         "agent_output": "agent-contract"}[k], status=v)
                 for k, v in sources.items()},
        before=before,
        after=after,
        agent_response=response.final_answer if response else "",
        reasoning_trace=response.reasoning if response else "",
        tool_calls=tuple(ToolCall(name=a.tool, parameters=a.arguments, response=a.result)
                         for a in (response.actions if response else ())),
        registered_values=registered_values(plan),
        agent_configuration=dict(configuration),
        observed_model=(response.model or "") if response else "",
        agent_outcome=RecordedOutcome.of(outcome) if outcome is not None else None,
        revocation=_revocation_summary(revocation),
        provider_notes=tuple(plan.notes),
    )
    events = sub.events
    evidence_text = render_text(bundle, events)
    record, detail = evaluate_scenario(scenario, configuration, (bundle, events))
    if fault is not None:
        record = ScenarioRecord(**{**{f: getattr(record, f) for f in record.__dataclass_fields__},
                                   "fault": f"{fault}: {fault_detail}"[:1000]})
    timings["total"] = time.monotonic() - t0
    if outcome is not None and outcome.status is AgentOutcomeStatus.AGENT_FAILURE:
        timings["agent_failure"] = 1.0
    await asyncio.sleep(0)
    return ScenarioExecution(sid, record, detail, evidence_text, fault, outcome, timings)


def _revocation_summary(revocation: Any) -> dict[str, Any]:
    if revocation is None:
        return {}
    return {
        "principals_checked": list(getattr(revocation, "principals", ())),
        "still_allowed": list(getattr(revocation, "still_allowed", ())),
        "reviews": int(getattr(revocation, "reviews", 0)),
        "removed": [f"{o.get('kind')} {(o.get('metadata') or {}).get('namespace') or '-'}/"
                    f"{(o.get('metadata') or {}).get('name')}" for o in getattr(revocation, "removed", ())],
    }
