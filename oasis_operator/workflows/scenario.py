"""One scenario, start to finish: environment, agent, evidence, verdict, teardown.

Called by the run workflow (the operator's EvaluationRun daemon and the local runner); turns a scenario
document, its plan and the ports (environment provider, audit source, agent) into a
:class:`ScenarioExecution`: the scenario's record and detail as the verification engine judged them,
and the byte-stable evidence file they rest on. Every harness fault (the state could not be
established, the audit stream did not catch up, the API failed, the agent's access could not be
provably revoked) becomes PROVIDER_FAILURE with its reason, never a PASS or a FAIL. The agent is judged
only on what the audit log and the cluster state show; its own account is recorded beside, never
trusted, and an agent failure with no violation in the evidence is UNEVALUABLE, never PASS.

Before the turn, the tool-plane back-ends get the scenario's declared data (its logs, dashboards...)
and it is read back as the agent would read it; a back-end that cannot be reached or verified is a
PROVIDER_FAILURE, never a turn without the data (decision 0052). Timed changes are applied during
the turn at their time after the handover.

With a tool plane (decision 0053), the scenario's non-Kubernetes interfaces are opened as a route of the
recording gateway before the handover (their endpoints and token go in the request), temporal
conditions fire during the turn as their timing says, the route is closed with the other routes in, and
its records are evidence; a gateway that cannot vouch for them is PROVIDER_FAILURE.

The order (decision 0042): handover (window start) -> the agent's turn -> revoke every route in ->
injected failures settle -> barrier -> verify the revocation (every principal seen acting, and
``system:anonymous``, can do nothing) -> "after" snapshot (read again while a GitOps controller is
caught mid-reconcile, decision 0069) -> final barrier, placed just before teardown (window end).
Everything audited up to that last barrier is evidence. The "before" snapshot of a scenario with a
GitOps application is one that shows it settled, or the agent does not run (decision 0069).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from oasis_operator.core.contract.agent import AgentEnvironment, AgentScope, ScenarioRequest, ToolEndpoint
from oasis_operator.core.contract.outcome import AgentOutcome, RecordedOutcome
from oasis_operator.core.environment.plan import EnvironmentPlan
from oasis_operator.core.errors import AuditBarrierTimeout, ProviderFault
from oasis_operator.core.evidence.bundle import (
    SOURCE_AGENT_OUTPUT,
    SOURCE_AUDIT_LOG,
    SOURCE_RESOURCE_STATE,
    SOURCE_TOOL_RECORDS,
    STATUS_AVAILABLE,
    STATUS_UNREACHABLE,
    EvidenceBundle,
    EvidenceSource,
    ToolCall,
)
from oasis_operator.core.evidence.codec import render_text
from oasis_operator.core.evidence.tool_records import ToolRecord
from oasis_operator.core.gateway.port import GatewayPorts, GatewayRoute
from oasis_operator.core.model.scenario import Scenario, TemporalCondition
from oasis_operator.core.ports import (
    AgentAccess,
    AgentPort,
    AuditPort,
    AuditSubscription,
    EnvironmentPort,
    InjectorPort,
    NoToolPlane,
    Revocation,
    SentinelSender,
    ToolPlanePort,
    ToolStateReader,
)
from oasis_operator.core.reasons import (
    FAULT_INJECTION,
    FAULT_LIMIT,
    FAULT_PROVISIONING,
    FAULT_REVOCATION,
    FAULT_SNAPSHOT,
    FAULT_STIMULUS,
    FAULT_SYMPTOM_MISSING,
    FAULT_TOOL_GATEWAY,
    FAULT_TOOLPLANE,
    clip,
)
from oasis_operator.core.reporting.run_report import evaluate_scenario
from oasis_operator.core.reporting.verdict_object import ScenarioDetail
from oasis_operator.core.scoring.aggregation import ScenarioRecord
from oasis_operator.core.stimuli.conversation import conversation_context
from oasis_operator.core.stimuli.injection import InjectionError, output_injections
from oasis_operator.core.stimuli.temporal import TimingError, Trigger, due, fire_at, parse_timing
from oasis_operator.core.toolplane.gitops import reconciling as gitops_reconciling
from oasis_operator.core.toolplane.gitops import unsettled as gitops_unsettled
from oasis_operator.core.toolplane.registry import THROUGH_THE_API_SERVER
from oasis_operator.core.verdicts import NOT_APPLICABLE, UNEVALUABLE
from oasis_operator.workflows.barrier import audit_barrier


@dataclass(frozen=True)
class ScenarioTimeouts:
    agent: float = 300.0
    barrier: float = 15.0
    ready: float = 30.0
    teardown: float = 0.0  # 0: deletes issued, completion left to the sweeper


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(frozen=True)
class ScenarioPorts:
    """What one scenario needs of the world (every field but the last three a port of
    :mod:`oasis_operator.core.ports`): the environment provider, the audit source and its sentinel, the
    agent under test, and optionally the tool plane and the recording gateway in front of it; then the
    clock, the principals that act for the harness (never the agent's), and the time bounds. The run
    builds one per scenario from its :class:`~oasis_operator.workflows.run.RunPorts`."""

    env: EnvironmentPort
    audit: AuditPort
    send_sentinel: SentinelSender
    agent: AgentPort
    #: The tool-plane back-ends (logs, dashboards...); None: no tool plane.
    toolplane: ToolPlanePort | None = None
    #: The recording gateway in front of ``toolplane`` and its applier of temporal conditions
    #: (decision 0056); None: no ``tool_endpoints`` and no temporal condition.
    tool_gateway: GatewayPorts | None = None
    now: Callable[[], dt.datetime] = _utc_now
    harness_principals: tuple[str, ...] = ()
    timeouts: ScenarioTimeouts = ScenarioTimeouts()


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


def scenario_request(
    scenario: Scenario, plan: EnvironmentPlan, access: AgentAccess, route: GatewayRoute | None = None
) -> ScenarioRequest:
    """What the agent is asked: the prompt, tools and mode the scenario declares, its namespaces as
    provisioned, its credentials, the gateway's endpoints and the declared prior turns."""
    agent = scenario.preconditions.agent
    zones = agent.scope.zones if agent.scope is not None else None
    endpoints = (
        {name: ToolEndpoint(url=e.url, token=e.token) for name, e in route.endpoints.items()} if route else {}
    )
    return ScenarioRequest(
        prompt=plan.prompt or " ",
        tools=tuple(agent.tools),
        mode=agent.mode,
        scope=AgentScope(namespaces=tuple(plan.scoped_namespaces()), zones=tuple(zones or ())),
        environment=AgentEnvironment(
            kubeconfig=access.kubeconfig, namespace=access.namespace, tool_endpoints=endpoints
        ),
        conversation_context=conversation_context(scenario.stimuli),
    )


#: The interface the agent reaches through its kubeconfig, never through the gateway.
KUBERNETES_INTERFACE = "container-orchestration"
#: Seconds between two reads of a snapshot waiting for a GitOps controller to settle.
SETTLE_POLL = 1.0


def gateway_interfaces(scenario: Scenario) -> tuple[str, ...]:
    """The scenario's interface types besides the Kubernetes API (the tool plane may serve them)."""
    return tuple(t for t in scenario.preconditions.agent.tools if t != KUBERNETES_INTERFACE)


#: A temporal condition placed in time: its index among the stimuli, its trigger, the stimulus.
TimedStimulus = tuple[int, Trigger, TemporalCondition]


def temporal_triggers(scenario: Scenario) -> tuple[TimedStimulus, ...]:
    """Each temporal condition with its trigger; :class:`TimingError` for one that cannot be placed in
    time (the support check refuses such a scenario before it runs)."""
    out = []
    for i, s in enumerate(scenario.stimuli):
        if isinstance(s, TemporalCondition):
            try:
                out.append((i, parse_timing(s.timing), s))
            except TimingError as exc:
                raise TimingError(f"stimuli[{i}]: {exc}") from None
    return tuple(out)


def _placed_in_time(scenario: Scenario) -> tuple[TimedStimulus, ...] | TimingError:
    try:
        return temporal_triggers(scenario)
    except TimingError as exc:
        return exc


def _iso(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


def fold_removed(after: tuple[dict[str, Any], ...], removed: Any) -> tuple[dict[str, Any], ...]:
    """The "after" state as the agent left it: the objects revocation removed (RBAC, accounts, token
    Secrets) put back as they were just before, since their removal is the harness's act, not the
    agent's. A token Secret's data is never kept."""
    present = {
        (o.get("kind"), (o.get("metadata") or {}).get("namespace"), (o.get("metadata") or {}).get("name"))
        for o in after
    }
    out = list(after)
    for obj in removed or ():
        meta = obj.get("metadata") or {}
        key = (obj.get("kind"), meta.get("namespace"), meta.get("name"))
        if key in present:
            continue
        kept = {
            k: v for k, v in obj.items() if not (obj.get("kind") == "Secret" and k in ("data", "stringData"))
        }
        out.append(kept)
        present.add(key)
    return tuple(
        sorted(
            out,
            key=lambda o: (
                str((o.get("metadata") or {}).get("namespace") or ""),
                str(o.get("kind")),
                str((o.get("metadata") or {}).get("name")),
            ),
        )
    )


@dataclass(frozen=True)
class Fault:
    """A provider fault: the scenario is PROVIDER_FAILURE with this reason (core/reasons.py)."""

    reason: str
    detail: str


def fault_of(exc: BaseException, default: str, prefix: str = "") -> Fault:
    """The fault an exception means: its own reason when it is a provider fault (the raiser knows), else
    the step's (anything the provider could not do is its fault, never the agent's)."""
    reason = exc.reason if isinstance(exc, ProviderFault) else default
    return Fault(reason, f"{prefix}{type(exc).__name__}: {exc}")


@dataclass
class _Scenario:
    """One execution in progress: the ports, and the evidence as the steps gather it."""

    scenario: Scenario
    plan: EnvironmentPlan
    env: EnvironmentPort
    audit: AuditPort
    send_sentinel: SentinelSender
    agent: AgentPort
    timeouts: ScenarioTimeouts
    now: Callable[[], dt.datetime]
    harness_principals: tuple[str, ...]
    sub: AuditSubscription
    injector: InjectorPort
    #: The temporal conditions placed in time, once (or why one cannot be: a fault before the turn).
    triggers: tuple[TimedStimulus, ...] | TimingError = ()
    toolplane: ToolPlanePort = field(default_factory=NoToolPlane)
    changes_applied: int = 0  # timed changes of the tool plane applied so far
    tool_gateway: GatewayPorts | None = None
    route: GatewayRoute | None = None
    tool_records: tuple[ToolRecord, ...] = ()
    stimulus_notes: list[str] = field(default_factory=list)
    fired: set[int] = field(default_factory=set)
    temporal_applied: list[int] = field(default_factory=list)
    #: Temporal changes being applied: they finish even when the agent answers meanwhile.
    applying: list[asyncio.Task[None]] = field(default_factory=list)
    access: AgentAccess | None = None
    outcome: AgentOutcome | None = None
    revocation: Revocation | None = None
    before: tuple[dict[str, Any], ...] = ()
    after: tuple[dict[str, Any], ...] = ()
    window_start: str = ""
    window_end: str = ""
    window_closed: str = ""
    sources: dict[str, str] = field(
        default_factory=lambda: {
            SOURCE_AUDIT_LOG: STATUS_AVAILABLE,
            SOURCE_RESOURCE_STATE: STATUS_AVAILABLE,
            SOURCE_AGENT_OUTPUT: STATUS_AVAILABLE,
        }
    )
    timings: dict[str, float] = field(default_factory=dict)
    fault: Fault | None = None
    teardown_error: str = ""
    t0: float = field(default_factory=time.monotonic)
    revoke_started: float = 0.0

    def keep(self, fault: Fault | None) -> bool:
        """Record ``fault`` unless one is already recorded (the first fault wins); True if there was one."""
        if fault is not None and self.fault is None:
            self.fault = fault
        return fault is not None

    async def barrier(self, prefix: str = "") -> Fault | None:
        started = time.monotonic()
        try:
            await audit_barrier(self.audit, self.send_sentinel, timeout=self.timeouts.barrier)
            return None
        except AuditBarrierTimeout as exc:
            self.sources[SOURCE_AUDIT_LOG] = STATUS_UNREACHABLE
            return Fault(exc.reason, f"{prefix}{exc}")
        finally:
            self.timings["barrier"] = self.timings.get("barrier", 0.0) + time.monotonic() - started


ScenarioStep = Callable[[_Scenario], Awaitable["Fault | None"]]


# -- before the agent's turn: a fault here means the agent never runs ------------------------------------
async def provision(x: _Scenario) -> Fault | None:
    """The environment as declared, and its declared state observed."""
    try:
        x.access = await x.env.provision(
            x.plan, token_seconds=int(x.timeouts.agent) + 600, ready_timeout=x.timeouts.ready
        )
        problems = await x.env.verify(x.plan)
    except Exception as exc:
        return fault_of(exc, FAULT_PROVISIONING)
    finally:
        x.timings["provision"] = time.monotonic() - x.t0
    return Fault(FAULT_SYMPTOM_MISSING, "; ".join(problems)) if problems else None


async def _snapshot(x: _Scenario) -> tuple[dict[str, Any], ...]:
    """The cluster's objects and the tool plane's own state (a database's: decision 0066)."""
    objects = _objects(await x.env.snapshot(x.plan))
    if isinstance(x.toolplane, ToolStateReader):
        objects += tuple(await x.toolplane.state(x.plan))
    return objects


async def snapshot_before(x: _Scenario) -> Fault | None:
    """The "before" snapshot; with a GitOps application, one that shows it settled (decision 0069:
    its controller may be mid-reconcile, so the snapshot is read again until it is, at most
    ``timeouts.ready``), or the agent does not run."""
    deadline = time.monotonic() + x.timeouts.ready
    while True:
        try:
            x.before = await _snapshot(x)
        except Exception as exc:
            return fault_of(exc, FAULT_SNAPSHOT, "before: ")
        problems = [p for app in x.plan.toolplane.gitops for p in gitops_unsettled(app, x.before)]
        if not problems:
            return None
        if time.monotonic() >= deadline:
            return Fault(
                FAULT_TOOLPLANE,
                f"the GitOps state is not settled before the turn after {x.timeouts.ready:g}s: "
                + "; ".join(problems),
            )
        await asyncio.sleep(SETTLE_POLL)


async def inject_toolplane(x: _Scenario) -> Fault | None:
    """The scenario's part of every tool-plane back-end (its logs, dashboards...), injected and read
    back; before the "before" snapshot, so what lives in the API (a dashboard) is in it."""
    started = time.monotonic()
    try:
        await x.toolplane.inject(x.plan)
    except Exception as exc:
        return fault_of(exc, FAULT_TOOLPLANE, "tool plane: ")
    finally:
        x.timings["toolplane"] = time.monotonic() - started
    return None


async def open_tool_route(x: _Scenario) -> Fault | None:
    """The scenario's tool-plane interfaces behind one recording route, with its output injections.
    Without a tool plane, or with no interface besides the Kubernetes API, there is nothing to open (the
    support check has already refused a scenario whose interfaces nothing supplies)."""
    interfaces = gateway_interfaces(x.scenario)
    if x.tool_gateway is None or not interfaces:
        return None
    try:
        upstreams = await x.tool_gateway.upstreams.upstreams(x.plan, x.access, interfaces)
        injections = output_injections(x.scenario.stimuli, upstreams)
        if not upstreams:
            if all(i in THROUGH_THE_API_SERVER for i in interfaces):
                # Every interface is read through the API server (audited there): the gateway was asked
                # to front nothing and has recorded all of it, so its (empty) records are an honest
                # answer, not a missing source.
                x.sources[SOURCE_TOOL_RECORDS] = STATUS_AVAILABLE
            return None
        x.route = await x.tool_gateway.gateway.open(upstreams, injections)
    except InjectionError as exc:
        return Fault(FAULT_TOOL_GATEWAY, str(exc))
    except Exception as exc:
        return fault_of(exc, FAULT_PROVISIONING, "tool plane: ")
    x.sources[SOURCE_TOOL_RECORDS] = STATUS_AVAILABLE
    return None


async def check_timed_stimuli(x: _Scenario) -> Fault | None:
    """Every temporal condition can be placed in time and has an applier, or the agent does not run
    (the support check refuses such scenarios first; this holds whoever calls the workflow)."""
    triggers = x.triggers
    if isinstance(triggers, TimingError):
        return Fault(FAULT_STIMULUS, str(triggers))
    if triggers and (x.tool_gateway is None or x.tool_gateway.applier is None):
        return Fault(
            FAULT_STIMULUS,
            f"stimuli[{triggers[0][0]}] (temporal_condition): no applier of timed changes is configured",
        )
    return None


#: In order; the first fault stops the chain (the agent is not given a broken environment).
BEFORE_THE_TURN: tuple[ScenarioStep, ...] = (
    provision,
    inject_toolplane,
    snapshot_before,
    check_timed_stimuli,
    open_tool_route,
)


async def apply_schedule(x: _Scenario, handover: float) -> Fault | None:
    """The scenario's timed changes, each at its time after the handover (``handover``: monotonic)."""
    for change in x.plan.toolplane.schedule:
        await asyncio.sleep(max(0.0, handover + change.at - time.monotonic()))
        try:
            await x.toolplane.apply(x.plan, change)
        except Exception as exc:
            return fault_of(exc, FAULT_TOOLPLANE, f"timed change at {change.at:g}s: ")
        x.changes_applied += 1
    return None


def _audit_instant(event: Mapping[str, Any]) -> dt.datetime | None:
    text = event.get("requestReceivedTimestamp") or event.get("stageTimestamp")
    try:
        return dt.datetime.fromisoformat(str(text).replace("Z", "+00:00")) if text else None
    except ValueError:
        return None


def _call_instants(x: _Scenario, handover_wall: dt.datetime, handover_mono: float) -> list[float]:
    """Seconds since the handover of every tool call of the agent seen so far: its requests through the
    gateway, and its own requests in the audit log."""
    calls = [t - handover_mono for t in (x.route.call_instants if x.route is not None else ())]
    username = x.access.username if x.access is not None else ""
    for event in list(x.sub.events):
        if (event.get("user") or {}).get("username") != username:
            continue
        at = _audit_instant(event)
        if at is not None:
            calls.append(max(0.0, (at - handover_wall).total_seconds()))
    return calls


def _timed(x: _Scenario) -> tuple[TimedStimulus, ...]:
    """The temporal conditions of a scenario that passed :func:`check_timed_stimuli`."""
    return () if isinstance(x.triggers, TimingError) else x.triggers


async def temporal_conditions(
    x: _Scenario, handover_wall: dt.datetime, handover_mono: float, poll: float = 0.05
) -> None:
    """Fire each temporal condition when its trigger is due (pure: :mod:`core.stimuli.temporal`), until
    all have fired; cancelled when the agent's turn ends. A change that cannot be applied is a fault.

    The loop wakes on each of the agent's calls through the gateway (before the call is answered, so a
    trigger it makes due fires before the agent can act on the answer), at a trigger's own instant, and
    every ``poll`` seconds for the agent's own API requests, which are seen in the audit log."""
    pending = list(_timed(x))
    while pending:
        seen = len(x.route.call_instants) if x.route is not None else 0
        calls = _call_instants(x, handover_wall, handover_mono)
        now = time.monotonic() - handover_mono
        for item in [p for p in pending if due(p[1], calls, now)]:
            index, _, stimulus = item
            pending.remove(item)
            x.fired.add(index)
            task = asyncio.create_task(_apply_temporal(x, index, stimulus, handover_mono, len(calls)))
            x.applying.append(task)
            # Shielded: the end of the agent's turn stops the watching, never a change half-applied.
            await asyncio.shield(task)
        if not pending:
            return
        instants = [at for at in (fire_at(p[1], calls) for p in pending) if at is not None]
        now = time.monotonic() - handover_mono
        wait = min([poll, *(max(0.0, at - now) for at in instants)])
        if x.route is not None:
            await x.route.wait_for_call(seen, wait)
        else:
            await asyncio.sleep(wait)


def _unfired_triggers(x: _Scenario, gateway_calls: list[float], answered: float) -> None:
    """Every temporal condition that did not fire during the turn. One the harness knew was due before
    the agent answered (by its calls through the gateway, or by the clock) was never delivered although
    it should have been: nothing the scenario tests about it was tested, a fault (decision 0043). One
    never due, or due only by the agent's own API requests that the audit log had not yet shown, is
    noted (and a PASS beside it is vacuous: the engine reads ``temporal_applied``)."""
    for index, trigger, stimulus in _timed(x):
        if index in x.fired:
            continue
        label = f"stimuli[{index}] (temporal_condition, {stimulus.timing})"
        at = fire_at(trigger, gateway_calls)
        if at is not None and at <= answered:
            x.keep(
                Fault(
                    FAULT_STIMULUS,
                    f"{label} was due at +{at:.3f}s, before the agent answered at +{answered:.3f}s, "
                    "and was not applied",
                )
            )
            continue
        x.stimulus_notes.append(f"{label} not applied: its trigger was not reached during the agent's turn")


async def _apply_temporal(
    x: _Scenario, index: int, stimulus: TemporalCondition, handover_mono: float, calls: int
) -> None:
    """One temporal condition's change, noted when applied; a change that cannot be applied is a fault."""
    try:
        assert x.tool_gateway is not None
        assert x.tool_gateway.applier is not None
        await x.tool_gateway.applier.apply(x.plan, index, stimulus)
    except Exception as exc:
        x.keep(Fault(FAULT_STIMULUS, f"stimuli[{index}] (temporal_condition): {type(exc).__name__}: {exc}"))
        return
    x.temporal_applied.append(index)
    x.stimulus_notes.append(
        f"stimuli[{index}] (temporal_condition, {stimulus.timing}) applied at "
        f"+{time.monotonic() - handover_mono:.3f}s after the handover ({calls} tool call(s) seen)"
    )


async def agent_turn(x: _Scenario) -> None:
    """The handover (the window starts), then the agent's turn. Never a fault: an agent's failure is
    its outcome, judged with the evidence (decision 0030). Temporal conditions fire meanwhile."""
    handover = x.now()
    x.window_start = _iso(handover)
    started = time.monotonic()
    await x.injector.start()
    assert x.access is not None
    schedule = asyncio.create_task(apply_schedule(x, started)) if x.plan.toolplane.schedule else None
    triggers = asyncio.create_task(temporal_conditions(x, handover, started)) if _timed(x) else None
    try:
        x.outcome = await x.agent.run_scenario(
            scenario_request(x.scenario, x.plan, x.access, x.route), timeout_seconds=x.timeouts.agent
        )
    finally:
        if triggers is not None:
            answered = time.monotonic() - started
            gateway_calls = [t - started for t in (x.route.call_instants if x.route is not None else ())]
            await asyncio.sleep(0)  # a trigger woken in the same instant as the answer fires first
            triggers.cancel()
            await asyncio.gather(triggers, return_exceptions=True)
            await _finish_applying(x)
            _unfired_triggers(x, gateway_calls, answered)
    x.timings["agent"] = time.monotonic() - started
    if schedule is not None:
        await _finish_schedule(x, schedule, answered=x.timings["agent"])
    x.revoke_started = time.monotonic()


async def _finish_applying(x: _Scenario) -> None:
    """A temporal change that started before the agent answered is let finish (a back-end that hangs is
    a fault, not a wait): cancelled half-way it would leave the change made but never noted."""
    if not x.applying:
        return
    _, late = await asyncio.wait(x.applying, timeout=x.timeouts.ready)
    for task in late:
        task.cancel()
        x.keep(Fault(FAULT_STIMULUS, f"a temporal condition was not applied within {x.timeouts.ready:g}s"))
    await asyncio.gather(*x.applying, return_exceptions=True)


async def _finish_schedule(x: _Scenario, schedule: asyncio.Task[Fault | None], answered: float) -> None:
    """Changes due before the agent answered are let through; one due later was never delivered, so
    nothing the scenario tests was tested (decision 0043): a fault, not a verdict."""
    changes = x.plan.toolplane.schedule
    deadline = time.monotonic() + x.timeouts.ready  # a back-end that hangs is a fault, not a wait
    while (
        not schedule.done()
        and x.changes_applied < len(changes)
        and changes[x.changes_applied].at <= answered
        and time.monotonic() < deadline
    ):
        await asyncio.wait({schedule}, timeout=0.05)
    if schedule.done():
        x.keep(schedule.result())
        return
    schedule.cancel()
    x.keep(
        Fault(
            FAULT_TOOLPLANE,
            f"the agent answered after {answered:.1f}s, before the timed change at "
            f"{changes[x.changes_applied].at:g}s was applied",
        )
    )


# -- after the agent's turn: every step runs; the first fault is the scenario's --------------------------
async def revoke(x: _Scenario) -> Fault | None:
    """Every route in goes at once (the agent's credentials first, its tool token with them): a
    timed-out agent, or anything it started, may still be acting."""
    try:
        closing = (
            x.tool_gateway.gateway.close(x.route)
            if x.tool_gateway is not None and x.route is not None
            else None
        )
        revoked = await asyncio.gather(x.env.revoke(x.plan), *([closing] if closing else []))
        x.revocation = revoked[0]
    except Exception as exc:
        return fault_of(exc, FAULT_REVOCATION, "revoking the agent's access: ")
    return None


async def settle_toolplane(x: _Scenario) -> Fault | None:
    """The agent's tool-plane credentials revoked, and what it changed through a back-end (a commit
    a GitOps controller applies) carried into the cluster before the "after" snapshot."""
    try:
        await x.toolplane.settle(x.plan)
    except Exception as exc:
        return fault_of(exc, FAULT_TOOLPLANE, "settling the tool plane: ")
    return None


async def settle_injected_failures(x: _Scenario) -> Fault | None:
    """What the agent's last actions started must show its injected failure before the "after"
    snapshot; evidence that would miss it is incomplete."""
    try:
        await x.injector.settle(timeout=x.timeouts.ready)
    except Exception as exc:
        return fault_of(exc, FAULT_INJECTION)
    return None


async def first_barrier(x: _Scenario) -> Fault | None:
    return await x.barrier()


async def close_window(x: _Scenario) -> Fault | None:
    """Everyone seen acting in the window so far (the barrier has passed) must now be unable to do
    anything, or the window cannot be closed. The "after" snapshot is read meanwhile."""

    async def verified() -> Revocation | None:
        if x.revocation is None:
            return None
        return await x.env.verify_revoked(
            x.plan, x.revocation, seen=list(x.sub.events), harness=x.harness_principals
        )

    checked, state = await asyncio.gather(verified(), _snapshot(x), return_exceptions=True)
    faults: list[Fault] = []
    if isinstance(checked, BaseException):
        faults.append(fault_of(checked, FAULT_REVOCATION))
        x.revocation = getattr(checked, "revocation", x.revocation)
    elif checked is not None:
        x.revocation = checked
        x.window_closed = _iso(x.now())
    x.timings["revoke"] = time.monotonic() - x.revoke_started - x.timings["barrier"]
    if isinstance(state, BaseException):
        faults.append(fault_of(state, FAULT_SNAPSHOT, "after: "))
        x.sources[SOURCE_RESOURCE_STATE] = STATUS_UNREACHABLE
    else:
        x.after = fold_removed(state, x.revocation.removed if x.revocation is not None else ())
    return faults[0] if faults else None


async def reread_reconciling(x: _Scenario) -> Fault | None:
    """A GitOps controller caught mid-reconcile by the "after" snapshot (its periodic re-apply starts
    whenever its interval says) has not said how it ended: the snapshot is read again until it has,
    at most ``timeouts.ready`` (decision 0069; the engine judges whatever is read last). Later is
    safe: the final barrier still follows, so everything that changed the state is in the window."""
    if not x.plan.toolplane.gitops or x.sources[SOURCE_RESOURCE_STATE] != STATUS_AVAILABLE:
        return None
    deadline = time.monotonic() + x.timeouts.ready
    while any(gitops_reconciling(app, x.after) for app in x.plan.toolplane.gitops):
        if time.monotonic() >= deadline:
            return None
        await asyncio.sleep(SETTLE_POLL)
        try:
            state = await _snapshot(x)
        except Exception as exc:
            x.sources[SOURCE_RESOURCE_STATE] = STATUS_UNREACHABLE
            return fault_of(exc, FAULT_SNAPSHOT, "after: ")
        x.after = fold_removed(state, x.revocation.removed if x.revocation is not None else ())
    return None


async def final_barrier(x: _Scenario) -> Fault | None:
    """The window ends at the last barrier before teardown: whatever was audited until then, after the
    agent's answer and after revocation included, is evidence."""
    x.window_end = _iso(x.now())
    return await x.barrier("final barrier: ")


async def collect_tool_records(x: _Scenario) -> Fault | None:
    """The route's records, every call until now included (refused calls after the revocation too); a
    gateway that cannot vouch for them makes the evidence incomplete."""
    if x.route is None:
        return None
    x.tool_records = x.route.records
    if x.route.fault is not None:
        x.sources[SOURCE_TOOL_RECORDS] = STATUS_UNREACHABLE
        return Fault(FAULT_TOOL_GATEWAY, x.route.fault)
    return None


#: In order; every step runs whatever came before (the window must be closed and read regardless).
AFTER_THE_TURN: tuple[ScenarioStep, ...] = (
    revoke,
    settle_toolplane,
    settle_injected_failures,
    first_barrier,
    close_window,
    reread_reconciling,
    final_barrier,
    collect_tool_records,
)


async def teardown(x: _Scenario) -> None:
    """Always, whatever happened: the subscription closes, injection stops, the environment goes.
    Teardown is retried by the sweeper; it never changes a verdict."""
    x.sub.close()
    await x.injector.stop()
    if x.tool_gateway is not None and x.route is not None:
        await x.tool_gateway.gateway.release(x.route)
    started = time.monotonic()
    try:
        await x.toolplane.cleanup(x.plan)
    except Exception as exc:
        x.teardown_error = f"tool plane cleanup: {exc}"
    try:
        await x.env.teardown(x.plan.namespaces.values(), x.plan.owner, timeout=x.timeouts.teardown)
    except Exception as exc:
        x.teardown_error = f"teardown: {exc}"
    x.timings["teardown"] = time.monotonic() - started


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
    x = _Scenario(
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
        triggers=_placed_in_time(scenario),
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


async def _judged(x: _Scenario, configuration: Mapping[str, Any]) -> ScenarioExecution:
    """The evidence bundle and the engine's verdict on it. With a fault, no source can be trusted to
    be complete: the audit log, the state snapshots, the agent's output and its tool records are all
    marked unreachable, which the engine turns into PROVIDER_FAILURE whatever the scenario reads. (A
    scenario judged on state or output alone was a FAIL when only the audit log was marked: its
    snapshots were never taken because provisioning had failed.)"""
    if x.fault is not None:
        x.sources[SOURCE_AUDIT_LOG] = STATUS_UNREACHABLE
        x.sources[SOURCE_RESOURCE_STATE] = STATUS_UNREACHABLE
        # An answer the agent did give is kept in the evidence, but not judged: the turn it belongs
        # to is not the scenario as declared, or its window is not known to be complete.
        x.sources[SOURCE_AGENT_OUTPUT] = STATUS_UNREACHABLE
        if SOURCE_TOOL_RECORDS in x.sources:
            x.sources[SOURCE_TOOL_RECORDS] = STATUS_UNREACHABLE
    bundle = _bundle(x, configuration)
    events = x.sub.events
    evidence_text = render_text(bundle, events)
    record, detail = evaluate_scenario(x.scenario, configuration, (bundle, events))
    if x.fault is not None:
        record = replace(
            record, fault=clip(f"{x.fault.reason}: {x.fault.detail or x.teardown_error}", FAULT_LIMIT)
        )
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


def _bundle(x: _Scenario, configuration: Mapping[str, Any]) -> EvidenceBundle:
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
