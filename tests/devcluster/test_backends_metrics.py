"""Back-filled series are what an agent's PromQL reads through vmauth; alert states come from vmalert
evaluating declared rules over them; one namespace's token sees nothing of another's."""

from __future__ import annotations

import time
from typing import Any

import httpx2
import pytest

from oasis_operator.devcluster.backends.metrics import AlertsBackend, MetricsBackend, Series

pytestmark = pytest.mark.cluster

MEMORY = "container_memory_working_set_bytes"


def bearer(token: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {token}"}


def result(resp: httpx2.Response) -> list[dict[str, Any]]:
    assert resp.status_code == 200, resp.text
    body = resp.json()
    assert body["status"] == "success", body
    out: list[dict[str, Any]] = body["data"]["result"]
    return out


@pytest.fixture
def backfilled(metrics: MetricsBackend, tool_namespaces: tuple[str, str]) -> tuple[str, str, float]:
    """One hour of a growing memory series per namespace, the first sample an hour in the past."""
    ns, other = tool_namespaces
    now = time.time()
    metrics.import_series(
        [
            Series(
                {"__name__": MEMORY, "namespace": n, "pod": "api-0"},
                [(now - 3600 + 60 * i, 1e6 * (i + 1) + offset) for i in range(61)],
            )
            for n, offset in ((ns, 0.0), (other, 7.0))
        ]
    )
    return ns, other, now


def test_a_backfilled_series_reads_back_with_its_past_timestamps(metrics, backfilled):
    ns, _, now = backfilled
    token = metrics.grant(ns)
    resp = httpx2.get(
        f"{metrics.url}/api/v1/query_range",
        headers=bearer(token),
        params={"query": MEMORY, "start": now - 3600, "end": now, "step": 1800},
    )
    series = result(resp)
    assert [s["metric"]["namespace"] for s in series] == [ns]
    values = [(round(t - now), float(v)) for t, v in series[0]["values"]]
    assert values == [(-3600, 1e6), (-1800, 31e6), (0, 61e6)]


ISOLATION: list[tuple[str, str, dict[str, str]]] = [
    ("a plain query", "/api/v1/query", {"query": MEMORY}),
    ("a query naming the other namespace", "/api/v1/query", {"query": f'{MEMORY}{{namespace="OTHER"}}'}),
    ("an aggregate over everything", "/api/v1/query", {"query": f"count({MEMORY})"}),
    (
        "an extra_label argument of the client's own",
        "/api/v1/query",
        {"query": MEMORY, "extra_label": "namespace=OTHER"},
    ),
    ("the series listing", "/api/v1/series", {"match[]": MEMORY}),
    ("the label values listing", "/api/v1/label/namespace/values", {}),
]


@pytest.mark.parametrize(("case", "path", "params"), ISOLATION, ids=[c[0] for c in ISOLATION])
def test_a_token_sees_only_its_namespace(metrics, backfilled, case, path, params):
    ns, other, _ = backfilled
    params = {k: v.replace("OTHER", other) for k, v in params.items()}
    resp = httpx2.get(f"{metrics.url}{path}", headers=bearer(metrics.grant(ns)), params=params)
    assert resp.status_code == 200, resp.text
    assert other not in resp.text
    if path == "/api/v1/query" and "namespace=" not in str(params.get("query")):
        assert ns in resp.text or resp.json()["data"]["result"][0]["value"][1] == "1"


REFUSED: list[tuple[str, str, str, int]] = [
    ("an import (a write)", "POST", "/api/v1/import", 400),
    ("a remote write", "POST", "/api/v1/write", 400),
    ("a series deletion", "POST", "/api/v1/admin/tsdb/delete_series", 400),
    ("the gateway's command line", "GET", "/flags", 401),
    ("the gateway's own metrics", "GET", "/metrics", 401),
    ("a config reload", "GET", "/-/reload", 401),
]


@pytest.mark.parametrize(("case", "method", "path", "code"), REFUSED, ids=[c[0] for c in REFUSED])
def test_only_read_paths_are_routed(metrics, backfilled, case, method, path, code):
    ns, _, _ = backfilled
    body = '{"metric":{"__name__":"forged","namespace":"x"},"values":[1],"timestamps":[1]}'
    resp = httpx2.request(
        method,
        f"{metrics.url}{path}",
        headers=bearer(metrics.grant(ns)),
        params={"match[]": MEMORY},
        content=body,
    )
    assert resp.status_code == code, resp.text


def test_no_token_or_a_wrong_one_is_refused(metrics, backfilled):
    assert httpx2.get(f"{metrics.url}/api/v1/query", params={"query": MEMORY}).status_code == 401
    assert (
        httpx2.get(
            f"{metrics.url}/api/v1/query", params={"query": MEMORY}, headers=bearer("not-a-token")
        ).status_code
        == 401
    )


def alerts_of(metrics: MetricsBackend, token: str, **params: str) -> list[dict[str, Any]]:
    resp = httpx2.get(f"{metrics.url}/api/v1/alerts", headers=bearer(token), params=params)
    assert resp.status_code == 200, resp.text
    out: list[dict[str, Any]] = resp.json()["data"]["alerts"]
    return out


def wait_alerts(metrics: MetricsBackend, token: str, count: int, timeout: float = 15) -> list[dict[str, Any]]:
    deadline = time.monotonic() + timeout
    while True:
        found = alerts_of(metrics, token)
        if len(found) >= count or time.monotonic() > deadline:
            return found
        time.sleep(0.2)


def test_declared_rules_give_pending_and_firing_alerts_per_namespace(
    metrics, alerts: AlertsBackend, backfilled
):
    ns, other, _ = backfilled
    threshold = 50e6  # the series end above it
    alerts.set_rules(
        ns,
        [
            {
                "name": ns,
                "interval": "1s",
                "rules": [
                    {
                        "alert": "HighMemory",
                        "expr": f'{MEMORY}{{namespace="{ns}"}} > {threshold}',
                        "for": "10m",
                        "labels": {"namespace": ns, "severity": "warning"},
                    }
                ],
            }
        ],
    )
    alerts.set_rules(
        other,
        [
            {
                "name": other,
                "interval": "1s",
                "rules": [
                    {
                        "alert": "HighMemory",
                        "expr": f'{MEMORY}{{namespace="{other}"}} > {threshold}',
                        "labels": {"namespace": other, "severity": "critical"},
                    }
                ],
            }
        ],
    )
    try:
        mine = wait_alerts(metrics, metrics.grant(ns), 1)
        theirs = wait_alerts(metrics, metrics.grant(other), 1)
        assert [(a["labels"]["alertname"], a["labels"]["namespace"], a["state"]) for a in mine] == [
            ("HighMemory", ns, "pending")
        ]
        assert [(a["labels"]["namespace"], a["state"]) for a in theirs] == [(other, "firing")]
        # Asking for the other namespace by the proxy's own argument changes nothing.
        assert alerts_of(metrics, metrics.grant(ns), namespace=other) == mine
        rules = httpx2.get(f"{metrics.url}/api/v1/rules", headers=bearer(metrics.grant(ns))).json()
        assert [(g["name"], g["file"]) for g in rules["data"]["groups"]] == [(ns, f"{ns}.yaml")]
        # vmalert writes the alert state back as ALERTS series, confined like any other series.
        state = result(
            httpx2.get(
                f"{metrics.url}/api/v1/query", headers=bearer(metrics.grant(ns)), params={"query": "ALERTS"}
            )
        )
        assert {(s["metric"]["namespace"], s["metric"]["alertstate"]) for s in state} <= {(ns, "pending")}
    finally:
        alerts.remove_rules(ns)
        alerts.remove_rules(other)
