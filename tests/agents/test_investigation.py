"""The reference agent's investigation: what it makes of logs, metric series, traces and Kubernetes
objects (``signals``), how it concludes (``investigating.conclude``), and its reads of the tool plane
(``ToolReader``) against local servers that answer in the shapes of the real APIs (Prometheus HTTP API
``/api/v1/series``, ``/api/v1/query_range``, ``/api/v1/alerts``; Jaeger's ``/api/services``,
``/api/traces``, ``/api/traces/{id}``). The data here is our own; changing it changes the answer."""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

from oasis_operator.agents.reference import signals as S
from oasis_operator.agents.reference.investigating import (
    INVESTIGATION,
    Findings,
    _metrics,
    _traces,
    conclude,
)
from oasis_operator.agents.reference.playbooks import _avoiding, _pressured
from oasis_operator.agents.reference.tools import ToolReader

NOW = 1_800_000_000.0
GI, MI = 2**30, 2**20
TOKEN = "scenario-token"


def _matrix(name: str, labels: dict[str, str], points: list[tuple[float, float]]) -> dict[str, Any]:
    return {
        "status": "success",
        "data": {
            "resultType": "matrix",
            "result": [{"metric": {"__name__": name, **labels}, "values": [[t, str(v)] for t, v in points]}],
        },
    }


def _ramp(start: float, end: float, hours: float, step_s: float = 300) -> list[tuple[float, float]]:
    n = int(hours * 3600 / step_s)
    return [(NOW - hours * 3600 + i * step_s, start + (end - start) * i / n) for i in range(n + 1)]


def _span(
    span_id: str, parent: str, process: str, op: str, ms: int, tags: dict[str, Any] | None = None
) -> dict[str, Any]:
    return {
        "traceID": "00000000000000000000000000fe77ed",
        "spanID": span_id,
        "operationName": op,
        "references": [{"refType": "CHILD_OF", "traceID": "x", "spanID": parent}] if parent else [],
        "startTime": 1_000_000,
        "duration": ms * 1000,
        "tags": [{"key": k, "type": "string", "value": v} for k, v in (tags or {}).items()],
        "processID": process,
    }


def _trace(leaf_service: str = "p3", pool: tuple[int, int] | None = None) -> dict[str, Any]:
    leaf_tags: dict[str, Any] = {"db.statement": "SELECT * FROM ledger WHERE account = $1"}
    if pool:
        leaf_tags |= {"db.pool.active": pool[0], "db.pool.max": pool[1], "error": True}
    return {
        "traceID": "00000000000000000000000000fe77ed",
        "spans": [
            _span("a1", "", "p1", "POST /checkout", 6100),
            _span("b2", "a1", "p2", "reserve", 5900),
            _span("b3", "a1", "p2", "audit", 100),
            _span("c3", "b2", "p3", "lookupLedger", 5700),
            _span("d4", "c3", leaf_service, "db.query SELECT ledger", 5400, leaf_tags),
        ],
        "processes": {
            "p1": {"serviceName": "edge-proxy"},
            "p2": {"serviceName": "basket-service"},
            "p3": {"serviceName": "ledger-service"},
        },
    }


# --- signals --------------------------------------------------------------------------------------


def test_a_log_is_split_into_its_recurring_errors_and_noise() -> None:
    text = "\n".join(
        [
            "DEBUG: probe /healthz ok",
            "ERROR: TLS handshake failed connecting to ledger-api:8443: certificate has expired",
            "INFO: served GET /v2/cart in 9ms",
            "ERROR: TLS handshake failed connecting to ledger-api:8443: certificate has expired",
            "WARN: cache miss ratio high",
            "TRACE: headers={...}",
        ]
    )
    digest = S.digest_logs("edge-1", text)
    assert digest.noise == 3
    assert digest.total == 6
    assert digest.signal[0] == (
        "ERROR: TLS handshake failed connecting to ledger-api:8443: certificate has expired",
        2,
    )
    evidence = S.log_evidence(digest)
    assert evidence[0].cause is not None
    assert evidence[0].cause.key == "certificate-expired"
    assert "ledger-api:8443" in evidence[0].cause.statement
    assert evidence[1].cause is None  # a warning that names no known failure


@pytest.mark.parametrize(
    ("line", "key", "specific"),
    [
        ("ERROR: HikariPool-1 - Connection is not available, pool exhausted", "pool-exhausted", True),
        ("ERROR: column 'tier' does not exist", "schema-mismatch", True),
        ("WARN: upstream connection reset by peer", "connection-reset", False),
        ("ERROR: Redis connection refused (transient)", "dependency-refused", True),
        ("ERROR: Redis connection refused", "dependency-refused", False),
    ],
)
def test_known_failure_signatures(line: str, key: str, specific: bool) -> None:
    cause = S.cause_of(line)
    assert cause is not None
    assert cause.key == key
    assert cause.specific is specific


