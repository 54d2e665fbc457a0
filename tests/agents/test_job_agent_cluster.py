"""The Kubernetes Job agent adapter's lifecycle on the embedded control plane.

The control plane's nodes are simulated: a pod "runs" without its image ever starting, so no agent
can answer here. What can be checked — and is — is that the adapter creates its objects as the
scenario's ServiceAccount would need them, never mistakes a simulated pod for an answer, and
removes everything it created. Running a real agent image needs a cluster with real nodes.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest
from lightkube import AsyncClient, KubeConfig
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import ConfigMap

from oasis_operator.adapters.agents.job import AgentJobSettings, AgentJobTarget, KubernetesJobAgent
from oasis_operator.adapters.agents.job_objects import IDENTITY_LABEL, sweep_identity_places
from oasis_operator.core.contract import (
    LAUNCH_FAILED,
    TIMEOUT,
    AgentEnvironment,
    AgentOutcomeStatus,
    AgentScope,
    ScenarioRequest,
)
from oasis_operator.core.errors import AgentUnavailable

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


async def ours(client: AsyncClient, kind: Any, namespace: str, prefix: str) -> list[str]:
    return [
        str(o.metadata.name)
        async for o in client.list(kind, namespace=namespace)
        if o.metadata is not None and str(o.metadata.name).startswith(prefix)
    ]


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
    events = [
        e
        for e in audit.barrier()
        if e["stage"] == "ResponseComplete"
        and e.get("objectRef", {}).get("namespace") == namespace
        and e["verb"] in {"create", "delete"}
        and e["objectRef"]["resource"] in {"jobs", "configmaps"}
    ]
    created = {
        (e["objectRef"]["resource"], e["responseObject"]["metadata"]["name"])
        for e in events
        if e["verb"] == "create" and e.get("responseObject")
    }
    deleted = {
        (e["objectRef"]["resource"], e["objectRef"].get("name")) for e in events if e["verb"] == "delete"
    }
    assert {r for r, _ in created} == {"jobs", "configmaps"}
    assert all(name.startswith("worker-run-") for _, name in created), created
    assert created <= deleted
    for resource in (Job, ConfigMap):
        assert await ours(client, resource, namespace, "worker-run") == []


async def test_an_object_someone_else_named_like_the_agent_s_is_never_deleted(
    client: AsyncClient, admin: httpx2.Client, namespace: str
) -> None:
    """A name collision used to make the adapter delete the object that was there (M-3)."""
    mine = {}
    for kind, doc in (
        (
            "configmaps",
            {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "worker-run"}, "data": {"k": "v"}},
        ),
        (
            "jobs",
            {
                "apiVersion": "batch/v1",
                "kind": "Job",
                "metadata": {"name": "worker-run"},
                "spec": {
                    "suspend": True,
                    "template": {
                        "spec": {
                            "restartPolicy": "Never",
                            "containers": [{"name": "c", "image": "busybox:1.36"}],
                        }
                    },
                },
            },
        ),
    ):
        group = "/api/v1" if kind == "configmaps" else "/apis/batch/v1"
        made = admin.post(f"{group}/namespaces/{namespace}/{kind}", json=doc)
        assert made.status_code == 201, made.text
        mine[kind] = (group, made.json()["metadata"]["uid"])
    target = AgentJobTarget(name="worker-run", namespace=namespace, service_account="default")
    agent = KubernetesJobAgent(
        AgentJobSettings(image="registry.example/agent:1.0", timeout_seconds=2),
        client,
        lambda _r: target,
        poll_seconds=0.2,
    )
    await agent.run_scenario(request(namespace))
    for kind, (group, uid) in mine.items():
        still = admin.get(f"{group}/namespaces/{namespace}/{kind}/worker-run")
        assert still.status_code == 200, (kind, still.text)
        assert still.json()["metadata"]["uid"] == uid
        assert not still.json()["metadata"].get("deletionTimestamp")


async def test_the_identity_question_runs_without_a_token_in_a_place_of_its_own_then_removed(
    client: AsyncClient, admin: httpx2.Client, namespace: str
) -> None:
    """Before any scenario, the agent's image is unjudged: it gets no token, no network and none of
    the run's namespace, and its place is gone afterwards (M-3)."""
    run = f"{namespace}.my-run"
    agent = KubernetesJobAgent(
        AgentJobSettings(image="registry.example/agent:1.0", identity_timeout_seconds=4),
        client,
        lambda _r: None,
        identity_job_name="my-run-identity",
        identity_run=run,
        poll_seconds=0.2,
    )
    seen: dict[str, Any] = {}

    async def watch() -> None:
        while not seen.get("job"):
            places = admin.get(
                "/api/v1/namespaces", params={"labelSelector": f"{IDENTITY_LABEL}={run}"}
            ).json()["items"]
            for place in places:
                name = place["metadata"]["name"]
                jobs = admin.get(f"/apis/batch/v1/namespaces/{name}/jobs").json()["items"]
                policies = admin.get(f"/apis/networking.k8s.io/v1/namespaces/{name}/networkpolicies").json()[
                    "items"
                ]
                if jobs:
                    seen.update(place=name, job=jobs[0], policies=policies)
            await asyncio.sleep(0.2)

    watcher = asyncio.create_task(watch())
    with pytest.raises(AgentUnavailable):
        await agent.identify()  # simulated nodes: no answer, in time
    watcher.cancel()
    assert seen, "the identity Job ran in a namespace made for it"
    assert seen["place"].startswith("agent-")
    assert seen["place"] != namespace
    spec = seen["job"]["spec"]["template"]["spec"]
    assert spec["automountServiceAccountToken"] is False
    assert spec["serviceAccountName"] == "default"
    assert seen["job"]["metadata"]["name"].startswith("my-run-identity-")
    assert [p["spec"] for p in seen["policies"]] == [
        {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]}
    ]
    place = admin.get(f"/api/v1/namespaces/{seen['place']}")
    assert place.status_code == 404 or place.json()["metadata"].get("deletionTimestamp")
    assert admin.get(f"/apis/batch/v1/namespaces/{namespace}/jobs").json()["items"] == []


async def test_identity_places_a_crash_left_are_swept_and_nothing_else(
    client: AsyncClient, admin: httpx2.Client
) -> None:
    left = admin.post(
        "/api/v1/namespaces",
        json={
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"generateName": "agent-", "labels": {IDENTITY_LABEL: "x.y"}},
        },
    ).json()["metadata"]["name"]
    other = admin.post(
        "/api/v1/namespaces",
        json={
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {"generateName": "agent-", "labels": {"team": "x"}},
        },
    ).json()["metadata"]["name"]
    try:
        now = dt.datetime.now(dt.UTC)
        assert left not in await sweep_identity_places(client, older_than=dt.timedelta(hours=1), now=now)
        swept = await sweep_identity_places(
            client, older_than=dt.timedelta(0), now=now + dt.timedelta(seconds=5)
        )
        assert left in swept
        assert other not in swept
        assert admin.get(f"/api/v1/namespaces/{other}").json()["metadata"].get("deletionTimestamp") is None
    finally:
        admin.delete(f"/api/v1/namespaces/{other}")
        admin.delete(f"/api/v1/namespaces/{left}")
