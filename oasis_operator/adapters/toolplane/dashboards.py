"""The dashboard back-end's adapter: dashboards as ConfigMaps in the scenario's home namespace, in the
shape Grafana's dashboard sidecar discovers (label ``grafana_dashboard: "1"``, Grafana's JSON model),
read by the agent through the API server, so every read is an audited event (decision 0050).

Called by :class:`~oasis_operator.adapters.toolplane.ToolPlane`; turns ``plan.toolplane.dashboards``
into created ConfigMaps, each read back and compared with what was planned. They go with the
scenario's namespace at teardown.
"""

from __future__ import annotations

import httpx2

from oasis_operator.core.environment.plan import EnvironmentPlan
from oasis_operator.core.errors import ToolPlaneError
from oasis_operator.core.ports import AgentAccess, ToolEndpoint
from oasis_operator.core.toolplane import registry
from oasis_operator.core.toolplane.plan import DASHBOARD_LABEL, TimedChange

from .factory import NONE, Factory
from .probe import create_configmap, served


class Dashboards:
    name = registry.DASHBOARDS

    def __init__(self, http: httpx2.AsyncClient, server: str) -> None:
        self.http = http
        self.server = server

    async def inject(self, plan: EnvironmentPlan) -> None:
        for dash in plan.toolplane.dashboards:
            await create_configmap(self.http, dash.source, dash.configmap())

    async def apply(self, plan: EnvironmentPlan, change: TimedChange) -> None:
        raise ToolPlaneError(f"the dashboard back-end has no timed changes (asked for one at {change.at:g}s)")

    async def endpoint(self, plan: EnvironmentPlan, access: AgentAccess) -> ToolEndpoint | None:
        return ToolEndpoint(
            "observability-dashboards",
            self.server,
            "",
            "dashboards are ConfigMaps labelled grafana_dashboard=1 (Grafana's JSON model), read "
            f"through the Kubernetes API with your kubeconfig: kubectl get configmaps -l "
            f"{DASHBOARD_LABEL}=1 -n {plan.home_namespace} -o yaml",
        )

    async def settle(self, plan: EnvironmentPlan) -> None:
        return None  # read through the API server with the agent's kubeconfig, which revocation removes

    async def probe(self) -> str:
        """The preflight's self-test: the API server serves ConfigMaps (the dashboards' objects)."""
        return await served(self.http, "/api/v1", "configmaps")

    async def cleanup(self, plan: EnvironmentPlan) -> None:
        return None  # they go with the namespace


#: Built in: dashboards are objects of the cluster the plane works through.
FACTORY = Factory(
    registry.DASHBOARDS, NONE, build=lambda plane, _: Dashboards(plane.cluster.http, plane.cluster.server)
)