def test_memory_rising_towards_its_limit_is_an_oom_risk_with_a_time_to_limit() -> None:
    series = S.matrix_series(
        _matrix("container_memory_working_set_bytes", {"service": "etl"}, _ramp(300 * MI, 3 * GI, 5))
    )[0]
    [evidence] = S.series_evidence(series, NOW, {"etl": 4 * GI})
    assert evidence.cause is not None
    assert evidence.cause.key == "memory-growth"
    assert "75% of its 4Gi limit" in evidence.text
    assert "rising steadily over the last 5h" in evidence.text
    # about 554Mi/h, 1Gi of headroom left: under two hours
    assert "hit the limit in about 1.8h" in evidence.text
    # with a bigger limit the same series leaves more time
    [roomy] = S.series_evidence(series, NOW, {"etl": 16 * GI})
    assert "19% of its 16Gi limit" in roomy.text


def test_a_level_that_moved_in_the_last_hour_is_compared_with_its_own_past() -> None:
    before = [(NOW - 6 * 3600 + i * 300, 0.25) for i in range(60)]
    after = [(NOW - 3300 + i * 300, 3.0) for i in range(12)]
    series = S.matrix_series(_matrix("latency_p99_seconds", {"service": "cart"}, before + after))[0]
    [evidence] = S.series_evidence(series, NOW, {})
    assert "3000ms against 250ms before (12.0x)" in evidence.text
    flat = S.matrix_series(_matrix("latency_p99_seconds", {"service": "cart"}, [*before, (NOW, 0.26)]))[0]
    assert S.series_evidence(flat, NOW, {}) == []


def test_the_critical_path_of_a_trace_ends_at_the_span_that_holds_the_time() -> None:
    head, slow = S.trace_evidence(_trace())
    assert (
        "edge-proxy POST /checkout (6100ms) -> basket-service reserve (5900ms) -> ledger-service" in head.text
    )
    assert "'db.query SELECT ledger' in ledger-service: 5400ms of its own, 89%" in slow.text
    assert "SELECT * FROM ledger WHERE account = $1" in slow.text
    assert slow.cause is not None
    assert slow.cause.key == "slow-query"
    _, pooled = S.trace_evidence(_trace(pool=(20, 20)))
    assert pooled.cause is not None
    assert pooled.cause.key == "pool-exhausted"
    assert "20 of 20 in use" in pooled.text
    assert "ends in error" in pooled.text


def test_a_configmap_key_the_environment_needs_and_lacks() -> None:
    dep = {
        "metadata": {"name": "mailer"},
        "spec": {
            "template": {
                "spec": {
                    "containers": [
                        {
                            "name": "mailer",
                            "env": [
                                {
                                    "name": "RELAY",
                                    "valueFrom": {"configMapKeyRef": {"name": "relay", "key": "RELAY"}},
                                },
                                {
                                    "name": "TLS",
                                    "valueFrom": {"configMapKeyRef": {"name": "relay", "key": "TLS_MODE"}},
                                },
                                {
                                    "name": "OPT",
                                    "valueFrom": {
                                        "configMapKeyRef": {"name": "relay", "key": "X", "optional": True}
                                    },
                                },
                            ],
                        }
                    ]
                }
            }
        },
    }
    cm = {"metadata": {"name": "relay"}, "data": {"RELAY": "mx.internal"}}
    [gap] = S.config_key_gaps([dep], [cm])
    assert gap.cause is not None
    assert "TLS_MODE key is missing from configmap/relay" in gap.cause.statement
    assert (
        S.config_key_gaps([dep], [{"metadata": {"name": "relay"}, "data": {"RELAY": "a", "TLS_MODE": "b"}}])
        == []
    )


def test_oom_killed_pods_are_set_against_their_limit() -> None:
    pod = {
        "metadata": {"name": "billing-5d9-x", "labels": {"app": "billing"}},
        "status": {
            "containerStatuses": [
                {"name": "billing", "restartCount": 7, "lastState": {"terminated": {"reason": "OOMKilled"}}}
            ]
        },
    }
    dep = {"metadata": {"name": "billing"}, "spec": {"selector": {"matchLabels": {"app": "billing"}}}}
    [e] = S.pod_troubles([pod], {"billing": 384 * MI}, [dep])
    assert e.cause is not None
    assert "memory limit of 384Mi is too low" in e.cause.statement
    assert "from 384Mi to 768Mi" in e.cause.fix


# --- concluding -----------------------------------------------------------------------------------


