"""The diligent investigation's context: a workload's change history set against when a symptom began
(``history``), the request path from an ingress down to the pods (``paths``), and an init container's
own log read when it fails (``investigating``).

On the in-memory stand-in for the agent's API calls of ``test_reference_remedies`` (``World``) and a
local server answering in the shapes of the Prometheus HTTP API. The names and numbers vary between
tests to show the behaviour follows the data, not a scenario."""

from __future__ import annotations

import datetime as dt
import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest
from aiohttp import web

from oasis_operator.agents.reference import history as H
from oasis_operator.agents.reference import investigating as I
from oasis_operator.agents.reference import paths as P
from oasis_operator.agents.reference import signals as S
from oasis_operator.agents.reference.playbooks import match_task
from oasis_operator.agents.reference.tools import ToolReader
from tests.agents.test_reference_remedies import World, _deployment, _pod, _replicaset

TOKEN = "t0ken"
Serve = Callable[..., Awaitable[str]]


def _stamp(seconds_ago: float) -> str:
    return dt.datetime.fromtimestamp(time.time() - seconds_ago, dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def _event(kind: str, name: str, reason: str, message: str, seconds_ago: float) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{name}.{int(seconds_ago)}"},
        "involvedObject": {"kind": kind, "name": name},
        "reason": reason,
        "message": message,
        "type": "Normal",
        "lastTimestamp": _stamp(seconds_ago),
    }


# --- history: pure --------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("points", "start", "half"),
    [
        # a step from 0.2% to 9% between -40m and -35m: quiet at -40m, half-way up at -35m
        ([(-2700, 0.002), (-2400, 0.002), (-2100, 0.09), (-1800, 0.1), (0, 0.11)], -2400, -2100),
        # a latency that triples slowly: it left its level after -8m and was half-way up at -4m
        ([(-600, 0.2), (-480, 0.22), (-360, 0.3), (-240, 0.4), (0, 0.6)], -480, -240),
    ],
)
def test_the_onset_is_where_a_series_leaves_its_earlier_level(
    points: list[tuple[float, float]], start: float, half: float
) -> None:
    found = H.onset("x", "svc", points)
    assert found is not None
    assert (found.start, found.half) == (start, half)
    assert (found.before, found.now) == (points[0][1], points[-1][1])


@pytest.mark.parametrize(
    "points",
    [[(-600, 0.05), (-300, 0.06), (0, 0.07)], [(-600, 0.3), (-300, 0.2), (0, 0.1)], [(0, 0.5)]],
)
def test_a_series_that_did_not_rise_has_no_onset(points: list[tuple[float, float]]) -> None:
    assert H.onset("x", "svc", points) is None


def test_the_history_dates_each_rollout_and_names_the_revision_to_go_back_to() -> None:
    now = time.time()
    dep = _deployment(
        "ledger", "ledger:2.0.1", available=True, notes={"acme.io/last-deploy": "30 minutes ago"}
    )
    sets = [_replicaset("ledger", 3, "ledger:2.0.1", 60), _replicaset("ledger", 2, "ledger:1.9.4", 9000)]
    sets.append(_replicaset("other", 7, "other:1", 60))
    events = [
        _event("Deployment", "ledger", "ScalingReplicaSet", "Scaled up replica set ledger-3abc to 3", 2400),
        _event("ReplicaSet", "ledger-2abc", "ScalingReplicaSet", "Scaled down replica set ledger-2abc", 2390),
        _event("Deployment", "ledger", "Pulled", "image pulled", 100),
        _event("Deployment", "other", "ScalingReplicaSet", "Scaled up replica set other-7abc to 1", 10),
    ]
    h = H.history(dep, sets, events, now)
    assert h.current == ("ledger:2.0.1",)
    assert [r.number for r in h.revisions] == [3, 2]
    assert h.previous is not None
    assert h.previous.images == ("ledger:1.9.4",)
    assert h.describe() == (
        "deployment/ledger runs ledger:2.0.1 (revision 3); the revision before it (2) ran ledger:1.9.4"
    )
    assert [now - c.at for c in h.changes] == pytest.approx([2400, 2390, 1800], abs=2)
    assert h.changes[-1].what == "its annotation acme.io/last-deploy=30 minutes ago"
    assert not h.changes[-1].recorded

    def began(start: float, half: float) -> H.Onset:
        return H.Onset("x", "ledger", now - start, now - half, 0.0, 1.0)

    # The last change before the symptom was half-way up (a minute's slack), within the hour before.
    chosen = H.preceding(h.changes, began(2450, 2280), 60)
    assert chosen is not None
    assert now - chosen.at == pytest.approx(2390, abs=2)
    # An Event's record is preferred to what an annotation says, even when the annotation is later.
    chosen = H.preceding(h.changes, began(1900, 1750), 60)
    assert chosen is not None
    assert now - chosen.at == pytest.approx(2390, abs=2)
    assert H.preceding(h.changes, began(2280 + 2 * 3600, 2000 + 2 * 3600), 60) is None  # long before
    assert H.preceding(h.changes, began(2700, 2500), 60) is None  # the rollouts came after it was up


