"""Where a scenario runs: a cluster and the ports that reach it (decision 0100).

A scenario attempt runs in one :class:`ScenarioCluster`: its environment, the audit stream and the
sentinel of that cluster's API server, its tool plane. Two kinds of :class:`ScenarioClusters` exist:

- **targets**: a control plane the operator starts and owns, one per scenario attempt, thrown away
  afterwards. Nothing but the scenario lives there, so the scenario keeps its declared names (no
  suffix: the prompts reach the agent byte for byte) and the agent's token is worthless anywhere else;
- **shared** (:class:`OneCluster`): every scenario in the operator's own cluster, names suffixed, as
  before; kept as an explicit opt-in for a dedicated evaluation cluster.

Called by the run workflow (:mod:`oasis_operator.workflows.scheduling`, ``preparing``), implemented by
the shell (:mod:`oasis_operator.handlers.targets`).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Protocol

from oasis_operator.core.gateway.port import GatewayPorts
from oasis_operator.core.ports import (
    AgentPrincipalNaming,
    AuditHistory,
    AuditPort,
    EnvironmentPort,
    NoToolPlane,
    SentinelSender,
    ToolPlanePort,
)

__all__ = ["OneCluster", "ScenarioCluster", "ScenarioClusters", "SurvivedAttempt"]


@dataclass(frozen=True)
class ScenarioCluster:
    """One cluster a scenario attempt runs in, and the ports that reach it."""

    #: A name for the status and the logs ("shared", or the target's name).
    name: str
    env: EnvironmentPort
    audit: AuditPort
    send_sentinel: SentinelSender
    toolplane: ToolPlanePort = field(default_factory=NoToolPlane)
    tool_gateway: GatewayPorts | None = None
    #: Who acts for the harness in this cluster (its operator identity, its back-ends' controllers).
    harness_principals: tuple[str, ...] = ()


@dataclass(frozen=True)
class SurvivedAttempt:
    """What an attempt cut off by an operator restart left in a cluster nobody holds any more: that
    cluster's audit log, to read again, and how the agent was named there (decisions 0097, 0110)."""

    naming: AgentPrincipalNaming
    audit: AuditHistory


class ScenarioClusters(Protocol):
    """Gives each scenario attempt its cluster."""

    @property
    def exact_names(self) -> bool:
        """True: a leased cluster holds one scenario only, which keeps its declared names."""
        ...

    @property
    def backends(self) -> frozenset[str]:
        """The tool-plane back-ends every leased cluster has (what triage and planning are given)."""
        ...

    async def lease(self, owner: str) -> ScenarioCluster:
        """A cluster for the scenario attempt ``owner``; raises
        :class:`~oasis_operator.core.errors.TargetUnavailable` when none can be had."""
        ...

    async def release(self, owner: str) -> None:
        """``owner`` is done with its cluster (a target is thrown away); harmless when it has none."""
        ...

    def survived(self, owner: str) -> SurvivedAttempt | None:
        """What the attempt ``owner``, cut off by a restart of the operator, left; None when nothing
        was kept. Released with ``release(owner)``."""
        ...


class OneCluster:
    """Every scenario in one shared cluster (the operator's own): names suffixed, nothing leased."""

    exact_names = False

    def __init__(self, cluster: ScenarioCluster) -> None:
        self.cluster = cluster

    @property
    def backends(self) -> frozenset[str]:
        return self.cluster.toolplane.backends

    async def lease(self, owner: str) -> ScenarioCluster:
        return self.cluster

    async def release(self, owner: str) -> None:
        return None

    def survived(self, owner: str) -> SurvivedAttempt | None:
        """The shared cluster's own audit source and environment, when they can read the past."""
        env, audit = self.cluster.env, self.cluster.audit
        if isinstance(audit, AuditHistory) and isinstance(env, AgentPrincipalNaming):
            return SurvivedAttempt(env, audit)
        return None
