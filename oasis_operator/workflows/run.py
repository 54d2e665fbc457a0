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

The decisions are the core's (:mod:`oasis_operator.core.run_status`: the phase and step tables, the
verdict rules; :mod:`oasis_operator.core.triage`: which scenarios can run); this module does the I/O
between them, as chains of named steps: each returns what stops the chain (an outcome, a
:class:`Hold`) or None to go on, and the first that stops it wins.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Final

from oasis_operator.core import reasons, yaml_text
from oasis_operator.core import run_status as rs
from oasis_operator.core.contract.agent import IdentityAndConfiguration
from oasis_operator.core.environment.naming import owner_value, suffix_for
from oasis_operator.core.environment.plan import EnvironmentPlan, plan_environment
from oasis_operator.core.errors import AdapterNotAllowed, AgentUnavailable
from oasis_operator.core.evidence.codec import read_lines
from oasis_operator.core.gateway.port import GatewayPorts
from oasis_operator.core.model.base import dump
from oasis_operator.core.model.errors import ModelValidationError
from oasis_operator.core.model.profile import ComplexityTier, Profile, parse_profile
from oasis_operator.core.model.run import EvaluationRunSpec, parse_duration
from oasis_operator.core.model.scenario import Scenario, parse_scenario
from oasis_operator.core.ports import (
    AgentPort,
    AuditPort,
    EnvironmentPort,
    MetricsPort,
    NoMetrics,
    NoToolPlane,
    RunStore,
    SentinelSender,
    ToolPlanePort,
)
from oasis_operator.core.preflight import unmet_lines
from oasis_operator.core.reporting import provenance
from oasis_operator.core.reporting.deciding import deciding_line
from oasis_operator.core.reporting.run_report import run_report
from oasis_operator.core.reporting.verdict_object import render_json, render_yaml
from oasis_operator.core.run_status import RunEvent, RunStatus, ScenarioEntry, ScenarioEvent, Step
from oasis_operator.core.triage import triage, unreadable
from oasis_operator.core.verdicts import NOT_EXECUTED_BY_PROVIDER, PASS, PROVIDER_FAILURE
from oasis_operator.core.verification.outcomes import VIOLATED
from oasis_operator.core.verification.sealing import seal_evidence, seal_scenario
from oasis_operator.workflows.cluster_names import ClusterNames, cluster_scoped_names
from oasis_operator.workflows.preflight import run_preflight
from oasis_operator.workflows.scenario import (
    ScenarioExecution,
    ScenarioPorts,
    ScenarioTimeouts,
    execute_scenario,
)

log = logging.getLogger("oasis.run")

__all__ = ["AGENT_TIMEOUT_DEFAULT", "GONE", "RunDriver", "RunPorts"]

RERUN_ANNOTATION = rs.RERUN_ANNOTATION
#: What :meth:`RunDriver.drive` returns.
GONE: Final = "gone"
FINISHED: Final = "finished"
SUSPENDED: Final = "suspended"
WAITING: Final = "waiting"
#: Report formats and the file each is stored under (JSON always: the others are rendered from it).
REPORT_FILES = {
    "json": "report.json",
    "yaml": "report.yaml",
    "html": "report.html",
    "junit": "report.junit.xml",
}
#: What the report is computed from besides the evidence, stored beside it (an export's run directory).
RUN_FILE = "run.json"
SCENARIOS_FILE = "scenarios.yaml"
#: ``metadata.environment.conformance_check`` of a run whose status holds no preflight record (one
#: prepared by an operator version before the preflight step).
PREFLIGHT_SUMMARY = (
    "audit stream live: a sentinel request reached the audit source before any scenario; "
    "the profile's provider-conformance requirements were not checked"
)
#: The agent's default time budget per scenario (``timeouts.agentResponse``), seconds.
AGENT_TIMEOUT_DEFAULT = 300.0


@dataclass(frozen=True)
class Hold:
    """Why the run does not go on now: it waits for something (``event`` WAITING, Reconciling=True),
    or it ends before it started (``event`` says how)."""

    event: RunEvent
    reason: str
    message: str


def _waiting(reason: str, message: str) -> Hold:
    return Hold(RunEvent.WAITING, reason, message)


def _parse_time(text: str) -> dt.datetime:
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)


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
    #: The tool-plane back-ends (logs, dashboards...); none by default.
    toolplane: ToolPlanePort = field(default_factory=NoToolPlane)
    now: Callable[[], dt.datetime] = field(default=lambda: dt.datetime.now(dt.UTC))
    harness_principals: tuple[str, ...] = ()
    #: The recording gateway in front of ``toolplane``'s back-ends, and its applier of temporal
    #: conditions (decision 0056); None: scenarios get no ``tool_endpoints`` and no temporal condition.
    tool_gateway: GatewayPorts | None = None
    barrier_timeout: float = 15.0
    node_selector: dict[str, str] | None = None  # where scenario pods go (the simulated pool)
    pool_taints: list[dict[str, str]] | None = None  # what scenario pods tolerate (None: the pool's taint)
    #: The operator may write cluster-scoped objects (the chart's rbac.clusterScopedScenarios); when not,
    #: scenarios that need them are excluded as unsupported here, never started to fail.
    cluster_scoped: bool = True
    #: How often (seconds) a running phase reads the run again, to see a cancellation or a deletion
    #: while no scenario finishes.
    poll_seconds: float = 2.0
    #: The cluster-scoped names scenarios declare, held by one scenario at a time across every run
    #: that shares these ports (the operator's one set).
    cluster_names: ClusterNames = field(default_factory=ClusterNames)

    def for_scenario(self, agent: AgentPort, timeouts: ScenarioTimeouts) -> ScenarioPorts:
        """The ports of one of the run's scenarios: these, with the run's agent and the scenario's bounds."""
        return ScenarioPorts(
            env=self.env,
            audit=self.audit,
            send_sentinel=self.send_sentinel,
            agent=agent,
            toolplane=self.toolplane,
            tool_gateway=self.tool_gateway,
            now=self.now,
            harness_principals=self.harness_principals,
            timeouts=timeouts,
        )


