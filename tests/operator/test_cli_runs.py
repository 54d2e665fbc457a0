"""`oasis get`, `oasis describe` and `oasis run` (also `kubectl oasis ...`) against real runs."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

from oasis_operator.devcluster import stack

pytestmark = pytest.mark.cluster


def oasis(*args: str, timeout: float = 300) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "oasis_operator.cli", *args], capture_output=True, text=True, timeout=timeout
    )


def test_get_and_describe(cluster, installation, finished_runs):
    kc = ["--kubeconfig", str(cluster.kubeconfig), "-n", installation.namespace]
    got = oasis("get", *kc)
    assert got.returncode == 0, got.stderr
    lines = got.stdout.splitlines()
    assert lines[0].split()[:3] == ["NAME", "VERDICT", "PHASE"]
    assert any(line.split()[:3] == ["careful", "PASS", "Incomplete"] for line in lines)  # decision 0105
    assert any(line.split()[:3] == ["reckless", "FAIL", "Failed"] for line in lines)
    described = oasis("describe", "reckless", *kc)
    assert described.returncode == 0, described.stderr
    text = described.stdout
    assert "Verdict:  FAIL" in text
    assert "infra.safety.do.unqualified-destruction-001" in text
    # The deciding audit event, with its principal and audit ID.
    assert "<- deletecollection pods in " in text
    assert "system:serviceaccount:" in text
    assert "audit ID" in text
    missing = oasis("describe", "no-such-run", *kc)
    assert missing.returncode == 2
    assert "not found" in missing.stderr


def test_run_locally_shows_progress_and_exits_with_the_verdict(cluster, installation, tmp_path):
    # The module's operator watches the same namespace: use a namespace of the run's own.
    ns = f"{installation.namespace}-local"
    with cluster.admin_http() as http:
        stack.ensure_namespace(http, ns)
        stack.import_si_profile(http, ns)
    run = stack.evaluation_run("local", installation.agents["reckless"], parallelism=8)
    run["metadata"]["namespace"] = ns
    manifest = tmp_path / "run.yaml"
    manifest.write_text(yaml.safe_dump(run))
    done = oasis(
        "run",
        "-f",
        str(manifest),
        "--kubeconfig",
        str(cluster.dev.operator_kubeconfig),
        "--audit-log",
        str(cluster.audit_log),
    )
    assert done.returncode == 1, done.stderr  # a FAIL verdict fails the command, as a CI gate needs
    assert "Running" in done.stdout
    assert "Done FAIL" in done.stdout
    assert done.stdout.strip().splitlines()[-1].startswith("local: FAIL: ")
    assert done.stdout.strip().endswith("(exit 1)")
    assert Path(manifest).exists()


def test_kubectl_finds_the_plugin(cluster, installation, finished_runs):
    import os

    from oasis_operator.devcluster import binaries

    kubectl = binaries.resolve(quiet=True).path("kubectl")
    env = {
        **os.environ,
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        "KUBECONFIG": str(cluster.kubeconfig),
    }
    out = subprocess.run(
        [str(kubectl), "oasis", "get", "-n", installation.namespace],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert out.returncode == 0, out.stderr
    assert "reckless" in out.stdout
    waited = subprocess.run(
        [str(kubectl), "oasis", "wait", "reckless", "-n", installation.namespace],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
    )
    assert waited.returncode == 1, waited.stdout + waited.stderr
    assert waited.stdout.startswith(f"{installation.namespace}/reckless: FAIL: ")


def test_wait_exits_with_the_verdict_of_a_finished_run(cluster, installation, finished_runs):
    kc = ["--kubeconfig", str(cluster.kubeconfig), "-n", installation.namespace]
    ns = installation.namespace
    failed = oasis("wait", "reckless", *kc, "--timeout", "60s", timeout=120)
    assert failed.returncode == 1, failed.stdout + failed.stderr
    assert failed.stdout.strip().splitlines() == [failed.stdout.strip()]  # one line
    s = finished_runs["reckless"]["status"]["summary"]
    assert failed.stdout.strip() == (
        f"{ns}/reckless: FAIL: {s['passed']} passed, {s['failed']} failed, {s['providerFailures']} provider "
        f"failures, {s['unevaluable']} unevaluable, {s['excluded']} excluded of {s['total']} (exit 1)"
    )
    assert s["failed"] >= 1
    careful = finished_runs["careful"]["status"]
    passed = oasis("wait", "careful", *kc, "--timeout", "60s", timeout=120)
    # The careful run PASSes every SI safety scenario (all executed, the operator has the tool plane), but the
    # run scores no capability dimension, so its report makes no conformance claim: exit 3, never 0.
    assert careful["verdict"] == "PASS"
    assert careful["report"]["incomplete"] is True
    assert passed.returncode == 3, passed.stdout + passed.stderr
    assert passed.stdout.startswith(f"{ns}/careful: PASS (incomplete evaluation: no conformance claim): ")
    missing = oasis("wait", "no-such-run", *kc, "--timeout", "60s", timeout=120)
    assert missing.returncode == 5
    assert "not found" in missing.stderr
    assert missing.stdout == ""


def test_wait_times_out_on_a_run_nobody_evaluates(cluster, installation):
    # No operator watches this namespace: the run stays Pending forever.
    ns = f"{installation.namespace}-idle"
    with cluster.admin_http() as http:
        stack.ensure_namespace(http, ns)
        stack.apply(http, stack.evaluation_run("idle", installation.agents["careful"]), ns)
    kc = ["--kubeconfig", str(cluster.kubeconfig), "-n", ns]
    start = time.monotonic()
    out = oasis("wait", "idle", *kc, "--timeout", "2s", timeout=60)
    assert out.returncode == 4, out.stdout + out.stderr
    assert out.stdout.strip() == f"{ns}/idle: not Completed within 2s (phase Pending) (exit 4)"
    assert time.monotonic() - start < 30
    absent = oasis("wait", "not-yet", *kc, "--timeout", "2s", "--for-creation", timeout=60)
    assert absent.returncode == 4, absent.stdout + absent.stderr
    assert "(phase not created)" in absent.stdout


def test_get_all_namespaces_one_run_and_its_formats(cluster, installation, finished_runs):
    kc = ["--kubeconfig", str(cluster.kubeconfig)]
    wide = oasis("get", "-A", "-o", "wide", *kc)
    assert wide.returncode == 0, wide.stderr
    header = wide.stdout.splitlines()[0].split()
    assert header[:3] == ["NAMESPACE", "NAME", "VERDICT"]
    assert "PROFILE" in header  # the CRD's printer columns, wide ones included, as kubectl shows them
    assert "MESSAGE" in header
    assert header[-1] == "AGE"
    assert any(
        line.split()[:3] == [installation.namespace, "reckless", "FAIL"] for line in wide.stdout.splitlines()
    )
    one = oasis("get", "reckless", "-n", installation.namespace, "-o", "json", *kc)
    assert one.returncode == 0, one.stderr
    named = yaml.safe_load(one.stdout)  # the run itself, as kubectl prints a named object
    assert (named["kind"], named["status"]["verdict"]) == ("EvaluationRun", "FAIL")
    both = oasis("get", "reckless", "-A", *kc)
    assert both.returncode == 2
    assert "-n" in both.stderr


def test_get_watch_prints_a_line_per_change_until_interrupted(cluster, installation, finished_runs):
    import signal

    proc = subprocess.Popen(
        [
            sys.executable,
            "-m",
            "oasis_operator.cli",
            "get",
            "-w",
            "-n",
            installation.namespace,
            "--kubeconfig",
            str(cluster.kubeconfig),
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        assert proc.stdout is not None
        first = [proc.stdout.readline() for _ in range(3)]  # header, careful, reckless
        assert first[0].split()[:2] == ["NAME", "VERDICT"]
        with cluster.admin_http() as http:
            r = http.patch(
                f"/apis/oasis.dev/v1alpha1/namespaces/{installation.namespace}/evaluationruns/careful",
                json={"metadata": {"annotations": {"example.com/touched": "yes"}}},
                headers={"Content-Type": "application/merge-patch+json"},
            )
            assert r.status_code == 200, r.text
        changed = proc.stdout.readline()
        assert changed.split()[:3] == ["careful", "PASS", "Incomplete"], changed
    finally:
        proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
