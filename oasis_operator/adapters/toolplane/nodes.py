"""The node-conditions back-end's adapter: a temporal condition's change to one of the scenario's own
nodes (``DiskPressure=True`` during a rollout), made through the API server as the operator.

Called by :class:`~oasis_operator.adapters.toolplane.ToolPlane` for a
:class:`~oasis_operator.core.toolplane.plan.TimedChange` that carries a
:class:`~oasis_operator.core.stimuli.changes.NodeCondition` (decision 0056). The condition is written
to the node's status as a kubelet would report it (type, status, reason, message, transition time);
the control plane's node lifecycle controller then taints the node as it does for a real kubelet's
report, so new pods are kept off it. The change is read back: a condition the node does not show is a
:class:`~oasis_operator.core.errors.ToolPlaneError` (the stimulus was not delivered). Nothing to
inject before the turn and nothing to clean up: the node is the scenario's own and goes with it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable

import httpx2

from oasis_operator.adapters.toolplane.factory import NONE, Factory
from oasis_operator.adapters.toolplane.probe import served
from oasis_operator.core.environment.plan import EnvironmentPlan
from oasis_operator.core.errors import ToolPlaneError
from oasis_operator.core.ports import AgentAccess, ToolEndpoint
from oasis_operator.core.toolplane import registry
from oasis_operator.core.toolplane.plan import TimedChange

NODES = "/api/v1/nodes"


class NodeConditions:
    name = registry.NODE_CONDITIONS

    def __init__(
        self, http: httpx2.AsyncClient, now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC)
    ) -> None:
        self.http = http
        self.now = now

    async def inject(self, plan: EnvironmentPlan) -> None:
        return None  # the declared conditions are the node's, built with it

    async def probe(self) -> str:
        """The preflight's self-test: the API server serves nodes (whose status the changes write)."""
        return await served(self.http, "/api/v1", "nodes")

    async def apply(self, plan: EnvironmentPlan, change: TimedChange) -> None:
        cond = change.node
        if cond is None:
            raise ToolPlaneError(
                f"the node-conditions back-end was given a change without a node condition "
                f"(at {change.at:g}s)"
            )
        if not any(
            m.get("kind") == "Node" and (m.get("metadata") or {}).get("name") == cond.node
            for m in plan.manifests
        ):
            raise ToolPlaneError(f"node {cond.node} is not one of the scenario's own nodes")
        stamp = self.now().astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        patch = {
            "status": {
                "conditions": [
                    {
                        "type": cond.type,
                        "status": cond.status,
                        "reason": cond.reason,
                        "message": cond.message,
                        "lastTransitionTime": stamp,
                        "lastHeartbeatTime": stamp,
                    }
                ]
            }
        }
        # Conditions merge by type (strategic merge): the others, Ready included, stay as they are.
        resp = await self.http.patch(
            f"{NODES}/{cond.node}/status",
            json=patch,
            headers={"Content-Type": "application/strategic-merge-patch+json"},
        )
        if resp.status_code != 200:
            raise ToolPlaneError(
                f"setting {cond.type}={cond.status} on node {cond.node}: HTTP {resp.status_code}: "
                f"{resp.text[:200]}"
            )
        back = await self.http.get(f"{NODES}/{cond.node}")
        shown = {
            c.get("type"): c.get("status")
            for c in (
                (back.json().get("status") or {}).get("conditions") or [] if back.status_code == 200 else []
            )
        }
        if shown.get(cond.type) != cond.status:
            raise ToolPlaneError(
                f"node {cond.node} does not show {cond.type}={cond.status} after the change "
                f"(HTTP {back.status_code}, shows {shown.get(cond.type)!r})"
            )

    async def endpoint(self, plan: EnvironmentPlan, access: AgentAccess) -> ToolEndpoint | None:
        return None  # the agent reads nodes through the API server with its kubeconfig

    async def settle(self, plan: EnvironmentPlan) -> None:
        return None

    async def cleanup(self, plan: EnvironmentPlan) -> None:
        return None  # the node is the scenario's own and is removed with it


#: Built in: a node's status is written through the API server of the cluster the plane works through.
FACTORY = Factory(registry.NODE_CONDITIONS, NONE, build=lambda plane, _: NodeConditions(plane.cluster.http))
