"""The provisioner's stand-in for a kubelet: the simulated pods of a scenario's workloads brought to
their declared state, and their statuses and Events written as a kubelet reports them.

Called by :mod:`.provisioning` (a workload's pods running, pending, rolling or failing before the
handover) and by :class:`~oasis_operator.adapters.k8s.injected_failures.FailureInjector` (a pod started
after the handover failing as declared), which reach it as its
:class:`~oasis_operator.adapters.k8s.injected_failures.SimulatedKubelet`. What a status says is the core's
(:mod:`oasis_operator.core.environment.pod_status`, :mod:`~oasis_operator.core.environment.provider_pods`).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import time
from collections.abc import Iterable
from typing import Any, cast

from lightkube import ApiError
from lightkube.resources.apps_v1 import Deployment
from lightkube.resources.core_v1 import Node, Pod
from lightkube.types import PatchType

from oasis_operator.adapters.k8s.cluster import STATUS_MANAGER, ClusterConnection, OnCluster
from oasis_operator.adapters.plumbing.polling import wait_until
from oasis_operator.core.environment import pod_status, provider_pods
from oasis_operator.core.environment.manifests import WorkloadState
from oasis_operator.core.environment.pod_states import POD_STATES
from oasis_operator.core.environment.symptoms import (
    available_problems,
    rolled_out,
    rollout_caught_halfway,
    workload_problems,
)
from oasis_operator.core.errors import ProvisioningError


class Kubelet(OnCluster):
    """The simulated pods of one cluster."""

    def __init__(self, conn: ClusterConnection) -> None:
        super().__init__(conn)
        self._node_ips: dict[str, str] = {}

    async def pods_of(self, w: WorkloadState) -> list[dict[str, Any]]:
        if w.kind == "Pod":
            try:
                return [(await self.client.get(Pod, w.name, namespace=w.namespace)).to_dict()]
            except ApiError as exc:
                if exc.status.code == 404:
                    return []
                raise
        selector: dict[str, Any] = dict(w.selector)
        pods = [p.to_dict() async for p in self.client.list(Pod, namespace=w.namespace, labels=selector)]
        return [p for p in pods if not p["metadata"].get("deletionTimestamp")]

    async def realise_workloads(self, workloads: Iterable[WorkloadState], timeout: float) -> None:
        """Wait for each workload's pods to exist and be bound; then write failing statuses."""
        await asyncio.gather(*(self._realise(w, timeout) for w in workloads))

    async def _rolled_out(self, w: WorkloadState) -> bool:
        """A running Deployment's rollout is complete (no old revision's pods left, all available);
        failing workloads never become available, so only their pod count matters."""
        if w.kind != "Deployment" or w.state != "running":
            return True
        return rolled_out(w, (await self.client.get(Deployment, w.name, namespace=w.namespace)).to_dict())

    async def node_ip(self, node: str) -> str:
        """The node's InternalIP (the hostIP of its pods)."""
        if node not in self._node_ips:
            obj = (await self.client.get(Node, node)).to_dict()
            found = [
                a["address"]
                for a in obj.get("status", {}).get("addresses", [])
                if a.get("type") == "InternalIP"
            ]
            self._node_ips[node] = found[0] if found else "10.89.0.1"
        return self._node_ips[node]

    async def where(self, pod: dict[str, Any]) -> dict[str, Any]:
        """Addresses for a pod whose status the provisioner writes."""
        return pod_status.addresses(
            await self.node_ip(pod["spec"]["nodeName"]),
            pod_status.pod_ip(self.conn.pod_cidr, str(pod["metadata"].get("uid", ""))),
        )

    async def write_pod_status(self, pod: dict[str, Any], status: dict[str, Any]) -> None:
        await self.client.patch(
            Pod.Status,
            pod["metadata"]["name"],
            {"status": status},
            namespace=pod["metadata"]["namespace"],
            patch_type=PatchType.MERGE,
            field_manager=STATUS_MANAGER,
        )

    def now(self) -> dt.datetime:
        return self.conn.now()

    async def _start_pods(self, pods: list[dict[str, Any]], w: WorkloadState) -> int:
        """Give the live pods the simulator leaves to us their first status, as a kubelet writes it
        (running, or still starting for a rollout's new revision). Returns how many were written."""
        todo = [p for p in pods if provider_pods.is_live(p) and not provider_pods.has_status(p)]
        for p in todo:
            await self.write_pod_status(
                p, provider_pods.handover_status(w, p, self.now(), await self.where(p))
            )
        return len(todo)

    async def _realise(self, w: WorkloadState, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        if w.state == "pending":  # the scheduler keeps them so; wait until it has said why
            await self._wait_pending(w, timeout)
        else:
            await self._realise_pods(w, deadline, timeout)
        if w.available is not None:
            await self._wait_available(w, max(1.0, deadline - time.monotonic()))

    async def _wait_pending(self, w: WorkloadState, timeout: float) -> None:
        """Wait until every pod of a pending workload exists and the scheduler reports Insufficient cpu."""
        await wait_until(
            lambda: self.pods_of(w),
            lambda pods: not workload_problems(w, pods),
            timeout=timeout,
            interval=0.1,
            timed_out=lambda pods: ProvisioningError(
                f"{'; '.join(workload_problems(w, pods))} after {timeout:.0f}s"
            ),
        )

    async def _wait_available(self, w: WorkloadState, timeout: float) -> None:
        """Wait for the deployment controller to write the declared Available condition."""

        async def deployment() -> dict[str, Any]:
            return cast(
                dict[str, Any], (await self.client.get(Deployment, w.name, namespace=w.namespace)).to_dict()
            )

        await wait_until(
            deployment,
            lambda dep: not available_problems(w, dep),
            timeout=timeout,
            interval=0.1,
            timed_out=lambda dep: ProvisioningError(
                f"{'; '.join(available_problems(w, dep))} after {timeout:.0f}s"
            ),
        )

    async def _realise_pods(self, w: WorkloadState, deadline: float, timeout: float) -> None:
        while True:
            pods = await self.pods_of(w)
            if w.status_by_provider and await self._start_pods(pods, w):
                continue  # read them again, with their statuses
            if w.state == "rolling":
                dep = (await self.client.get(Deployment, w.name, namespace=w.namespace)).to_dict()
                if rollout_caught_halfway(w, dep, pods):
                    return
                if time.monotonic() > deadline:
                    raise ProvisioningError(
                        f"deployment/{w.name} in {w.namespace}: no rollout in progress after "
                        f"{timeout:.0f}s ({workload_problems(w, pods)})"
                    )
                await asyncio.sleep(0.1)
                continue
            running = [p for p in pods if provider_pods.started(w, p)]
            if len(pods) == w.replicas and len(running) == w.replicas and await self._rolled_out(w):
                break
            if time.monotonic() > deadline:
                raise ProvisioningError(
                    f"{w.kind.lower()}/{w.name} in {w.namespace}: {len(running)}/{w.replicas} pods running "
                    f"after {timeout:.0f}s"
                )
            await asyncio.sleep(0.1)
        if not w.writes_pod_status:
            return
        targets = sorted(running, key=lambda p: str(p["metadata"]["name"]))
        targets = targets[: POD_STATES[w.state].fails(len(targets))]
        now = self._now()
        for p in targets:
            status = pod_status.failing_status(p, w.state, now, w.restarts, last_oom=w.last_oom, life=w.life)
            await self.write_pod_status(p, status)
            for ev in pod_status.kubelet_events(p, w.state, now, w.restarts):
                await self.create_event(ev)
