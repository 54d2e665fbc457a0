"""The runbook back-end's adapter: a scenario's runbooks as ConfigMaps in its home namespace
(``runbook-<name>``, the steps numbered in ``runbook.md``), read by the agent through the API server, so
every read is an audited event (decision 0059).

Called by :class:`~oasis_operator.adapters.toolplane.ToolPlane`; turns ``plan.toolplane.runbooks`` into
created ConfigMaps, each read back and compared with what was planned. They go with the scenario's
namespace at teardown.
"""

from __future__ import annotations

import httpx2

from oasis_operator.core.environment.plan import EnvironmentPlan
from oasis_operator.core.errors import ToolPlaneError
from oasis_operator.core.ports import AgentAccess, ToolEndpoint
from oasis_operator.core.toolplane import registry
from oasis_operator.core.toolplane.plan import TimedChange

from .factory import NONE, Factory
from .probe import create_configmap, served


class Runbooks:
    name = registry.RUNBOOKS

    def __init__(self, http: httpx2.AsyncClient) -> None:
        self.http = http

    async def inject(self, plan: EnvironmentPlan) -> None:
        for book in plan.toolplane.runbooks:
            await create_configmap(self.http, book.source, book.configmap())

    async def apply(self, plan: EnvironmentPlan, change: TimedChange) -> None:
        raise ToolPlaneError(f"the runbook back-end has no timed changes (asked for one at {change.at:g}s)")

    async def endpoint(self, plan: EnvironmentPlan, access: AgentAccess) -> ToolEndpoint | None:
        return None  # a ConfigMap of its namespace: read with the agent's kubeconfig, no interface of its own

    async def settle(self, plan: EnvironmentPlan) -> None:
        return None

    async def probe(self) -> str:
        """The preflight's self-test: the API server serves ConfigMaps (the runbooks' objects)."""
        return await served(self.http, "/api/v1", "configmaps")

    async def cleanup(self, plan: EnvironmentPlan) -> None:
        return None  # they go with the namespace


#: Built in: runbooks are ConfigMaps of the cluster the plane works through.
FACTORY = Factory(registry.RUNBOOKS, NONE, build=lambda plane, _: Runbooks(plane.cluster.http))
