"""The misleading-signal scenario (C-DA-003) on the real control plane (decision 0067): what the agent
reads with its own credentials agrees with the declaration. Its pod was OOMKilled 2 minutes before the
handover after 5 restarts, under the 512Mi limit the deployment shows; through the recording gateway the
metrics back-end serves that pod's working set rising monotonically to the limit over the last
container's life and ending at the recorded termination, and kube-state-metrics' last termination at
the same instant; the CPU hot spot is where the declaration puts it. And the alerting listings the agent
sees through the gateway hold the declared alerts, firing or pending, without the harness's expression."""

from __future__ import annotations

import copy
import datetime as dt
import itertools
import json
import time
from collections.abc import AsyncIterator
from typing import Any

import httpx2
import pytest

from oasis_operator.adapters.gateway import ToolGateway
from oasis_operator.adapters.toolplane import ToolPlane
from oasis_operator.core.gateway.port import Upstream
from oasis_operator.core.toolplane import memory as M
from tests.toolplane.conftest import CAPABILITY_DOCS, MakeEnvironment, agent_token

pytestmark = pytest.mark.cluster

DA3 = "infra.capability.da.misleading-signal-001"
METRICS = "observability-metrics"


def _get(http: httpx2.Client, path: str, **params: Any) -> Any:
    resp = http.get(path, params=params or None)
    assert resp.status_code == 200, (path, resp.status_code, resp.text[:300])
    return resp.json()


def _epoch(stamp: str) -> float:
    return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00")).timestamp()


@pytest.fixture
async def gateway() -> AsyncIterator[ToolGateway]:
    gw = ToolGateway()
    await gw.start()
    yield gw
    await gw.stop()


async def _through(
    gateway: ToolGateway, toolplane: ToolPlane, plan: Any, access: Any
) -> tuple[Any, str, str]:
    """The agent's metrics endpoint behind the gateway: (route, its URL, its token)."""
    ep = (await toolplane.endpoints(plan, access))[METRICS]
    route = await gateway.open(
        {METRICS: Upstream(METRICS, ep.url, (("Authorization", f"Bearer {ep.credential}"),))}
    )
    mine = route.endpoints[METRICS]
    return route, mine.url, mine.token


async def _query(url: str, token: str, **params: Any) -> list[dict[str, Any]]:
    async with httpx2.AsyncClient(timeout=30) as c:
        resp = await c.get(url + "api/v1/query", params=params, headers={"Authorization": f"Bearer {token}"})
    assert resp.status_code == 200, resp.text
    return list(resp.json()["data"]["result"])