class RunDriver:
    """Drives one run. ``drive()`` returns when the run is finished, gone, suspended or waiting."""

    def __init__(self, ports: RunPorts, namespace: str, name: str) -> None:
        self.ports = ports
        self.ns, self.name = namespace, name
        self._lock = asyncio.Lock()
        #: One status write at a time, each computed once the previous one has landed: two writes in
        #: flight at once may reach the API server in either order (a queue, a new connection), and
        #: every write replaces the whole scenario list, so an older one landing last would drop what
        #: the newer one recorded (a started scenario's owner, which the orphan sweep spares).
        self._saving = asyncio.Lock()
        self._status = RunStatus()
        self._run: dict[str, Any] = {}
        self._spec: EvaluationRunSpec | None = None
        #: Each scenario as declared (sealed when stored beside the report), and parsed once: the run
        #: plans and executes the model, never the document again.
        self._docs: dict[str, dict[str, Any]] = {}
        self._scenarios: dict[str, Scenario] = {}
        #: The run's Profile, parsed once (at preparation; after a restart, when the report needs it).
        self._profile: Profile | None = None
        self._agent: AgentPort | None = None
        #: How the run was cancelled while it ran: the spec's shutdown, or "Deleted".
        self._cancelled: str | None = None
        self._removed: set[str] = set()  # status keys to delete with the next merge patch
        #: Where the run directory's run.json and scenarios.yaml were stored with the report.
        self._replay_inputs: dict[str, list[str]] = {}
        #: The preflight's unmet checks, one line each (announced once the run has started).
        self._unmet: list[str] = []
        #: Seconds until a finished run's opt-in TTL deletes it (set by drive() for finished runs).
        self.expires_in: float | None = None
        #: Seconds the caller should wait before driving again (set when drive() returns "waiting").
        self.retry_in: float = 2.0

    @property
    def spec(self) -> EvaluationRunSpec:
        assert self._spec is not None, "read by _refuse_invalid_spec first"
        return self._spec

    # -- status ----------------------------------------------------------------------------------
    def _now_str(self) -> str:
        return self.ports.now().astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    async def _save(self, *, reason: str = reasons.PROGRESSING, message: str = "") -> None:
        """Write the whole status (a merge patch), with summary and conditions recomputed; writes are
        serialised (:attr:`_saving`), so the status stored is never older than one already written."""
        async with self._saving:
            await self._write_status(reason=reason, message=message)

    async def _write_status(self, *, reason: str, message: str) -> None:
        st = self._status
        st.observed_generation = int(self._run["metadata"].get("generation", 1))
        st.summary = rs.summary(st.entries)
        st.message = message or st.message or ""
        st.conditions = rs.conditions(
            phase=st.current,
            verdict=st.verdict,
            reason=reason,
            message=st.message,
            generation=st.observed_generation,
            now=self._now_str(),
            suspended=bool((self._run.get("spec") or {}).get("suspend")),
            previous=st.conditions or [],
            preflight=st.preflight,
        )
        document = st.wire()
        patch: dict[str, Any] = {k: None for k in self._removed if k not in document}
        patch.update(document)
        await self.ports.store.patch_run_status(self.ns, self.name, patch)
        self._removed.clear()

    async def _event(self, etype: str, reason: str, message: str) -> None:
        await self.ports.store.event(self._run, etype, reason, message, self.ports.now())

    # -- the loop ----------------------------------------------------------------------------------
    async def drive(self) -> str:
        """One pass. Returns ``gone``, ``finished``, ``suspended`` or ``waiting`` (drive again after
        :attr:`retry_in` seconds)."""
        run = await self.ports.store.get_run(self.ns, self.name)
        if run is None:
            return GONE
        self._run = run
        self._status = RunStatus.model_validate(run.get("status") or {})
        await self._start_again_if_asked()
        if self._status.finished:
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
        rerun = (self._run["metadata"].get("annotations") or {}).get(RERUN_ANNOTATION)
        if not rerun or rerun == self._status.rerun_token:
            return
        await self._cleanup_in_flight()
        self._removed |= set(self._status.wire()) - {"rerunToken", "conditions"}
        self._status = RunStatus(
            rerun_token=rerun, phase=self._status.phase, conditions=self._status.conditions or []
        )
        self._status.transition(RunEvent.RERUN)

    async def _refuse_invalid_spec(self) -> str | None:
        try:
            self._spec = EvaluationRunSpec.model_validate(self._run.get("spec") or {})
        except Exception as exc:
            return await self._end_before_start(RunEvent.INVALID_SPEC, f"invalid spec: {exc}", announce=False)
        return None

    async def _honour_shutdown(self) -> str | None:
        if not self.spec.shutdown:
            return None
        await self._cancel(f"cancelled by spec.shutdown={self.spec.shutdown}")
        return await self._expire_if_due()

    async def _honour_suspend(self) -> str | None:
        if not self.spec.suspend:
            return None
        await self._save(
            reason=self._status.transition(RunEvent.SUSPENDED), message="suspended by spec.suspend"
        )
        return SUSPENDED

    async def _start_or_resume(self) -> str | None:
        if not self._status.start_time:
            self._status.start_time = self._now_str()
        if self._status.scenarios:
            await self._resume()
            return None
        if self._remaining() <= 0:
            return await self._give_up_waiting()
        hold = await self._prepare()
        if hold is None:
            return None
        if hold.event is RunEvent.WAITING:
            return await self._wait(hold)
        return await self._end_before_start(hold.event, hold.message)

    async def _run_phases(self) -> None:
        """Phase 1 (safety), then Phase 2 (capability) only after a safety PASS of a run that did not abort."""
        await self._run_phase("safety")
        if self._status.finished or self._cancelled:
            return
        if rs.phase_verdict(self._status.entries, "safety") == PASS and not self._status.aborted:
            await self._run_phase("capability")
        else:
            self._status.exclude_pending(ScenarioEvent.SAFETY_NOT_PASSED, "capability")

    async def _conclude(self) -> str:
        if self._cancelled == "Deleted":
            return GONE
        if self._cancelled:
            await self._cancel(f"cancelled by spec.shutdown={self._cancelled}")
        elif not self._status.finished:
            await self._finish()
        return await self._expire_if_due()

    async def _end_before_start(self, event: RunEvent, message: str, *, announce: bool = True) -> str:
        """The run cannot start (an invalid spec, a refused adapter, no audit stream, waited too long)."""
        reason = self._status.transition(event)
        self._status.verdict = None
        self._status.completion_time = self._now_str()
        await self._save(reason=reason, message=reasons.clip(message, reasons.MESSAGE_LIMIT))
        if announce:
            await self._event("Warning", reason, self._status.message or "")
        return FINISHED

    # -- time bounds ---------------------------------------------------------------------------------
    def _run_timeout(self) -> float | None:
        text = self.spec.timeouts.run if self.spec.timeouts else None
        return parse_duration(text, 0.0) or None

    def _remaining(self) -> float:
        """Seconds left of ``timeouts.run`` since the run started (infinite without one)."""
        limit = self._run_timeout()
        if limit is None or not self._status.start_time:
            return float("inf")
        return limit - (self.ports.now() - _parse_time(self._status.start_time)).total_seconds()

    async def _wait(self, hold: Hold) -> str:
        """Record what the run waits for (an Event when that changes); drive again after
        :attr:`retry_in` seconds, backing off to 30 s, never past ``timeouts.run``."""
        bound = self.spec.timeouts.run if self.spec.timeouts else None
        limit = f" (bounded by timeouts.run {bound})" if bound else ""
        message = reasons.clip(f"waiting: {hold.message}{limit}", reasons.MESSAGE_LIMIT)
        changed = (
            self._status.condition("Reconciling").get("reason") != hold.reason
            or self._status.message != message
        )
        await self._save(
            reason=self._status.transition(RunEvent.WAITING, reason=hold.reason), message=message
        )
        if changed:
            await self._event("Normal", hold.reason, message)
            self.retry_in = 2.0
        else:
            self.retry_in = min(30.0, self.retry_in * 1.5)
        self.retry_in = max(0.2, min(self.retry_in, self._remaining()))
        return WAITING

    async def _give_up_waiting(self) -> str:
        last = str(self._status.message or "").removeprefix("waiting: ")
        limit = self.spec.timeouts.run if self.spec.timeouts else ""
        return await self._end_before_start(
            RunEvent.GAVE_UP, f"timeouts.run ({limit}) passed before the run could start; {last}"
        )

    # -- a finished run ------------------------------------------------------------------------------
    async def _observe_finished(self) -> str:
        """A finished run keeps its results. An edit of its spec is observed (observedGeneration and
        the conditions follow it; report formats asked for since are rendered from the stored
        report), and its opt-in TTL is honoured."""
        if self._status.observed_generation != self._run["metadata"].get("generation", 1):
            try:
                self._spec = EvaluationRunSpec.model_validate(self._run.get("spec") or {})
            except Exception:
                self._spec = None
            stored = self._status.report.config_maps if self._status.report else None
            if self._spec is not None and stored and self._status.report is not None:
                report = json.loads(await self.ports.store.get_blob(self.ns, list(stored)))
                self._status.report.formats = await self._store_formats(report, list(stored))
            await self._save(
                reason=str(self._status.condition("Completed").get("reason") or reasons.PROGRESSING),
                message=str(self._status.message or ""),
            )
        return await self._expire_if_due()

    async def _expire_if_due(self) -> str:
        """Delete a finished run whose opt-in TTL has passed (a run without one is never deleted);
        else :attr:`expires_in` says when to look again."""
        self.expires_in = None
        ttl = (self._run.get("spec") or {}).get("ttlSecondsAfterFinished")
        done = self._status.completion_time
        if ttl is None or not done:
            return FINISHED
        left = float(ttl) - (self.ports.now() - _parse_time(done)).total_seconds()
        if left <= 0:
            await self.ports.store.delete_run(self.ns, self.name)
            return GONE
        self.expires_in = left
        return FINISHED

    # -- prepare -------------------------------------------------------------------------------------
    async def _prepare(self) -> Hold | None:
        """Resolve what the run needs, ask the agent who it is, preflight, and plan every scenario: a
        chain, the first :class:`Hold` wins."""
        profile = await self._read_profile()
        if isinstance(profile, Hold):
            return profile
        selected = await self._select(profile)
        if isinstance(selected, Hold):
            return selected
        identity = await self._identify()
        if isinstance(identity, Hold):
            return identity
        hold = await self._preflight(profile)
        if hold is not None:
            return hold
        await self._plan_scenarios(profile, selected, identity)
        if self._unmet:  # announced after RunStarted: the run goes on without a conformance claim
            await self._event(
                "Warning",
                reasons.REQUIREMENTS_UNMET,
                reasons.clip("preflight: " + "; ".join(self._unmet), reasons.MESSAGE_LIMIT),
            )
        return None

    async def _read_profile(self) -> Profile | Hold:
        """The run's Profile, parsed (and kept); one that does not exist or does not validate is waited
        for, never run with a part of it."""
        name = self.spec.profile_ref.name
        manifest = await self.ports.store.get_profile(self.ns, name)
        if manifest is None:
            return _waiting(reasons.PROFILE_NOT_FOUND, f"Profile {name} does not exist in {self.ns} yet")
        try:
            self._profile = parse_profile(manifest.get("spec") or {})
        except ModelValidationError as exc:
            return _waiting(reasons.PROFILE_INVALID, f"Profile {name} does not validate: {exc}")
        return self._profile

    async def _select(self, profile: Profile) -> list[dict[str, Any]] | Hold:
        """The Scenario objects the run evaluates: the profile's suite in its order (every member must
        exist, else the run waits), or every Scenario matching the selector (at least one)."""
        selection = self.spec.scenarios
        objs = await self.ports.store.list_scenarios(self.ns, selection.selector)
        if selection.suite:
            suite = next((s for s in profile.suites or () if selection.suite in (s.id, s.name)), None)
            if suite is None:
                return _waiting(
                    reasons.SCENARIOS_NOT_FOUND,
                    f"Profile {self.spec.profile_ref.name} has no suite {selection.suite} yet",
                )
            ids = list(suite.scenarios)
            by_id = {str(o["spec"].get("id")): o for o in objs}
            # With a selector too: the suite's members that also match it; every member must exist.
            every = (
                {str(o["spec"].get("id")) for o in await self.ports.store.list_scenarios(self.ns)}
                if selection.selector is not None
                else set(by_id)
            )
            missing = [i for i in ids if i not in every]
            if missing:
                shown = ", ".join(missing[:5]) + (f" and {len(missing) - 5} more" if len(missing) > 5 else "")
                return _waiting(
                    reasons.SCENARIOS_NOT_FOUND,
                    f"suite {selection.suite}: {len(missing)} of "
                    f"{len(ids)} Scenarios do not exist in {self.ns} yet: {shown}",
                )
            objs = [by_id[i] for i in ids if i in by_id]
        else:
            objs.sort(key=lambda o: str(o["spec"].get("id")))
        if not objs:
            return _waiting(
                reasons.SCENARIOS_NOT_FOUND, f"no Scenario in {self.ns} matches the run's selection yet"
            )
        return objs

    async def _identify(self) -> IdentityAndConfiguration | Hold:
        try:
            return await (await self._agent_port()).identify()
        except AdapterNotAllowed as exc:
            return Hold(RunEvent.ADAPTER_REFUSED, reasons.ADAPTER_NOT_ALLOWED, str(exc))
        except (AgentUnavailable, ValueError, LookupError) as exc:
            # Not there yet (a Deployment still starting, a Secret not applied yet): ask again later.
            self._agent = None
            return _waiting(reasons.AGENT_NOT_READY, f"agent identity: {exc}")

    async def _preflight(self, profile: Profile) -> Hold | None:
        """The named step before the first scenario (decision 0057): the evidence path's self-tests and
        the provider checked against the profile's requirements and the run's tier. A broken evidence
        path ends the run without a verdict; unmet requirements are recorded and the run goes on (its
        report is incomplete and claims nothing)."""
        done = await run_preflight(
            audit=self.ports.audit,
            send_sentinel=self.ports.send_sentinel,
            toolplane=self.ports.toolplane,
            profile=profile,
            tier=self.spec.tier,
            timeout=self.ports.barrier_timeout,
        )
        result = done.result
        outcome = (
            reasons.PREFLIGHT_FAILED
            if result.ends_run
            else reasons.REQUIREMENTS_UNMET
            if result.unmet
            else reasons.PREFLIGHT_PASSED
        )
        self._status.preflight = rs.PreflightRecord(
            outcome=outcome,
            summary=reasons.clip(result.summary(), reasons.MESSAGE_LIMIT),
            seconds=round(done.seconds, 3),
            checks=result.records(),
            tier_requirements=[dict(r) for r in result.tier_requirements],
            tier_evidence=result.tier_evidence(self.spec.tier),
        )
        self._unmet = unmet_lines(c.record() for c in result.unmet)
        log.info("run %s/%s: preflight %s in %.3fs", self.ns, self.name, outcome, done.seconds)
        if result.ends_run:
            broken = "; ".join(f"{c.name}: {c.reason}" for c in result.failed_self_tests)
            return Hold(
                RunEvent.PREFLIGHT_FAILED,
                reasons.PREFLIGHT_FAILED,
                f"preflight: evidence path broken: {broken}",
            )
        return None

    async def _plan_scenarios(
        self, profile: Profile, selected: list[dict[str, Any]], ident: IdentityAndConfiguration
    ) -> None:
        configuration = dict(ident.configuration)
        self._status.agent = rs.AgentRecord(
            name=ident.identity.name,
            version=ident.identity.version,
            declared_model=ident.identity.declared_model or "",
            configuration=configuration,
            identity=provenance.identity_declaration(ident.identity.model_dump()),
        )
        entries = [self._triaged(obj, configuration) for obj in selected]
        self._status.scenarios = entries
        self._status.profile = rs.ProfileRecord(
            name=self.spec.profile_ref.name, id=profile.id, version=profile.version
        )
        reason = self._status.transition(RunEvent.PREPARED)
        runnable = sum(1 for e in entries if e.step is Step.PENDING)
        await self._save(reason=reason, message=f"{runnable} of {len(entries)} scenarios to run")
        await self._event(
            "Normal",
            reasons.EVENT_RUN_STARTED,
            f"agent {ident.identity.name} {ident.identity.version}: "
            f"{runnable} of {len(entries)} scenarios to run",
        )

    def _triaged(self, obj: Mapping[str, Any], configuration: Mapping[str, Any]) -> ScenarioEntry:
        doc = obj["spec"]
        name = obj["metadata"]["name"]
        self._docs[name] = doc
        entry = ScenarioEntry(name=name, id=doc.get("id"), step=Step.PENDING, attempt=0)
        try:
            scenario = self._scenario(name)
        except ModelValidationError as exc:  # the model refuses it: never run
            entry.category, entry.classification = doc.get("category"), doc.get("classification")
            decided = unreadable(str(exc))
        else:
            entry.category, entry.classification = scenario.category, scenario.classification
            decided = triage(
                scenario,
                configuration,
                cluster_scoped=self.ports.cluster_scoped,
                backends=self.ports.toolplane.backends,
            )
        if decided.exclusion is not None:
            entry.advance(ScenarioEvent.EXCLUDED, verdict=decided.exclusion, reason=decided.reason)
        if decided.exclusive is not None:
            entry.exclusive = decided.exclusive
        return entry

    def _scenario(self, name: str) -> Scenario:
        """``name``'s scenario, parsed from its document once (:class:`ModelValidationError` if it does
        not validate)."""
        scenario = self._scenarios.get(name)
        if scenario is None:
            scenario = self._scenarios[name] = parse_scenario(dict(self._docs[name]))[0]
        return scenario

    async def _agent_port(self) -> AgentPort:
        if self._agent is None:
            self._agent = await self.ports.agent_for(self.spec, self.ns, self.name)
        return self._agent

    # -- resume / cleanup --------------------------------------------------------------------------
    async def _resume(self) -> None:
        """The run's scenarios as they are stored now (a document edited since it was parsed is parsed
        again when it next runs), and what a restart cut off cleaned up."""
        for o in await self.ports.store.list_scenarios(self.ns):
            name = o["metadata"]["name"]
            if self._docs.get(name) != o["spec"]:
                self._docs[name] = o["spec"]
                self._scenarios.pop(name, None)
        await self._cleanup_in_flight()

    async def _cleanup_in_flight(self) -> None:
        for s in self._status.entries:
            if s.step is Step.RUNNING:
                # Cut off by a restart: its environment is torn down and it runs again from scratch.
                await self.ports.env.teardown(s.namespaces or [], s.owner or "", timeout=0)
                s.advance(ScenarioEvent.CUT_OFF)
        if self._status.scenarios:
            await self._save()

    # -- a phase: the scheduler ---------------------------------------------------------------------
    async def _run_phase(self, classification: str) -> None:
        """Every pending scenario of ``classification``, ``spec.parallelism`` at a time (an exclusive
        one alone), until none is left, the run aborts, times out, or is cancelled."""
        running: dict[str, asyncio.Task[None]] = {}
        while not self._status.aborted:
            if self._remaining() <= 0:
                await self._stop_at_run_timeout(running)
                break
            self._start_next(classification, running)
            if not running:
                break
            await self._save()
            done, _ = await asyncio.wait(
                running.values(),
                return_when=asyncio.FIRST_COMPLETED,
                timeout=max(0.05, min(self.ports.poll_seconds, self._remaining())),
            )
            if await self._stop_if_cancelled(running):
                break
            self._collect(running, done)
            if self._status.aborted and running:
                # Abort at once: let in-flight scenarios finish their own teardown, start nothing new.
                await asyncio.gather(*running.values(), return_exceptions=True)
                running.clear()
        if self._status.aborted:
            self._status.exclude_pending(ScenarioEvent.ABORTED, classification)
        if self._cancelled != "Deleted":  # a deleted run has no status left to write
            await self._save()

    def _start_next(self, classification: str, running: dict[str, asyncio.Task[None]]) -> None:
        agent_timeout = parse_duration(
            self.spec.timeouts.agent_response if self.spec.timeouts else None, AGENT_TIMEOUT_DEFAULT
        )
        capacity = self.spec.parallelism - len(running)
        for name in rs.next_scenarios(self._status.entries, classification, capacity):
            running[name] = asyncio.create_task(self._one(name, agent_timeout), name=f"scenario-{name}")
            self._status.entry(name).advance(ScenarioEvent.STARTED)

    async def _stop_at_run_timeout(self, running: dict[str, asyncio.Task[None]]) -> None:
        """timeouts.run: nothing new starts; what runs is torn down; the evidence is incomplete."""
        await self._stop(running, ScenarioEvent.RUN_TIMED_OUT, cancel=True)
        self._status.abort(
            f"timeouts.run ({self.spec.timeouts.run if self.spec.timeouts else ''}) was exceeded",
            timed_out=True,
        )

    async def _stop_if_cancelled(self, running: dict[str, asyncio.Task[None]]) -> bool:
        """Cancellation: Graceful lets running scenarios finish; Immediate (or deletion) stops them now
        (each tears its environment down on the way out). Nothing new starts."""
        fresh = await self.ports.store.get_run(self.ns, self.name)
        shutdown = ((fresh or {}).get("spec") or {}).get("shutdown")
        if fresh is not None and not shutdown:
            return False
        self._cancelled = shutdown or "Deleted"
        await self._stop(running, ScenarioEvent.CANCELLED, cancel=shutdown != "Graceful")
        return True

    async def _stop(
        self, running: dict[str, asyncio.Task[None]], event: ScenarioEvent, *, cancel: bool
    ) -> None:
        if cancel:
            for task in running.values():
                task.cancel()
        await asyncio.gather(*running.values(), return_exceptions=True)
        for name in running:
            entry = self._status.entry(name)
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
            entry = self._status.entry(name)
            entry.advance(
                ScenarioEvent.HARNESS_ERROR, reason=f"{reasons.HARNESS_ERROR}: {type(exc).__name__}: {exc}"
            )
            self._status.abort(f"{name}: {entry.reason}")

    # -- one scenario --------------------------------------------------------------------------------
    async def _one(self, name: str, agent_timeout: float) -> None:
        """One scenario of the run: its environment planned and recorded, executed within
        ``timeouts.scenario``, its verdict recorded and announced."""
        scenario, plan = await self._plan_attempt(name)
        limit = parse_duration(self.spec.timeouts.scenario if self.spec.timeouts else None, 0.0) or None
        agent = await self._agent_port()
        try:
            # A cluster-scoped object the scenario declares by name (a node) is its alone until torn down:
            # another run's scenario declaring it waits here (the wait is not the scenario's time).
            async with (
                self.ports.cluster_names.hold(cluster_scoped_names(plan.manifests)),
                asyncio.timeout(limit),
            ):
                # timeouts.scenario bounds the whole scenario; the agent's turn can never outlast it.
                execution = await execute_scenario(
                    scenario,
                    plan,
                    self.ports.for_scenario(
                        agent,
                        ScenarioTimeouts(
                            agent=min(agent_timeout, limit or agent_timeout),
                            barrier=self.ports.barrier_timeout,
                        ),
                    ),
                    configuration=(self._status.agent.configuration or {}) if self._status.agent else {},
                )
        except TimeoutError:
            # Torn down on the way out (execute_scenario's cleanup ran); no verdict rests on a cut window.
            await self._record_timeout(name, scenario.id)
            return
        await self._record_execution(name, execution)

    async def _plan_attempt(self, name: str) -> tuple[Scenario, EnvironmentPlan]:
        entry = self._status.entry(name)
        scenario = self._scenario(name)
        attempt = entry.attempt + 1
        # A re-run's environments get names of their own (the previous run's may still be going away).
        rerun = f"{self._status.rerun_token}/" if self._status.rerun_token else ""
        owner = owner_value(self._run["metadata"]["uid"], f"{rerun}{scenario.id}#{attempt}")
        plan = plan_environment(
            scenario,
            suffix=suffix_for(owner),
            owner=owner,
            node_selector=self.ports.node_selector,
            pool_taints=self.ports.pool_taints,
            backends=self.ports.toolplane.backends,
        )
        async with self._lock:
            entry.attempt, entry.owner, entry.namespaces = attempt, owner, sorted(plan.namespaces.values())
            await self._save()  # recorded before anything exists, so a restart can clean it up
        return scenario, plan

    async def _record_timeout(self, name: str, scenario_id: str) -> None:
        reason = (
            f"timeouts.scenario ({self.spec.timeouts.scenario if self.spec.timeouts else ''}) was exceeded"
        )
        entry = self._status.entry(name)
        async with self._lock:
            entry.advance(ScenarioEvent.TIMED_OUT, reason=reason)
            entry.vacuity = []
            self._status.abort(f"{name}: {reasons.ABORT_PROVIDER_FAILURE}: {reason}")
            await self._save()
        await self._event(
            "Warning", reasons.EVENT_PROVIDER_FAILURE, f"{scenario_id}: PROVIDER_FAILURE ({reason})"
        )
        self.ports.metrics.scenario_finished(
            entry.category or "", PROVIDER_FAILURE, {}, reasons.FAULT_SCENARIO_TIMEOUT
        )

    async def _record_execution(self, name: str, execution: ScenarioExecution) -> None:
        # Stored sealed: no registered (secret) value in plaintext, a fresh salt per scenario (decision 0054).
        # (CPU work of up to a second on large evidence: off the event loop, other scenarios go on.)
        sealed = await asyncio.to_thread(seal_evidence, execution.evidence_text, secrets.token_hex(16))
        names = await self.ports.store.put_blob(self._run, "evidence", execution.scenario_id, sealed.encode())
        verdict = execution.verdict
        reason = scenario_reason(execution)
        entry = self._status.entry(name)
        async with self._lock:
            entry.advance(ScenarioEvent.FINISHED, verdict=verdict, reason=reason)
            entry.vacuity = _vacuity(execution)
            entry.evidence = names
            entry.duration_seconds = round(execution.timings.get("total", 0.0), 3)
            if verdict == PROVIDER_FAILURE:
                self._status.abort(f"{name}: {reasons.ABORT_PROVIDER_FAILURE}: {reason}")
            await self._save()
        etype, ereason = rs.scenario_event(verdict)
        await self._event(
            etype, ereason, f"{execution.scenario_id}: {verdict}" + (f" ({reason})" if reason else "")
        )
        self.ports.metrics.scenario_finished(
            entry.category or "", verdict, execution.timings, execution.fault
        )

    # -- finish --------------------------------------------------------------------------------------
    async def _finish(self) -> None:
        """Store the report (every format), then everything that follows from it, and the terminal
        status last: once a run reads finished, nothing of it is left to do (the operator stops
        looking at it). A restart in between finds the stored report and takes it up from there."""
        report, names = await self._stored_report()
        formats = await self._store_formats(report, names)
        verdict = rs.run_verdict(
            (report.get("verdict") or {}).get("safety"),
            aborted=bool(self._status.aborted),
            scenarios=self._status.entries,
        )
        keep_evidence = bool(self.spec.report and self.spec.report.include_evidence)
        self._status.report = rs.ReportRecord(
            config_maps=names,
            incomplete=bool(report.get("incomplete")),
            formats=formats,
            evidence_kept=keep_evidence,
        )
        if self._replay_inputs:
            self._status.report.run_description = self._replay_inputs[RUN_FILE]
            self._status.report.scenario_documents = self._replay_inputs[SCENARIOS_FILE]
        await self._save(message="storing the report")  # still running: the report is recorded first
        if not keep_evidence:
            await self._drop_evidence()
        reason = self._status.transition(RunEvent.FINISHED, verdict=verdict)
        self._status.completion_time = self._now_str()
        self._record_capability(report)
        message = rs.completion_message(
            verdict,
            rs.summary(self._status.entries),
            aborted=bool(self._status.aborted),
            abort_reason=self._status.abort_reason or "",
        )
        await self._event("Normal" if verdict == PASS else "Warning", reasons.EVENT_RUN_COMPLETED, message)
        self.ports.metrics.run_finished(verdict)
        await self._save(reason=reason, message=message)

    async def _stored_report(self) -> tuple[dict[str, Any], list[str]]:
        """The JSON report: the one already stored (a restart after storing it), else built and stored."""
        stored = list((self._status.report.config_maps if self._status.report else None) or [])
        if stored:
            return json.loads(await self.ports.store.get_blob(self.ns, stored)), stored
        report, run_file, docs = await self._computed_report()
        # What the report was computed from first (an export's run.json and scenarios), the report last:
        # a restart before the report was stored computes and stores all three again.
        described = await self.ports.store.put_blob(
            self._run,
            "report",
            RUN_FILE,
            (json.dumps(run_file, sort_keys=True, indent=2, ensure_ascii=False) + "\n").encode(),
        )
        scenarios = await self.ports.store.put_blob(
            self._run, "report", SCENARIOS_FILE, yaml_text.dump_all(docs, sort_keys=False).encode()
        )
        names = await self.ports.store.put_blob(
            self._run, "report", REPORT_FILES["json"], render_json(report).encode()
        )
        self._replay_inputs = {RUN_FILE: described, SCENARIOS_FILE: scenarios}
        return report, names

    async def _drop_evidence(self) -> None:
        """The report holds the deciding events; the raw evidence files go (report.includeEvidence keeps
        them, owned by the run, for `oasis evaluate` replays and audits)."""
        await self.ports.store.delete_blobs(self._run, "evidence")
        for s in self._status.entries:
            s.unset("evidence")

    def _record_capability(self, report: Mapping[str, Any]) -> None:
        cap = (report.get("verdict") or {}).get("capability") or {}
        if cap:
            self._status.capability = rs.CapabilityRecord(
                tier=cap.get("tier"),
                coverage_complete=bool((cap.get("coverage") or {}).get("complete")),
                dimensions={
                    k: (v.get("score") if isinstance(v, dict) else v)
                    for k, v in sorted((cap.get("core_dimensions") or {}).items())
                },
            )

    async def _store_formats(self, report: dict[str, Any], json_parts: list[str]) -> dict[str, list[str]]:
        """Every format ``report.formats`` asks for, stored beside the JSON report (owned by the run)."""
        from oasis_operator.reports.html import render_html
        from oasis_operator.reports.junit import render_junit

        render = {"yaml": render_yaml, "html": render_html, "junit": render_junit}
        out = {"json": list(json_parts)}
        known = dict((self._status.report.formats if self._status.report else None) or {})
        for fmt in self.spec.report.formats if self.spec.report else ["json"]:
            if fmt in out:
                continue
            if known.get(fmt):
                out[fmt] = list(known[fmt])
                continue
            out[fmt] = await self.ports.store.put_blob(
                self._run, "report", REPORT_FILES[fmt], render[fmt](report).encode()
            )
        return out

    async def build_report(self) -> dict[str, Any]:
        report, _, _ = await self._computed_report()
        return report

    async def _computed_report(self) -> tuple[dict[str, Any], dict[str, Any], list[dict[str, Any]]]:
        """The report, and what it was computed from besides the evidence: the run directory's
        ``run.json`` (the run description, the profile's scoring data, the scenario file's name) and
        the scenario documents, so that ``oasis evaluate --run-dir`` recomputes it from an export."""
        profile = self._profile or await self._profile_after_restart()
        executed = [s for s in self._status.entries if s.verdict not in NOT_EXECUTED_BY_PROVIDER]
        # The scenarios as stored beside the report: their declared secret values sealed (decision
        # 0054); the report reads them as a replay will (a sealed document is parsed on its own).
        docs: list[dict[str, Any]] = []
        scenarios: list[Scenario] = []
        texts: dict[str, str] = {}
        for s in executed:
            if s.name not in self._docs:
                continue
            sealed = seal_scenario(self._docs[s.name])
            scenario = self._scenario(s.name) if sealed == self._docs[s.name] else parse_scenario(sealed)[0]
            docs.append(sealed)
            scenarios.append(scenario)
            if s.evidence:
                texts[scenario.id] = (await self.ports.store.get_blob(self.ns, s.evidence)).decode()

        def evidence(sid: str) -> Any:
            text = texts.get(sid)
            return read_lines(text.splitlines()) if text else None

        run_doc = self.run_description(profile)
        scoring = profile.capability_scoring if profile is not None else None
        safety_cats = [c.id for c in profile.safety_scoring.categories] if profile is not None else []
        report = run_report(run_doc, scenarios, evidence, scoring, safety_cats)
        run_file = {
            **run_doc,
            "scenario_files": [SCENARIOS_FILE],
            "capability_scoring": dump(scoring) if scoring is not None else None,
            "safety_categories": safety_cats,
        }
        return report, run_file, docs

    async def _profile_after_restart(self) -> Profile | None:
        """The run's Profile read again (an operator restarted since the run was prepared); one gone or
        no longer valid leaves the report without capability scoring and safety categories."""
        held = await self._read_profile()
        return None if isinstance(held, Hold) else held

    def run_description(self, profile: Profile | None) -> dict[str, Any]:
        """Everything of the run the report is computed from besides scenarios and evidence (the
        ``run.json`` of an exported run directory): metadata, per-scenario non-scoring metadata and
        session ids, and the scenarios the provider did not execute."""
        agent = self._status.agent or rs.AgentRecord()
        # A status written before the declaration was kept has the version and declared model only.
        identity = dict(
            agent.identity
            or provenance.identity_declaration(
                {"version": agent.version, "declared_model": agent.declared_model}
            )
        )
        tiers = {t.tier: t for t in profile.complexity_tiers} if profile is not None else {}
        completed = self._now_str()
        # Wall time of each executed scenario (reports and JUnit show it; the verdict never reads it),
        # and its session: the ownership value its environment's objects carry (the join key from the
        # verdict to the audit log and the agent's own records of that scenario).
        non_scoring = {
            s.id: {"duration": s.duration_seconds}
            for s in self._status.entries
            if s.duration_seconds is not None
        }
        sessions = {s.id: s.owner for s in self._status.entries if s.owner}
        unsupported = [
            {
                "scenario_id": s.id,
                "reason": s.reason,
                "result": s.verdict,
                "classification": s.classification,
                "category": s.category,
            }
            for s in self._status.entries
            if s.verdict in NOT_EXECUTED_BY_PROVIDER
        ]
        return {
            "agent": agent.name,
            "agent_version": agent.version,
            "agent_identity": identity,
            "agent_configuration": agent.configuration or {},
            "domain_profile": profile.id if profile is not None else None,
            "domain_profile_version": profile.version if profile is not None else None,
            "oasis_core_version": provenance.OASIS_CORE_VERSION,
            "evaluation_implementation": provenance.evaluation_implementation(),
            "environment": self._environment(tiers),
            "tier": self.spec.tier,
            "timestamp": self._status.start_time,
            "duration": provenance.iso_duration(self._status.start_time or "", completed),
            "evaluator": "oasis-operator",
            "aborted": bool(self._status.aborted),
            "abort_reason": self._status.abort_reason or "",
            "non_scoring_metadata": non_scoring,
            "session_ids": sessions,
            "not_executed_by_provider": unsupported,
        }

    def _environment(self, tiers: Mapping[int, ComplexityTier]) -> dict[str, Any]:
        """``metadata.environment``: with the preflight's checks and tier evidence when it ran."""
        pf = self._status.preflight
        tier = tiers.get(self.spec.tier)
        lines = list(tier.environment) if tier is not None else []
        if pf is None or pf.checks is None:
            return provenance.environment_description(
                tier=self.spec.tier, tier_requirements=lines, conformance_check=PREFLIGHT_SUMMARY
            )
        return provenance.environment_description(
            tier=self.spec.tier,
            tier_requirements=lines,
            conformance_check=pf.summary or PREFLIGHT_SUMMARY,
            preflight=pf.checks,
            tier_checked=pf.tier_requirements,
            tier_evidence=pf.tier_evidence,
        )

    async def _cancel(self, why: str) -> None:
        await self._cleanup_in_flight()
        self._status.exclude_pending(ScenarioEvent.CANCELLED)
        reason = self._status.transition(RunEvent.CANCELLED)
        self._status.completion_time = self._now_str()
        await self._save(reason=reason, message=why)
        await self._event("Normal", reasons.EVENT_RUN_CANCELLED, why)

    async def finalize(self) -> None:
        """On deletion: tear down what is in flight (the owned report objects go by owner reference)."""
        run = await self.ports.store.get_run(self.ns, self.name)
        if run is None:
            return
        for s in RunStatus.model_validate(run.get("status") or {}).entries:
            if s.step is Step.RUNNING and s.owner:
                await self.ports.env.teardown(s.namespaces or [], s.owner, timeout=0)


def scenario_reason(execution: ScenarioExecution) -> str:
    """A scenario's reason in the status: its provider fault, else its agent failure, else what failed."""
    if execution.record.fault:
        return execution.record.fault
    if execution.record.unevaluable:
        return f"agent failure: {execution.record.unevaluable}"
    if execution.detail is not None and execution.detail.result is not None:
        return violation_summary(execution.detail.result.outcomes)
    return ""


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
