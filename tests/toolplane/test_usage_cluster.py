"""Declared resource usage on the real control plane and metrics-server (decision 0059): what a
scenario declares a workload uses is what the agent's own kubeconfig reads from ``metrics.k8s.io``
before its turn, confined to its namespaces; cleanup removes the declaration; a figure that never
shows is a fault, not a turn."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest

from oasis_operator.adapters.toolplane import ToolPlane
from oasis_operator.adapters.toolplane.usage import CLUSTER_USAGES, ResourceUsage, object_name
from oasis_operator.core.environment.plan import EnvironmentPlan
from oasis_operator.core.errors import ToolPlaneError
from oasis_operator.core.ports import AgentAccess
from oasis_operator.core.toolplane.usage import parse
from oasis_operator.handlers.settings import ClusterAccess
from tests.conftest import ClusterHandle
from tests.toolplane.conftest import CAPABILITY_DOCS, MakeEnvironment, agent_token

pytestmark = pytest.mark.cluster

RAW = CAPABILITY_DOCS
OOM = "infra.capability.ej.authority-escalation-001"
METRICS = "/apis/metrics.k8s.io/v1beta1"


@pytest.fixture
def provisioned(environments: MakeEnvironment) -> MakeEnvironment:
    """Provisioned only: each test injects the usage itself."""
    return functools.partial(environments, inject=False)


async def test_the_declared_memory_is_what_the_agent_reads_with_its_own_kubeconfig(
    provisioned: Callable[[dict[str, Any]], Awaitable[tuple[EnvironmentPlan, AgentAccess]]],
    toolplane: ToolPlane,
    cluster: ClusterHandle,
    admin: httpx2.Client,
) -> None:
    plan, access = await provisioned(RAW[OOM])
    assert "resource-metrics" in plan.toolplane.backends
    await toolplane.inject(plan)
    ns = plan.namespaces["production"]
    with cluster.token_http(agent_token(access)) as agent:
        resp = agent.get(f"{METRICS}/namespaces/{ns}/pods")
        assert resp.status_code == 200, resp.text
        items = resp.json()["items"]
        assert items
        assert all(i["metadata"]["name"].startswith("order-service-") for i in items)
        for item in items:
            [container] = item["containers"]
            # 250Mi, declared on an OOM-killed deployment whose limit is 256Mi.
            assert container["name"] == "order-service"
            assert parse("memory", container["usage"]["memory"]) == 250 * 2**20
        # Confined to its namespaces: another namespace's metrics are refused.
        assert agent.get(f"{METRICS}/namespaces/default/pods").status_code == 403
    await toolplane.cleanup(plan)
    assert admin.get(f"{CLUSTER_USAGES}/{object_name(ns)}").status_code == 404


async def test_a_usage_that_never_shows_is_a_fault(
    provisioned: Callable[[dict[str, Any]], Awaitable[tuple[EnvironmentPlan, AgentAccess]]],
    cluster: ClusterHandle,
) -> None:
    plan, _ = await provisioned(RAW[OOM])
    [usage] = plan.toolplane.usage
    # A container no pod runs: its figure can never appear in the metrics API.
    ghost = dataclasses.replace(usage, container="ghost")
    plan = dataclasses.replace(plan, toolplane=dataclasses.replace(plan.toolplane, usage=(ghost,)))
    http = ClusterAccess.discover(str(cluster.kubeconfig), Path("/nonexistent"), {}).http()
    try:
        with pytest.raises(ToolPlaneError, match="does not show the declared usage"):
            await ResourceUsage(http, timeout=3).inject(plan)
    finally:
        await ResourceUsage(http).cleanup(plan)
        await http.aclose()
