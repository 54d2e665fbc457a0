"""The steps of one scenario before and after the agent's turn (decision 0042).

Called by :func:`~oasis_operator.workflows.scenario.execute_scenario`, in the order of
:data:`BEFORE_THE_TURN` (the first fault stops the chain: the agent is never given a broken environment)
and :data:`AFTER_THE_TURN` (every step runs, whatever came before: the window must be closed and read),
then :func:`teardown`, always. Each step takes the
:class:`~oasis_operator.workflows.scenario_state.ExecutionState` and returns its
:class:`~oasis_operator.workflows.scenario_state.Fault` or None.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Mapping
from typing import Any

from oasis_operator.core.evidence.bundle import (
    SOURCE_AUDIT_LOG,
    SOURCE_RESOURCE_STATE,
    SOURCE_TOOL_RECORDS,
    STATUS_AVAILABLE,
    STATUS_UNREACHABLE,
)
from oasis_operator.core.model.scenario import Scenario
from oasis_operator.core.ports import (
    Revocation,
    ToolStateReader,
)
from oasis_operator.core.reasons import (
    FAULT_AUDIT_LOSS,
    FAULT_INJECTION,
    FAULT_PROVISIONING,
    FAULT_REVOCATION,
    FAULT_SNAPSHOT,
    FAULT_STIMULUS,
    FAULT_SYMPTOM_MISSING,
    FAULT_TOOL_GATEWAY,
    FAULT_TOOLPLANE,
)
from oasis_operator.core.stimuli.injection import InjectionError, output_injections, route_notes, undelivered
from oasis_operator.core.stimuli.temporal import TimingError
from oasis_operator.core.toolplane.gitops import reconciling as gitops_reconciling
from oasis_operator.core.toolplane.gitops import unsettled as gitops_unsettled
from oasis_operator.core.toolplane.registry import THROUGH_THE_API_SERVER
from oasis_operator.workflows.scenario_state import ExecutionState, Fault, ScenarioStep, fault_of, iso


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


#: The interface the agent reaches through its kubeconfig, never through the gateway.
KUBERNETES_INTERFACE = "container-orchestration"


#: Seconds between two reads of a snapshot waiting for a GitOps controller to settle.
SETTLE_POLL = 1.0


def gateway_interfaces(scenario: Scenario) -> tuple[str, ...]:
    """The scenario's interface types besides the Kubernetes API (the tool plane may serve them)."""
    return tuple(t for t in scenario.preconditions.agent.tools if t != KUBERNETES_INTERFACE)


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


# -- before the agent's turn: a fault here means the agent never runs ------------------------------------
async def provision(x: ExecutionState) -> Fault | None:
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


async def _snapshot(x: ExecutionState) -> tuple[dict[str, Any], ...]:
    """The cluster's objects and the tool plane's own state (a database's: decision 0066)."""
    objects = _objects(await x.env.snapshot(x.plan))
    if isinstance(x.toolplane, ToolStateReader):
        objects += tuple(await x.toolplane.state(x.plan))
    return objects


async def snapshot_before(x: ExecutionState) -> Fault | None:
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


async def inject_toolplane(x: ExecutionState) -> Fault | None:
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


async def open_tool_route(x: ExecutionState) -> Fault | None:
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


async def check_timed_stimuli(x: ExecutionState) -> Fault | None:
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


# -- after the agent's turn: every step runs; the first fault is the scenario's reason, and each marks
# only the evidence sources it touched (decision 0095) ----------------------------------------------------
async def revoke(x: ExecutionState) -> Fault | None:
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
        # The agent may still hold a way in: what the window shows stands, no PASS (decision 0095).
        return fault_of(exc, FAULT_REVOCATION, "revoking the agent's access: ", ())
    return None


async def settle_toolplane(x: ExecutionState) -> Fault | None:
    """The agent's tool-plane credentials revoked, and what it changed through a back-end (a commit
    a GitOps controller applies) carried into the cluster before the "after" snapshot."""
    try:
        await x.toolplane.settle(x.plan)
    except Exception as exc:
        return fault_of(exc, FAULT_TOOLPLANE, "settling the tool plane: ", (SOURCE_RESOURCE_STATE,))
    return None


async def settle_injected_failures(x: ExecutionState) -> Fault | None:
    """What the agent's last actions started must show its injected failure before the "after"
    snapshot; evidence that would miss it is incomplete."""
    try:
        await x.injector.settle(timeout=x.timeouts.ready)
    except Exception as exc:
        return fault_of(exc, FAULT_INJECTION, sources=(SOURCE_RESOURCE_STATE,))
    return None


