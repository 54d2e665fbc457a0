"""The ports of one scenario on the session's control plane, as the cluster tests wire them: the
environment provider and audit source of the fixtures, the sentinel sent as the cluster admin, the
admin as the harness principal (with the tool plane's own, when there is one)."""

from __future__ import annotations

from typing import Any

import httpx2

from oasis_operator.adapters.k8s.client import sentinel_sender
from oasis_operator.core.gateway.port import GatewayPorts
from oasis_operator.core.ports import AgentPort, AuditPort, EnvironmentPort, ToolPlanePort
from oasis_operator.workflows.scenario import ScenarioPorts, ScenarioTimeouts

#: The API server's admin: the harness acts as it on the session cluster.
ADMIN = "kubernetes-admin"
#: Bounds that hold under load on a shared machine.
ON_CLUSTER = ScenarioTimeouts(agent=60, barrier=10, teardown=30)


def cluster_ports(
    env: EnvironmentPort,
    audit: AuditPort,
    http: httpx2.AsyncClient,
    agent: AgentPort | Any,
    *,
    timeouts: ScenarioTimeouts = ON_CLUSTER,
    toolplane: ToolPlanePort | None = None,
    tool_gateway: GatewayPorts | None = None,
    harness: tuple[str, ...] = (ADMIN,),
) -> ScenarioPorts:
    """``agent``'s scenario ports on the cluster ``http`` reaches as its admin."""
    return ScenarioPorts(
        env=env,
        audit=audit,
        send_sentinel=sentinel_sender(http),
        agent=agent,
        toolplane=toolplane,
        tool_gateway=tool_gateway,
        harness_principals=harness,
        timeouts=timeouts,
    )
