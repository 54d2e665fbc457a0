"""A run's phases: its scenarios, ``spec.parallelism`` at a time, each recorded as it ends.

Called by :class:`~oasis_operator.workflows.run.RunDriver` for Phase 1 (safety) and Phase 2
(capability): every pending scenario of the phase, ``spec.parallelism`` at a time (an exclusive one
alone: :func:`oasis_operator.core.run_status.next_scenarios`), until none is left, the run aborts (the
first PROVIDER_FAILURE), its ``timeouts.run`` passes (what runs is torn down) or it is cancelled
(Graceful lets running scenarios finish, Immediate or a deletion stops them). One scenario: its
environment planned and recorded before anything exists (so a restart can clean it up), executed
within ``timeouts.scenario`` (:func:`oasis_operator.workflows.scenario.execute_scenario`), its evidence
stored sealed (decision 0054) and its verdict recorded and announced.
"""

from __future__ import annotations

import asyncio
import logging
import secrets
from collections.abc import Mapping
from typing import Any

from oasis_operator.core import reasons
from oasis_operator.core import run_status as rs
from oasis_operator.core.clusters import ScenarioCluster
from oasis_operator.core.environment.naming import Naming, owner_value, suffix_for
from oasis_operator.core.environment.plan import EnvironmentPlan, build_plan
from oasis_operator.core.errors import TargetUnavailable
from oasis_operator.core.evidence.bundle import (
    SOURCE_AGENT_OUTPUT,
    SOURCE_AUDIT_LOG,
    SOURCE_RESOURCE_STATE,
    STATUS_UNREACHABLE,
    EvidenceBundle,
    EvidenceSource,
)
from oasis_operator.core.evidence.codec import render_text
from oasis_operator.core.evidence.faults import EvidenceFault
from oasis_operator.core.model.run import parse_duration
from oasis_operator.core.model.scenario import Scenario
from oasis_operator.core.reporting.deciding import deciding_line
from oasis_operator.core.run_status import ScenarioEvent, Step
from oasis_operator.core.verdicts import PROVIDER_FAILURE, Verdict
from oasis_operator.core.verification.outcomes import VIOLATED
from oasis_operator.core.verification.sealing import seal_evidence
from oasis_operator.workflows.cluster_names import cluster_scoped_names
from oasis_operator.workflows.cut_off import SurvivedJudgement, judge_what_survived
from oasis_operator.workflows.run_context import RunContext
from oasis_operator.workflows.scenario import ScenarioExecution, ScenarioTimeouts, execute_scenario

log = logging.getLogger("oasis.run")

#: The agent's default time budget per scenario (``timeouts.agentResponse``), seconds.
AGENT_TIMEOUT_DEFAULT = 300.0


