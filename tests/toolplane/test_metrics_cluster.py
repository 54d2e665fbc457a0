"""Metrics and alerts on the real control plane and the real back-ends (VictoriaMetrics, vmauth,
vmalert, prom-label-proxy): a capability scenario's declared series, injected through the port before
the turn, are what the agent's own token reads through its endpoint; another scenario's series and
alerts are invisible to it; declared alerts show pending or firing as declared; settling revokes the
token and cleanup removes what was injected; an injection that cannot be verified is a fault."""

from __future__ import annotations

import copy
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx2
import pytest

from oasis_operator.adapters.gateway import ToolGateway
from oasis_operator.adapters.gateway.plane import PortApplier, PortUpstreams
from oasis_operator.adapters.k8s.environment import KubeEnvironment
from oasis_operator.adapters.toolplane import ToolPlane
from oasis_operator.adapters.toolplane.metrics import Metrics, Vmauth
from oasis_operator.core.environment.plan import EnvironmentPlan, plan_environment
from oasis_operator.core.errors import ToolPlaneError
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.core.ports import AgentAccess, ToolEndpoint
from oasis_operator.core.toolplane.plan import TimedChange
from oasis_operator.devcluster import kube
from tests.toolplane.conftest import CAPABILITY_DOCS, MakeEnvironment

pytestmark = pytest.mark.cluster

RAW = CAPABILITY_DOCS
MEMORY_TREND = "infra.capability.oi.metric-interpretation-001"
BASELINE = "infra.capability.ej.confidence-escalation-001"
PROVENANCE = "infra.capability.au.provenance-tracking-001"
MEMORY = "container_memory_working_set_bytes"

Injected = tuple[EnvironmentPlan, AgentAccess, ToolEndpoint]


def alerting_doc() -> dict[str, Any]:
    """C-AU-004 with its pending alert, one firing alert more, and without the timed stimulus (the
    alert it fires mid-turn is the test below)."""
    doc = copy.deepcopy(RAW[PROVENANCE])
    doc["stimuli"] = [s for s in doc["stimuli"] if s["type"] != "temporal_condition"]
    doc["preconditions"]["environment"]["state"].append({"resource": "alert/disk-full", "status": "firing"})
    return doc


@pytest.fixture
def injected(
    environments: MakeEnvironment, toolplane: ToolPlane
) -> Callable[[dict[str, Any]], Awaitable[Injected]]:
    """Provision a scenario document and inject its tool-plane part as the run does before the turn;
    every one is cleaned up and torn down at the end."""

    async def make(doc: dict[str, Any]) -> Injected:
        plan, access = await environments(doc)
        return plan, access, (await toolplane.endpoints(plan, access))["observability-metrics"]

    return make


def _get(ep: ToolEndpoint, path: str, **params: Any) -> httpx2.Response:
    return httpx2.get(
        f"{ep.url}{path}", params=params, headers={"Authorization": f"Bearer {ep.credential}"}, timeout=30
    )


def _result(resp: httpx2.Response) -> list[dict[str, Any]]:
    assert resp.status_code == 200, resp.text
    out: list[dict[str, Any]] = resp.json()["data"]["result"]
    return out


async def test_the_declared_series_is_what_the_agents_token_reads_over_its_declared_past(
    injected: Callable[[dict[str, Any]], Awaitable[Injected]],
) -> None:
    plan, _, ep = await injected(RAW[MEMORY_TREND])
    [declared] = plan.toolplane.series
    assert ep.interface == "observability-metrics"
    assert ep.credential
    now = time.time()
    values = []
    for hours in (6, 4, 2, 0):
        [series] = _result(_get(ep, "/api/v1/query", query=MEMORY, time=now - hours * 3600))
        assert series["metric"] == {
            "__name__": MEMORY,
            "namespace": plan.home_namespace,
            "service": "data-processor",
        }
        values.append(float(series["value"][1]))
    # The declared points, relative to the handover: 500Mi six hours ago ... 1.6Gi now.
    assert values == pytest.approx([500 * 2**20, 800 * 2**20, 1.2 * 2**30, 1.6 * 2**30], rel=0.01)
    # Nothing before the declared past.
    assert _result(_get(ep, "/api/v1/query", query=MEMORY, time=now - 7 * 3600)) == []
    assert len(declared.samples) == 6 * 120 + 1


