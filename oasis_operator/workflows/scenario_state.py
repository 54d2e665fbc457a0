"""One scenario's execution while it is in progress, and what every step of it shares.

Called by the scenario workflow's steps (:mod:`~oasis_operator.workflows.scenario_steps`, the agent's
turn in :mod:`~oasis_operator.workflows.agent_turn`) and by
:func:`~oasis_operator.workflows.scenario.execute_scenario`, which makes one :class:`ExecutionState`:
the scenario (parsed once) and its plan, the ports (:class:`ScenarioPorts`), the time bounds, the
temporal conditions placed in time once, and the evidence as the steps gather it. A step returns a
:class:`Fault` (a provider fault, with the evidence sources it touched: decision 0095) or None.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from oasis_operator.core.contract.outcome import AgentOutcome
from oasis_operator.core.environment.plan import EnvironmentPlan
from oasis_operator.core.errors import AuditBarrierTimeout, ProviderFault
from oasis_operator.core.evidence.bundle import (
    SOURCE_AGENT_OUTPUT,
    SOURCE_AUDIT_LOG,
    SOURCE_RESOURCE_STATE,
    STATUS_AVAILABLE,
    STATUS_UNREACHABLE,
)
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
)
from oasis_operator.core.stimuli.temporal import TimingError, Trigger, parse_timing
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
    builds one per scenario from its :class:`~oasis_operator.workflows.run_context.RunPorts`."""

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


def placed_in_time(scenario: Scenario) -> tuple[TimedStimulus, ...] | TimingError:
    try:
        return temporal_triggers(scenario)
    except TimingError as exc:
        return exc


def iso(t: dt.datetime) -> str:
    return t.astimezone(dt.UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")


@dataclass(frozen=True)
class Fault:
    """A provider fault (its reason a core/reasons.py constant) and the evidence sources it made
    unusable (decision 0095). ``sources=None``: every source, what a fault that says nothing more
    means (before the turn the agent never ran; a stimulus not delivered is not the scenario
    declared). ``()``: none in particular; the evidence is still not known complete, so no PASS."""

    reason: str
    detail: str
    sources: tuple[str, ...] | None = None


def fault_of(
    exc: BaseException, default: str, prefix: str = "", sources: tuple[str, ...] | None = None
) -> Fault:
    """The fault an exception means: its own reason when it is a provider fault (the raiser knows), else
    the step's (anything the provider could not do is its fault, never the agent's)."""
    reason = exc.reason if isinstance(exc, ProviderFault) else default
    return Fault(reason, f"{prefix}{type(exc).__name__}: {exc}", sources)


@dataclass
class ExecutionState:
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
    #: The task text exactly as sent to the agent (recorded in the evidence with its digest).
    delivered_prompt: str = ""
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
    #: Every fault in the order it happened; the first is the scenario's reason (:attr:`fault`).
    faults: list[Fault] = field(default_factory=list)
    teardown_error: str = ""
    t0: float = field(default_factory=time.monotonic)
    revoke_started: float = 0.0

    @property
    def fault(self) -> Fault | None:
        """The first fault: the scenario's reason."""
        return self.faults[0] if self.faults else None

    def keep(self, fault: Fault | None) -> bool:
        """Record ``fault`` beside those already recorded (each keeps the sources it touched: decision
        0095); True if there was one."""
        if fault is not None:
            self.faults.append(fault)
        return fault is not None

    async def barrier(self, prefix: str = "") -> Fault | None:
        started = time.monotonic()
        try:
            await audit_barrier(self.audit, self.send_sentinel, timeout=self.timeouts.barrier)
            return None
        except AuditBarrierTimeout as exc:
            self.sources[SOURCE_AUDIT_LOG] = STATUS_UNREACHABLE
            return Fault(exc.reason, f"{prefix}{exc}", (SOURCE_AUDIT_LOG,))
        finally:
            self.timings["barrier"] = self.timings.get("barrier", 0.0) + time.monotonic() - started


ScenarioStep = Callable[[ExecutionState], Awaitable["Fault | None"]]


def timed(x: ExecutionState) -> tuple[TimedStimulus, ...]:
    """The temporal conditions of a scenario that passed :func:`check_timed_stimuli`."""
    return () if isinstance(x.triggers, TimingError) else x.triggers