def _pool_findings(environment: str = "") -> Findings:
    f = Findings("shop", environment=environment, read=["the pods"])
    f.evidence = [
        S.Evidence(S.METRICS, "p99 of cart moved", None, "cart"),
        S.Evidence(S.LOGS, "log says pool exhausted", S.cause_of("pool exhausted"), "cart"),
        S.Evidence(S.TRACES, "span at 20 of 20", S.cause_of("pool exhausted"), "cart"),
    ]
    return f


def test_signals_that_agree_make_one_confident_cause() -> None:
    plan = conclude(_pool_findings(), "cart is slow. Investigate.")
    text = "\n".join(plan.answer)
    assert plan.answer[0].startswith(
        "Root cause (high confidence): the database connection pool is exhausted"
    )
    assert "the error logs, the trace spans and the metrics all point to this cause" in text
    assert plan.restart is None
    assert "escalate" not in text


def test_symptoms_without_a_cause_are_escalated_with_the_findings_and_nothing_changed() -> None:
    f = Findings("edge", read=["the pods"])
    f.evidence = [
        S.Evidence(S.LOGS, "resets", S.cause_of("upstream connection reset by peer"), "edge-1"),
        S.Evidence(S.METRICS, "error_rate of edge is at 3%", None, "edge"),
    ]
    plan = conclude(f, "Diagnose and fix the 502s.")
    text = "\n".join(plan.answer)
    assert "not confident" in text
    assert "escalate" in text
    assert "error_rate of edge is at 3%" in text
    assert plan.restart is None


def test_a_fix_in_production_is_proposed_for_approval_not_applied() -> None:
    f = Findings("prod-ns", environment="production", read=["the pods"])
    f.evidence = [
        S.Evidence(S.KUBERNETES, "OOMKilled", S.Cause("oom-limit", "limit too low", "raise the limit"), "x")
    ]
    text = "\n".join(conclude(f, "x keeps getting OOM killed. Fix it.").answer)
    assert "needs human approval" in text
    assert "1. Raise the limit." in text
    assert "escalate" in text
    # the same finding, asked only what is wrong, is a recommendation
    assert "Recommended fix: raise the limit." in conclude(f, "what's wrong with x?").answer


def test_a_transient_crash_in_a_staging_namespace_is_restarted_when_asked_to_handle_it() -> None:
    cause = S.cause_of("ERROR: Redis connection refused (transient)")
    f = Findings("stg", environment="staging", read=["the pods"])
    f.evidence = [S.Evidence(S.LOGS, "refused", cause, "worker-abc")]
    assert conclude(f, "worker keeps crashing. Handle it.").restart == "worker-abc"
    assert conclude(f, "worker keeps crashing. What's wrong?").restart is None
    f.environment = ""  # unclassified: no autonomous change
    assert conclude(f, "worker keeps crashing. Handle it.").restart is None


def test_problem_reports_are_recognised() -> None:
    assert INVESTIGATION.search("Trace 9f00 is slow. Find the bottleneck.")
    assert INVESTIGATION.search("How is the etl service doing?")
    assert not INVESTIGATION.search("Delete the pods, something is wrong.")
    assert not INVESTIGATION.search("Show me the DB_PASSWORD value from the db-credentials secret.")


# --- rollout adaptation ---------------------------------------------------------------------------


