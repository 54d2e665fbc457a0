"""The join of the two tool-plane seams (decision 0056): the provider's back-ends
(:class:`~oasis_operator.core.ports.ToolPlanePort`) seen through the recording gateway's ports.

- :class:`PortUpstreams` (a :class:`~oasis_operator.core.gateway.port.ToolUpstreamsPort`): every
  endpoint a back-end hands out becomes the gateway's upstream for that interface type, its credential
  (if any) turned into the header the gateway adds (never shown to the agent). The interfaces read
  through the API server with the agent's kubeconfig (logs, dashboards;
  ``registry.THROUGH_THE_API_SERVER``) are audited there, so they stay out of the gateway.
- :class:`PortApplier` (a :class:`~oasis_operator.core.gateway.port.StimulusApplier`): a temporal
  condition's declared change (:mod:`oasis_operator.core.stimuli.changes`) becomes a
  :class:`~oasis_operator.core.toolplane.plan.TimedChange` given to the port's ``apply``, the same
  path as the plan's timed log lines.

:func:`gateway_ports` puts them together with a gateway, as the operator's start-up and the tests do.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from oasis_operator.core.environment.plan import EnvironmentPlan
from oasis_operator.core.errors import ToolPlaneError
from oasis_operator.core.gateway.calls import upstream_authorization
from oasis_operator.core.gateway.port import GatewayPorts, ToolGatewayPort, Upstream
from oasis_operator.core.ports import AgentAccess, ToolPlanePort
from oasis_operator.core.stimuli.changes import AlertFires, declared_change
from oasis_operator.core.stimuli.injection import field_of
from oasis_operator.core.toolplane import registry
from oasis_operator.core.toolplane.plan import TimedChange

__all__ = ["PortApplier", "PortUpstreams", "gateway_ports", "plan_nodes", "plan_pending_alerts"]


class PortUpstreams:
    def __init__(self, port: ToolPlanePort) -> None:
        self.port = port

    async def upstreams(self, plan: Any, access: Any, interfaces: Sequence[str]) -> Mapping[str, Upstream]:
        assert isinstance(plan, EnvironmentPlan)
        assert isinstance(access, AgentAccess)
        wanted = set(interfaces)
        out: dict[str, Upstream] = {}
        for interface, ep in sorted((await self.port.endpoints(plan, access)).items()):
            if interface not in wanted or interface in registry.THROUGH_THE_API_SERVER:
                continue
            # A back-end isolated per scenario without a credential (a Jaeger of its own) is fronted all the
            # same: the agent reaches it only through its route, and every call is recorded.
            headers = (("Authorization", upstream_authorization(ep.credential)),) if ep.credential else ()
            out[interface] = Upstream(interface, ep.url, headers)
        return out


def plan_pending_alerts(plan: EnvironmentPlan) -> frozenset[str]:
    """The alerts the scenario declares pending (the only ones a change may make fire)."""
    return frozenset(r.name for r in plan.toolplane.alerts if r.state == "pending")


def plan_nodes(plan: EnvironmentPlan) -> frozenset[str]:
    """The scenario's own nodes (the only ones a change may touch)."""
    return frozenset(
        str((m.get("metadata") or {}).get("name")) for m in plan.manifests if m.get("kind") == "Node"
    )


class PortApplier:
    def __init__(self, port: ToolPlanePort) -> None:
        self.port = port

    async def apply(self, plan: Any, index: int, stimulus: Any) -> None:
        assert isinstance(plan, EnvironmentPlan)
        try:
            change = declared_change(
                field_of(stimulus, "description"), plan_nodes(plan), plan_pending_alerts(plan)
            )
        except ValueError as exc:  # refused by the support check first; a caller that skipped it gets a fault
            raise ToolPlaneError(f"stimuli[{index}]: {exc}") from None
        if isinstance(change, AlertFires):
            await self.port.apply(plan, TimedChange(0.0, registry.ALERTS, alert=change.name))
        else:
            await self.port.apply(plan, TimedChange(0.0, registry.NODE_CONDITIONS, node=change))


def gateway_ports(gateway: ToolGatewayPort, port: ToolPlanePort) -> GatewayPorts:
    """The gateway in front of the port's back-ends, and the port as the applier of temporal conditions."""
    return GatewayPorts(gateway=gateway, upstreams=PortUpstreams(port), applier=PortApplier(port))