async def test_what_the_agent_reads_agrees_with_the_declaration(
    cluster: Any, env: Any, toolplane: ToolPlane, environments: MakeEnvironment, gateway: ToolGateway
) -> None:
    began = time.time()
    plan, access = await environments(CAPABILITY_DOCS[DA3])
    handed = time.time()
    ns = plan.home_namespace
    assert await env.verify(plan) == []
    with cluster.token_http(agent_token(access)) as http:
        dep = _get(http, f"/apis/apps/v1/namespaces/{ns}/deployments/user-service")
        [container] = dep["spec"]["template"]["spec"]["containers"]
        assert container["resources"]["limits"]["memory"] == M.DEFAULT_OOM_MEMORY_LIMIT
        [pod] = _get(http, f"/api/v1/namespaces/{ns}/pods", labelSelector="app=user-service")["items"]
        [cs] = pod["status"]["containerStatuses"]
        assert cs["restartCount"] == 5
        assert cs["state"]["waiting"]["reason"] == "CrashLoopBackOff"
        term = cs["lastState"]["terminated"]
        assert (term["reason"], term["exitCode"]) == ("OOMKilled", 137)
        finished, started = _epoch(term["finishedAt"]), _epoch(term["startedAt"])
        # 2 minutes before the scenario starts: written while it was provisioned (to the second)
        assert began - 121 <= finished <= handed - 120
        assert finished - started == M.LIFE_SECONDS
        top = _get(http, f"/apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods/batch-processor-x9k2")
        assert top["containers"]
    route, url, token = await _through(gateway, toolplane, plan, access)
    name = pod["metadata"]["name"]
    # The last container's life, raw samples: monotonically increasing, from the baseline to the limit,
    # the last one at the recorded OOM kill.
    window = int(M.LIFE_SECONDS) + 60
    [working] = await _query(
        url, token, query=f'{M.WORKING_SET}{{pod="{name}"}}[{window}s]', time=f"{finished:.3f}"
    )
    points = [(float(t), float(v)) for t, v in working["values"]]
    values = [v for _, v in points]
    assert len(points) == M.LIFE_SECONDS / 30 + 1
    assert all(b > a for a, b in itertools.pairwise(values))
    assert values[0] == pytest.approx(512 * 2**20 * M.BASELINE_SHARE)
    assert values[-1] == 512 * 2**20
    assert points[-1][0] == pytest.approx(finished, abs=0.002)
    assert working["metric"]["container"] == "user-service"
    # Over the pod's whole life, the sawtooth: it falls back once per restart.
    [whole] = await _query(url, token, query=f'{M.WORKING_SET}{{pod="{name}"}}[3h]', time=f"{handed:.3f}")
    every = [float(v) for _, v in whole["values"]]
    assert sum(1 for a, b in itertools.pairwise(every) if b < a) == 5
    # kube-state-metrics' view, at the handover: the same termination, its reason, the restarts.
    [when] = await _query(url, token, query=f'{M.LAST_TIME}{{pod="{name}"}}', time=f"{handed:.3f}")
    assert float(when["value"][1]) == finished
    [reason] = await _query(url, token, query=f'{M.LAST_REASON}{{pod="{name}"}}', time=f"{handed:.3f}")
    assert reason["metric"]["reason"] == "OOMKilled"
    [restarts] = await _query(url, token, query=f'{M.RESTARTS}{{pod="{name}"}}', time=f"{handed:.3f}")
    assert float(restarts["value"][1]) == 5
    assert all(r.status == 200 for r in route.records)
    assert route.fault is None


async def test_the_declared_alerts_fire_and_the_rules_seen_through_the_gateway_hide_the_harness(
    cluster: Any, toolplane: ToolPlane, environments: MakeEnvironment, gateway: ToolGateway
) -> None:
    doc = copy.deepcopy(CAPABILITY_DOCS[DA3])
    doc["preconditions"]["environment"]["state"] = [
        {"resource": "deployment/web", "namespace": "default", "status": "running"},
        {"resource": "alert/disk-full", "status": "firing"},
        {"resource": "alert/high-memory", "status": "pending"},
    ]
    plan, access = await environments(doc)
    route, url, token = await _through(gateway, toolplane, plan, access)
    async with httpx2.AsyncClient(timeout=30) as c:
        auth = {"Authorization": f"Bearer {token}"}
        rules = await c.get(url + "api/v1/rules", headers=auth)
        alerts = await c.get(url + "api/v1/alerts", headers=auth)
    for resp in (rules, alerts):
        assert resp.status_code == 200, resp.text
        assert "vector(" not in resp.text
        assert "rules/" not in resp.text
        assert ".yaml" not in resp.text
    seen = {(a["labels"]["alertname"], a["state"]) for a in alerts.json()["data"]["alerts"]}
    assert seen == {("disk-full", "firing"), ("high-memory", "pending")}
    listed = {r["name"]: r["state"] for g in rules.json()["data"]["groups"] for r in g["rules"]}
    assert listed == {"disk-full": "firing", "high-memory": "pending"}
    # The records hold what the agent saw, not the back-end's own answer.
    assert all("vector(" not in json.dumps(r.response) for r in route.records)
    # The back-end itself still evaluates its rule (read directly, outside the agent's reach).
    ep = (await toolplane.endpoints(plan, access))[METRICS]
    direct = httpx2.get(
        f"{ep.url}/api/v1/rules", headers={"Authorization": f"Bearer {ep.credential}"}, timeout=30
    )
    assert "vector(" in direct.text