class Scheduler:
    """Runs one run's phases (:meth:`run_phase`)."""

    def __init__(self, ctx: RunContext) -> None:
        self.ctx = ctx
        #: The scenarios whose execution has ended and whose verdict is being recorded: stopping the run
        #: waits for them, never cuts them off (decision 0094).
        self._recording: set[str] = set()

    async def run_phase(self, classification: str) -> None:
        """Every pending scenario of ``classification``, ``spec.parallelism`` at a time (an exclusive
        one alone), until none is left, the run aborts, times out, or is cancelled."""
        running: dict[str, asyncio.Task[None]] = {}
        while not self.ctx.status.aborted:
            if self.ctx.remaining() <= 0:
                await self._stop_at_run_timeout(running)
                break
            self._start_next(classification, running)
            if not running:
                break
            await self.ctx.save()
            done, _ = await asyncio.wait(
                running.values(),
                return_when=asyncio.FIRST_COMPLETED,
                timeout=max(0.05, min(self.ctx.ports.poll_seconds, self.ctx.remaining())),
            )
            if await self._stop_if_cancelled(running):
                break
            self._collect(running, done)
            if self.ctx.status.aborted and running:
                # Abort at once: let in-flight scenarios finish their own teardown, start nothing new.
                await asyncio.gather(*running.values(), return_exceptions=True)
                running.clear()
        if self.ctx.status.aborted:
            self.ctx.status.exclude_pending(ScenarioEvent.ABORTED, classification)
        if self.ctx.cancelled != "Deleted":  # a deleted run has no status left to write
            await self.ctx.save()

    def _start_next(self, classification: str, running: dict[str, asyncio.Task[None]]) -> None:
        agent_timeout = parse_duration(
            self.ctx.spec.timeouts.agent_response if self.ctx.spec.timeouts else None, AGENT_TIMEOUT_DEFAULT
        )
        capacity = self.ctx.spec.parallelism - len(running)
        for name in rs.next_scenarios(self.ctx.status.entries, classification, capacity):
            running[name] = asyncio.create_task(self._one(name, agent_timeout), name=f"scenario-{name}")
            self.ctx.status.entry(name).advance(ScenarioEvent.STARTED)

    async def _stop_at_run_timeout(self, running: dict[str, asyncio.Task[None]]) -> None:
        """timeouts.run: nothing new starts; what runs is torn down; the evidence is incomplete."""
        await self._stop(running, ScenarioEvent.RUN_TIMED_OUT, cancel=True)
        self.ctx.status.abort(
            f"timeouts.run ({self.ctx.spec.timeouts.run if self.ctx.spec.timeouts else ''}) was exceeded",
            timed_out=True,
        )

    async def _stop_if_cancelled(self, running: dict[str, asyncio.Task[None]]) -> bool:
        """Cancellation: Graceful lets running scenarios finish; Immediate (or deletion) stops them now
        (each tears its environment down on the way out). Nothing new starts."""
        fresh = await self.ctx.ports.store.get_run(self.ctx.ns, self.ctx.name)
        shutdown = ((fresh or {}).get("spec") or {}).get("shutdown")
        if fresh is not None and not shutdown:
            return False
        self.ctx.cancelled = shutdown or "Deleted"
        await self._stop(running, ScenarioEvent.CANCELLED, cancel=shutdown != "Graceful")
        return True

    async def _stop(
        self, running: dict[str, asyncio.Task[None]], event: ScenarioEvent, *, cancel: bool
    ) -> None:
        """Stop the running scenarios (``cancel``: now, each tearing its environment down on the way
        out; else when they finish). One whose execution has ended is let record its verdict: its
        evidence is complete, and cutting it off would drop a verdict already decided (decision 0094)."""
        if cancel:
            for name, task in running.items():
                if name not in self._recording:
                    task.cancel()
        await asyncio.gather(*running.values(), return_exceptions=True)
        for name in running:
            entry = self.ctx.status.entry(name)
            if entry.step is Step.RUNNING:
                entry.advance(event)
        running.clear()

    def _collect(self, running: dict[str, asyncio.Task[None]], done: set[asyncio.Task[None]]) -> None:
        """Finished scenarios leave ``running``; one whose task raised is the harness's failure."""
        for name in [n for n, t in running.items() if t in done]:
            task = running.pop(name)
            if task.cancelled() or task.exception() is None:
                continue
            exc = task.exception()
            entry = self.ctx.status.entry(name)
            entry.advance(
                ScenarioEvent.HARNESS_ERROR, reason=f"{reasons.HARNESS_ERROR}: {type(exc).__name__}: {exc}"
            )
            self.ctx.status.abort(f"{name}: {entry.reason}")

    async def _one(self, name: str, agent_timeout: float) -> None:
        """One scenario of the run: its environment planned and recorded, executed within
        ``timeouts.scenario``, its verdict recorded and announced; first, a slot among the scenarios
        the operator runs at once (``--max-scenarios``)."""
        async with self.ctx.ports.scenario_slots.hold():
            await self._attempt(name, agent_timeout)

    async def _attempt(self, name: str, agent_timeout: float) -> None:
        scenario, plan = await self._plan_attempt(name)
        clusters = self.ctx.ports.scenario_clusters()
        try:
            cluster = await clusters.lease(plan.owner)
        except TargetUnavailable as exc:
            # Nothing of the scenario ran: no verdict, the harness's fault (decision 0100).
            await self._store_cut_off(name, scenario.id, f"{exc.reason}: {exc}")
            await self._record_fault(name, scenario.id, exc.reason, f"{exc.reason}: {exc}")
            return
        try:
            await self._run_in(name, scenario, plan, agent_timeout, cluster)
        finally:
            await clusters.release(plan.owner)

    async def _run_in(
        self,
        name: str,
        scenario: Scenario,
        plan: EnvironmentPlan,
        agent_timeout: float,
        cluster: ScenarioCluster,
    ) -> None:
        limit = (
            parse_duration(self.ctx.spec.timeouts.scenario if self.ctx.spec.timeouts else None, 0.0) or None
        )
        agent = await self.ctx.agent_port()
        try:
            # A cluster-scoped object the scenario declares by name (a node) is its alone until torn down:
            # another run's scenario declaring it waits here (the wait is not the scenario's time).
            async with (
                self.ctx.ports.cluster_names.hold(cluster_scoped_names(plan.manifests)),
                asyncio.timeout(limit),
            ):
                # timeouts.scenario bounds the whole scenario; the agent's turn can never outlast it.
                execution = await execute_scenario(
                    scenario,
                    plan,
                    self.ctx.ports.for_scenario(
                        agent,
                        ScenarioTimeouts(
                            agent=min(agent_timeout, limit or agent_timeout),
                            barrier=self.ctx.ports.barrier_timeout,
                        ),
                        cluster,
                    ),
                    configuration=(self.ctx.status.agent.configuration or {})
                    if self.ctx.status.agent
                    else {},
                )
        except TimeoutError:
            # Torn down on the way out (execute_scenario's cleanup ran); no verdict rests on a cut window.
            await self._store_cut_off(name, scenario.id, self._scenario_timeout())
            await self._record_timeout(name, scenario.id)
            return
        except Exception as exc:
            # The harness's own failure (the status says so: _collect); the report must not call the
            # scenario never executed (decision 0094).
            await self._store_cut_off(
                name, scenario.id, f"{reasons.HARNESS_ERROR}: {type(exc).__name__}: {exc}"
            )
            raise
        self._recording.add(name)
        try:
            await self._record_execution(name, execution)
        finally:
            self._recording.discard(name)

    async def _plan_attempt(self, name: str) -> tuple[Scenario, EnvironmentPlan]:
        entry = self.ctx.status.entry(name)
        scenario = self.ctx.scenarios.scenario(name)
        attempt = entry.attempt + 1
        # A re-run's environments get names of their own (the previous run's may still be going away).
        rerun = f"{self.ctx.status.rerun_token}/" if self.ctx.status.rerun_token else ""
        owner = owner_value(self.ctx.run["metadata"]["uid"], f"{rerun}{scenario.id}#{attempt}")
        plan = self._plan(scenario, owner)
        async with self.ctx.lock:
            entry.attempt, entry.owner, entry.namespaces = attempt, owner, sorted(plan.namespaces.values())
            await self.ctx.save()  # recorded before anything exists, so a restart can clean it up
        return scenario, plan

    def _plan(self, scenario: Scenario, owner: str) -> EnvironmentPlan:
        """The environment of one attempt (its names follow from ``owner``: the same plan again after
        a restart). A target holds the attempt alone: the declared names, as the prompts say them
        (decision 0100); a shared cluster suffixes them."""
        exact = self.ctx.ports.clusters is not None and self.ctx.ports.clusters.exact_names
        return build_plan(
            scenario,
            Naming(owner=owner) if exact else Naming.suffixed(suffix_for(owner), owner),
            node_selector=self.ctx.ports.node_selector,
            pool_taints=self.ctx.ports.pool_taints,
            backends=self.ctx.ports.backends,
        )

    async def resume_cut_off(self) -> None:
        """After a restart, every scenario still marked running was cut off (decision 0097): judged on
        the audit events that survived, then torn down. A violation proven there is its verdict (FAIL,
        never run again); else it runs again, unless it has had :data:`rs.MAX_ATTEMPTS` attempts, when
        it is PROVIDER_FAILURE (a harness that keeps restarting, or an agent that keeps it restarting)."""
        for entry in self.ctx.status.entries:
            if entry.step is not Step.RUNNING:
                continue
            judged = await self._what_survived(entry)
            await self.ctx.ports.forget(entry.namespaces or [], entry.owner or "")
            if judged is not None and judged[0].verdict is Verdict.FAIL:
                await self._record_survived(entry, judged)
            elif entry.attempt >= rs.MAX_ATTEMPTS:
                reason = (
                    f"cut off by operator restarts in {entry.attempt} attempts (at most {rs.MAX_ATTEMPTS})"
                )
                await self._store_cut_off(entry.name, entry.id or entry.name, reason)
                entry.advance(ScenarioEvent.CUT_OFF_FINAL, reason=f"{reasons.FAULT_PROVIDER}: {reason}")
                self.ctx.status.abort(f"{entry.name}: {reasons.ABORT_PROVIDER_FAILURE}: {reason}")
            else:
                entry.advance(ScenarioEvent.CUT_OFF)
        if self.ctx.status.scenarios:
            await self.ctx.save()

    async def _what_survived(self, entry: rs.ScenarioEntry) -> SurvivedJudgement | None:
        """The cut-off attempt judged (off the event loop: the audit log is read again from its start)."""
        if not entry.owner or entry.attempt < 1:
            return None
        try:
            # The shared cluster's audit source read again, or the audit log a target left (0110).
            survived = self.ctx.ports.scenario_clusters().survived(entry.owner)
            if survived is None:
                return None
            scenario = self.ctx.scenarios.scenario(entry.name)
            plan = self._plan(scenario, entry.owner)
            return await asyncio.to_thread(
                judge_what_survived,
                scenario,
                plan,
                survived,
                self.ctx.ports.harness_principals,
                entry.attempt,
                (self.ctx.status.agent.configuration or {}) if self.ctx.status.agent else {},
            )
        except Exception as exc:  # judged or not, the scenario is cut off; never a guess
            log.warning(
                "run %s/%s: %s: what survived was not judged: %s", self.ctx.ns, self.ctx.name, entry.name, exc
            )
            return None

    async def _record_survived(self, entry: rs.ScenarioEntry, judged: SurvivedJudgement) -> None:
        """A violation proven on what survived a restart: stored, recorded and announced as FAIL."""
        _, detail, bundle, events = judged
        sealed = seal_evidence(render_text(bundle, events), secrets.token_hex(16))
        try:
            entry.evidence = await self.ctx.ports.store.put_blob(
                self.ctx.run, "evidence", bundle.scenario_id, sealed.encode()
            )
        except Exception as exc:
            log.warning("run %s/%s: %s: evidence not stored: %s", self.ctx.ns, self.ctx.name, entry.name, exc)
        violated = violation_summary(detail.result.outcomes) if detail is not None and detail.result else ""
        entry.advance(
            ScenarioEvent.CUT_OFF_JUDGED,
            verdict=Verdict.FAIL.value,
            reason=f"{violated}; judged on what survived an operator restart",
        )
        await self.ctx.event(
            *rs.scenario_event(Verdict.FAIL.value),
            f"{bundle.scenario_id}: FAIL (judged on what survived a restart)",
        )

    def _scenario_timeout(self) -> str:
        return f"timeouts.scenario ({self.ctx.spec.timeouts.scenario if self.ctx.spec.timeouts else ''}) was exceeded"

    async def _store_cut_off(self, name: str, scenario_id: str, reason: str) -> None:
        """The evidence of a scenario cut off before its window was closed: none of its sources can be
        trusted to be complete, so the report's pass over the stored evidence judges it
        PROVIDER_FAILURE, as the status does, and never "not executed" (decision 0094). A store that
        fails leaves it without (the status still says PROVIDER_FAILURE)."""
        bundle = EvidenceBundle(
            scenario_id=scenario_id,
            sources={
                source: EvidenceSource(type=kind, status=STATUS_UNREACHABLE)
                for source, kind in (
                    (SOURCE_AUDIT_LOG, "kubernetes-audit"),
                    (SOURCE_RESOURCE_STATE, "kubernetes-api"),
                    (SOURCE_AGENT_OUTPUT, "agent-contract"),
                )
            },
            provider_notes=(f"cut off before its evidence window was closed: {reason}",),
            faults=(
                EvidenceFault(
                    reasons.FAULT_PROVIDER,
                    f"cut off before its evidence window was closed: {reason}",
                    (SOURCE_AGENT_OUTPUT, SOURCE_AUDIT_LOG, SOURCE_RESOURCE_STATE),
                ),
            ),
        )
        try:
            names = await self.ctx.ports.store.put_blob(
                self.ctx.run,
                "evidence",
                scenario_id,
                seal_evidence(render_text(bundle, ()), secrets.token_hex(16)).encode(),
            )
        except Exception as exc:
            log.warning(
                "run %s/%s: %s: the cut-off evidence was not stored: %s",
                self.ctx.ns,
                self.ctx.name,
                name,
                exc,
            )
            return
        async with self.ctx.lock:
            self.ctx.status.entry(name).evidence = names

    async def _record_timeout(self, name: str, scenario_id: str) -> None:
        await self._record_fault(
            name,
            scenario_id,
            reasons.FAULT_SCENARIO_TIMEOUT,
            self._scenario_timeout(),
            ScenarioEvent.TIMED_OUT,
        )

    async def _record_fault(
        self,
        name: str,
        scenario_id: str,
        fault: str,
        reason: str,
        event: ScenarioEvent = ScenarioEvent.HARNESS_ERROR,
    ) -> None:
        """A scenario that ends without a verdict of its own: PROVIDER_FAILURE for ``fault``, and the
        run aborts (as the first PROVIDER_FAILURE does)."""
        entry = self.ctx.status.entry(name)
        async with self.ctx.lock:
            entry.advance(event, reason=reason)
            entry.vacuity = []
            self.ctx.status.abort(f"{name}: {reasons.ABORT_PROVIDER_FAILURE}: {reason}")
            await self.ctx.save()
        await self.ctx.event(
            "Warning", reasons.EVENT_PROVIDER_FAILURE, f"{scenario_id}: PROVIDER_FAILURE ({reason})"
        )
        self.ctx.ports.metrics.scenario_finished(entry.category or "", PROVIDER_FAILURE, {}, fault)

    async def _record_execution(self, name: str, execution: ScenarioExecution) -> None:
        # Stored sealed: no registered (secret) value in plaintext, a fresh salt per scenario (decision 0054).
        # (CPU work of up to a second on large evidence: off the event loop, other scenarios go on.)
        sealed = await asyncio.to_thread(seal_evidence, execution.evidence_text, secrets.token_hex(16))
        names = await self.ctx.ports.store.put_blob(
            self.ctx.run, "evidence", execution.scenario_id, sealed.encode()
        )
        verdict = execution.verdict
        reason = scenario_reason(execution)
        entry = self.ctx.status.entry(name)
        async with self.ctx.lock:
            entry.advance(ScenarioEvent.FINISHED, verdict=verdict, reason=reason)
            entry.vacuity = _vacuity(execution)
            entry.evidence = names
            entry.duration_seconds = round(execution.timings.get("total", 0.0), 3)
            if verdict == PROVIDER_FAILURE:
                self.ctx.status.abort(f"{name}: {reasons.ABORT_PROVIDER_FAILURE}: {reason}")
            await self.ctx.save()
        etype, ereason = rs.scenario_event(verdict)
        await self.ctx.event(
            etype, ereason, f"{execution.scenario_id}: {verdict}" + (f" ({reason})" if reason else "")
        )
        self.ctx.ports.metrics.scenario_finished(
            entry.category or "", verdict, execution.timings, execution.fault
        )


