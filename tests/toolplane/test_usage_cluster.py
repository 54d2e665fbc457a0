"""Declared resource usage on the real control plane and metrics-server (decision 0059): what a
scenario declares a workload uses is what the agent's own kubeconfig reads from ``metrics.k8s.io``
before its turn, confined to its namespaces; cleanup removes the declaration; a figure that never
shows is a fault, not a turn."""

from __future__ import annotations

import copy
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


MISLEADING = "infra.capability.da.misleading-signal-001"


async def test_a_pod_share_of_its_node_and_the_node_figure_are_what_the_agent_reads(
    provisioned: Callable[[dict[str, Any]], Awaitable[tuple[EnvironmentPlan, AgentAccess]]],
    toolplane: ToolPlane,
    cluster: ClusterHandle,
) -> None:
    """The misleading-signal scenario's pegged node (decision 0065): its batch pod uses 95% of node-1's
    8 allocatable cores, and node-1 reports 97% (the pod's share plus the node's own overhead), both read
    with the agent's kubeconfig. Its ``metrics/user-service`` entry is still refused (the rising memory
    series is not planned), so the scenario is provisioned without it."""
    doc = copy.deepcopy(RAW[MISLEADING])
    state = doc["preconditions"]["environment"]["state"]
    doc["preconditions"]["environment"]["state"] = [
        e for e in state if e["resource"] != "metrics/user-service"
    ]
    plan, access = await provisioned(doc)
    [node] = plan.toolplane.nodes
    assert (node.node, node.cpu, node.overhead) == ("node-1", 7760, 160)
    await toolplane.inject(plan)
    ns = plan.namespaces["default"]
    with cluster.token_http(agent_token(access)) as agent:
        pod = agent.get(f"{METRICS}/namespaces/{ns}/pods/batch-processor-x9k2")
        assert pod.status_code == 200, pod.text
        [container] = pod.json()["containers"]
        assert abs(_millicores(container["usage"]["cpu"]) - 7600) <= 7600 * 0.05
        resp = agent.get(f"{METRICS}/nodes/node-1")
        assert resp.status_code == 200, resp.text
        cpu = _millicores(resp.json()["usage"]["cpu"])
        # 97% of 8 cores, within the CPU tolerance of decision 0059; not the pods' 95% alone.
        assert abs(cpu - 7760) <= 7760 * 0.05, cpu
        assert cpu > 7600 + 80, cpu
        assert agent.get("/api/v1/nodes/node-1").status_code == 200


def _millicores(text: str) -> float:
    scale = {"n": 1e6, "u": 1e3, "m": 1.0}
    return int(text[:-1]) / scale[text[-1]] if text[-1] in scale else float(text) * 1000