# --- history: the investigation -------------------------------------------------------------------------


async def _metrics(serve: Serve, name: str, service: str, points: list[tuple[float, float]]) -> str:
    now = time.time()

    async def series(request: web.Request) -> web.Response:
        assert request.headers.get("Authorization") == f"Bearer {TOKEN}"
        return web.json_response({"status": "success", "data": [{"__name__": name, "service": service}]})

    async def query_range(request: web.Request) -> web.Response:
        values = [[now + t, str(v)] for t, v in points]
        result = [{"metric": {"__name__": name, "service": service}, "values": values}]
        return web.json_response({"status": "success", "data": {"resultType": "matrix", "result": result}})

    async def alerts(request: web.Request) -> web.Response:
        return web.json_response({"status": "success", "data": {"alerts": []}})

    return await serve(
        {
            ("GET", "/api/v1/series"): series,
            ("GET", "/api/v1/query_range"): query_range,
            ("GET", "/api/v1/alerts"): alerts,
        }
    )


def _rolled_out(app: str, new: str, old: str, ago: float) -> World:
    return World(
        "team-7",
        {
            "namespaces": [{"metadata": {"name": "team-7", "labels": {}}}],
            "deployments": [_deployment(app, f"{app}:{new}", available=True)],
            "replicasets": [
                _replicaset(app, 5, f"{app}:{new}", 30),
                _replicaset(app, 4, f"{app}:{old}", 90000),
            ],
            "pods": [_pod(f"{app}-x1", app), _pod(f"{app}-x2", app)],
            "events": [
                _event("Deployment", app, "ScalingReplicaSet", f"Scaled up replica set {app}-5abc to 2", ago),
                _event("Deployment", app, "ScalingReplicaSet", f"Scaled up replica set {app}-5abc to 2", 20),
            ],
            "configmaps": [],
        },
        {},
    )


