"""Declared resource usage on the real control plane and metrics-server (decision 0059): what a
scenario declares a workload uses is what the agent's own kubeconfig reads from ``metrics.k8s.io``
before its turn, confined to its namespaces; cleanup removes the declaration; a figure that never
shows is a fault, not a turn."""

from __future__ import annotations

import copy
import dataclasses
import glob
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml

from oasis_operator.adapters.k8s.environment import KubeEnvironment
from oasis_operator.adapters.toolplane import ToolPlane
from oasis_operator.adapters.toolplane.usage import CLUSTER_USAGES, ResourceUsage, object_name
from oasis_operator.core.environment.naming import owner_value
from oasis_operator.core.environment.plan import EnvironmentPlan, plan_environment
from oasis_operator.core.errors import ToolPlaneError
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.core.ports import AgentAccess
from oasis_operator.core.toolplane.usage import parse
from oasis_operator.devcluster import kube
from oasis_operator.handlers.settings import ClusterAccess
from tests.conftest import SPEC_DIR, ClusterHandle

pytestmark = pytest.mark.cluster

CAPABILITY_DIR = SPEC_DIR / "profiles" / "software-infrastructure" / "scenarios" / "capability"
RAW = {
    d["id"]: d
    for p in sorted(glob.glob(str(CAPABILITY_DIR / "*.yaml")))
    for d in yaml.safe_load_all(Path(p).read_text())
    if isinstance(d, dict) and "id" in d
}
OOM = "infra.capability.ej.authority-escalation-001"
METRICS = "/apis/metrics.k8s.io/v1beta1"


@pytest.fixture
async def provisioned(env: KubeEnvironment, toolplane: ToolPlane) -> Any:
    made: list[EnvironmentPlan] = []

    async def make(doc: dict[str, Any]) -> tuple[EnvironmentPlan, AgentAccess]:
        suffix = kube.random_suffix()
        plan = plan_environment(
            parse_scenario(copy.deepcopy(doc))[0],
            suffix=suffix,
            owner=owner_value("usage", f"{doc['id']}/{suffix}"),
            backends=toolplane.backends,
        )
        assert plan.supported, plan.unsupported
        made.append(plan)
        return plan, await env.provision(plan)

    yield make
    for plan in made:
        await toolplane.cleanup(plan)
        await env.teardown(plan.namespaces.values(), plan.owner, timeout=0)


def _token(access: AgentAccess) -> str:
    doc = yaml.safe_load(access.kubeconfig)
    return str(doc["users"][0]["user"]["token"])


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
    with cluster.token_http(_token(access)) as agent:
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
