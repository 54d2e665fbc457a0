"""The operator's target control planes as the run workflow's :class:`ScenarioClusters` port
(decision 0100).

Called by the operator's startup in targets mode. Each lease takes a fresh target from the
:class:`~oasis_operator.devcluster.targets.TargetPool` and builds the ports that reach it: the
environment adapter with the operator's identity in that target, the target's own audit log (a file the
target's API server writes, blocking: no webhook, no batch to lose), the sentinel sender, and the tool
plane of the back-ends the target started, behind the operator's one recording gateway. Release closes
those clients and gives the target back to the pool, which resets it with a proof or destroys it
(decision 0101).
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

from lightkube import AsyncClient

from oasis_operator.adapters.audit.source import FileAuditSource
from oasis_operator.adapters.gateway.plane import gateway_ports
from oasis_operator.adapters.k8s.client import sentinel_sender, whoami
from oasis_operator.adapters.k8s.environment import AgentAccountNaming, KubeEnvironment
from oasis_operator.adapters.toolplane import Cluster, discovered, tool_plane
from oasis_operator.core.clusters import ScenarioCluster, SurvivedAttempt
from oasis_operator.core.errors import TargetUnavailable
from oasis_operator.core.gateway.port import ToolGatewayPort
from oasis_operator.devcluster.cluster import POD_CIDR
from oasis_operator.devcluster.targets import Target, TargetPool
from oasis_operator.handlers.settings import ClusterAccess, ToolPlaneSettings

__all__ = ["OwnedTargets"]

log = logging.getLogger("oasis.targets")

Closer = Callable[[], Awaitable[Any]]


@dataclass
class _Lease:
    target: Target
    closers: list[Closer] = field(default_factory=list)


class OwnedTargets:
    """A target control plane per scenario attempt, at its baseline, reset (or destroyed) on release."""

    exact_names = True

    def __init__(
        self, pool: TargetPool, *, backends: frozenset[str], gateway: ToolGatewayPort | None = None
    ) -> None:
        self.pool = pool
        self._backends = backends
        self.gateway = gateway
        self._leases: dict[str, _Lease] = {}

    @property
    def backends(self) -> frozenset[str]:
        return self._backends

    async def lease(self, owner: str) -> ScenarioCluster:
        try:
            target = await self.pool.lease()
        except Exception as exc:
            raise TargetUnavailable(f"no target control plane started: {exc}") from exc
        held = self._leases[owner] = _Lease(target)
        try:
            await asyncio.to_thread(self.pool.mark_leased, target, owner)
            return await self._ports(owner, held)
        except Exception as exc:
            await self.release(owner)
            raise TargetUnavailable(f"target {target.name} cannot be reached: {exc}") from exc

    async def _ports(self, owner: str, held: _Lease) -> ScenarioCluster:
        target = held.target
        access = ClusterAccess.from_kubeconfig(target.kubeconfig)
        client = AsyncClient(access.lightkube_config(), field_manager="oasis-operator")
        held.closers.append(client.close)
        http = access.http()
        held.closers.append(http.aclose)
        audit = FileAuditSource(target.audit_log)
        await audit.start()
        held.closers.append(audit.stop)
        username = await whoami(http)
        endpoint = access.endpoint()
        cluster = Cluster(http, endpoint.server)
        configured = ToolPlaneSettings.load(target.toolplane_file).backends if target.toolplane_file else {}
        plane = tool_plane(cluster, {**configured, **await discovered(cluster)})
        held.closers.append(plane.aclose)
        # The operator reaches the target on loopback; the agent at the served address (decision 0109).
        served = target.agent_server or endpoint.server
        log.info("scenario %s runs in %s (%s)", owner, target.name, served)
        return ScenarioCluster(
            name=target.name,
            env=KubeEnvironment(client, server=served, ca_data=endpoint.ca_data, pod_cidr=POD_CIDR),
            audit=audit,
            send_sentinel=sentinel_sender(http),
            toolplane=plane,
            tool_gateway=gateway_ports(self.gateway, plane) if self.gateway is not None else None,
            harness_principals=(*((username,) if username else ()), *plane.principals),
        )

    def survived(self, owner: str) -> SurvivedAttempt | None:
        """The audit log of the target a cut-off attempt held, kept across the restart (0110)."""
        log_file = self.pool.survived_audit(owner)
        if log_file is None:
            return None
        return SurvivedAttempt(AgentAccountNaming(), FileAuditSource(log_file))

    async def release(self, owner: str) -> None:
        await asyncio.to_thread(self.pool.drop_survived, owner)
        held = self._leases.pop(owner, None)
        if held is None:
            return
        self.pool.unmark(held.target)
        for close in reversed(held.closers):
            try:
                await close()
            except Exception:  # closing is best effort: the target is reset or destroyed anyway
                log.exception("closing a client of %s", held.target.name)
        await self.pool.give_back(held.target)

    async def close(self) -> None:
        for owner in list(self._leases):
            await self.release(owner)
        await self.pool.close()
