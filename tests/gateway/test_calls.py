"""How the gateway classifies, records and bounds one call: pure decisions, table-driven."""

from __future__ import annotations

import gzip
import hashlib

import pytest

from oasis_operator.core.evidence.tool_records import ToolRecord, record_from_dict
from oasis_operator.core.gateway.calls import (
    Bucket,
    agent_response_headers,
    body_evidence,
    classify,
    forwarded_request_headers,
)

CLASSIFIED: dict[str, tuple[str, str, str, tuple[str, str]]] = {
    "an instant query": ("observability-metrics", "GET", "/api/v1/query", ("query", "")),
    "a range query sent as a form": ("observability-metrics", "POST", "/api/v1/query_range", ("query", "")),
    "the alert listing": ("observability-metrics", "GET", "/api/v1/alerts", ("list", "alerts")),
    "one trace": ("observability-tracing", "GET", "/api/traces/abc123", ("get", "trace/abc123")),
    "a trace search": ("observability-tracing", "GET", "/api/traces", ("list", "traces")),
    "the services of the tracer": ("observability-tracing", "GET", "/api/services", ("list", "services")),
    "a git fetch": ("gitops", "POST", "/shop/app.git/git-upload-pack", ("get", "repository/app")),
    "a git push (a write)": (
        "gitops",
        "POST",
        "/shop/app.git/git-receive-pack",
        ("update", "repository/app"),
    ),
    "a git fetch advertisement": (
        "gitops",
        "GET",
        "/shop/app.git/info/refs?service=git-upload-pack",
        ("get", "repository/app"),
    ),
    "a git push advertisement": (
        "gitops",
        "GET",
        "/shop/app.git/info/refs?service=git-receive-pack",
        ("update", "repository/app"),
    ),
    "a deletion": ("observability-metrics", "DELETE", "/api/v1/admin/tsdb/delete_series", ("delete", "")),
}


@pytest.mark.parametrize(
    ("interface", "method", "path", "expected"), CLASSIFIED.values(), ids=CLASSIFIED.keys()
)
def test_a_call_is_classified_in_the_si_vocabulary(interface, method, path, expected):
    path, _, query = path.partition("?")
    assert classify(interface, method, path, query) == expected


def test_a_json_body_is_recorded_parsed_with_its_size_and_digest():
    raw = b'{"a": [1, 2]}'
    assert body_evidence(raw, "application/json") == {
        "bytes": len(raw),
        "sha256": hashlib.sha256(raw).hexdigest(),
        "body": {"a": [1, 2]},
    }


def test_a_gzip_body_is_recorded_decoded_but_digested_as_sent():
    raw = gzip.compress(b"0032want abc\n")
    out = body_evidence(raw, "application/x-git-upload-pack-request", "gzip")
    assert out["body"] == "0032want abc\n"
    assert out["sha256"] == hashlib.sha256(raw).hexdigest()


BINARY = {
    "not UTF-8": (b"\xff\xfe\x00", "", ""),
    "text with a NUL": (b"PACK\x00\x00", "application/octet-stream", ""),
    "gzip larger than the limit when decoded": (gzip.compress(b"a" * 5000), "text/plain", "gzip"),
    "an encoding we do not decode": (b"xx", "text/plain", "br"),
}


@pytest.mark.parametrize(("raw", "content_type", "encoding"), BINARY.values(), ids=BINARY.keys())
def test_a_body_that_is_not_text_is_recorded_by_size_and_digest_only(raw, content_type, encoding):
    out = body_evidence(raw, content_type, encoding, limit=1000)
    assert out == {"bytes": len(raw), "sha256": hashlib.sha256(raw).hexdigest(), "binary": True}


def test_the_agents_credentials_never_reach_a_back_end_and_the_scenarios_do():
    sent = forwarded_request_headers(
        [
            ("Authorization", "Bearer agent"),
            ("Cookie", "c"),
            ("Accept", "application/json"),
            ("X-Forwarded-For", "1.2.3.4"),
            ("Git-Protocol", "version=2"),
        ],
        [("Authorization", "Bearer scoped")],
    )
    assert sent == [
        ("Accept", "application/json"),
        ("Git-Protocol", "version=2"),
        ("Authorization", "Bearer scoped"),
    ]


def test_nothing_naming_the_back_end_reaches_the_agent():
    passed = agent_response_headers(
        {
            "Content-Type": "application/json",
            "Server": "VictoriaMetrics",
            "X-Server-Hostname": "vm-0",
            "Location": "http://127.0.0.1:8428/x",
            "Vary": "Accept-Encoding",
            "ETag": "e",
        }
    )
    assert passed == [("Content-Type", "application/json"), ("ETag", "e")]


def test_the_bucket_allows_a_burst_then_the_rate():
    bucket = Bucket.full(3, 0.0)
    allowed = []
    for _ in range(4):
        ok, bucket = bucket.take(0.0, rate=2.0, burst=3)
        allowed.append(ok)
    assert allowed == [True, True, True, False]
    assert bucket.take(0.4, 2.0, 3)[0] is False  # 0.8 of a token
    assert bucket.take(0.5, 2.0, 3)[0] is True


def test_a_gateway_record_reads_back_with_its_optional_fields():
    record = ToolRecord(
        "observability-metrics",
        "list",
        "2026-12-02T04:00:00.000001Z",
        "alerts",
        {"method": "GET", "path": "/api/v1/alerts"},
        {"x": 1},
        200,
        duration_ms=1.5,
        response_meta={"bytes": 7},
        injected=(2,),
        refused="",
    )
    assert record_from_dict(record.to_dict()) == record
    assert "injected" not in ToolRecord("a", "get", "t").to_dict()
