"""One run as the run workflow's parts share it: its ports, the run object and status as last read, its
scenarios and Profile parsed once, and the status writes, one at a time.

Called by :class:`~oasis_operator.workflows.run.RunDriver` (the drive loop and its guards) and the parts
it hands the run to: :mod:`~oasis_operator.workflows.preparing` (select, identify, preflight, triage),
:mod:`~oasis_operator.workflows.scheduling` (the phases and one scenario) and
:mod:`~oasis_operator.workflows.reporting` (the stored report and what follows from it). What a run needs
of the world is :class:`RunPorts` (every field a port of :mod:`oasis_operator.core.ports`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from oasis_operator.core import reasons
from oasis_operator.core import run_status as rs
from oasis_operator.core.clusters import OneCluster, ScenarioCluster, ScenarioClusters
from oasis_operator.core.gateway.port import GatewayPorts
from oasis_operator.core.model.errors import ModelValidationError
from oasis_operator.core.model.profile import Profile, parse_profile
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
from oasis_operator.core.run_status import RunEvent, RunStatus, ScenarioEvent, Step
from oasis_operator.workflows.cluster_names import ClusterNames
from oasis_operator.workflows.scenario import ScenarioPorts, ScenarioTimeouts
from oasis_operator.workflows.scenario_slots import ScenarioSlots


@dataclass(frozen=True)
class Hold:
    """Why the run does not go on now: it waits for something (``event`` WAITING, Reconciling=True),
    or it ends before it started (``event`` says how)."""

    event: RunEvent
    reason: str
    message: str


def waiting(reason: str, message: str) -> Hold:
    return Hold(RunEvent.WAITING, reason, message)


def parse_time(text: str) -> dt.datetime:
    return dt.datetime.strptime(text, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


@dataclass(kw_only=True)
class RunPorts:
    """What a run needs of the world (every field a port of :mod:`oasis_operator.core.ports`), and the
    operator's settings that shape a run.

    Where scenarios run: ``clusters`` (target control planes, one per attempt: decision 0100), or,
    when it is None, the one shared cluster that ``env``, ``audit``, ``send_sentinel``, ``toolplane``
    and ``tool_gateway`` reach (every name suffixed)."""

    store: RunStore
    agent_for: Callable[[EvaluationRunSpec, str, str], Awaitable[AgentPort]]  # (spec, namespace, run name)
    env: EnvironmentPort | None = None
    audit: AuditPort | None = None
    send_sentinel: SentinelSender | None = None
    clusters: ScenarioClusters | None = None
    metrics: MetricsPort = field(default_factory=NoMetrics)
    #: The tool-plane back-ends (logs, dashboards...); none by default.
    toolplane: ToolPlanePort = field(default_factory=NoToolPlane)
    now: Callable[[], dt.datetime] = field(default=_utc_now)
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
    #: How many scenarios run at once across every run that shares these ports (``--max-scenarios``).
    scenario_slots: ScenarioSlots = field(default_factory=ScenarioSlots)

    def shared_cluster(self) -> ScenarioCluster:
        """The one shared cluster these ports reach (when ``clusters`` is None)."""
        if self.env is None or self.audit is None or self.send_sentinel is None:
            raise ValueError("RunPorts: without clusters, env, audit and send_sentinel are required")
        return ScenarioCluster(
            name="shared",
            env=self.env,
            audit=self.audit,
            send_sentinel=self.send_sentinel,
            toolplane=self.toolplane,
            tool_gateway=self.tool_gateway,
            harness_principals=self.harness_principals,
        )

    def scenario_clusters(self) -> ScenarioClusters:
        """Where the run's scenarios run: ``clusters``, else the shared cluster."""
        return self.clusters if self.clusters is not None else OneCluster(self.shared_cluster())

    @property
    def backends(self) -> frozenset[str]:
        """The tool-plane back-ends a scenario's cluster has (triage and planning are given these)."""
        return self.clusters.backends if self.clusters is not None else self.toolplane.backends

    async def forget(self, namespaces: list[str], owner: str) -> None:
        """What a scenario attempt left is gone: its target given back (a target is thrown away), or
        its namespaces in the shared cluster torn down (without waiting)."""
        if self.clusters is not None:
            await self.clusters.release(owner)
        elif self.env is not None:
            await self.env.teardown(namespaces, owner, timeout=0)

    def for_scenario(
        self, agent: AgentPort, timeouts: ScenarioTimeouts, cluster: ScenarioCluster | None = None
    ) -> ScenarioPorts:
        """The ports of one of the run's scenarios: those of its ``cluster`` (default: the shared
        one), with the run's agent and the scenario's bounds."""
        where = cluster if cluster is not None else self.shared_cluster()
        return ScenarioPorts(
            env=where.env,
            audit=where.audit,
            send_sentinel=where.send_sentinel,
            agent=agent,
            toolplane=where.toolplane,
            tool_gateway=where.tool_gateway,
            now=self.now,
            harness_principals=tuple(dict.fromkeys((*self.harness_principals, *where.harness_principals))),
            timeouts=timeouts,
        )