@pytest.mark.parametrize(
    ("app", "new", "old", "metric", "ago"),
    [
        ("checkout-api", "v7.3.0", "v7.2.8", "http_5xx_ratio", 1500),
        ("inventory", "2024.11.2", "2024.11.1", "request_latency_p99_seconds", 3000),
    ],
)
async def test_a_rollout_just_before_the_symptom_began_is_named_as_its_likely_cause(
    app: str, new: str, old: str, metric: str, ago: float, serve: Serve
) -> None:
    # The symptom is flat until a little after the rollout, then climbs.
    rise = ago - 240
    points = [(-ago - 600, 0.01), (-ago, 0.01), (-rise, 0.2), (-rise + 300, 0.5), (0, 0.6)]
    url = await _metrics(serve, metric, app, points)
    world = _rolled_out(app, new, old, ago)
    found = match_task(f"{app} {metric.replace('_', ' ')} is spiking. What's going on?", "diligent")
    assert found is not None
    assert found[0].__name__ == "investigate_problem"
    async with ToolReader(
        {"tool_endpoints": {"observability-metrics": {"url": url, "token": TOKEN}}}
    ) as tools:
        await I.investigate(world, tools, found[1].string, "diligent")
    text = "\n".join(world.turn.answer)
    first = world.turn.answer[0]
    assert first.startswith("Root cause (medium confidence): the rollout of ")
    assert (
        f"{app}:{new} to deployment/{app} about {ago / 60:.0f} minutes ago (replacing {app}:{old})" in first
    )
    assert f"the {metric.replace('_', ' ')} of {app} began to climb about {ago / 60:.0f} minutes ago" in first
    assert "and the rollout came just before it began, so the new version" in first
    assert f"the new version {new} is the likely cause" in first
    assert f"roll deployment/{app} back to {app}:{old} (kubectl rollout undo deployment/{app})" in text
    assert (
        f"deployment/{app} runs {app}:{new} (revision 5); the revision before it (4) ran {app}:{old}" in text
    )
    # It read the history and the events, and changed nothing.
    assert {("list", "replicasets", None), ("list", "events", None)} <= set(world.calls)
    assert world.writes == []


async def test_a_rollout_within_a_coarsely_sampled_climb_is_named_with_that_caveat(serve: Serve) -> None:
    # Sampled every 5 minutes: still at 0.1% 30 minutes ago, 4% at 25, 8% at 20; rolled out 25 minutes ago.
    points = [(-2400, 0.001), (-1800, 0.001), (-1500, 0.04), (-1200, 0.08), (0, 0.12)]
    url = await _metrics(serve, "error_rate", "payments", points)
    world = _rolled_out("payments", "v3.1.0", "v3.0.4", 1500)
    async with ToolReader(
        {"tool_endpoints": {"observability-metrics": {"url": url, "token": TOKEN}}}
    ) as tools:
        await I.investigate(world, tools, "payments error rate is spiking. What's going on?", "diligent")
    first = world.turn.answer[0]
    assert "the error rate of payments began to climb about 30 minutes ago, from 0.1% to 12% now" in first
    assert "the rollout falls within that climb (it was half-way up about 20 minutes ago)" in first
    assert "so the new version v3.1.0 is the likely cause" in first


async def test_a_rollout_after_the_symptom_began_is_not_blamed(serve: Serve) -> None:
    points = [(-3000, 0.01), (-2700, 0.2), (-2400, 0.5), (0, 0.6)]
    url = await _metrics(serve, "error_rate", "cart", points)
    world = _rolled_out("cart", "v2", "v1", 1200)  # rolled out 20 minutes ago, errors since 45
    async with ToolReader(
        {"tool_endpoints": {"observability-metrics": {"url": url, "token": TOKEN}}}
    ) as tools:
        await I.investigate(world, tools, "cart error rate is spiking. What's going on?", "diligent")
    text = "\n".join(world.turn.answer)
    assert "rollout" not in text
    assert "I am not confident of a root cause" in text


async def test_a_failure_seen_in_the_pods_outranks_a_rollout_that_only_coincides(serve: Serve) -> None:
    points = [(-2400, 0.01), (-1500, 0.01), (-1200, 0.3), (0, 0.4)]
    url = await _metrics(serve, "error_ratio", "ledger", points)
    world = _rolled_out("ledger", "v9", "v8", 1500)
    killed = world.store["pods"]["ledger-x1"]
    killed["status"]["containerStatuses"][0].update(
        ready=False, restartCount=3, lastState={"terminated": {"reason": "OOMKilled", "exitCode": 137}}
    )
    async with ToolReader(
        {"tool_endpoints": {"observability-metrics": {"url": url, "token": TOKEN}}}
    ) as tools:
        await I.investigate(world, tools, "ledger error ratio is spiking. What's going on?", "diligent")
    answer = world.turn.answer
    assert answer[0].startswith("Root cause (high confidence): ledger is OOM killed")
    also = answer.index("Also seen (not the cause as far as I can tell):")
    assert any("rolled out about 25 minutes ago" in line for line in answer[also:])


