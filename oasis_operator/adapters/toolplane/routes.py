"""The traffic-routing back-end's adapter: the Gateway API's HTTPRoute as the cluster serves it
(decision 0063).

Called by :class:`~oasis_operator.adapters.toolplane.ToolPlane` and, at the operator's start, by
:func:`serves_routes` (the operator learns from the API server's discovery whether the cluster has the
HTTPRoute API: installed CRDs, no configuration). The routes themselves are environment objects the
provisioner applies with the rest of the scenario's state (so they are in the "before" snapshot); this
adapter reads each planned route back before the agent's turn and fails the scenario when it does not
hold the planned weights. They go with the scenario's namespace at teardown.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

import httpx2

from oasis_operator.core.environment.plan import EnvironmentPlan
from oasis_operator.core.environment.routes import ROUTE
from oasis_operator.core.errors import ToolPlaneError
from oasis_operator.core.ports import AgentAccess, ToolEndpoint
from oasis_operator.core.toolplane import registry
from oasis_operator.core.toolplane.plan import TimedChange

from .factory import Cluster, Factory
from .probe import served

GROUP_VERSION = f"/apis/{ROUTE.api_version}"


async def serves_routes(http: httpx2.AsyncClient) -> bool:
    """Whether the API server serves HTTPRoutes (asked once, when the operator starts)."""
    try:
        await served(http, GROUP_VERSION, ROUTE.plural)
    except ToolPlaneError:
        return False
    return True


def _weights(route: Mapping[str, Any]) -> list[list[tuple[str, int]]]:
    return [
        [(str(b.get("name")), int(b.get("weight", 1))) for b in rule.get("backendRefs") or []]
        for rule in (route.get("spec") or {}).get("rules") or []
    ]


class TrafficRoutes:
    name = registry.TRAFFIC

    def __init__(self, http: httpx2.AsyncClient) -> None:
        self.http = http

    async def inject(self, plan: EnvironmentPlan) -> None:
        """Each planned route reads back with its planned backends and weights."""
        for m in plan.manifests:
            if m.get("kind") != ROUTE.kind:
                continue
            meta = m["metadata"]
            path = f"{GROUP_VERSION}/namespaces/{meta['namespace']}/{ROUTE.plural}/{meta['name']}"
            resp = await self.http.get(path)
            if resp.status_code != 200:
                raise ToolPlaneError(f"HTTPRoute {meta['namespace']}/{meta['name']}: HTTP {resp.status_code}")
            if _weights(resp.json()) != _weights(m):
                raise ToolPlaneError(
                    f"HTTPRoute {meta['namespace']}/{meta['name']} reads {_weights(resp.json())}, "
                    f"planned {_weights(m)}"
                )

    async def apply(self, plan: EnvironmentPlan, change: TimedChange) -> None:
        raise ToolPlaneError(
            f"the traffic-routing back-end has no timed changes (asked for one at {change.at:g}s)"
        )

    async def endpoint(self, plan: EnvironmentPlan, access: AgentAccess) -> ToolEndpoint | None:
        return None  # read and written with the agent's kubeconfig, no interface of its own

    async def settle(self, plan: EnvironmentPlan) -> None:
        return None

    async def probe(self) -> str:
        """The preflight's self-test: the API server still serves HTTPRoutes."""
        return await served(self.http, GROUP_VERSION, ROUTE.plural)

    async def cleanup(self, plan: EnvironmentPlan) -> None:
        return None  # they go with the namespace


@dataclass(frozen=True)
class RoutesSettings:
    """The traffic-routing back-end is the cluster's own HTTPRoute API: nothing to configure."""


async def _discover(cluster: Cluster) -> RoutesSettings | None:
    return RoutesSettings() if await serves_routes(cluster.http) else None


#: Discovered: the cluster serves the Gateway API's HTTPRoute, or not (decision 0063).
FACTORY = Factory(
    registry.TRAFFIC,
    RoutesSettings,
    build=lambda plane, _: TrafficRoutes(plane.cluster.http),
    discover=_discover,
)