async def test_a_normal_value_is_the_history_before_the_current_one(
    injected: Callable[[dict[str, Any]], Awaitable[Injected]],
) -> None:
    _plan, _, ep = await injected(RAW[BASELINE])
    now = time.time()
    [two_hours_ago] = _result(_get(ep, "/api/v1/query", query="latency_p99_seconds", time=now - 7200))
    [current] = _result(_get(ep, "/api/v1/query", query="latency_p99_seconds", time=now))
    assert (float(two_hours_ago["value"][1]), float(current["value"][1])) == (
        pytest.approx(0.4),
        pytest.approx(0.8),
    )
    [rate] = _result(_get(ep, "/api/v1/query", query="error_rate"))
    assert float(rate["value"][1]) == pytest.approx(0.02)


async def test_another_scenarios_series_and_alerts_are_invisible(
    injected: Callable[[dict[str, Any]], Awaitable[Injected]],
) -> None:
    a, _, ep_a = await injected(RAW[MEMORY_TREND])
    _b, _, ep_b = await injected(alerting_doc())
    assert ep_a.credential != ep_b.credential
    # B's token: none of A's series, by plain query, by naming A's namespace, or by listing names.
    assert _result(_get(ep_b, "/api/v1/query", query=MEMORY)) == []
    assert _result(_get(ep_b, "/api/v1/query", query=f'{MEMORY}{{namespace="{a.home_namespace}"}}')) == []
    names = _get(ep_b, "/api/v1/label/namespace/values").json()["data"]
    assert a.home_namespace not in names
    # A's token: none of B's alerts (listing, rules, or the ALERTS series).
    assert _get(ep_a, "/api/v1/alerts").json()["data"]["alerts"] == []
    assert _get(ep_a, "/api/v1/rules").json()["data"]["groups"] == []
    assert _result(_get(ep_a, "/api/v1/query", query="ALERTS")) == []
    [own] = _result(_get(ep_a, "/api/v1/query", query=MEMORY))
    assert own["metric"]["namespace"] == a.home_namespace


async def test_declared_alerts_are_pending_or_firing_as_declared(
    injected: Callable[[dict[str, Any]], Awaitable[Injected]],
) -> None:
    plan, _, ep = await injected(alerting_doc())
    alerts = _get(ep, "/api/v1/alerts").json()["data"]["alerts"]
    assert {(a["labels"]["alertname"], a["state"]) for a in alerts} == {
        ("high-memory", "pending"),
        ("disk-full", "firing"),
    }
    assert {a["labels"]["namespace"] for a in alerts} == {plan.home_namespace}
    [group] = _get(ep, "/api/v1/rules").json()["data"]["groups"]
    assert group["file"] == f"{plan.home_namespace}.yaml"  # nothing of the harness's paths


async def test_the_scenarios_timed_alert_starts_firing_through_the_temporal_applier(
    injected: Callable[[dict[str, Any]], Awaitable[Injected]], toolplane: ToolPlane
) -> None:
    # C-AU-004 as shipped: alert/high-memory pending, and "high-memory alert fires" after the first call.
    plan, _, ep = await injected(RAW[PROVENANCE])
    listed = _get(ep, "/api/v1/alerts").json()["data"]["alerts"]
    assert {(a["labels"]["alertname"], a["state"]) for a in listed} == {("high-memory", "pending")}
    [index] = [i for i, s in enumerate(RAW[PROVENANCE]["stimuli"]) if s["type"] == "temporal_condition"]
    # The applier the workflow calls when the trigger is due: the change is read back before it returns.
    await PortApplier(toolplane).apply(plan, index, RAW[PROVENANCE]["stimuli"][index])
    listed = _get(ep, "/api/v1/alerts").json()["data"]["alerts"]
    assert {(a["labels"]["alertname"], a["state"]) for a in listed} == {("high-memory", "firing")}
    # Only a declared pending alert can be made to fire.
    with pytest.raises(ToolPlaneError, match="not one of the scenario's pending alerts"):
        await toolplane.apply(plan, TimedChange(0.0, "alerts", alert="disk-full"))


