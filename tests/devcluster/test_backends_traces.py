"""Declared spans loaded over OTLP are what an agent reads through Jaeger's query API, and one
namespace's Jaeger holds nothing of another's."""

from __future__ import annotations

import secrets
import time

import httpx2
import pytest

from oasis_operator.devcluster.backends.traces import Span, TracesBackend

pytestmark = pytest.mark.cluster


def checkout_trace(now: float) -> list[Span]:
    trace = secrets.token_hex(16)
    root, db = secrets.token_hex(8), secrets.token_hex(8)
    return [
        Span(
            trace,
            root,
            "frontend",
            "GET /checkout",
            now - 600,
            now - 597.5,
            attributes=(("http.status_code", "504"),),
            error=True,
        ),
        Span(
            trace,
            db,
            "orders-db",
            "SELECT orders",
            now - 599.9,
            now - 597.6,
            parent_span_id=root,
            attributes=(("db.statement", "SELECT * FROM orders WHERE customer_id = ?"),),
        ),
    ]


def test_declared_spans_read_back_through_the_query_api(traces: TracesBackend, tool_namespaces):
    ns, _ = tool_namespaces
    store = traces.instance(ns)
    spans = checkout_trace(time.time())
    store.load(spans)
    got = httpx2.get(f"{store.query_url}/api/traces/{spans[0].trace_id}").json()["data"][0]
    by_name = {s["operationName"]: s for s in got["spans"]}
    assert set(by_name) == {"GET /checkout", "SELECT orders"}
    services = {p["serviceName"] for p in got["processes"].values()}
    assert services == {"frontend", "orders-db"}
    db = by_name["SELECT orders"]
    assert db["references"] == [
        {"refType": "CHILD_OF", "traceID": spans[0].trace_id, "spanID": spans[0].span_id}
    ]
    # Declared times, ten minutes in the past, in whole microseconds (what Jaeger keeps), rounded as the
    # operator's own export rounds them (core/toolplane/traces.py: the duration is exactly the declared one).
    assert db["startTime"] == round(spans[1].start * 1e6)
    assert db["duration"] == round((spans[1].end - spans[1].start) * 1e6)
    tags = {t["key"]: t["value"] for t in db["tags"]}
    assert tags["db.statement"] == "SELECT * FROM orders WHERE customer_id = ?"
    found = httpx2.get(
        f"{store.query_url}/api/traces", params={"service": "frontend", "lookback": "1h", "limit": "20"}
    ).json()["data"]
    assert [t["traceID"] for t in found] == [spans[0].trace_id]


def test_namespaces_have_separate_trace_stores(traces: TracesBackend, tool_namespaces):
    ns, other = tool_namespaces
    mine, theirs = traces.instance(ns), traces.instance(other)
    assert mine.query_url != theirs.query_url
    spans = checkout_trace(time.time())
    mine.load(spans)
    assert httpx2.get(f"{theirs.query_url}/api/traces/{spans[0].trace_id}").status_code == 404
    assert httpx2.get(f"{theirs.query_url}/api/services").json()["data"] in (None, [])
    traces.release(other)
    with pytest.raises(httpx2.ConnectError):
        httpx2.get(f"{theirs.query_url}/api/services")
    traces.release(ns)