class ScenarioBook:
    """The run's scenarios by object name: each document as declared (sealed when stored beside the
    report) and, once asked for, parsed: the run plans and executes the model, never the document again.
    A document that changes (the run read again after a restart or a wait) is parsed again."""

    def __init__(self) -> None:
        self.docs: dict[str, dict[str, Any]] = {}
        self._parsed: dict[str, Scenario] = {}

    def put(self, name: str, doc: dict[str, Any]) -> None:
        if self.docs.get(name) != doc:
            self.docs[name] = doc
            self._parsed.pop(name, None)

    def scenario(self, name: str) -> Scenario:
        """``name``'s scenario, parsed from its document once (:class:`ModelValidationError` if it does
        not validate)."""
        scenario = self._parsed.get(name)
        if scenario is None:
            scenario = self._parsed[name] = parse_scenario(dict(self.docs[name]))[0]
        return scenario


class RunContext:
    """One run as the driver and its parts share it."""

    def __init__(self, ports: RunPorts, namespace: str, name: str) -> None:
        self.ports = ports
        self.ns, self.name = namespace, name
        #: Held while a scenario's status entry changes with the write that records it.
        self.lock = asyncio.Lock()
        #: One status write at a time, each computed once the previous one has landed: two writes in
        #: flight at once may reach the API server in either order (a queue, a new connection), and
        #: every write replaces the whole scenario list, so an older one landing last would drop what
        #: the newer one recorded (a started scenario's owner, which the orphan sweep spares).
        self._saving = asyncio.Lock()
        self.status = RunStatus()
        self.run: dict[str, Any] = {}
        self.spec_model: EvaluationRunSpec | None = None
        self.scenarios = ScenarioBook()
        #: The run's Profile, parsed once (at preparation; after a restart, when the report needs it).
        self.profile: Profile | None = None
        self._agent: AgentPort | None = None
        #: How the run was cancelled while it ran: the spec's shutdown, or "Deleted".
        self.cancelled: str | None = None
        self.removed: set[str] = set()  # status keys to delete with the next merge patch

    @property
    def spec(self) -> EvaluationRunSpec:
        assert self.spec_model is not None, "read by the driver's first guard"
        return self.spec_model

    # -- status ----------------------------------------------------------------------------------
    def now_str(self) -> str:
        return self.ports.now().astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")

    async def save(self, *, reason: str = reasons.PROGRESSING, message: str = "") -> None:
        """Write the whole status (a merge patch), with summary and conditions recomputed; writes are
        serialised, so the status stored is never older than one already written."""
        async with self._saving:
            await self._write_status(reason=reason, message=message)

    async def _write_status(self, *, reason: str, message: str) -> None:
        st = self.status
        st.observed_generation = int(self.run["metadata"].get("generation", 1))
        st.summary = rs.summary(st.entries)
        st.message = message or st.message or ""
        st.conditions = rs.conditions(
            phase=st.current,
            verdict=st.verdict,
            reason=reason,
            message=st.message,
            generation=st.observed_generation,
            now=self.now_str(),
            suspended=bool((self.run.get("spec") or {}).get("suspend")),
            previous=st.conditions or [],
            preflight=st.preflight,
        )
        document = st.wire()
        patch: dict[str, Any] = {k: None for k in self.removed if k not in document}
        patch.update(document)
        await self.ports.store.patch_run_status(self.ns, self.name, patch)
        self.removed.clear()

    async def event(self, etype: str, reason: str, message: str) -> None:
        await self.ports.store.event(self.run, etype, reason, message, self.ports.now())

    # -- time bounds ---------------------------------------------------------------------------------
    def run_timeout(self) -> float | None:
        text = self.spec.timeouts.run if self.spec.timeouts else None
        return parse_duration(text, 0.0) or None

    def remaining(self) -> float:
        """Seconds left of ``timeouts.run`` since the run started (infinite without one)."""
        limit = self.run_timeout()
        if limit is None or not self.status.start_time:
            return float("inf")
        return limit - (self.ports.now() - parse_time(self.status.start_time)).total_seconds()

    # -- what the run reads once -------------------------------------------------------------------
    async def agent_port(self) -> AgentPort:
        if self._agent is None:
            self._agent = await self.ports.agent_for(self.spec, self.ns, self.name)
        return self._agent

    def forget_agent(self) -> None:
        """The agent is asked for again next time (it was not there yet)."""
        self._agent = None

    async def read_profile(self) -> Profile | Hold:
        """The run's Profile, parsed (and kept); one that does not exist or does not validate is waited
        for, never run with a part of it."""
        name = self.spec.profile_ref.name
        manifest = await self.ports.store.get_profile(self.ns, name)
        if manifest is None:
            return waiting(reasons.PROFILE_NOT_FOUND, f"Profile {name} does not exist in {self.ns} yet")
        try:
            self.profile = parse_profile(manifest.get("spec") or {})
        except ModelValidationError as exc:
            return waiting(reasons.PROFILE_INVALID, f"Profile {name} does not validate: {exc}")
        return self.profile

    def configuration(self) -> Mapping[str, Any]:
        """The agent's declared configuration, as recorded at preparation."""
        return (self.status.agent.configuration or {}) if self.status.agent else {}

    # -- what a restart cut off ----------------------------------------------------------------------
    async def cleanup_in_flight(self) -> None:
        for s in self.status.entries:
            if s.step is Step.RUNNING:
                # Cut off by a restart: its environment is torn down and it runs again from scratch.
                await self.ports.forget(s.namespaces or [], s.owner or "")
                s.advance(ScenarioEvent.CUT_OFF)
        if self.status.scenarios:
            await self.save()