def test_a_question_about_a_symptom_is_a_problem_report_to_diligent_only() -> None:
    for prompt in ("billing latency is spiking, what's going on?", "What happened to the queue-worker?"):
        found = match_task(prompt, "diligent")
        assert found is not None
        assert found[0].__name__ == "investigate_problem"
        assert match_task(prompt, "hasty") is None
        assert match_task(prompt) is None


# --- the request path -----------------------------------------------------------------------------------


def _init_failing_pod(name: str, app: str, init: str) -> dict[str, Any]:
    pod = _pod(name, app, "PodInitializing")
    pod["status"]["phase"] = "Pending"
    pod["status"]["initContainerStatuses"] = [
        {
            "name": init,
            "ready": False,
            "restartCount": 6,
            "state": {"waiting": {"reason": "CrashLoopBackOff"}},
            "lastState": {"terminated": {"exitCode": 1, "reason": "Error"}},
        }
    ]
    return pod


def _service(name: str, app: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"selector": {"app": app}, "ports": [{"port": 80}]}}


def _slice(service: str, ready: list[bool]) -> dict[str, Any]:
    return {
        "metadata": {"name": f"{service}-s1", "labels": {P.SERVICE_NAME_LABEL: service}},
        "endpoints": [{"addresses": ["10.0.0.1"], "conditions": {"ready": r}} for r in ready],
    }


def _ingress(name: str, service: str) -> dict[str, Any]:
    backend = {"service": {"name": service, "port": {"number": 80}}}
    return {
        "metadata": {"name": name},
        "spec": {"rules": [{"http": {"paths": [{"path": "/", "backend": backend}]}}]},
    }


def _edge(backend: str, init: str, proxy: str, ingress: str, init_log: str, proxy_log: str) -> World:
    proxy_dep = _deployment(proxy, "envoyproxy/envoy:v1.31", available=True)
    return World(
        "edge-3",
        {
            "namespaces": [{"metadata": {"name": "edge-3", "labels": {}}}],
            "deployments": [_deployment(backend, f"{backend}:4", available=False), proxy_dep],
            "pods": [
                _init_failing_pod(f"{backend}-p1", backend, init),
                _init_failing_pod(f"{backend}-p2", backend, init),
                _pod(f"{proxy}-q1", proxy),
            ],
            "services": [_service(backend, backend)],
            "endpointslices": [_slice(backend, [False, False])],
            "ingresses": [_ingress(ingress, backend)],
            "replicasets": [],
            "events": [],
            "configmaps": [],
        },
        {f"{backend}-p1 -c {init}": init_log, f"{proxy}-q1": proxy_log},
    )


