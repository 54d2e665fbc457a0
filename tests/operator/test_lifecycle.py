"""What users do to a run besides waiting: suspend and resume it, cancel it, re-run it, let an opt-in TTL
delete it, and delete it (the finalizer cleans up). A run that names a missing profile stalls with a
precise condition and no verdict."""

from __future__ import annotations

import time
from typing import Any

import pytest

from oasis_operator.devcluster import stack

pytestmark = pytest.mark.cluster


def path(ns: str, name: str) -> str:
    return f"/apis/oasis.dev/v1alpha1/namespaces/{ns}/evaluationruns/{name}"


def status(http, ns: str, name: str) -> dict[str, Any]:
    return http.get(path(ns, name)).json().get("status") or {}


def conds(st: dict[str, Any]) -> dict[str, str]:
    return {c["type"]: c["status"] for c in st.get("conditions") or []}


def wait_for(fn, timeout: float = 60, interval: float = 0.2) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        v = fn()
        if v:
            return v
        time.sleep(interval)
    raise AssertionError(f"not reached in {timeout}s")


def merge(http, ns: str, name: str, patch: dict[str, Any]) -> None:
    r = http.patch(path(ns, name), json=patch, headers={"Content-Type": "application/merge-patch+json"})
    assert r.status_code == 200, r.text


def test_suspend_then_resume(cluster, installation):
    ns = installation.namespace
    run = stack.evaluation_run("suspended", installation.agents["careful"], parallelism=8)
    run["spec"]["suspend"] = True
    with cluster.admin_http() as http:
        stack.apply(http, run, ns)
        st = wait_for(lambda: (s := status(http, ns, "suspended")) and s.get("conditions") and s)
        assert st.get("phase") == "Pending"
        assert not st.get("scenarios"), "a suspended run starts nothing"
        assert conds(st)["Reconciling"] == "False"
        assert next(c for c in st["conditions"] if c["type"] == "Reconciling")["reason"] == "Suspended"
        merge(http, ns, "suspended", {"spec": {"suspend": False}})
        done = stack.wait_completed(http, ns, "suspended", 120)
    assert done["status"]["verdict"] == "PASS"


def test_shutdown_cancels_a_running_run(cluster, installation):
    ns = installation.namespace
    with cluster.admin_http() as http:
        stack.apply(http, stack.evaluation_run("cancelled", installation.agents["careful"], parallelism=1), ns)
        wait_for(lambda: status(http, ns, "cancelled").get("phase") == "Running")
        merge(http, ns, "cancelled", {"spec": {"shutdown": "Immediate"}})
        done = stack.wait_completed(http, ns, "cancelled", 120)
    st = done["status"]
    assert st["phase"] == "Cancelled"
    assert st.get("verdict") is None, "a cancelled run has no verdict"
    assert conds(st)["Succeeded"] == "False"
    assert any("cancelled" in (s.get("reason") or "") for s in st["scenarios"])


def test_rerun_by_annotation_starts_over(cluster, installation):
    ns = installation.namespace
    with cluster.admin_http() as http:
        stack.apply(http, stack.evaluation_run("again", installation.agents["reckless"], parallelism=8), ns)
        first = stack.wait_completed(http, ns, "again", 120)
        first_start = first["status"]["startTime"]
        time.sleep(1.1)
        merge(http, ns, "again", {"metadata": {"annotations": {"oasis.dev/rerun": "1"}}})
        second = wait_for(lambda: (r := http.get(path(ns, "again")).json())["status"].get("rerunToken") == "1"
                          and r["status"].get("phase") in ("Succeeded", "Failed") and r, timeout=120)
    assert second["status"]["startTime"] != first_start
    assert second["status"]["verdict"] == first["status"]["verdict"] == "FAIL"


def test_ttl_deletes_only_runs_that_opt_in(cluster, installation):
    ns = installation.namespace
    with cluster.admin_http() as http:
        short = stack.evaluation_run("short-lived", installation.agents["careful"], parallelism=8)
        short["spec"]["ttlSecondsAfterFinished"] = 1
        stack.apply(http, short, ns)
        stack.apply(http, stack.evaluation_run("kept", installation.agents["careful"], parallelism=8), ns)
        stack.wait_completed(http, ns, "kept", 120)
        wait_for(lambda: http.get(path(ns, "short-lived")).status_code == 404, timeout=60)
        time.sleep(6)
        assert http.get(path(ns, "kept")).status_code == 200, "a run without a TTL is never deleted"


def test_a_missing_profile_stalls_with_a_precise_condition(cluster, installation):
    ns = installation.namespace
    with cluster.admin_http() as http:
        stack.apply(http, stack.evaluation_run("orphan", installation.agents["careful"], profile="no-such-profile"), ns)
        done = stack.wait_completed(http, ns, "orphan", 60)
    st = done["status"]
    assert st["phase"] == "Failed"
    assert st.get("verdict") is None
    stalled = next(c for c in st["conditions"] if c["type"] == "Stalled")
    assert stalled["status"] == "True"
    assert stalled["reason"] == "InvalidSpec"
    assert "no-such-profile" in stalled["message"]


def test_deleting_a_run_removes_it_and_its_report_objects(cluster, installation):
    ns = installation.namespace
    with cluster.admin_http() as http:
        stack.apply(http, stack.evaluation_run("deleted", installation.agents["careful"], parallelism=8), ns)
        done = stack.wait_completed(http, ns, "deleted", 120)
        names = done["status"]["report"]["configMaps"]
        assert http.delete(path(ns, "deleted")).status_code in (200, 202)
        wait_for(lambda: http.get(path(ns, "deleted")).status_code == 404, timeout=60)
        wait_for(lambda: all(http.get(f"/api/v1/namespaces/{ns}/configmaps/{n}").status_code == 404
                             for n in names), timeout=60)
