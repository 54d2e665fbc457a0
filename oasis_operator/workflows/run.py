"""One EvaluationRun, driven level-based from its status until it is finished.

Called by the operator's EvaluationRun daemon (and by the local runner); turns the run object as the
API holds it into the next steps: prepare (resolve profile and scenarios, ask the agent who it is,
preflight the provider, decide applicability and support), Phase 1 (every applicable safety scenario,
``spec.parallelism`` at a time, exclusive ones alone, abort on the first PROVIDER_FAILURE), Phase 2
(capability scenarios, only after a safety PASS), then the report in every format the run asks for.
Progress lives in the run's status after every scenario, so a restarted operator resumes: scenarios
it finds marked running were cut off: each is judged on the audit events that survived (a violation
proven there is its FAIL), its environment is torn down, and otherwise it runs again, a bounded
number of times (decision 0097).

What the spec asks is honoured or refused, never ignored:

- something the run needs that does not exist yet (its Profile, a Scenario of its suite, any Scenario
  for its selector, the agent or its credentials Secret) is waited for (``Reconciling=True`` with the
  reason), never a failure and never a smaller run; ``timeouts.run`` bounds the wait;
- ``timeouts.run`` bounds the whole run from its start: past it, nothing new starts, running scenarios
  are torn down (one whose verdict is being recorded is let finish: decision 0094), and the run ends
  aborted (incomplete evidence: PROVIDER_FAILURE, unless a FAIL was already certain);
  ``timeouts.scenario`` bounds each scenario (the agent's turn included);
- ``report.formats`` are all stored (JSON always, as the source of the others); each scenario's
  evidence file is kept only with ``report.includeEvidence``;
- a finished run is only looked at again when its spec changes (its ``observedGeneration`` follows),
  the rerun annotation asks for a new run, or its opt-in TTL expires.

The decisions are the core's (:mod:`oasis_operator.core.run_status`: the phase and step tables, the
verdict rules; :mod:`oasis_operator.core.triage`: which scenarios can run); the workflow does the I/O
between them, as chains of named steps: each returns what stops the chain (an outcome, a
:class:`~oasis_operator.workflows.run_context.Hold`) or None to go on, and the first that stops it
wins. This module is the drive loop and its guards; preparing, scheduling and reporting are modules of
their own (:mod:`~oasis_operator.workflows.preparing`, :mod:`~oasis_operator.workflows.scheduling`,
:mod:`~oasis_operator.workflows.reporting`) over one shared
:class:`~oasis_operator.workflows.run_context.RunContext`.
"""

from __future__ import annotations

import json
from typing import Any, Final

from oasis_operator.core import reasons
from oasis_operator.core import run_status as rs
from oasis_operator.core.model.run import EvaluationRunSpec
from oasis_operator.core.run_status import RunEvent, RunStatus, ScenarioEvent, Step
from oasis_operator.core.verdicts import PASS
from oasis_operator.workflows.preparing import Preparation
from oasis_operator.workflows.reporting import Reporting
from oasis_operator.workflows.run_context import Hold, RunContext, RunPorts, parse_time
from oasis_operator.workflows.scheduling import (
    AGENT_TIMEOUT_DEFAULT,
    Scheduler,
    scenario_reason,
    violation_summary,
)

__all__ = ["AGENT_TIMEOUT_DEFAULT", "GONE", "RunDriver", "RunPorts", "scenario_reason", "violation_summary"]

RERUN_ANNOTATION = rs.RERUN_ANNOTATION
#: What :meth:`RunDriver.drive` returns.
GONE: Final = "gone"
FINISHED: Final = "finished"
SUSPENDED: Final = "suspended"
WAITING: Final = "waiting"


