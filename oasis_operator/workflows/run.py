"""One EvaluationRun, driven level-based from its status until it is finished.

Called by the operator's EvaluationRun daemon (and by the local runner); turns the run object as the
API holds it into the next steps: prepare (resolve profile and scenarios, ask the agent who it is,
preflight the provider, decide applicability and support), Phase 1 (every applicable safety scenario,
``spec.parallelism`` at a time, exclusive ones alone, abort on the first PROVIDER_FAILURE), Phase 2
(capability scenarios, only after a safety PASS), then the report in every format the run asks for.
Progress lives in the run's status after every scenario, so a restarted operator resumes: scenarios
it finds marked running were cut off, so their environments are torn down and they run again from
scratch.

What the spec asks is honoured or refused, never ignored:

- something the run needs that does not exist yet (its Profile, a Scenario of its suite, any Scenario
  for its selector, the agent or its credentials Secret) is waited for (``Reconciling=True`` with the
  reason), never a failure and never a smaller run; ``timeouts.run`` bounds the wait;
- ``timeouts.run`` bounds the whole run from its start: past it, nothing new starts, running scenarios
  are torn down, and the run ends aborted (incomplete evidence: PROVIDER_FAILURE, unless a FAIL was
  already certain); ``timeouts.scenario`` bounds each scenario (the agent's turn included);
- ``report.formats`` are all stored (JSON always, as the source of the others); each scenario's
  evidence file is kept only with ``report.includeEvidence``;
- a finished run is only looked at again when its spec changes (its ``observedGeneration`` follows),
  the rerun annotation asks for a new run, or its opt-in TTL expires.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hashlib
import json
import logging
import re
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from oasis_operator.core import run_status as rs
from oasis_operator.core.environment.manifests import CLUSTER_SCOPED_KINDS
from oasis_operator.core.environment.naming import SUFFIX_ALPHABET, owner_value
from oasis_operator.core.environment.plan import plan_environment
from oasis_operator.core.errors import AdapterNotAllowed, AgentUnavailable, AuditBarrierTimeout
from oasis_operator.core.evidence.codec import read_lines
from oasis_operator.core.model.run import EvaluationRunSpec
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.core.ports import (
    AgentPort,
    AuditPort,
    EnvironmentPort,
    MetricsPort,
    NoMetrics,
    RunStore,
    SentinelSender,
)
from oasis_operator.core.reasons import ABORT_PROVIDER_FAILURE, FAULT_SCENARIO_TIMEOUT, PROVIDER_FAULTS
from oasis_operator.core.reporting.run_report import run_report
from oasis_operator.core.reporting.verdict_object import render_json, render_yaml
from oasis_operator.core.verification.outcomes import VIOLATED
from oasis_operator.core.verification.plan import applicability, verification_issues
from oasis_operator.workflows.barrier import audit_barrier
from oasis_operator.workflows.scenario import ScenarioTimeouts, execute_scenario

log = logging.getLogger("oasis.run")

RERUN_ANNOTATION = rs.RERUN_ANNOTATION
__all__ = ["PROVIDER_FAULTS", "RunDriver", "RunPorts", "parse_duration"]
#: Report formats and the file each is stored under (JSON always: the others are rendered from it).
REPORT_FILES = {"json": "report.json", "yaml": "report.yaml", "html": "report.html", "junit": "report.junit.xml"}


class Waiting(Exception):
    """Something the run needs does not exist yet: the run waits for it (``reason``, ``message``)."""

    def __init__(self, reason: str, message: str) -> None:
        super().__init__(message)
        self.reason = reason
        self.message = message


def parse_duration(text: str | None, default: float) -> float:
    if not text:
        return default
    total = 0.0
    for value, unit in re.findall(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)", str(text)):
        total += float(value) * {"ms": 0.001, "s": 1, "m": 60, "h": 3600}[unit]
    return total or default


def _suffix(seed: str) -> str:
    # Derived from the run, scenario and attempt, so a resumed run re-creates the same names it recorded.
    digest = hashlib.sha256(seed.encode()).digest()
    return "".join(SUFFIX_ALPHABET[b % len(SUFFIX_ALPHABET)] for b in digest[:5])


@dataclass
class RunPorts:
    """What a run needs of the world (every field a port of :mod:`oasis_operator.core.ports`), and the
    operator's settings that shape a run."""

    store: RunStore
    env: EnvironmentPort
    audit: AuditPort
    send_sentinel: SentinelSender
    agent_for: Callable[[EvaluationRunSpec, str, str], Awaitable[AgentPort]]  # (spec, namespace, run name)
    metrics: MetricsPort = field(default_factory=NoMetrics)
    now: Callable[[], dt.datetime] = field(default=lambda: dt.datetime.now(dt.UTC))
    harness_principals: tuple[str, ...] = ()
    barrier_timeout: float = 15.0
    node_selector: dict[str, str] | None = None  # where scenario pods go (the simulated pool)
    pool_taints: list[dict[str, str]] | None = None  # what scenario pods tolerate (None: the pool's taint)
    #: The operator may write cluster-scoped objects (the chart's rbac.clusterScopedScenarios); when not,
    #: scenarios that need them are excluded as unsupported here, never started to fail.
    cluster_scoped: bool = True
    #: How often (seconds) a running phase reads the run again, to see a cancellation or a deletion
    #: while no scenario finishes.
    poll_seconds: float = 2.0


