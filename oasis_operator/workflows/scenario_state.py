"""One scenario's execution while it is in progress, and what every step of it shares.

Called by the scenario workflow's steps (:mod:`~oasis_operator.workflows.scenario_steps`, the agent's
turn in :mod:`~oasis_operator.workflows.agent_turn`) and by
:func:`~oasis_operator.workflows.scenario.execute_scenario`, which makes one :class:`ExecutionState`:
the scenario (parsed once) and its plan, the ports (:class:`ScenarioPorts`), the time bounds, the
temporal conditions placed in time once, and the evidence as the steps gather it. A step returns a
:class:`Fault` (a provider fault: PROVIDER_FAILURE with its reason) or None.
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
    """A provider fault: the scenario is PROVIDER_FAILURE with this reason (core/reasons.py)."""

    reason: str
    detail: str


def fault_of(exc: BaseException, default: str, prefix: str = "") -> Fault:
    """The fault an exception means: its own reason when it is a provider fault (the raiser knows), else
    the step's (anything the provider could not do is its fault, never the agent's)."""
    reason = exc.reason if isinstance(exc, ProviderFault) else default
    return Fault(reason, f"{prefix}{type(exc).__name__}: {exc}")


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


ScenarioStep = Callable[[ExecutionState], Awaitable["Fault | None"]]


def timed(x: ExecutionState) -> tuple[TimedStimulus, ...]:
    """The temporal conditions of a scenario that passed :func:`check_timed_stimuli`."""
    return () if isinstance(x.triggers, TimingError) else x.triggers
