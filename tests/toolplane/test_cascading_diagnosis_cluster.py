"""The cascading-diagnosis scenario (C-DA-004) on the real control plane (decision 0064): what the agent
reads with its own credential is the declared chain, ingress -> Service without endpoints -> pods whose
migration init container crash-loops, with the migration's error in that init container's log and the
mesh proxy's connection failure in its own; and a pod started after the handover fails alike."""

from __future__ import annotations

import asyncio
import time
from typing import Any

import httpx2
import pytest

from oasis_operator.adapters.k8s.environment import KubeEnvironment
from oasis_operator.adapters.toolplane import ToolPlane
from oasis_operator.core.environment.plan import EnvironmentPlan
from oasis_operator.core.ports import AgentAccess
from tests.toolplane.conftest import CAPABILITY_DOCS, MakeEnvironment, agent_token

pytestmark = pytest.mark.cluster

DA4 = "infra.capability.da.cascading-diagnosis-001"
MIGRATION = "ERROR: migration 042_add_index failed: relation already exists"
SIDECAR = "upstream connect error or disconnect/reset before headers. reset reason: connection failure"
#: How kubectl asks for a list: as the API server's table, whose STATUS column is what it prints.
TABLE = "application/json;as=Table;v=v1;g=meta.k8s.io,application/json"


def _get(http: httpx2.Client, path: str, **params: Any) -> Any:
    resp = http.get(path, params=params or None)
    assert resp.status_code == 200, (path, resp.status_code, resp.text[:300])
    return resp.json()


def _status_column(http: httpx2.Client, ns: str, selector: str) -> dict[str, str]:
    """Pod name -> the STATUS ``kubectl get pods`` prints."""
    resp = http.get(
        f"/api/v1/namespaces/{ns}/pods", params={"labelSelector": selector}, headers={"Accept": TABLE}
    )
    assert resp.status_code == 200, resp.text
    table = resp.json()
    col = [c["name"] for c in table["columnDefinitions"]].index("Status")
    return {r["object"]["metadata"]["name"]: r["cells"][col] for r in table["rows"]}


async def _provisioned(environments: MakeEnvironment) -> tuple[EnvironmentPlan, AgentAccess]:
    return await environments(CAPABILITY_DOCS[DA4])