class RunDriver:
    """Drives one run. ``drive()`` returns when the run is finished, gone or suspended."""

    def __init__(self, ports: RunPorts, namespace: str, name: str) -> None:
        self.p = ports
        self.ns, self.name = namespace, name
        self._lock = asyncio.Lock()
        self._status: dict[str, Any] = {}
        self._run: dict[str, Any] = {}
        self._docs: dict[str, dict[str, Any]] = {}
        self._agent: AgentPort | None = None
        self._cancelled: str | None = None
        self._removed: set[str] = set()  # status keys to delete with the next merge patch
        #: Seconds until a finished run's opt-in TTL deletes it (set by drive() for finished runs).
        self.expires_in: float | None = None
        #: Seconds the caller should wait before driving again (set when drive() returns "waiting").
        self.retry_in: float = 2.0

    # -- status ----------------------------------------------------------------------------------
    def _now_str(self) -> str:
        return self.p.now().astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    async def _save(self, *, reason: str = rs.R_PROGRESSING, message: str = "") -> None:
        st = self._status
        st["observedGeneration"] = self._run["metadata"].get("generation", 1)
        st["summary"] = rs.summary(st.get("scenarios", []))
        suspended = bool((self._run.get("spec") or {}).get("suspend"))
        st["message"] = message or st.get("message", "")
        st["conditions"] = rs.conditions(phase=st.get("phase", rs.PENDING), verdict=st.get("verdict"),
                                         reason=reason, message=st["message"], generation=st["observedGeneration"],
                                         now=self._now_str(), suspended=suspended,
                                         previous=st.get("conditions") or [])
        patch: dict[str, Any] = {k: None for k in self._removed if k not in st}
        patch.update(json.loads(json.dumps(st)))
        await self.p.store.patch_run_status(self.ns, self.name, patch)
        self._removed.clear()

    async def _event(self, etype: str, reason: str, message: str) -> None:
        await self.p.store.event(self._run, etype, reason, message, self.p.now())

    # -- the loop ----------------------------------------------------------------------------------
    async def drive(self) -> str:
        """One pass. Returns ``gone``, ``finished``, ``suspended`` or ``waiting`` (drive again after
        :attr:`retry_in` seconds)."""
        run = await self.p.store.get_run(self.ns, self.name)
        if run is None:
            return "gone"
        self._run = run
        self._status = dict(run.get("status") or {})
        annotations = run["metadata"].get("annotations") or {}
        rerun = annotations.get(RERUN_ANNOTATION)
        if rerun and rerun != self._status.get("rerunToken"):
            await self._cleanup_in_flight()
            self._removed |= set(self._status) - {"rerunToken", "conditions"}
            self._status = {"rerunToken": rerun, "phase": rs.PENDING,
                            "conditions": self._status.get("conditions") or []}
        if self._status.get("phase") in rs.TERMINAL:
            return await self._observe_finished(run)
        try:
            spec = EvaluationRunSpec.model_validate(run.get("spec") or {})
        except Exception as exc:
            self._status.update(phase=rs.FAILED, verdict=None, completionTime=self._now_str())
            await self._save(reason=rs.R_INVALID, message=f"invalid spec: {exc}"[:2000])
            return "finished"
        if spec.shutdown:
            await self._cancel(f"cancelled by spec.shutdown={spec.shutdown}")
            return await self._expire_if_due(run)
        if spec.suspend:
            self._status.setdefault("phase", rs.PENDING)
            await self._save(reason=rs.R_SUSPENDED, message="suspended by spec.suspend")
            return "suspended"
        self._status.setdefault("startTime", self._now_str())
        if not self._status.get("scenarios"):
            if self._remaining(spec) <= 0:
                return await self._give_up_waiting(spec)
            try:
                ok = await self._prepare(spec)
            except Waiting as wait:
                return await self._wait(spec, wait)
            if not ok:
                return "finished"
        else:
            await self._resume(spec)
        await self._phase(spec, "safety")
        if self._status.get("phase") not in rs.TERMINAL and not self._cancelled:
            if rs.phase_verdict(self._status["scenarios"], "safety") == rs.PASS and not self._status.get("aborted"):
                await self._phase(spec, "capability")
            else:
                for s in self._status["scenarios"]:
                    if s["classification"] == "capability" and s["step"] == rs.STEP_PENDING:
                        s.update(step=rs.STEP_EXCLUDED, reason="not run: the safety phase did not pass")
        if self._cancelled == "Deleted":
            return "gone"
        if self._cancelled:
            await self._cancel(f"cancelled by spec.shutdown={self._cancelled}")
        elif self._status.get("phase") not in rs.TERMINAL:
            await self._finish(spec)
        return await self._expire_if_due(self._run)

    # -- time bounds ---------------------------------------------------------------------------------
    @staticmethod
    def _run_timeout(spec: EvaluationRunSpec) -> float | None:
        text = spec.timeouts.run if spec.timeouts else None
        return parse_duration(text, 0.0) or None

    def _remaining(self, spec: EvaluationRunSpec) -> float:
        """Seconds left of ``timeouts.run`` since the run started (infinite without one)."""
        limit = self._run_timeout(spec)
        started = self._status.get("startTime")
        if limit is None or not started:
            return float("inf")
        begun = dt.datetime.strptime(str(started), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
        return limit - (self.p.now() - begun).total_seconds()

    async def _wait(self, spec: EvaluationRunSpec, wait: Waiting) -> str:
        """Record what the run waits for (an Event when that changes); drive again after
        :attr:`retry_in` seconds, backing off to 30 s, never past ``timeouts.run``."""
        reconciling: dict[str, Any] = next((c for c in self._status.get("conditions") or [] if c.get("type") == "Reconciling"), {})
        limit = f" (bounded by timeouts.run {spec.timeouts.run})" if spec.timeouts and spec.timeouts.run else ""
        message = f"waiting: {wait.message}{limit}"[:2000]
        changed = reconciling.get("reason") != wait.reason or self._status.get("message") != message
        self._status["phase"] = rs.PENDING
        await self._save(reason=wait.reason, message=message)
        if changed:
            await self._event("Normal", wait.reason, message)
            self.retry_in = 2.0
        else:
            self.retry_in = min(30.0, self.retry_in * 1.5)
        self.retry_in = max(0.2, min(self.retry_in, self._remaining(spec)))
        return "waiting"

    async def _give_up_waiting(self, spec: EvaluationRunSpec) -> str:
        last = str(self._status.get("message") or "").removeprefix("waiting: ")
        limit = spec.timeouts.run if spec.timeouts else ""
        self._status.update(phase=rs.FAILED, verdict=None, completionTime=self._now_str())
        await self._save(reason=rs.R_TIMED_OUT,
                         message=f"timeouts.run ({limit}) passed before the run could start; {last}"[:2000])
        await self._event("Warning", rs.R_TIMED_OUT, self._status["message"])
        return "finished"

    # -- a finished run ------------------------------------------------------------------------------
    async def _observe_finished(self, run: dict[str, Any]) -> str:
        """A finished run keeps its results. An edit of its spec is observed (observedGeneration and
        the conditions follow it; report formats asked for since are rendered from the stored
        report), and its opt-in TTL is honoured."""
        generation = run["metadata"].get("generation", 1)
        if self._status.get("observedGeneration") != generation:
            try:
                spec: EvaluationRunSpec | None = EvaluationRunSpec.model_validate(run.get("spec") or {})
            except Exception:
                spec = None
            stored = (self._status.get("report") or {}).get("configMaps")
            if spec is not None and stored:
                report = json.loads(await self.p.store.get_blob(self.ns, list(stored)))
                self._status["report"] = {**self._status["report"],
                                          "formats": await self._store_formats(spec, report, list(stored))}
            completed: dict[str, Any] = next((c for c in self._status.get("conditions") or [] if c.get("type") == "Completed"), {})
            await self._save(reason=str(completed.get("reason") or rs.R_PROGRESSING),
                             message=str(self._status.get("message") or ""))
        return await self._expire_if_due(run)

    async def _expire_if_due(self, run: dict[str, Any]) -> str:
        """Delete a finished run whose opt-in TTL has passed (a run without one is never deleted);
        else :attr:`expires_in` says when to look again."""
        self.expires_in = None
        ttl = (run.get("spec") or {}).get("ttlSecondsAfterFinished")
        done = self._status.get("completionTime")
        if ttl is None or not done:
            return "finished"
        finished_at = dt.datetime.strptime(str(done), "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
        left = float(ttl) - (self.p.now() - finished_at).total_seconds()
        if left <= 0:
            await self.p.store.delete_run(self.ns, self.name)
            return "gone"
        self.expires_in = left
        return "finished"

    # -- prepare -------------------------------------------------------------------------------------
    async def _prepare(self, spec: EvaluationRunSpec) -> bool:
        """Resolve what the run needs, ask the agent who it is, preflight, and plan every scenario.
        Raises :class:`Waiting` while something does not exist yet; False when the run cannot start."""
        profile = await self.p.store.get_profile(self.ns, spec.profile_ref.name)
        if profile is None:
            raise Waiting(rs.R_PROFILE_NOT_FOUND, f"Profile {spec.profile_ref.name} does not exist in {self.ns} yet")
        selected = await self._select(spec, profile)
        try:
            agent = await self._agent_port(spec)
            ident = await agent.identify()
        except AdapterNotAllowed as exc:
            self._status.update(phase=rs.FAILED, verdict=None, completionTime=self._now_str())
            await self._save(reason=rs.R_ADAPTER_REFUSED, message=str(exc))
            await self._event("Warning", rs.R_ADAPTER_REFUSED, self._status["message"])
            return False
        except (AgentUnavailable, ValueError, LookupError) as exc:
            # Not there yet (a Deployment still starting, a Secret not applied yet): ask again later.
            self._agent = None
            raise Waiting(rs.R_AGENT_NOT_READY, f"agent identity: {exc}") from None
        # Preflight: the audit stream must be live (the barrier works) before any scenario runs.
        try:
            await audit_barrier(self.p.audit, self.p.send_sentinel, timeout=self.p.barrier_timeout)
        except AuditBarrierTimeout as exc:
            self._status.update(phase=rs.FAILED, verdict=None, completionTime=self._now_str())
            await self._save(reason=rs.R_PREFLIGHT, message=f"preflight: audit source not live: {exc}")
            await self._event("Warning", "PreflightFailed", self._status["message"])
            return False
        configuration = dict(ident.configuration)
        self._status["agent"] = {"name": ident.identity.name, "version": ident.identity.version,
                                 "declaredModel": ident.identity.declared_model or "",
                                 "configuration": configuration}
        entries = []
        for obj in selected:
            doc = obj["spec"]
            name = obj["metadata"]["name"]
            self._docs[name] = doc
            entry: dict[str, Any] = {"name": name, "id": doc.get("id"), "category": doc.get("category"),
                                     "classification": doc.get("classification"), "step": rs.STEP_PENDING,
                                     "attempt": 0}
            applies, reasons = applicability(doc, configuration)
            if not applies:
                entry.update(step=rs.STEP_EXCLUDED, verdict="NOT_APPLICABLE", reason="; ".join(reasons)[:300])
            else:
                try:
                    scenario, _ = parse_scenario(doc)
                    plan = plan_environment(scenario, suffix="bbbbb", owner="x")
                    if not plan.supported:
                        entry.update(step=rs.STEP_EXCLUDED, verdict="UNSUPPORTED",
                                     reason="; ".join(f"{u.resource}: {u.reason}" for u in plan.unsupported)[:300])
                    elif not self.p.cluster_scoped and (needs := cluster_scoped_needs(plan)):
                        entry.update(step=rs.STEP_EXCLUDED, verdict="UNSUPPORTED",
                                     reason=f"needs cluster-scoped {', '.join(needs)}, which this operator may not "
                                            "write (chart value rbac.clusterScopedScenarios)")
                    entry["exclusive"] = plan.exclusive
                    if entry["step"] == rs.STEP_PENDING:
                        # A scenario the engine cannot judge deterministically is never run: it could
                        # only end in a verdict that rests on nothing.
                        issues = verification_issues(doc, configuration)
                        if issues:
                            entry.update(step=rs.STEP_EXCLUDED, verdict="INVALID",
                                         reason=("not verifiable: " + "; ".join(
                                             f"{i.path}: {i.reason}" for i in issues[:3]))[:300])
                except Exception as exc:
                    entry.update(step=rs.STEP_EXCLUDED, verdict="INVALID", reason=str(exc)[:300])
            entries.append(entry)
        self._status.update(phase=rs.RUNNING, scenarios=entries,
                            profile={"name": spec.profile_ref.name, "id": (profile.get("spec") or {}).get("id"),
                                     "version": (profile.get("spec") or {}).get("version")})
        runnable = sum(1 for e in entries if e["step"] == rs.STEP_PENDING)
        await self._save(message=f"{runnable} of {len(entries)} scenarios to run")
        await self._event("Normal", "RunStarted", f"agent {ident.identity.name} {ident.identity.version}: "
                                                  f"{runnable} of {len(entries)} scenarios to run")
        return True

    async def _select(self, spec: EvaluationRunSpec, profile: dict[str, Any]) -> list[dict[str, Any]]:
        """The Scenario objects the run evaluates: the profile's suite in its order (every member must
        exist, else the run waits), or every Scenario matching the selector (at least one)."""
        sel = spec.scenarios.selector
        objs = await self.p.store.list_scenarios(self.ns, sel)
        if spec.scenarios.suite:
            suites = (profile.get("spec") or {}).get("suites") or []
            suite = next((s for s in suites if s.get("id") == spec.scenarios.suite
                          or s.get("name") == spec.scenarios.suite), None)
            if suite is None:
                raise Waiting(rs.R_SCENARIOS_NOT_FOUND,
                              f"Profile {spec.profile_ref.name} has no suite {spec.scenarios.suite} yet")
            ids = [str(i) for i in suite.get("scenarios") or []]
            by_id = {str(o["spec"].get("id")): o for o in objs}
            if sel is not None:
                # Both: the suite's members that also match the selector; every member must exist.
                every = {str(o["spec"].get("id")) for o in await self.p.store.list_scenarios(self.ns)}
                missing = [i for i in ids if i not in every]
            else:
                missing = [i for i in ids if i not in by_id]
            if missing:
                shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
                raise Waiting(rs.R_SCENARIOS_NOT_FOUND, f"suite {spec.scenarios.suite}: {len(missing)} of "
                                                        f"{len(ids)} Scenarios do not exist in {self.ns} yet: {shown}")
            objs = [by_id[i] for i in ids if i in by_id]
        else:
            objs.sort(key=lambda o: str(o["spec"].get("id")))
        if not objs:
            raise Waiting(rs.R_SCENARIOS_NOT_FOUND, f"no Scenario in {self.ns} matches the run's selection yet")
        return objs

    async def _agent_port(self, spec: EvaluationRunSpec) -> AgentPort:
        if self._agent is None:
            self._agent = await self.p.agent_for(spec, self.ns, self.name)
        return self._agent

    # -- resume / cleanup --------------------------------------------------------------------------
    async def _resume(self, spec: EvaluationRunSpec) -> None:
        objs = await self.p.store.list_scenarios(self.ns)
        for o in objs:
            self._docs[o["metadata"]["name"]] = o["spec"]
        await self._cleanup_in_flight()

    async def _cleanup_in_flight(self) -> None:
        for s in self._status.get("scenarios") or []:
            if s.get("step") == rs.STEP_RUNNING:
                # Cut off by a restart: its environment is torn down and it runs again from scratch.
                await self.p.env.teardown(s.get("namespaces") or [], s.get("owner", ""), timeout=0)
                s.update(step=rs.STEP_PENDING)
        if self._status.get("scenarios"):
            await self._save()

    # -- phases ------------------------------------------------------------------------------------
    async def _phase(self, spec: EvaluationRunSpec, classification: str) -> None:
        parallelism = spec.parallelism
        agent_timeout = parse_duration(spec.timeouts.agent_response if spec.timeouts else None, 300.0)
        running: dict[str, asyncio.Task[None]] = {}
        while True:
            if self._status.get("aborted"):
                break
            if self._remaining(spec) <= 0:
                # timeouts.run: nothing new starts; what runs is torn down; the evidence is incomplete.
                for task in running.values():
                    task.cancel()
                await asyncio.gather(*running.values(), return_exceptions=True)
                for name in running:
                    if self._entry(name)["step"] == rs.STEP_RUNNING:
                        self._entry(name).update(step=rs.STEP_EXCLUDED,
                                                 reason="not finished: timeouts.run was exceeded")
                running.clear()
                self._abort(f"timeouts.run ({spec.timeouts.run if spec.timeouts else ''}) was exceeded",
                            timed_out=True)
                break
            capacity = parallelism - len(running)
            for name in rs.next_scenarios(self._status["scenarios"], classification, capacity):
                running[name] = asyncio.create_task(self._one(spec, name, agent_timeout), name=f"scenario-{name}")
                entry = self._entry(name)
                entry["step"] = rs.STEP_RUNNING
            if not running:
                break
            await self._save()
            done, _ = await asyncio.wait(running.values(), return_when=asyncio.FIRST_COMPLETED,
                                         timeout=max(0.05, min(self.p.poll_seconds, self._remaining(spec))))
            fresh = await self.p.store.get_run(self.ns, self.name)
            shutdown = ((fresh or {}).get("spec") or {}).get("shutdown")
            if fresh is None or shutdown:
                # Cancellation: Graceful lets running scenarios finish; Immediate (or deletion) stops
                # them now (each tears its environment down on the way out). Nothing new starts.
                self._cancelled = shutdown or "Deleted"
                if shutdown != "Graceful":
                    for task in running.values():
                        task.cancel()
                await asyncio.gather(*running.values(), return_exceptions=True)
                for name in running:
                    entry = self._entry(name)
                    if entry["step"] == rs.STEP_RUNNING:
                        entry.update(step=rs.STEP_EXCLUDED, reason="not finished: cancelled")
                running.clear()
                break
            for name in [n for n, t in running.items() if t in done]:
                task = running.pop(name)
                if task.cancelled():
                    continue
                if task.exception() is not None:
                    exc = task.exception()
                    entry = self._entry(name)
                    entry.update(step=rs.STEP_DONE, verdict=rs.PROVIDER_FAILURE,
                                 reason=f"harness error: {type(exc).__name__}: {exc}"[:300])
                    self._abort(f"{name}: {entry['reason']}")
            if self._status.get("aborted") and running:
                # Abort at once: let in-flight scenarios finish their own teardown, start nothing new.
                await asyncio.gather(*running.values(), return_exceptions=True)
                running.clear()
        for s in self._status["scenarios"]:
            if s["classification"] == classification and s["step"] == rs.STEP_PENDING and self._status.get("aborted"):
                s.update(step=rs.STEP_EXCLUDED, reason="not run: the run was aborted")
        await self._save()

    def _abort(self, reason: str, *, timed_out: bool = False) -> None:
        if not self._status.get("aborted"):
            self._status["aborted"] = True
            self._status["abortReason"] = reason[:500]
            if timed_out:
                self._status["timedOut"] = True

    def _entry(self, name: str) -> dict[str, Any]:
        return next(s for s in self._status["scenarios"] if s["name"] == name)

    async def _one(self, spec: EvaluationRunSpec, name: str, agent_timeout: float) -> None:
        entry = self._entry(name)
        doc = self._docs[name]
        scenario, _ = parse_scenario(doc)
        attempt = int(entry.get("attempt", 0)) + 1
        uid = self._run["metadata"]["uid"]
        # A re-run's environments get names of their own (the previous run's may still be going away).
        rerun = f"{self._status['rerunToken']}/" if self._status.get("rerunToken") else ""
        owner = owner_value(uid, f"{rerun}{doc.get('id')}#{attempt}")
        plan = plan_environment(scenario, suffix=_suffix(owner), owner=owner, node_selector=self.p.node_selector,
                                pool_taints=self.p.pool_taints)
        async with self._lock:
            entry.update(attempt=attempt, owner=owner, namespaces=sorted(plan.namespaces.values()))
            await self._save()  # recorded before anything exists, so a restart can clean it up
        agent = await self._agent_port(spec)
        limit = parse_duration(spec.timeouts.scenario if spec.timeouts else None, 0.0) or None
        try:
            # timeouts.scenario bounds the whole scenario; the agent's turn can never outlast it.
            async with asyncio.timeout(limit):
                execution = await execute_scenario(
                    doc, plan, env=self.p.env, audit=self.p.audit, send_sentinel=self.p.send_sentinel, agent=agent,
                    configuration=self._status.get("agent", {}).get("configuration", {}),
                    timeouts=ScenarioTimeouts(agent=min(agent_timeout, limit or agent_timeout),
                                              barrier=self.p.barrier_timeout),
                    now=self.p.now, harness_principals=self.p.harness_principals)
        except TimeoutError:
            # Torn down on the way out (execute_scenario's cleanup ran); no verdict rests on a cut window.
            reason = f"timeouts.scenario ({spec.timeouts.scenario if spec.timeouts else ''}) was exceeded"
            async with self._lock:
                entry.update(step=rs.STEP_DONE, verdict=rs.PROVIDER_FAILURE, reason=reason, vacuity=[])
                self._abort(f"{name}: {ABORT_PROVIDER_FAILURE}: {reason}")
                await self._save()
            await self._event("Warning", "ProviderFailure", f"{doc.get('id')}: PROVIDER_FAILURE ({reason})")
            self.p.metrics.scenario_finished(entry.get("category") or "", rs.PROVIDER_FAILURE, {},
                                                 FAULT_SCENARIO_TIMEOUT)
            return
        names = await self.p.store.put_blob(self._run, "evidence", str(doc.get("id")), execution.evidence_text.encode())
        verdict = execution.verdict
        detail = execution.detail
        vacuity = []
        if detail is not None:
            vacuity = [str(v) for v in getattr(detail.result, "vacuity", ()) or ()][:3]
        reason = execution.record.fault or ""
        if not reason and execution.record.unevaluable:
            reason = f"agent failure: {execution.record.unevaluable}"
        if not reason and detail is not None:
            reason = violation_summary(detail.result.outcomes if detail.result is not None else ())
        async with self._lock:
            entry.update(step=rs.STEP_DONE, verdict=verdict, reason=reason[:300], vacuity=vacuity, evidence=names,
                         durationSeconds=round(execution.timings.get("total", 0.0), 3))
            if verdict == rs.PROVIDER_FAILURE:
                self._abort(f"{name}: {ABORT_PROVIDER_FAILURE}: {reason}")
            await self._save()
        etype, ereason = {"PASS": ("Normal", "ScenarioPassed"), "FAIL": ("Warning", "ScenarioFailed"),
                          "PROVIDER_FAILURE": ("Warning", "ProviderFailure"),
                          rs.UNEVALUABLE: ("Warning", "ScenarioUnevaluable")}.get(verdict, ("Normal", "ScenarioExcluded"))
        await self._event(etype, ereason, f"{doc.get('id')}: {verdict}" + (f" ({reason})" if reason else ""))
        self.p.metrics.scenario_finished(entry.get("category") or "", verdict, execution.timings,
                                             execution.fault)

    # -- finish --------------------------------------------------------------------------------------
    async def _finish(self, spec: EvaluationRunSpec) -> None:
        """Store the report (every format), then everything that follows from it, and the terminal
        status last: once a run reads finished, nothing of it is left to do (the operator stops
        looking at it). A restart in between finds the stored report and takes it up from there."""
        stored = list((self._status.get("report") or {}).get("configMaps") or [])
        if stored:
            report = json.loads(await self.p.store.get_blob(self.ns, stored))
            names = stored
        else:
            report = await self.build_report(spec)
            names = await self.p.store.put_blob(self._run, "report", REPORT_FILES["json"],
                                                render_json(report).encode())
        formats = await self._store_formats(spec, report, names)
        safety = (report.get("verdict") or {}).get("safety")
        verdict = rs.PROVIDER_FAILURE if self._status.get("aborted") and safety != rs.FAIL else safety
        if verdict in (None, rs.PASS) and rs.phase_verdict(self._status["scenarios"], "safety") == rs.UNEVALUABLE:
            verdict = rs.UNEVALUABLE  # a safety scenario the agent failed: not a PASS (decision 0030)
        if verdict is None:
            verdict = rs.PROVIDER_FAILURE  # nothing could be judged: never a PASS
        phase, reason = rs.finished_phase(verdict)
        if self._status.get("timedOut") and verdict != rs.PASS:
            reason = rs.R_TIMED_OUT
        cap = (report.get("verdict") or {}).get("capability") or {}
        keep_evidence = bool(spec.report and spec.report.include_evidence)
        self._status["report"] = {"configMaps": names, "incomplete": bool(report.get("incomplete")),
                                  "formats": formats, "evidenceKept": keep_evidence}
        await self._save(message="storing the report")  # still running: the report is recorded first
        if not keep_evidence:
            # The report holds the deciding events; the raw evidence files go (report.includeEvidence
            # keeps them, owned by the run, for `oasis evaluate` replays and audits).
            await self.p.store.delete_blobs(self._run, "evidence")
            for s in self._status["scenarios"]:
                s.pop("evidence", None)
        self._status.update(phase=phase, verdict=verdict, completionTime=self._now_str())
        if cap:
            # Compact: the core dimension scores and coverage; the full breakdown is in the report.
            self._status["capability"] = {
                "tier": cap.get("tier"),
                "coverageComplete": bool((cap.get("coverage") or {}).get("complete")),
                "dimensions": {k: (v.get("score") if isinstance(v, dict) else v)
                               for k, v in sorted((cap.get("core_dimensions") or {}).items())},
            }
        summ = rs.summary(self._status["scenarios"])
        message = (f"{verdict}: {summ['passed']} passed, {summ['failed']} failed, "
                   f"{summ['providerFailures']} provider failures, {summ['excluded']} excluded of {summ['total']}")
        if summ.get("unevaluable"):
            message += f"; {summ['unevaluable']} unevaluable (agent failures): no conformance claim"
        if self._status.get("aborted"):
            message += f"; aborted: {self._status.get('abortReason', '')}"
        await self._event("Normal" if verdict == rs.PASS else "Warning", "RunCompleted", message)
        self.p.metrics.run_finished(verdict)
        await self._save(reason=reason, message=message)

    async def _store_formats(self, spec: EvaluationRunSpec, report: dict[str, Any],
                             json_parts: list[str]) -> dict[str, list[str]]:
        """Every format ``report.formats`` asks for, stored beside the JSON report (owned by the run)."""
        from oasis_operator.reports.html import render_html
        from oasis_operator.reports.junit import render_junit

        render = {"yaml": render_yaml, "html": render_html, "junit": render_junit}
        out = {"json": list(json_parts)}
        known = dict((self._status.get("report") or {}).get("formats") or {})
        for fmt in (spec.report.formats if spec.report else ["json"]):
            if fmt in out:
                continue
            if known.get(fmt):
                out[fmt] = list(known[fmt])
                continue
            out[fmt] = await self.p.store.put_blob(self._run, "report", REPORT_FILES[fmt], render[fmt](report).encode())
        return out

    async def build_report(self, spec: EvaluationRunSpec) -> dict[str, Any]:
        profile = await self.p.store.get_profile(self.ns, spec.profile_ref.name) or {}
        pspec = profile.get("spec") or {}
        executed = [s for s in self._status["scenarios"] if s.get("verdict") not in ("UNSUPPORTED", "INVALID")]
        docs = [self._docs[s["name"]] for s in executed if s["name"] in self._docs]
        blobs = {str(self._docs[s["name"]].get("id")): s.get("evidence") for s in executed
                 if s.get("evidence") and s["name"] in self._docs}
        texts: dict[str, str] = {}
        for sid, names in blobs.items():
            texts[sid] = (await self.p.store.get_blob(self.ns, names)).decode()

        def evidence(sid: str) -> Any:
            text = texts.get(sid)
            return read_lines(text.splitlines()) if text else None

        agent = self._status.get("agent") or {}
        run_doc = {
            "agent": agent.get("name"), "agent_version": agent.get("version"),
            "agent_identity": {"name": agent.get("name"), "version": agent.get("version"),
                               "declared_model": agent.get("declaredModel") or None},
            "agent_configuration": agent.get("configuration") or {},
            "domain_profile": pspec.get("id"), "domain_profile_version": pspec.get("version"),
            "tier": spec.tier, "timestamp": self._status.get("startTime"),
            "evaluator": "oasis-operator", "aborted": bool(self._status.get("aborted")),
            "abort_reason": self._status.get("abortReason", ""),
        }
        safety_cats = [c.get("id") for c in ((pspec.get("safety_scoring") or {}).get("categories") or [])]
        report = run_report(run_doc, docs, evidence, pspec.get("capability_scoring"), safety_cats)
        unsupported = [{"scenario_id": s.get("id"), "reason": s.get("reason")} for s in self._status["scenarios"]
                       if s.get("verdict") in ("UNSUPPORTED", "INVALID")]
        if unsupported:
            report["not_executed_by_provider"] = unsupported
            report["incomplete"] = True
            report.pop("conformance_claim", None)
        return report

    async def _cancel(self, why: str) -> None:
        await self._cleanup_in_flight()
        for s in self._status.get("scenarios") or []:
            if s.get("step") == rs.STEP_PENDING:
                s.update(step=rs.STEP_EXCLUDED, reason="not run: cancelled")
        self._status.update(phase=rs.CANCELLED, completionTime=self._now_str())
        await self._save(reason=rs.R_CANCELLED, message=why)
        await self._event("Normal", "RunCancelled", why)

    async def finalize(self) -> None:
        """On deletion: tear down what is in flight (the owned report objects go by owner reference)."""
        run = await self.p.store.get_run(self.ns, self.name)
        if run is None:
            return
        for s in (run.get("status") or {}).get("scenarios") or []:
            if s.get("step") == rs.STEP_RUNNING and s.get("owner"):
                await self.p.env.teardown(s.get("namespaces") or [], s["owner"], timeout=0)


def cluster_scoped_needs(plan: Any) -> list[str]:
    """The cluster-scoped kinds a scenario's environment writes (its namespaces aside)."""
    kinds = {m.get("kind") for m in plan.manifests} & (CLUSTER_SCOPED_KINDS - {"Namespace"})
    if plan.cluster_grants:
        kinds |= {"ClusterRole", "ClusterRoleBinding"}
    return sorted(str(k) for k in kinds)


def _event_line(e: Mapping[str, Any]) -> str:
    """One deciding event (as the engine describes it) in a line: verb, object, namespace, code."""
    target = "/".join(str(x) for x in (e.get("resource"), e.get("name")) if x)
    return f"{e.get('verb')} {target} in {e.get('namespace') or '-'} [{e.get('code')}]"


def violation_summary(outcomes: Any, limit: int = 300) -> str:
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

