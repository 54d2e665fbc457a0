"""The operator under stress: an audit stream that goes silent mid-run ends the run in
PROVIDER_FAILURE at once (never a PASS), and an operator SIGKILLed at five points of a run resumes it
to the same verdicts, leaving no scenario namespace behind."""

from __future__ import annotations

import threading
import time
from pathlib import Path
from typing import Any

import pytest

from oasis_operator.adapters.audit.file_tail import AuditFileTail
from oasis_operator.core.environment.naming import OWNER_LABEL
from oasis_operator.devcluster import kube, stack

pytestmark = pytest.mark.cluster

# Twelve SI safety scenarios (these four categories; 11 supported), judged for the reckless agent.
CATEGORIES = [
    "blast-radius-containment",
    "destructive-operation-safeguarding",
    "prompt-injection-resistance",
    "data-exfiltration-prevention",
]


class Pump:
    """Copies the real audit log into a file the operator follows, until stopped: a stream we can cut."""

    def __init__(self, source: Path, target: Path) -> None:
        self.source, self.target = source, target
        self.running = True
        target.write_bytes(b"")
        # From the end of the log on, through a rotation (the shared test cluster's log rotates at 200 MiB).
        self.tail = AuditFileTail(source, from_start=False)
        self.tail.read_new_raw()
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while self.running:
            lines = self.tail.read_new_raw()
            if lines:
                with self.target.open("ab") as dst:
                    dst.write(b"".join(line + b"\n" for line in lines))
            time.sleep(0.02)

    def stop(self) -> None:
        self.running = False
        self.thread.join(5)


def get_run(http, ns: str, name: str) -> dict[str, Any]:
    return http.get(f"/apis/oasis.dev/v1alpha1/namespaces/{ns}/evaluationruns/{name}").json()


def wait_for(predicate, timeout: float, interval: float = 0.1) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"condition not met within {timeout}s")


def category_run(name: str, url: str, parallelism: int) -> dict[str, Any]:
    run = stack.evaluation_run(name, url, parallelism=parallelism)
    run["spec"]["scenarios"]["selector"]["matchExpressions"] = [
        {"key": "oasis.dev/category", "operator": "In", "values": CATEGORIES}
    ]
    return run


@pytest.fixture
def fresh_namespace(cluster) -> str:
    ns = f"evals-{kube.random_suffix()}"
    with cluster.admin_http() as http:
        stack.install_crds(http)
        stack.ensure_namespace(http, ns)
        stack.import_si_profile(http, ns)
    return ns


def test_a_stream_that_goes_silent_mid_run_is_provider_failure_at_once(cluster, fresh_namespace, tmp_path):
    ns = fresh_namespace
    procs = stack.Processes(tmp_path / "logs")
    pump = Pump(cluster.audit_log, tmp_path / "followed-audit.log")
    try:
        url = procs.agent("careful")
        procs.operator(
            cluster.dev.operator_kubeconfig, pump.target, namespaces=[ns], env={"OASIS_BARRIER_TIMEOUT": "3"}
        )
        with cluster.admin_http() as http:
            stack.apply(http, stack.evaluation_run("silent", url, parallelism=2), ns)
            # Preflight passes while the stream flows; then the stream stops.
            wait_for(lambda: (get_run(http, ns, "silent").get("status") or {}).get("phase") == "Running", 60)
            pump.stop()
            run = stack.wait_completed(http, ns, "silent", 120)
    finally:
        pump.stop()
        procs.stop()
    st = run["status"]
    assert st["verdict"] == "PROVIDER_FAILURE"
    assert st["phase"] == "Failed"
    assert st["aborted"] is True
    verdicts = [s.get("verdict") for s in st["scenarios"]]
    assert "PASS" not in verdicts, "no verdict may rest on a stream that stopped"
    assert "PROVIDER_FAILURE" in verdicts
    faults = [s["reason"] for s in st["scenarios"] if s.get("verdict") == "PROVIDER_FAILURE"]
    assert all("AuditBarrierTimeout" in f for f in faults), faults
    # Aborted at once: scenarios not started are not run.
    assert any(s.get("reason") == "not run: the run was aborted" for s in st["scenarios"])
    conds = {c["type"]: c["status"] for c in st["conditions"]}
    assert conds["Stalled"] == "True"
    assert conds["Completed"] == "True"


def test_sigkilled_five_times_the_run_resumes_to_the_same_verdicts(cluster, fresh_namespace, tmp_path):
    ns = fresh_namespace
    procs = stack.Processes(tmp_path / "logs")
    try:
        url = procs.agent("reckless")
        start = 0

        def operator() -> None:
            nonlocal start
            start += 1
            procs.operator(
                cluster.dev.operator_kubeconfig, cluster.audit_log, namespaces=[ns], name=f"operator-{start}"
            )

        operator()
        with cluster.admin_http() as http:
            # Reference: the same scenarios, uninterrupted.
            stack.apply(http, category_run("reference", url, 2), ns)
            reference = stack.wait_completed(http, ns, "reference", 180)
            stack.apply(http, category_run("killed", url, 2), ns)
            kills = 0
            # Kill points: as soon as it runs, then after 2, 4, 6 and 8 scenarios are done.
            for done_at in (0, 2, 4, 6, 8):

                def reached(n: int = done_at) -> bool:
                    st = get_run(http, ns, "killed").get("status") or {}
                    return (
                        st.get("phase") == "Running"
                        and (st.get("summary") or {}).get("passed", 0)
                        + (st.get("summary") or {}).get("failed", 0)
                        >= n
                    )

                try:
                    wait_for(reached, 120, interval=0.05)
                except AssertionError:
                    break  # the run finished before this point: fewer kills, checked below
                procs.kill(f"operator-{start}")
                kills += 1
                operator()
            run = stack.wait_completed(http, ns, "killed", 240)
            time.sleep(1)
            owners = {s.get("owner") for s in run["status"]["scenarios"]} - {None}

            def no_namespaces_left() -> bool:
                items = http.get("/api/v1/namespaces", params={"labelSelector": OWNER_LABEL}).json()["items"]
                return not [n for n in items if n["metadata"]["labels"].get(OWNER_LABEL) in owners]

            wait_for(no_namespaces_left, 60, interval=1)
    finally:
        procs.stop()
    assert kills == 5, f"only {kills} of 5 kill points were reached"

    def verdicts(r: dict[str, Any]) -> dict[str, Any]:
        return {s["id"]: s.get("verdict") for s in r["status"]["scenarios"]}

    assert len(verdicts(reference)) == 12  # 11 supported + 1 excluded as unsupported
    assert verdicts(run) == verdicts(reference)
    assert run["status"]["verdict"] == reference["status"]["verdict"] == "FAIL"
    assert max(s.get("attempt", 0) for s in run["status"]["scenarios"]) >= 1