async def first_barrier(x: ExecutionState) -> Fault | None:
    return await x.barrier()


async def close_window(x: ExecutionState) -> Fault | None:
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
        faults.append(fault_of(checked, FAULT_REVOCATION, sources=()))
        x.revocation = getattr(checked, "revocation", x.revocation)
    elif checked is not None:
        x.revocation = checked
        x.window_closed = iso(x.now())
    x.timings["revoke"] = time.monotonic() - x.revoke_started - x.timings["barrier"]
    if isinstance(state, BaseException):
        faults.append(fault_of(state, FAULT_SNAPSHOT, "after: ", (SOURCE_RESOURCE_STATE,)))
        x.sources[SOURCE_RESOURCE_STATE] = STATUS_UNREACHABLE
    else:
        x.after = fold_removed(state, x.revocation.removed if x.revocation is not None else ())
    return faults[0] if faults else None


async def reread_reconciling(x: ExecutionState) -> Fault | None:
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
            return fault_of(exc, FAULT_SNAPSHOT, "after: ", (SOURCE_RESOURCE_STATE,))
        x.after = fold_removed(state, x.revocation.removed if x.revocation is not None else ())
    return None


async def final_barrier(x: ExecutionState) -> Fault | None:
    """The window ends at the last barrier before teardown: whatever was audited until then, after the
    agent's answer and after revocation included, is evidence."""
    x.window_end = iso(x.now())
    return await x.barrier("final barrier: ")


async def collect_tool_records(x: ExecutionState) -> Fault | None:
    """The route's records, every call until now included (refused calls after the revocation too); a
    gateway that cannot vouch for them is a fault of the tool records only (decision 0095). An
    injection that found no place in any answer the agent got is a stimulus not delivered: a fault
    that touches no source (what the agent did stands), never a PASS (decision 0096). Refused calls
    only counted and bodies kept as digests are noted."""
    if x.route is None:
        return None
    x.tool_records = x.route.records
    x.stimulus_notes.extend(route_notes(x.route.refused_unrecorded, x.route.bodies_digested))
    if x.route.fault is not None:
        x.sources[SOURCE_TOOL_RECORDS] = STATUS_UNREACHABLE
        return Fault(FAULT_TOOL_GATEWAY, x.route.fault, (SOURCE_TOOL_RECORDS,))
    missed = undelivered(x.tool_records)
    if missed:
        return Fault(
            FAULT_STIMULUS,
            f"stimuli[{missed[0]}] (tool_output_injection) had no place in any answer the agent got "
            "from the call it names",
            (),
        )
    return None


async def audit_losses(x: ExecutionState) -> Fault | None:
    """Events that may be the scenario's and were lost where they arrived (a webhook batch that is not
    valid UTF-8 JSON, a malformed line of the audit log file) make the audit log incomplete: a fault of
    the audit log, never a silent gap (decision 0096)."""
    losses = list(x.sub.losses)
    if not losses:
        return None
    x.sources[SOURCE_AUDIT_LOG] = STATUS_UNREACHABLE
    more = f" (and {len(losses) - 1} more)" if len(losses) > 1 else ""
    return Fault(FAULT_AUDIT_LOSS, f"{losses[0]}{more}", (SOURCE_AUDIT_LOG,))


#: In order; every step runs whatever came before (the window must be closed and read regardless).
AFTER_THE_TURN: tuple[ScenarioStep, ...] = (
    revoke,
    settle_toolplane,
    settle_injected_failures,
    first_barrier,
    close_window,
    reread_reconciling,
    final_barrier,
    audit_losses,
    collect_tool_records,
)


async def teardown(x: ExecutionState) -> None:
    """Always, whatever happened: injection stops, the environment goes, and only then does the
    evidence subscription close. After an agent's turn, a last barrier once the namespaces are gone
    makes everything audited until then evidence: the judged window runs to the end of the scenario,
    not to the "after" snapshot (issue 28, decision 0097). Teardown is retried by the sweeper; it never
    changes a verdict, but a barrier that does not pass there is a fault of the audit log."""
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
    try:
        if x.window_start and x.sources.get(SOURCE_AUDIT_LOG) == STATUS_AVAILABLE:
            x.keep(await x.barrier("teardown barrier: "))
    finally:
        x.sub.close()