class RunDriver:
    """Drives one run. ``drive()`` returns when the run is finished, gone, suspended or waiting: a chain
    of guards (an invalid spec, a shutdown, a suspension, a run to start or resume), then the phases
    (:mod:`~oasis_operator.workflows.scheduling`), then the report (:mod:`~oasis_operator.workflows.reporting`);
    preparation is :mod:`~oasis_operator.workflows.preparing`'s. The run's shared state is a
    :class:`~oasis_operator.workflows.run_context.RunContext`."""

    def __init__(self, ports: RunPorts, namespace: str, name: str) -> None:
        self.ctx = RunContext(ports, namespace, name)
        self.preparation = Preparation(self.ctx)
        self.scheduler = Scheduler(self.ctx)
        self.reporting = Reporting(self.ctx)
        #: Seconds until a finished run's opt-in TTL deletes it (set by drive() for finished runs).
        self.expires_in: float | None = None
        #: Seconds the caller should wait before driving again (set when drive() returns "waiting").
        self.retry_in: float = 2.0

    async def build_report(self) -> dict[str, Any]:
        """The run's report as it would be stored now."""
        return await self.reporting.build_report()

    async def drive(self) -> str:
        """One pass. Returns ``gone``, ``finished``, ``suspended`` or ``waiting`` (drive again after
        :attr:`retry_in` seconds)."""
        run = await self.ctx.ports.store.get_run(self.ctx.ns, self.ctx.name)
        if run is None:
            return GONE
        self.ctx.run = run
        self.ctx.status = RunStatus.model_validate(run.get("status") or {})
        await self._start_again_if_asked()
        if self.ctx.status.finished:
            return await self._observe_finished()
        for guard in (
            self._refuse_invalid_spec,
            self._honour_shutdown,
            self._honour_suspend,
            self._start_or_resume,
        ):
            outcome = await guard()
            if outcome is not None:
                return outcome
        await self._run_phases()
        return await self._conclude()

    async def _start_again_if_asked(self) -> None:
        """The rerun annotation: whatever is in flight goes, and the run starts from Pending (keeping
        only its conditions, so their transition times stay honest)."""
        rerun = (self.ctx.run["metadata"].get("annotations") or {}).get(RERUN_ANNOTATION)
        if not rerun or rerun == self.ctx.status.rerun_token:
            return
        await self.ctx.cleanup_in_flight()
        self.ctx.removed |= set(self.ctx.status.wire()) - {"rerunToken", "conditions"}
        self.ctx.status = RunStatus(
            rerun_token=rerun, phase=self.ctx.status.phase, conditions=self.ctx.status.conditions or []
        )
        self.ctx.status.transition(RunEvent.RERUN)

    async def _refuse_invalid_spec(self) -> str | None:
        try:
            self.ctx.spec_model = EvaluationRunSpec.model_validate(self.ctx.run.get("spec") or {})
        except Exception as exc:
            return await self._end_before_start(RunEvent.INVALID_SPEC, f"invalid spec: {exc}", announce=False)
        return None

    async def _honour_shutdown(self) -> str | None:
        if not self.ctx.spec.shutdown:
            return None
        await self._cancel(f"cancelled by spec.shutdown={self.ctx.spec.shutdown}")
        return await self._expire_if_due()

    async def _honour_suspend(self) -> str | None:
        if not self.ctx.spec.suspend:
            return None
        await self.ctx.save(
            reason=self.ctx.status.transition(RunEvent.SUSPENDED), message="suspended by spec.suspend"
        )
        return SUSPENDED

    async def _start_or_resume(self) -> str | None:
        if not self.ctx.status.start_time:
            self.ctx.status.start_time = self.ctx.now_str()
        if self.ctx.status.scenarios:
            await self._resume()
            return None
        if self.ctx.remaining() <= 0:
            return await self._give_up_waiting()
        hold = await self.preparation.prepare()
        if hold is None:
            return None
        if hold.event is RunEvent.WAITING:
            return await self._wait(hold)
        return await self._end_before_start(hold.event, hold.message)

    async def _run_phases(self) -> None:
        """Phase 1 (safety), then Phase 2 (capability) only after a safety PASS of a run that did not abort."""
        await self.scheduler.run_phase("safety")
        if self.ctx.status.finished or self.ctx.cancelled:
            return
        if rs.phase_verdict(self.ctx.status.entries, "safety") == PASS and not self.ctx.status.aborted:
            await self.scheduler.run_phase("capability")
        else:
            self.ctx.status.exclude_pending(ScenarioEvent.SAFETY_NOT_PASSED, "capability")

    async def _conclude(self) -> str:
        if self.ctx.cancelled == "Deleted":
            return GONE
        if self.ctx.cancelled:
            await self._cancel(f"cancelled by spec.shutdown={self.ctx.cancelled}")
        elif not self.ctx.status.finished:
            await self.reporting.finish()
        return await self._expire_if_due()

    async def _end_before_start(self, event: RunEvent, message: str, *, announce: bool = True) -> str:
        """The run cannot start (an invalid spec, a refused adapter, no audit stream, waited too long)."""
        reason = self.ctx.status.transition(event)
        self.ctx.status.verdict = None
        self.ctx.status.completion_time = self.ctx.now_str()
        await self.ctx.save(reason=reason, message=reasons.clip(message, reasons.MESSAGE_LIMIT))
        if announce:
            await self.ctx.event("Warning", reason, self.ctx.status.message or "")
        return FINISHED

    async def _wait(self, hold: Hold) -> str:
        """Record what the run waits for (an Event when that changes); drive again after
        :attr:`retry_in` seconds, backing off to 30 s, never past ``timeouts.run``."""
        bound = self.ctx.spec.timeouts.run if self.ctx.spec.timeouts else None
        limit = f" (bounded by timeouts.run {bound})" if bound else ""
        message = reasons.clip(f"waiting: {hold.message}{limit}", reasons.MESSAGE_LIMIT)
        changed = (
            self.ctx.status.condition("Reconciling").get("reason") != hold.reason
            or self.ctx.status.message != message
        )
        await self.ctx.save(
            reason=self.ctx.status.transition(RunEvent.WAITING, reason=hold.reason), message=message
        )
        if changed:
            await self.ctx.event("Normal", hold.reason, message)
            self.retry_in = 2.0
        else:
            self.retry_in = min(30.0, self.retry_in * 1.5)
        self.retry_in = max(0.2, min(self.retry_in, self.ctx.remaining()))
        return WAITING

    async def _give_up_waiting(self) -> str:
        last = str(self.ctx.status.message or "").removeprefix("waiting: ")
        limit = self.ctx.spec.timeouts.run if self.ctx.spec.timeouts else ""
        return await self._end_before_start(
            RunEvent.GAVE_UP, f"timeouts.run ({limit}) passed before the run could start; {last}"
        )

    async def _observe_finished(self) -> str:
        """A finished run keeps its results. An edit of its spec is observed (observedGeneration and
        the conditions follow it; report formats asked for since are rendered from the stored
        report), and its opt-in TTL is honoured."""
        if self.ctx.status.observed_generation != self.ctx.run["metadata"].get("generation", 1):
            try:
                self.ctx.spec_model = EvaluationRunSpec.model_validate(self.ctx.run.get("spec") or {})
            except Exception:
                self.ctx.spec_model = None
            stored = self.ctx.status.report.config_maps if self.ctx.status.report else None
            if self.ctx.spec_model is not None and stored and self.ctx.status.report is not None:
                report = json.loads(await self.ctx.ports.store.get_blob(self.ctx.ns, list(stored)))
                self.ctx.status.report.formats = await self.reporting.store_formats(report, list(stored))
            await self.ctx.save(
                reason=str(self.ctx.status.condition("Completed").get("reason") or reasons.PROGRESSING),
                message=str(self.ctx.status.message or ""),
            )
        return await self._expire_if_due()

    async def _expire_if_due(self) -> str:
        """Delete a finished run whose opt-in TTL has passed (a run without one is never deleted);
        else :attr:`expires_in` says when to look again."""
        self.expires_in = None
        ttl = (self.ctx.run.get("spec") or {}).get("ttlSecondsAfterFinished")
        done = self.ctx.status.completion_time
        if ttl is None or not done:
            return FINISHED
        left = float(ttl) - (self.ctx.ports.now() - parse_time(done)).total_seconds()
        if left <= 0:
            await self.ctx.ports.store.delete_run(self.ctx.ns, self.ctx.name)
            return GONE
        self.expires_in = left
        return FINISHED

    async def _resume(self) -> None:
        """The run's scenarios as they are stored now (a document edited since it was parsed is parsed
        again when it next runs), and what a restart cut off cleaned up."""
        for o in await self.ctx.ports.store.list_scenarios(self.ctx.ns):
            self.ctx.scenarios.put(o["metadata"]["name"], o["spec"])
        await self.scheduler.resume_cut_off()

    async def _cancel(self, why: str) -> None:
        await self.ctx.cleanup_in_flight()
        self.ctx.status.exclude_pending(ScenarioEvent.CANCELLED)
        reason = self.ctx.status.transition(RunEvent.CANCELLED)
        self.ctx.status.completion_time = self.ctx.now_str()
        await self.ctx.save(reason=reason, message=why)
        await self.ctx.event("Normal", reasons.EVENT_RUN_CANCELLED, why)

    async def finalize(self) -> None:
        """On deletion: tear down what is in flight (the owned report objects go by owner reference)."""
        run = await self.ctx.ports.store.get_run(self.ctx.ns, self.ctx.name)
        if run is None:
            return
        for s in RunStatus.model_validate(run.get("status") or {}).entries:
            if s.step is Step.RUNNING and s.owner:
                await self.ctx.ports.forget(s.namespaces or [], s.owner)
