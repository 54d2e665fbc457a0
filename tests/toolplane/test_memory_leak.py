"""A workload that leaks memory until OOM killed (decision 0067): the plan, the pod's recorded
termination and the series anchored at it agree, for the SI scenario and for varied declarations."""

from __future__ import annotations

import copy
import datetime as dt
import itertools

import pytest

from oasis_operator.core.environment import pod_status
from oasis_operator.core.environment.naming import suffix_for
from oasis_operator.core.environment.plan import plan_environment
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.core.toolplane import memory as M
from tests.toolplane.conftest import CAPABILITY_DOCS

SCENARIO = "infra.capability.da.misleading-signal-001"
BACKENDS = frozenset({"logs", "gitops", "metrics", "alerts", "traces", "resource-metrics"})


def _plan(doc: dict):  # type: ignore[no-untyped-def]
    return plan_environment(
        parse_scenario(copy.deepcopy(doc))[0], suffix=suffix_for("t"), owner="t", backends=BACKENDS
    )


def test_the_scenario_is_planned_with_a_default_limit_and_its_leak() -> None:
    plan = _plan(CAPABILITY_DOCS[SCENARIO])
    assert plan.supported, plan.unsupported
    [dep] = [o for o in plan.manifests if o["kind"] == "Deployment"]
    assert dep["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]["memory"] == "512Mi"
    [leak] = plan.toolplane.leaks
    assert (leak.workload, leak.limit_bytes, leak.restarts, leak.last_oom) == (
        "user-service",
        512 * 2**20,
        5,
        -120.0,
    )
    [w] = [w for w in plan.workloads if w.name == "user-service"]
    assert (w.last_oom, w.life) == (-120.0, M.LIFE_SECONDS)


@pytest.mark.parametrize(
    ("limit", "restarts", "ago", "want_limit", "want_at"),
    [
        (None, 3, "5_minutes_ago", 512 * 2**20, -300.0),
        ("1Gi", 7, "45s ago", 2**30, -45.0),
        ("300M", 2, None, 3e8, -90.0),
    ],
)
def test_a_declared_limit_restarts_and_time_are_used(
    limit: str | None, restarts: int, ago: str | None, want_limit: float, want_at: float
) -> None:
    dep = {"resource": "deployment/cart", "namespace": "shop", "status": "OOMKilled", "restarts": restarts}
    if limit:
        dep["memory_limit"] = limit
    metrics = {
        "resource": "metrics/cart",
        "namespace": "shop",
        "memory_usage_trend": "monotonically_increasing",
    }
    if ago:
        metrics["last_oom_kill"] = ago
    doc = copy.deepcopy(CAPABILITY_DOCS[SCENARIO])
    doc["preconditions"]["environment"]["state"] = [{"resource": "namespace/shop"}, dep, metrics]
    doc["preconditions"]["agent"]["scope"]["namespaces"] = ["shop"]
    plan = _plan(doc)
    assert plan.supported, plan.unsupported
    [leak] = plan.toolplane.leaks
    assert (leak.limit_bytes, leak.restarts, leak.last_oom) == (want_limit, restarts, want_at)


@pytest.mark.parametrize(
    ("status", "trend", "ago", "why"),
    [
        ("CrashLoopBackOff", "monotonically_increasing", "2_minutes_ago", "declared OOMKilled"),
        ("OOMKilled", "decreasing", "2_minutes_ago", "only a rising memory trend"),
        ("OOMKilled", "monotonically_increasing", "soon", "not a time before now"),
    ],
)
def test_a_leak_without_its_oom_killed_workload_or_with_other_words_is_refused(
    status: str, trend: str, ago: str, why: str
) -> None:
    doc = copy.deepcopy(CAPABILITY_DOCS[SCENARIO])
    state = doc["preconditions"]["environment"]["state"]
    state[0]["status"] = status
    state[3]["memory_usage_trend"], state[3]["last_oom_kill"] = trend, ago
    plan = _plan(doc)
    assert not plan.supported
    assert any(why in u.reason for u in plan.unsupported), plan.unsupported


def _pod() -> dict:
    return {
        "metadata": {"name": "api-1", "namespace": "n", "uid": "u"},
        "spec": {"containers": [{"name": "api", "image": "api:1"}]},
    }


@pytest.mark.parametrize(("restarts", "last_oom", "life"), [(5, -120.0, 1200.0), (2, -30.0, 600.0)])
def test_the_recorded_termination_and_the_series_agree(restarts: int, last_oom: float, life: float) -> None:
    now = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)
    status = pod_status.failing_status(_pod(), "OOMKilled", now, restarts, last_oom=last_oom, life=life)
    [cs] = status["containerStatuses"]
    term = cs["lastState"]["terminated"]
    finished = dt.datetime.fromisoformat(term["finishedAt"].replace("Z", "+00:00"))
    started = dt.datetime.fromisoformat(term["startedAt"].replace("Z", "+00:00"))
    assert (finished - now).total_seconds() == last_oom
    assert (finished - started).total_seconds() == life
    assert (term["reason"], term["exitCode"], cs["restartCount"]) == ("OOMKilled", 137, restarts)
    runs = M.lives(restarts, last_oom, life)
    assert dt.datetime.fromisoformat(status["startTime"].replace("Z", "+00:00")) == now + dt.timedelta(
        seconds=runs[0][0]
    )
    # the adapter anchors at the recorded time: here, relative to an import 7 s after the status
    start = now.timestamp() + 7
    leak = M.OomLeak(
        "metrics/api", "n", "Deployment", "api", (("app", "api"),), 512 * 2**20, restarts, last_oom, life
    )
    got = {
        s.name: M.absolute_times(s, start)
        for s in M.leak_series(leak, "api-1", "api", finished.timestamp() - start, 0.0)
    }
    working = got[M.WORKING_SET].samples
    # every life rises monotonically from the baseline to the limit, ending at the recorded kill
    drops = [i for i, (a, b) in enumerate(itertools.pairwise(working)) if b[1] < a[1]]
    assert len(drops) == restarts
    bounds = [0, *(i + 1 for i in drops), len(working)]
    for lo, hi in itertools.pairwise(bounds):
        life_samples = working[lo:hi]
        assert all(b[1] > a[1] for a, b in itertools.pairwise(life_samples))
        assert life_samples[0][1] == pytest.approx(leak.limit_bytes * M.BASELINE_SHARE)
        assert life_samples[-1][1] == pytest.approx(leak.limit_bytes)
    assert start + working[-1][0] == pytest.approx(finished.timestamp())
    # kube-state-metrics' view: the last termination at the recorded time, the restarts counted
    assert got[M.LAST_TIME].samples[-1][1] == pytest.approx(finished.timestamp())
    assert got[M.RESTARTS].samples[-1] == (0.0, float(restarts))
    assert dict(got[M.LAST_REASON].labels)["reason"] == "OOMKilled"
    assert {v for _, v in got[M.LIMIT_SERIES].samples} == {leak.limit_bytes}


def test_without_a_declared_leak_the_last_termination_is_as_before() -> None:
    now = dt.datetime(2026, 3, 1, 12, 0, 0, tzinfo=dt.UTC)
    term = pod_status.failing_status(_pod(), "OOMKilled", now)["containerStatuses"][0]["lastState"][
        "terminated"
    ]
    assert (term["startedAt"], term["finishedAt"]) == ("2026-03-01T11:58:25Z", "2026-03-01T11:58:30Z")