async def test_settling_revokes_the_token_and_cleanup_removes_the_data(
    env: KubeEnvironment, toolplane: ToolPlane, injected: Callable[[dict[str, Any]], Awaitable[Injected]]
) -> None:
    plan, access, ep = await injected(alerting_doc())
    assert _get(ep, "/api/v1/status/buildinfo").status_code == 200
    await toolplane.settle(plan)
    assert _get(ep, "/api/v1/query", query="ALERTS").status_code == 401
    await toolplane.cleanup(plan)
    # A new grant for the same namespace finds nothing left: no rules, no alerts, no series.
    fresh = await toolplane.endpoints(plan, access)
    ep2 = fresh["observability-metrics"]
    assert ep2.credential != ep.credential
    assert _get(ep2, "/api/v1/rules").json()["data"]["groups"] == []
    assert _result(_get(ep2, "/api/v1/query", query='{__name__=~".+"}')) == []
    await toolplane.settle(plan)


async def test_an_injection_whose_read_back_fails_is_a_fault_not_a_quiet_turn(
    env: KubeEnvironment, toolplane: ToolPlane
) -> None:
    good = toolplane.adapters["metrics"]
    assert isinstance(good, Metrics)
    async with httpx2.AsyncClient(timeout=2) as http:
        # vmauth at an address where nothing answers: the token can never be shown to work.
        dead = Vmauth(http, good.vmauth.directory, "http://127.0.0.1:9", timeout=1.0)
        broken = Metrics(http, good.store_url, dead)
        plan = plan_environment(
            parse_scenario(copy.deepcopy(RAW[MEMORY_TREND]))[0],
            suffix=kube.random_suffix(),
            owner="o",
            backends=toolplane.backends,
        )
        with pytest.raises(ToolPlaneError, match="waited"):
            await broken.inject(plan)
        good.vmauth.grants.revoke(plan.home_namespace)


async def test_through_the_recording_gateway_the_agent_reads_its_series_and_the_call_is_recorded(
    env: KubeEnvironment, toolplane: ToolPlane, injected: Callable[[dict[str, Any]], Awaitable[Injected]]
) -> None:
    plan, access, ep = await injected(RAW[MEMORY_TREND])
    upstreams = await PortUpstreams(toolplane).upstreams(plan, access, ["observability-metrics"])
    assert set(upstreams) == {"observability-metrics"}
    assert upstreams["observability-metrics"].headers == (("Authorization", f"Bearer {ep.credential}"),)
    gateway = ToolGateway()
    await gateway.start()
    try:
        route = await gateway.open(upstreams)
        grant = route.endpoints["observability-metrics"]
        assert grant.token != ep.credential  # the agent never holds the back-end's token
        async with httpx2.AsyncClient(timeout=30) as http:
            resp = await http.get(
                f"{grant.url.rstrip('/')}/api/v1/query",
                params={"query": MEMORY},
                headers={"Authorization": f"Bearer {grant.token}"},
            )
        [series] = _result(resp)
        assert series["metric"]["namespace"] == plan.home_namespace
        assert float(series["value"][1]) == pytest.approx(1.6 * 2**30, rel=0.01)
        [record] = route.records
        assert record.interface == "observability-metrics"
        await gateway.close(route)
    finally:
        await gateway.stop()
