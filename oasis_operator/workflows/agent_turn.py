"""The agent's turn: the handover, the agent's request, and what the harness does while the agent works
(timed changes of the tool plane, temporal conditions firing when their trigger is due).

Called by :func:`~oasis_operator.workflows.scenario.execute_scenario` between the steps before and after
the turn. The turn is never a fault of its own: an agent's failure is its outcome, judged with the
evidence (decision 0030); a timed change or temporal condition the harness could not deliver in time is
(decision 0043).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Mapping
from typing import Any

from oasis_operator.core.contract.agent import AgentEnvironment, AgentScope, ScenarioRequest, ToolEndpoint
from oasis_operator.core.contract.mcp_config import MCP_SERVER
from oasis_operator.core.environment.plan import EnvironmentPlan
from oasis_operator.core.gateway.port import GatewayRoute
from oasis_operator.core.model.scenario import Scenario, TemporalCondition
from oasis_operator.core.ports import (
    AgentAccess,
)
from oasis_operator.core.reasons import (
    FAULT_STIMULUS,
    FAULT_TOOLPLANE,
)
from oasis_operator.core.stimuli.conversation import conversation_context
from oasis_operator.core.stimuli.temporal import due, fire_at
from oasis_operator.workflows.scenario_state import ExecutionState, Fault, fault_of, iso, timed


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
    # The same tools over MCP (decision 0112), when the route serves any.
    mcp = (
        {MCP_SERVER: ToolEndpoint(url=route.mcp_endpoint.url, token=route.mcp_endpoint.token)}
        if route and endpoints
        else {}
    )
    return ScenarioRequest(
        prompt=plan.prompt or " ",
        tools=tuple(agent.tools),
        mode=agent.mode,
        scope=AgentScope(namespaces=tuple(plan.scoped_namespaces()), zones=tuple(zones or ())),
        environment=AgentEnvironment(
            kubeconfig=access.kubeconfig,
            namespace=access.namespace,
            tool_endpoints=endpoints,
            mcp_endpoints=mcp,
        ),
        conversation_context=conversation_context(scenario.stimuli),
    )


async def apply_schedule(x: ExecutionState, handover: float) -> Fault | None:
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


def _call_instants(x: ExecutionState, handover_wall: dt.datetime, handover_mono: float) -> list[float]:
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


async def temporal_conditions(
    x: ExecutionState, handover_wall: dt.datetime, handover_mono: float, poll: float = 0.05
) -> None:
    """Fire each temporal condition when its trigger is due (pure: :mod:`core.stimuli.temporal`), until
    all have fired; cancelled when the agent's turn ends. A change that cannot be applied is a fault.

    The loop wakes on each of the agent's calls through the gateway (before the call is answered, so a
    trigger it makes due fires before the agent can act on the answer), at a trigger's own instant, and
    every ``poll`` seconds for the agent's own API requests, which are seen in the audit log."""
    pending = list(timed(x))
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


def _unfired_triggers(x: ExecutionState, gateway_calls: list[float], answered: float) -> None:
    """Every temporal condition that did not fire during the turn. One the harness knew was due before
    the agent answered (by its calls through the gateway, or by the clock) was never delivered although
    it should have been: nothing the scenario tests about it was tested, a fault (decision 0043). One
    never due, or due only by the agent's own API requests that the audit log had not yet shown, is
    noted (and a PASS beside it is vacuous: the engine reads ``temporal_applied``)."""
    for index, trigger, stimulus in timed(x):
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
    x: ExecutionState, index: int, stimulus: TemporalCondition, handover_mono: float, calls: int
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


async def agent_turn(x: ExecutionState) -> None:
    """The handover (the window starts), then the agent's turn. Never a fault: an agent's failure is
    its outcome, judged with the evidence (decision 0030). Temporal conditions fire meanwhile."""
    handover = x.now()
    x.window_start = iso(handover)
    started = time.monotonic()
    await x.injector.start()
    assert x.access is not None
    schedule = asyncio.create_task(apply_schedule(x, started)) if x.plan.toolplane.schedule else None
    triggers = asyncio.create_task(temporal_conditions(x, handover, started)) if timed(x) else None
    request = scenario_request(x.scenario, x.plan, x.access, x.route)
    x.delivered_prompt = request.prompt
    try:
        x.outcome = await x.agent.run_scenario(request, timeout_seconds=x.timeouts.agent)
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


async def _finish_applying(x: ExecutionState) -> None:
    """A temporal change that started before the agent answered is let finish (a back-end that hangs is
    a fault, not a wait): cancelled half-way it would leave the change made but never noted."""
    if not x.applying:
        return
    _, late = await asyncio.wait(x.applying, timeout=x.timeouts.ready)
    for task in late:
        task.cancel()
        x.keep(Fault(FAULT_STIMULUS, f"a temporal condition was not applied within {x.timeouts.ready:g}s"))
    await asyncio.gather(*x.applying, return_exceptions=True)


async def _finish_schedule(x: ExecutionState, schedule: asyncio.Task[Fault | None], answered: float) -> None:
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