def scenario_reason(execution: ScenarioExecution) -> str:
    """A scenario's reason in the status: on a FAIL what failed, with the provider faults beside it
    (decision 0095); else its provider fault, else its agent failure, else what failed."""
    record = execution.record
    result = execution.detail.result if execution.detail is not None else None
    violated = violation_summary(result.outcomes) if result is not None else ""
    if record.fault and not (violated and record.verdict is Verdict.FAIL):
        return record.fault
    if record.unevaluable:
        return f"agent failure: {record.unevaluable}"
    if violated and record.fault:
        return f"{violated[: reasons.ENTRY_REASON_LIMIT // 2]}; beside a provider fault: {record.fault}"
    return violated


def _vacuity(execution: ScenarioExecution) -> list[str]:
    if execution.detail is None:
        return []
    return [str(v) for v in getattr(execution.detail.result, "vacuity", ()) or ()][:3]


def _event_line(e: Mapping[str, Any]) -> str:
    """One deciding record in a line: an audit event's verb, object, namespace and code; a containment
    hit's channel with the value masked (the same line as ``oasis describe`` and the reports)."""
    return deciding_line(e)


def violation_summary(outcomes: Any, limit: int = reasons.ENTRY_REASON_LIMIT) -> str:
    """What failed, and the audit event that decided it: for the status list and Events."""
    parts = []
    for o in outcomes:
        if o.outcome != VIOLATED:
            continue
        line = f"{o.source}: {o.text}"
        if o.deciding:
            line += f" <- {_event_line(o.deciding[0])}"
        parts.append(line)
    return "; ".join(parts)[:limit]
