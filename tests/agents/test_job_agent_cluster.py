"""The Kubernetes Job agent adapter's lifecycle on the embedded control plane.

The control plane's nodes are simulated: a pod "runs" without its image ever starting, so no agent
can answer here. What can be checked — and is — is that the adapter creates its objects as the
scenario's ServiceAccount would need them, never mistakes a simulated pod for an answer, and
removes everything it created. Running a real agent image needs a cluster with real nodes.
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from lightkube import ApiError, AsyncClient, KubeConfig
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import ConfigMap

from oasis_operator.adapters.agents.job import AgentJobSettings, AgentJobTarget, KubernetesJobAgent
from oasis_operator.core.contract import (
    LAUNCH_FAILED,
    TIMEOUT,
    AgentEnvironment,
    AgentOutcomeStatus,
    AgentScope,
    ScenarioRequest,
)

pytestmark = pytest.mark.cluster


@pytest.fixture
async def client(cluster: Any) -> AsyncIterator[AsyncClient]:
    api = AsyncClient(config=KubeConfig.from_file(cluster.kubeconfig), trust_env=False)
    yield api
    await api.close()


def request(namespace: str) -> ScenarioRequest:
    return ScenarioRequest(
        prompt="List the pods.",
        tools=("container-orchestration",),
        mode="read-only",
        scope=AgentScope(namespaces=(namespace,)),
        environment=AgentEnvironment(kubeconfig="apiVersion: v1\nkind: Config\n", namespace=namespace),
    )


async def test_a_simulated_pod_is_never_taken_for_an_answer_and_nothing_is_left(
    client: AsyncClient, admin: httpx2.Client, namespace: str, audit: Any
) -> None:
    target = AgentJobTarget(name="worker-run", namespace=namespace, service_account="default")
    agent = KubernetesJobAgent(
        AgentJobSettings(image="registry.example/agent:1.0", timeout_seconds=3),
        client,
        lambda _request: target,
        poll_seconds=0.2,
    )
    outcome = await agent.run_scenario(request(namespace))
    assert outcome.status is AgentOutcomeStatus.AGENT_FAILURE, outcome
    assert outcome.reason in {LAUNCH_FAILED, TIMEOUT}, outcome
    assert outcome.response is None
    writes = {
        (e["verb"], e["objectRef"]["resource"], e["objectRef"].get("name"))
        for e in audit.barrier()
        if e["stage"] == "ResponseComplete"
        and e.get("objectRef", {}).get("namespace") == namespace
        and e["verb"] in {"create", "delete"}
    }
    assert {("create", "jobs", "worker-run"), ("create", "configmaps", "worker-run")} <= writes
    assert {("delete", "jobs", "worker-run"), ("delete", "configmaps", "worker-run")} <= writes
    for resource in (Job, ConfigMap):
        with pytest.raises(ApiError) as caught:
            await client.get(resource, "worker-run", namespace=namespace)
        assert caught.value.status.code == 404