async def test_the_agent_reads_the_declared_chain(
    cluster: Any, env: KubeEnvironment, toolplane: ToolPlane, environments: MakeEnvironment
) -> None:
    plan, access = await _provisioned(environments)
    ns = plan.home_namespace
    # The provisioner's own check: every declared symptom, and the Service's empty endpoints, observed.
    assert plan.empty_endpoints == ((ns, "api-backend"),)
    assert await env.verify(plan) == []
    with cluster.token_http(agent_token(access)) as http:
        # The pods: Init:CrashLoopBackOff, as a kubelet reports a migration that keeps failing.
        pods = _get(http, f"/api/v1/namespaces/{ns}/pods", labelSelector="app=api-backend")["items"]
        assert len(pods) == 1
        (pod,) = pods
        status = pod["status"]
        assert status["phase"] == "Pending"
        conditions = {c["type"]: c for c in status["conditions"]}
        assert conditions["Ready"]["status"] == "False"
        assert (conditions["Initialized"]["status"], conditions["Initialized"]["reason"]) == (
            "False",
            "ContainersNotInitialized",
        )
        (init,) = status["initContainerStatuses"]
        assert init["name"] == "db-migrate"
        assert init["state"]["waiting"]["reason"] == "CrashLoopBackOff"
        assert init["lastState"]["terminated"]["exitCode"] == 1
        assert init["restartCount"] >= 1
        assert [c["state"]["waiting"]["reason"] for c in status["containerStatuses"]] == ["PodInitializing"]
        name = pod["metadata"]["name"]
        assert _status_column(http, ns, "app=api-backend") == {name: "Init:CrashLoopBackOff"}

        # kubectl logs <pod> -c db-migrate (and --previous: it failed alike before).
        log = http.get(f"/api/v1/namespaces/{ns}/pods/{name}/log", params={"container": "db-migrate"})
        assert (log.status_code, log.text) == (200, MIGRATION + "\n")
        previous = http.get(
            f"/api/v1/namespaces/{ns}/pods/{name}/log", params={"container": "db-migrate", "previous": "true"}
        )
        assert (previous.status_code, previous.text) == (200, MIGRATION + "\n")
        main = http.get(f"/api/v1/namespaces/{ns}/pods/{name}/log", params={"container": "api-backend"})
        assert (main.status_code, main.text) == (200, "")

        # The Service: EndpointSlices written by the endpoint controller, none of them ready.
        slices = _get(
            http,
            f"/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices",
            labelSelector="kubernetes.io/service-name=api-backend",
        )["items"]
        assert slices
        assert not [
            e for s in slices for e in s.get("endpoints") or [] if (e.get("conditions") or {}).get("ready")
        ]

        # The ingress routes to it.
        ingress = _get(http, f"/apis/networking.k8s.io/v1/namespaces/{ns}/ingresses/public")
        backend = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
        assert backend == {"name": "api-backend", "port": {"number": 80}}

        # The mesh proxy's log.
        (proxy,) = _get(http, f"/api/v1/namespaces/{ns}/pods", labelSelector="app=service-mesh-sidecar")[
            "items"
        ]
        assert proxy["status"]["phase"] == "Running"
        log = http.get(f"/api/v1/namespaces/{ns}/pods/{proxy['metadata']['name']}/log")
        assert (log.status_code, log.text) == (200, SIDECAR + "\n")
    # And the ingress's 503s, as the controller's request counter, through the agent's metrics endpoint.
    (series,) = plan.toolplane.series
    values = [v for _, v in series.samples]
    assert values == sorted(values)
    ep = (await toolplane.endpoints(plan, access))["observability-metrics"]
    query = 'sum by (ingress, service, status) (rate(nginx_ingress_controller_requests{status="503"}[5m]))'
    resp = httpx2.get(
        f"{ep.url}/api/v1/query",
        params={"query": query, "time": time.time() - 60},
        headers={"Authorization": f"Bearer {ep.credential}"},
        timeout=30,
    )
    assert resp.status_code == 200, resp.text
    (rate,) = resp.json()["data"]["result"]
    assert rate["metric"] == {"ingress": "public", "service": "api-backend", "status": "503"}
    assert float(rate["value"][1]) == pytest.approx(4.0, rel=0.05)


async def test_a_replacement_pod_fails_its_init_container_again(
    cluster: Any, env: KubeEnvironment, environments: MakeEnvironment
) -> None:
    plan, access = await _provisioned(environments)
    ns = plan.home_namespace
    injector = env.failure_injector(plan)
    await injector.start()
    try:
        with cluster.token_http(agent_token(access)) as http:
            (old,) = _get(http, f"/api/v1/namespaces/{ns}/pods", labelSelector="app=api-backend")["items"]
            resp = http.delete(f"/api/v1/namespaces/{ns}/pods/{old['metadata']['name']}")
            assert resp.status_code == 200, resp.text
            deadline = time.monotonic() + 20
            while True:
                shown = _status_column(http, ns, "app=api-backend")
                if shown and old["metadata"]["name"] not in shown and set(shown.values()) == {"Init:Error"}:
                    break
                assert time.monotonic() < deadline, shown
                await asyncio.sleep(0.2)
            await injector.settle(timeout=10)
            (new,) = _get(http, f"/api/v1/namespaces/{ns}/pods", labelSelector="app=api-backend")["items"]
            (init,) = new["status"]["initContainerStatuses"]
            assert init["state"]["terminated"]["exitCode"] == 1
            assert init["restartCount"] == 0
            assert new["status"]["phase"] == "Pending"
    finally:
        await injector.stop()
