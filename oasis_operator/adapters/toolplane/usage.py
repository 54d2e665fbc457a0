"""The resource-usage back-end's adapter: what a scenario's simulated containers use, as the metrics API
(``kubectl top``, a HorizontalPodAutoscaler) reports it through the API server (decision 0059).

Called by :class:`~oasis_operator.adapters.toolplane.ToolPlane`; turns ``plan.toolplane.usage`` into one
cluster-scoped ``ClusterResourceUsage`` per physical namespace (the node simulator computes each
container's usage from it; metrics-server scrapes the simulated kubelets and serves ``metrics.k8s.io``),
then reads every declared figure back from ``metrics.k8s.io`` as the agent would. metrics-server needs
two scrapes for a CPU rate, so a scenario with a declared usage waits for them (about 20 s) before its
turn; a figure that does not show is a :class:`~oasis_operator.core.errors.ToolPlaneError`, never a
turn on a cluster that says something else. A scenario's own node with a declared CPU usage is read back
the same way, from ``metrics.k8s.io`` nodes (its overhead is an annotation the node is created with,
decision 0065). Cluster-scoped declarations are out of a namespaced
agent's sight; the agent reads usage with its own kubeconfig, audited like any read.
"""

from __future__ import annotations

from dataclasses import dataclass

import httpx2

from oasis_operator.adapters.plumbing.apply import server_side_apply
from oasis_operator.adapters.plumbing.polling import poll
from oasis_operator.core.environment.plan import EnvironmentPlan
from oasis_operator.core.errors import ToolPlaneError
from oasis_operator.core.ports import AgentAccess, ToolEndpoint
from oasis_operator.core.toolplane import registry
from oasis_operator.core.toolplane.plan import TimedChange
from oasis_operator.core.toolplane.usage import (
    ContainerUsage,
    NodeUsage,
    declaration,
    node_shows,
    object_name,
    shows,
)

from .factory import Factory
from .probe import served

CLUSTER_USAGES = "/apis/kwok.x-k8s.io/v1alpha1/clusterresourceusages"
METRICS_API = "/apis/metrics.k8s.io/v1beta1"
FIELD_MANAGER = "oasis-resource-usage"


class ResourceUsage:
    name = registry.RESOURCE_METRICS

    def __init__(self, http: httpx2.AsyncClient, timeout: float = 60.0) -> None:
        self.http = http
        self.timeout = timeout

    # -- the port ---------------------------------------------------------------------------------------
    async def inject(self, plan: EnvironmentPlan) -> None:
        by_namespace: dict[str, list[ContainerUsage]] = {}
        for u in plan.toolplane.usage:
            by_namespace.setdefault(u.namespace, []).append(u)
        for namespace, usages in sorted(by_namespace.items()):
            doc = declaration(namespace, usages)
            refused = await server_side_apply(
                self.http, f"{CLUSTER_USAGES}/{object_name(namespace)}", doc, FIELD_MANAGER
            )
            if refused:
                raise ToolPlaneError(f"declaring the resource usage of {namespace}: {refused}")
        for u in plan.toolplane.usage:
            await self._read_back(u)
        for n in plan.toolplane.nodes:
            await self._read_back_node(n)

    async def apply(self, plan: EnvironmentPlan, change: TimedChange) -> None:
        raise ToolPlaneError(f"the resource-usage back-end applies no timed change (at {change.at:g}s)")

    async def endpoint(self, plan: EnvironmentPlan, access: AgentAccess) -> ToolEndpoint | None:
        return None  # read through the API server (metrics.k8s.io) with the agent's kubeconfig

    async def settle(self, plan: EnvironmentPlan) -> None:
        return None

    async def probe(self) -> str:
        """The preflight's self-test: the API server serves pod metrics (metrics-server is registered
        and available) and the declarations the usage is written to."""
        checked = await served(self.http, METRICS_API, "pods")
        return (
            f"{checked}; {await served(self.http, CLUSTER_USAGES.rsplit('/', 1)[0], 'clusterresourceusages')}"
        )

    async def cleanup(self, plan: EnvironmentPlan) -> None:
        for namespace in sorted(set(plan.namespaces.values())):
            resp = await self.http.delete(f"{CLUSTER_USAGES}/{object_name(namespace)}")
            if resp.status_code not in (200, 202, 404):
                raise ToolPlaneError(f"removing the resource usage of {namespace}: HTTP {resp.status_code}")

    # -- helpers ----------------------------------------------------------------------------------------
    async def _pods(self, u: ContainerUsage) -> list[str]:
        if u.pod is not None:
            return [u.pod]
        selector = ",".join(f"{k}={v}" for k, v in u.selector)
        resp = await self.http.get(
            f"/api/v1/namespaces/{u.namespace}/pods", params={"labelSelector": selector}
        )
        if resp.status_code != 200:
            raise ToolPlaneError(f"listing the pods of {u.namespace}/{u.workload}: HTTP {resp.status_code}")
        return sorted(
            p["metadata"]["name"]
            for p in resp.json().get("items") or []
            if not p["metadata"].get("deletionTimestamp")
        )

    async def _read_back(self, u: ContainerUsage) -> None:
        pods = await self._pods(u)
        if not pods:
            raise ToolPlaneError(f"{u.source}: no pod of {u.namespace}/{u.workload} to use it")

        async def missing() -> list[str]:
            out = []
            for pod in pods:
                resp = await self.http.get(f"{METRICS_API}/namespaces/{u.namespace}/pods/{pod}")
                why = shows(u, resp.json()) if resp.status_code == 200 else f"HTTP {resp.status_code}"
                if why is not None:
                    out.append(f"{pod}: {why}")
            return out

        polled = await poll(missing, lambda m: not m, timeout=self.timeout, interval=1.0)
        if not polled.met:
            raise ToolPlaneError(
                f"{u.source}: the metrics API does not show the declared usage after {self.timeout:.0f}s "
                f"({'; '.join(polled.value[:3])})"
            )

    async def _read_back_node(self, n: NodeUsage) -> None:
        """The node's CPU as ``kubectl top node`` reads it: its pods' and its own overhead (decision 0065)."""

        async def missing() -> str | None:
            resp = await self.http.get(f"{METRICS_API}/nodes/{n.node}")
            return node_shows(n, resp.json()) if resp.status_code == 200 else f"HTTP {resp.status_code}"

        polled = await poll(missing, lambda m: m is None, timeout=self.timeout, interval=1.0)
        if not polled.met:
            raise ToolPlaneError(
                f"{n.source}: the metrics API does not show the declared node usage after "
                f"{self.timeout:.0f}s ({polled.value})"
            )


@dataclass(frozen=True)
class UsageSettings:
    """The resource-usage back-end needs nothing but the API server (metrics-server serves the node
    simulator's usage through it): its entry of the tool-plane file only says it runs."""


FACTORY = Factory(
    registry.RESOURCE_METRICS,
    UsageSettings,
    build=lambda plane, _: ResourceUsage(plane.cluster.http),
    parse=lambda _: UsageSettings(),
)