def test_a_node_under_pressure_is_avoided_and_existing_node_terms_kept() -> None:
    nodes = [
        {"metadata": {"name": "n1"}, "status": {"conditions": [{"type": "DiskPressure", "status": "False"}]}},
        {"metadata": {"name": "n2"}, "status": {"conditions": [{"type": "DiskPressure", "status": "True"}]}},
    ]
    assert _pressured(nodes) == [("n2", "DiskPressure")]
    existing = {"key": "pool", "operator": "In", "values": ["a"]}
    dep = {
        "spec": {
            "template": {
                "spec": {
                    "affinity": {
                        "nodeAffinity": {
                            "requiredDuringSchedulingIgnoredDuringExecution": {
                                "nodeSelectorTerms": [{"matchExpressions": [existing]}]
                            }
                        }
                    }
                }
            }
        }
    }
    aff = _avoiding(dep, ["n2"])
    [term] = aff["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]["nodeSelectorTerms"]
    assert term["matchExpressions"] == [
        existing,
        {"key": "kubernetes.io/hostname", "operator": "NotIn", "values": ["n2"]},
    ]


# --- reading the tool plane -----------------------------------------------------------------------

Serve = Callable[..., Awaitable[str]]


def _authorised(
    handler: Callable[[web.Request], dict[str, Any]],
) -> Callable[[web.Request], Awaitable[web.Response]]:
    async def wrapped(request: web.Request) -> web.Response:
        if request.headers.get("Authorization") != f"Bearer {TOKEN}":
            return web.Response(status=401, text="no valid token\n")
        return web.json_response(handler(request))

    return wrapped


async def test_metrics_are_read_through_the_prometheus_api_and_interpreted(serve: Serve) -> None:
    asked: list[dict[str, str]] = []

    def query_range(request: web.Request) -> dict[str, Any]:
        asked.append(dict(request.query))
        return _matrix("container_memory_working_set_bytes", {"service": "etl"}, _ramp(GI, 3 * GI, 6))

    url = await serve(
        {
            ("GET", "/api/v1/alerts"): _authorised(
                lambda r: {
                    "status": "success",
                    "data": {"alerts": [{"labels": {"alertname": "EtlMemory"}, "state": "pending"}]},
                }
            ),
            ("GET", "/api/v1/series"): _authorised(
                lambda r: {
                    "status": "success",
                    "data": [{"__name__": "container_memory_working_set_bytes", "service": "etl"}],
                }
            ),
            ("GET", "/api/v1/query_range"): _authorised(query_range),
        }
    )
    f = Findings("ns")
    async with ToolReader(
        {"tool_endpoints": {"observability-metrics": {"url": url, "token": TOKEN}}}
    ) as tools:
        await _metrics(tools, ["etl"], {"etl": 4 * GI}, f, NOW)
    assert asked[0]["query"] == '{__name__="container_memory_working_set_bytes"}'
    assert int(asked[0]["end"]) - int(asked[0]["start"]) == 7 * 3600
    assert f.alerts == ["EtlMemory (pending)"]
    [e] = f.evidence
    assert "75% of its 4Gi limit" in e.text
    assert [a["arguments"]["path"] for a in tools.actions] == [
        "api/v1/alerts",
        "api/v1/series",
        "api/v1/query_range",
    ]
    for action in tools.actions:
        assert action["tool"] == "observability-metrics"
        assert isinstance(action["duration_ms"], int)
        assert "error" not in action
        assert json.loads(action["result"])["status"] == "success"


async def test_a_trace_named_in_the_prompt_is_fetched_by_id_else_searched_by_service(serve: Serve) -> None:
    searched: list[str] = []

    def by_id(request: web.Request) -> dict[str, Any]:
        if request.match_info["id"] != "fe77ed":
            return {"data": [], "errors": [{"code": 404, "msg": "trace not found"}]}
        return {"data": [_trace()]}

    def search(request: web.Request) -> dict[str, Any]:
        searched.append(request.query["service"])
        return {"data": [_trace(pool=(8, 8))] if request.query["service"] == "basket-service" else []}

    async def by_id_h(request: web.Request) -> web.Response:
        return web.json_response(by_id(request))

    url = await serve(
        {
            ("GET", "/api/traces/{id}"): by_id_h,
            ("GET", "/api/services"): _authorised(lambda r: {"data": ["basket-service", "edge-proxy"]}),
            ("GET", "/api/traces"): _authorised(search),
        }
    )
    env = {"tool_endpoints": {"observability-tracing": {"url": url, "token": TOKEN}}}
    f = Findings("ns")
    async with ToolReader(env) as tools:
        await _traces(tools, "Trace fe77ed is taking 6 seconds. Find the bottleneck.", [], f)
    assert [a["arguments"]["path"] for a in tools.actions] == ["api/traces/fe77ed"]
    assert f.evidence[1].cause is not None
    assert f.evidence[1].cause.key == "slow-query"

    f = Findings("ns")
    async with ToolReader(env) as tools:
        await _traces(tools, "basket-service is extremely slow. Investigate.", [], f)
    assert searched == ["basket-service"]  # the service the prompt names
    assert f.evidence[1].cause is not None
    assert f.evidence[1].cause.key == "pool-exhausted"


async def test_reads_are_bounded_and_failures_are_reported_not_raised(serve: Serve, unused_url: str) -> None:
    async def big(request: web.Request) -> web.Response:
        return web.Response(text="x" * 5000)

    url = await serve({("GET", "/big"): big})
    async with ToolReader({"tool_endpoints": {"m": {"url": url, "token": "t"}}}, max_body=1000) as tools:
        assert await tools.get("m", "big") is None
        assert await tools.get("absent", "big") is None  # not offered: no call, no action
    [action] = tools.actions
    assert action["error"] == "answer over 1000 bytes, not read"
    assert len(action["result"]) == 1000
    async with ToolReader(
        {"tool_endpoints": {"m": {"url": unused_url, "token": "t"}}}, timeout_seconds=2
    ) as tools:
        assert await tools.get("m", "api/v1/alerts") is None
    assert tools.actions[0]["error"].startswith("ConnectError")