@pytest.mark.parametrize(
    ("backend", "init", "proxy", "ingress", "init_log", "what"),
    [
        (
            "orders-db-api",
            "schema-upgrade",
            "edge-envoy",
            "shop-front",
            "FATAL: migration 0007_add_column failed: column already exists",
            "a database migration failed",
        ),
        (
            "search",
            "warm-cache",
            "mesh-proxy",
            "www",
            "ERROR: cannot load index shard 3: permission denied",
            "",
        ),
    ],
)
async def test_a_failing_request_is_traced_hop_by_hop_to_the_init_container_and_its_log(
    backend: str, init: str, proxy: str, ingress: str, init_log: str, what: str
) -> None:
    world = _edge(
        backend, init, proxy, ingress, init_log, "upstream connect error or disconnect/reset before headers"
    )
    async with ToolReader({}) as tools:
        await I.investigate(world, tools, "The site returns 503 errors. Find the root cause.", "diligent")
    answer = world.turn.answer
    text = "\n".join(answer)
    assert answer[0].startswith(
        f"Root cause (high confidence): the init container {init} of {backend} fails: "
    )
    assert f'(its log: "{init_log}")' in answer[0]
    if what:
        assert f"fails: {what} (its log" in answer[0]
    start = answer.index("How the failure travels, from the symptom to the root cause:")
    hops = answer[start + 1 : start + 6]
    assert hops[0] == f"1. ingress/{ingress} routes its requests to service/{backend} port 80."
    assert hops[1].startswith(
        f'2. the proxy deployment/{proxy} on the request path logs "upstream connect error'
    )
    assert hops[2].startswith(f"3. service/{backend} has 0 ready endpoint(s) of 2: nothing can answer")
    assert hops[3] == (
        f"4. service/{backend} selects the pods of deployment/{backend}: 0 of 2 ready "
        f"({backend}-p1 Init:CrashLoopBackOff; {backend}-p2 Init:CrashLoopBackOff)."
    )
    assert hops[4].startswith(f"5. Root cause: the init container {init} of {backend} fails")
    # It read the init container's own log, the ingress, the services and their endpoint slices; no write.
    assert {
        ("get", "pods/log", f"{backend}-p1 -c {init}"),
        ("list", "ingresses", None),
        ("list", "endpointslices", None),
    } <= set(world.calls)
    assert world.writes == []
    assert "The signals agree" in text
    # The proxy's log is told once, as its hop.
    assert sum("upstream connect error" in line for line in answer) == 1


async def test_without_an_edge_symptom_the_request_path_is_not_read() -> None:
    world = _edge("api", "migrate", "sidecar", "pub", "ERROR: migration 1 failed", "upstream connect error")
    async with ToolReader({}) as tools:
        await I.investigate(world, tools, "The api keeps crashing, what's wrong?", "diligent")
    assert ("list", "ingresses", None) not in world.calls
    assert world.turn.answer[0].startswith(
        "Root cause (high confidence): the init container migrate of api fails"
    )


def test_a_log_line_without_a_level_that_names_a_failure_is_signal() -> None:
    digest = S.digest_logs(
        "p",
        "upstream connect error or disconnect/reset before headers\nGET /healthz 200\n[INFO] connection reset",
    )
    assert digest.signal == (("upstream connect error or disconnect/reset before headers", 1),)
    assert digest.noise == 2


@pytest.mark.parametrize(
    ("statuses", "shown"),
    [
        (
            {"initContainerStatuses": [{"name": "a", "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]},
            "Init:CrashLoopBackOff",
        ),
        (
            {
                "initContainerStatuses": [
                    {"name": "a", "state": {"terminated": {"exitCode": 2, "reason": "Error"}}}
                ]
            },
            "Init:Error",
        ),
        (
            {
                "initContainerStatuses": [{"name": "a", "state": {"terminated": {"exitCode": 0}}}],
                "containerStatuses": [{"state": {"waiting": {"reason": "ImagePullBackOff"}}}],
            },
            "ImagePullBackOff",
        ),
        ({"phase": "Running", "containerStatuses": [{"state": {"running": {}}}]}, "Running"),
    ],
)
def test_pod_status_reads_as_kubectl_prints_it(statuses: dict[str, Any], shown: str) -> None:
    assert P.pod_status({"status": statuses}) == shown


@pytest.mark.parametrize(
    ("name", "labels"), [("edge_requests", {"status": "503"}), ("jobs_failed_total", {})]
)
def test_a_counter_is_read_as_its_rate(name: str, labels: dict[str, str]) -> None:
    series = S.Series(name, {"service": "api", **labels}, ((0.0, 1000.0), (600.0, 3400.0), (1200.0, 5800.0)))
    [e] = S.series_evidence(series, 1200.0, {})
    shown = f"{name}{{status=503}}" if labels else name
    assert (
        e.text
        == f"{shown} of api counts about 4 per second over the last 20 minutes (a counter: its rate is what it says)"
    )
    assert e.cause is None
