"""The environment port on a Kubernetes cluster: realising an environment plan, snapshotting it, closing
the agent's window, and tearing it down.

Called by the scenario workflow (and the tests of the 21 SI safety scenarios); :class:`KubeEnvironment`
puts the adapter's parts, each on the same :class:`~oasis_operator.adapters.k8s.cluster.ClusterConnection`,
behind :class:`~oasis_operator.core.ports.EnvironmentPort`:

- :mod:`.provisioning`: the admission policy, the plan's objects in dependency order, the agent's grant
  and kubeconfig, the declared state observed; state injected later (the provider API);
- :mod:`.kubelet`: the simulated pods brought to their declared state, as a kubelet reports them;
- :mod:`.snapshots` and :mod:`.revocation`: the before/after snapshots, every route in removed and proved
  gone;
- :mod:`.teardown`: an idempotent teardown plus the orphan sweep.

One :class:`KubeEnvironment` per cluster connection: it keeps no state at module level, so a provider
that gives each scenario a cluster of its own makes one for each.
"""

from __future__ import annotations

import base64
import datetime as dt
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from lightkube import AsyncClient
from lightkube.resources.core_v1 import Event

from oasis_operator.adapters.k8s.cluster import (
    AGENT_ACCOUNT,
    DEFAULT_POD_CIDR,
    FIELD_MANAGER,
    OWNED_CLUSTER_KINDS,
    SNAPSHOT_KINDS,
    ClusterConnection,
    cluster_grant_name,
    resource_class,
)
from oasis_operator.adapters.k8s.injected_failures import FailureInjector
from oasis_operator.adapters.k8s.kubelet import Kubelet
from oasis_operator.adapters.k8s.provisioning import Provisioner
from oasis_operator.adapters.k8s.revocation import Revoker
from oasis_operator.adapters.k8s.snapshots import Snapshots
from oasis_operator.adapters.k8s.teardown import Teardown
from oasis_operator.core.environment.manifests import WorkloadState
from oasis_operator.core.environment.plan import EnvironmentPlan, Injection
from oasis_operator.core.errors import ProvisioningError, RevocationFailed
from oasis_operator.core.ports import AgentAccess, LiveOwners, Revocation


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class AgentAccountNaming:
    """How the agent is named in the audit log of a cluster it was provisioned in: its ServiceAccount
    in the home namespace (decisions 0097, 0110). Needs no cluster: it follows from the plan alone."""

    def agent_principal(self, plan: EnvironmentPlan) -> str:
        return f"system:serviceaccount:{plan.home_namespace}:{AGENT_ACCOUNT}"


class KubeEnvironment:
    """Provider operations on one cluster, through an admin client."""

    def __init__(
        self,
        client: AsyncClient,
        *,
        server: str,
        ca_data: str,
        now: Callable[[], dt.datetime] = _utc_now,
        pod_cidr: str = DEFAULT_POD_CIDR,
    ) -> None:
        self.conn = ClusterConnection(client, server=server, ca_data=ca_data, now=now, pod_cidr=pod_cidr)
        self.kubelet = Kubelet(self.conn)
        self.provisioner = Provisioner(self.conn, self.kubelet)
        self.snapshots = Snapshots(self.conn)
        self.revoker = Revoker(self.conn)
        self.teardowns = Teardown(self.conn)

    @property
    def client(self) -> AsyncClient:
        return self.conn.client

    @property
    def server(self) -> str:
        return self.conn.server

    @property
    def ca_data(self) -> str:
        return self.conn.ca_data

    def now(self) -> dt.datetime:
        return self.conn.now()

    def agent_principal(self, plan: EnvironmentPlan) -> str:
        """The agent's username in the audit log: its ServiceAccount in the home namespace (0097)."""
        return AgentAccountNaming().agent_principal(plan)

    # -- provisioning ------------------------------------------------------------------------------
    async def apply(self, manifest: dict[str, Any]) -> None:
        await self.conn.apply(manifest)

    async def create_event(self, manifest: dict[str, Any]) -> None:
        await self.conn.create_event(manifest)

    async def ensure_admission_policy(self) -> None:
        await self.provisioner.ensure_admission_policy()

    async def provision(
        self, plan: EnvironmentPlan, *, token_seconds: int = 900, ready_timeout: float = 30.0
    ) -> AgentAccess:
        return await self.provisioner.provision(
            plan, token_seconds=token_seconds, ready_timeout=ready_timeout
        )

    async def inject(self, injection: Injection, *, ready_timeout: float = 30.0) -> list[str]:
        return await self.provisioner.inject(injection, ready_timeout=ready_timeout)

    async def verify(self, plan: EnvironmentPlan) -> list[str]:
        return await self.provisioner.verify(plan)

    # -- the simulated kubelet ---------------------------------------------------------------------
    async def realise_workloads(self, workloads: Iterable[WorkloadState], timeout: float) -> None:
        await self.kubelet.realise_workloads(workloads, timeout)

    async def node_ip(self, node: str) -> str:
        return await self.kubelet.node_ip(node)

    async def where(self, pod: dict[str, Any]) -> dict[str, Any]:
        return await self.kubelet.where(pod)

    async def write_pod_status(self, pod: dict[str, Any], status: dict[str, Any]) -> None:
        await self.kubelet.write_pod_status(pod, status)

    def failure_injector(self, plan: EnvironmentPlan) -> FailureInjector:
        """The injector of the plan's declared failures (not started; inactive when there are none)."""
        return FailureInjector(self.kubelet, plan.workloads, plan.owner)

    # -- snapshots and revocation ------------------------------------------------------------------
    async def snapshot(self, plan: EnvironmentPlan) -> dict[str, Any]:
        return await self.snapshots.snapshot(plan)

    async def revoke(self, plan: EnvironmentPlan, *, rounds: int = 3) -> Revocation:
        return await self.revoker.revoke(plan, rounds=rounds)

    async def verify_revoked(
        self,
        plan: EnvironmentPlan,
        revocation: Revocation,
        *,
        seen: Iterable[Mapping[str, Any]] = (),
        harness: Iterable[str] = (),
        settle: float = 5.0,
    ) -> Revocation:
        return await self.revoker.verify_revoked(plan, revocation, seen=seen, harness=harness, settle=settle)

    # -- teardown ----------------------------------------------------------------------------------
    async def teardown(self, namespaces: Iterable[str], owner: str, *, timeout: float = 60.0) -> list[str]:
        return await self.teardowns.teardown(namespaces, owner, timeout=timeout)

    async def sweep_orphans(self, live_owners: LiveOwners, *, timeout: float = 60.0) -> list[str]:
        return await self.teardowns.sweep_orphans(live_owners, timeout=timeout)


def ca_data_from_file(path: str) -> str:
    with open(path, "rb") as fh:
        return base64.b64encode(fh.read()).decode()


__all__ = [
    "AGENT_ACCOUNT",
    "DEFAULT_POD_CIDR",
    "FIELD_MANAGER",
    "OWNED_CLUSTER_KINDS",
    "SNAPSHOT_KINDS",
    "AgentAccess",
    "Event",
    "KubeEnvironment",
    "ProvisioningError",
    "Revocation",
    "RevocationFailed",
    "ca_data_from_file",
    "cluster_grant_name",
    "resource_class",
]
