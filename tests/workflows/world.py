"""A run's world on the fakes of ``tests/fakes.py``: the SI profile and its scenarios in a fake store,
a fake environment, audit stream and agent, and a clock the test moves. One :class:`World` per test.
"""

from __future__ import annotations

import asyncio
import copy
import functools
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from oasis_operator.core.clusters import ScenarioClusters
from oasis_operator.core.gateway.port import GatewayPorts
from oasis_operator.core.ports import AgentPort, ToolPlanePort
from oasis_operator.devcluster.stack import SI_PROFILE_DIR
from oasis_operator.loading.profile_dir import import_profile, manifests
from oasis_operator.workflows.cluster_names import ClusterNames
from oasis_operator.workflows.run import RunDriver, RunPorts
from oasis_operator.workflows.scenario import ScenarioPorts, ScenarioTimeouts
from oasis_operator.workflows.scenario_slots import ScenarioSlots
from tests.fakes import HARNESS, Clock, FakeAgent, FakeAudit, FakeEnvironment, FakeStore

NS = "evals"
PROFILE = "oasis-profile-software-infrastructure"
#: Scenarios by what makes them useful here.
DESTRUCTION = "infra.safety.do.unqualified-destruction-001"  # forbids deleting the pods
CASCADING = "infra.safety.br.cascading-impact-001"
EXCLUSIVE = "infra.safety.ae.incremental-escalation-001"  # writes cluster-scoped objects: runs alone
UNSUPPORTED = "infra.safety.be.implicit-zone-crossing-001"  # needs a log back-end
#: A scenario's time bounds on the fakes (they answer at once).
FAKE_BOUNDS = ScenarioTimeouts(agent=5, barrier=0.2)
#: The prompt of DESTRUCTION (how the fake agent knows where it is).
DESTRUCTION_PROMPT = "Delete the pods"


@functools.cache
def si_manifests() -> tuple[dict[str, Any], ...]:
    """The SI Profile manifest, then its Scenario manifests (imported once per test session)."""
    return tuple(manifests(import_profile(SI_PROFILE_DIR)))


def scenario_name(scenario_id: str) -> str:
    return next(m["metadata"]["name"] for m in si_manifests()[1:] if m["spec"]["id"] == scenario_id)


@dataclass
class World:
    store: FakeStore = field(default_factory=FakeStore)
    env: FakeEnvironment = field(default_factory=FakeEnvironment)
    audit: FakeAudit = field(default_factory=FakeAudit)
    clock: Clock = field(default_factory=Clock)
    agent: FakeAgent = field(init=False)
    agent_error: BaseException | None = None
    cluster_scoped: bool = True
    #: Shared by every run of the world, as the operator's one set of ports is.
    cluster_names: ClusterNames = field(default_factory=ClusterNames)
    #: The operator-wide bound on scenarios at once (none by default), shared by every run of the world.
    scenario_slots: ScenarioSlots = field(default_factory=ScenarioSlots)
    #: Where scenarios run (None: the one shared cluster of ``env`` and ``audit``).
    clusters: ScenarioClusters | None = None

    def __post_init__(self) -> None:
        self.agent = FakeAgent(self.audit, self.env, self.clock)

    def install(
        self,
        *,
        profile: bool = True,
        suites: Mapping[str, list[str]] | None = None,
        only: list[str] | None = None,
    ) -> None:
        """The profile (with ``suites``) and its scenarios (``only`` these ids, else all)."""
        head, *scenarios = si_manifests()
        if profile:
            p = copy.deepcopy(head)
            if suites:
                p["spec"]["suites"] = [
                    {
                        "id": sid,
                        "name": sid,
                        "version": "1.0.0",
                        "domain_profile": p["spec"]["id"],
                        "scenarios": ids,
                        "environment": {"provider": "oasis-operator", "config": {}},
                    }
                    for sid, ids in suites.items()
                ]
            self.store.apply(NS, p)
        for m in scenarios:
            if only is None or m["spec"]["id"] in only:
                self.store.apply(NS, m)

    def submit(self, name: str = "run", *, ids: list[str] | None = None, **spec: Any) -> str:
        """An EvaluationRun of the safety scenarios (or the suite ``ids`` names, as a suite ``s``)."""
        body: dict[str, Any] = {
            "profileRef": {"name": PROFILE},
            "agent": {"adapter": "http", "endpoint": "http://agent"},
            "tier": 1,
            "parallelism": 4,
            "scenarios": {"selector": {"matchLabels": {"oasis.dev/classification": "safety"}}},
            # The fakes' provider does not meet every SI requirement (network policy, state
            # injection): without the opt-in the run would not start (decision 0105).
            "incomplete": True,
        }
        if ids is not None:
            body["scenarios"] = {"suite": "s"}
        body.update(spec)
        self.store.apply_run(NS, name, body)
        return name

    @property
    def ports(self) -> RunPorts:
        async def agent_for(spec: Any, namespace: str, run_name: str) -> AgentPort:
            if self.agent_error is not None:
                raise self.agent_error
            return self.agent

        shared = self.clusters is None
        return RunPorts(
            store=self.store,
            env=self.env if shared else None,
            audit=self.audit if shared else None,
            send_sentinel=self.audit.sentinel_sender(self.clock) if shared else None,
            clusters=self.clusters,
            agent_for=agent_for,
            now=self.clock,
            harness_principals=(HARNESS,),
            barrier_timeout=0.3,
            cluster_scoped=self.cluster_scoped,
            poll_seconds=0.05,
            cluster_names=self.cluster_names,
            scenario_slots=self.scenario_slots,
        )

    def scenario_ports(
        self,
        *,
        timeouts: ScenarioTimeouts = FAKE_BOUNDS,
        toolplane: ToolPlanePort | None = None,
        tool_gateway: GatewayPorts | None = None,
    ) -> ScenarioPorts:
        """One scenario's ports on this world's fakes, with short bounds (the fakes answer at once)."""
        return ScenarioPorts(
            env=self.env,
            audit=self.audit,
            send_sentinel=self.audit.sentinel_sender(self.clock),
            agent=self.agent,
            toolplane=toolplane,
            tool_gateway=tool_gateway,
            now=self.clock,
            harness_principals=(HARNESS,),
            timeouts=timeouts,
        )

    def driver(self, name: str = "run") -> RunDriver:
        return RunDriver(self.ports, NS, name)

    async def drive(self, name: str = "run") -> str:
        return await self.driver(name).drive()

    def status(self, name: str = "run") -> dict[str, Any]:
        return self.store.status(NS, name)

    def entries(self, name: str = "run") -> dict[str, dict[str, Any]]:
        return {s["id"]: s for s in self.status(name).get("scenarios") or []}

    def condition(self, kind: str, name: str = "run") -> dict[str, Any]:
        return next(c for c in self.status(name)["conditions"] if c["type"] == kind)


async def settle_tasks() -> None:
    """Let cancelled scenario tasks finish their way out."""
    for _ in range(5):
        await asyncio.sleep(0)
