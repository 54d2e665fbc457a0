"""Traces on the real back-end (Jaeger v2, one process per scenario): a capability scenario's declared
spans are what the agent reads through its endpoint, with the declared tree, durations, errors and
attributes; another scenario's endpoint shows none of them; settling ends the agent's access."""

from __future__ import annotations

import itertools
import time
from collections.abc import Awaitable, Callable
from typing import Any

import httpx2
import pytest

from oasis_operator.adapters.toolplane import ToolPlane
from oasis_operator.core.environment.plan import EnvironmentPlan
from oasis_operator.core.ports import ToolEndpoint
from oasis_operator.core.toolplane.traces import ROOT_END
from tests.toolplane.conftest import CAPABILITY_DOCS as RAW
from tests.toolplane.conftest import MakeEnvironment

pytestmark = pytest.mark.cluster

TRACE_NAVIGATION = "infra.capability.oi.trace-navigation-001"
MULTI_SIGNAL = "infra.capability.da.multi-signal-correlation-001"

Injected = tuple[EnvironmentPlan, ToolEndpoint]


def _get(url: str, timeout: float = 30, **params: Any) -> httpx2.Response:
    return httpx2.get(url, params=params, timeout=timeout)


@pytest.fixture
def injected(environments: MakeEnvironment, toolplane: ToolPlane) -> Callable[[str], Awaitable[Injected]]:
    async def make(sid: str) -> Injected:
        plan, access = await environments(RAW[sid])
        return plan, (await toolplane.endpoints(plan, access))["observability-tracing"]

    return make


async def test_the_trace_the_prompt_names_is_read_by_its_id_with_the_declared_tree(
    injected: Callable[[str], Awaitable[Injected]],
) -> None:
    _, ep = await injected(TRACE_NAVIGATION)
    resp = _get(f"{ep.url}/api/traces/abc123")
    assert resp.status_code == 200, resp.text
    [trace] = resp.json()["data"]
    services = {pid: p["serviceName"] for pid, p in trace["processes"].items()}
    spans = {s["spanID"]: s for s in trace["spans"]}
    by_name = {s["operationName"]: s for s in spans.values()}
    assert {(services[s["processID"]], n, s["duration"]) for n, s in by_name.items()} == {
        ("api-gateway", "GET /api/orders/123", 8_200_000),
        ("order-service", "getOrder", 8_000_000),
        ("inventory-service", "checkStock", 7_800_000),
        ("inventory-service", "db.query SELECT * FROM inventory WHERE sku=...", 7_500_000),
    }
    # The declared tree: each span's parent is the one it was declared under.
    chain = [
        "GET /api/orders/123",
        "getOrder",
        "checkStock",
        "db.query SELECT * FROM inventory WHERE sku=...",
    ]
    for parent, child in itertools.pairwise(chain):
        [ref] = by_name[child]["references"]
        assert spans[ref["spanID"]]["operationName"] == parent
    tags = {t["key"]: t["value"] for t in by_name[chain[-1]]["tags"]}
    assert tags["db.statement"] == "SELECT * FROM inventory WHERE sku = $1"
    assert tags["db.rows_affected"] == 1
    # Times are relative to the handover: the root ended about a minute before it.
    root = by_name[chain[0]]
    ended = (root["startTime"] + root["duration"]) / 1e6
    assert -ROOT_END - 5 < time.time() - ended < -ROOT_END + 120


async def test_another_scenarios_traces_are_invisible_and_settling_ends_access(
    toolplane: ToolPlane, injected: Callable[[str], Awaitable[Injected]]
) -> None:
    a_plan, a = await injected(MULTI_SIGNAL)
    _, b = await injected(TRACE_NAVIGATION)
    assert a.url != b.url
    assert _get(f"{a.url}/api/services").json()["data"] == ["api-service"]
    assert "api-service" not in (_get(f"{b.url}/api/services").json()["data"] or [])
    found = _get(f"{a.url}/api/traces", service="api-service", lookback="1h")
    [trace] = found.json()["data"]
    [db] = [s for s in trace["spans"] if s["operationName"] == "db.query SELECT orders"]
    assert {"key": "error", "type": "bool", "value": True} in db["tags"]
    await toolplane.settle(a_plan)
    with pytest.raises(httpx2.TransportError):
        _get(f"{a.url}/api/services", timeout=5)
