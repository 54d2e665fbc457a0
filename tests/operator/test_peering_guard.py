"""The guard against a second operator (decision 0114), on the control plane: two operators that
share a kopf peering object never reconcile at once: one of a higher priority makes the other pause
while it is alive; once it stops, the other resumes. A peering object that cannot be made is refused
with one line saying why."""

from __future__ import annotations

import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import pytest

from oasis_operator.devcluster import kube, stack

pytestmark = pytest.mark.cluster


def run(name: str) -> dict[str, Any]:
    """A run whose Profile does not exist: an operator that reconciles it says so in its status at once."""
    return {
        "apiVersion": "oasis.dev/v1alpha1",
        "kind": "EvaluationRun",
        "metadata": {"name": name},
        "spec": {
            "profileRef": {"name": "not-yet"},
            "agent": {"adapter": "http", "endpoint": "http://agent"},
            "tier": 1,
            "incomplete": True,
            "scenarios": {"suite": "s"},
        },
    }


def reconciled(admin: Any, ns: str, name: str) -> bool:
    got = admin.get(f"/apis/oasis.dev/v1alpha1/namespaces/{ns}/evaluationruns/{name}").json()
    return bool((got.get("status") or {}).get("conditions"))


def peers(admin: Any, ns: str, name: str) -> dict[str, Any]:
    got = admin.get(f"/apis/kopf.dev/v1/namespaces/{ns}/kopfpeerings/{name}")
    return dict(got.json().get("status") or {}) if got.status_code == 200 else {}


def wait_for(check: Any, what: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        assert time.monotonic() < deadline, f"not within {timeout}s: {what}"
        time.sleep(0.5)


def patched(log_dir: Path, ns: str, name: str) -> bool:
    """Whether the operator logging in ``log_dir`` wrote the run's status."""
    text = (log_dir / "operator.log").read_text(errors="replace")
    return f"/namespaces/{ns}/evaluationruns/{name}/status" in text


def test_an_operator_of_higher_priority_in_the_peering_takes_over_and_hands_back(
    cluster: Any, admin: Any, tmp_path: Path
) -> None:
    ns = f"guard-{kube.random_suffix(6)}"
    stack.install_crds(admin)
    stack.ensure_namespace(admin, ns)
    first, second = stack.Processes(tmp_path / "first"), stack.Processes(tmp_path / "second")

    def start(procs: stack.Processes, priority: int) -> None:
        procs.operator(
            cluster.dev.operator_kubeconfig,
            cluster.audit_log,
            namespaces=[ns],
            extra_args=["--peering", "oasis-operator", "--peering-priority", str(priority)],
        )

    try:
        start(first, 0)
        stack.apply(admin, run("before"), ns)
        wait_for(lambda: reconciled(admin, ns, "before"), "the only operator reconciles")
        wait_for(lambda: len(peers(admin, ns, "oasis-operator")) == 1, "the operator's keep-alive")

        start(second, 1)  # a debugging operator, say: the first pauses in its favour
        wait_for(
            lambda: len(peers(admin, ns, "oasis-operator")) == 2, "the second operator joins the peering"
        )
        wait_for(
            lambda: "Pausing operations in favour of" in (tmp_path / "first" / "operator.log").read_text(),
            "the first pauses",
        )
        stack.apply(admin, run("during"), ns)
        wait_for(lambda: patched(tmp_path / "second", ns, "during"), "the second reconciles")
        time.sleep(5)
        assert not patched(tmp_path / "first", ns, "during"), (
            "the paused operator reconciled beside the other"
        )

        second.stop()  # leaves the peering on the way out
        wait_for(lambda: len(peers(admin, ns, "oasis-operator")) == 1, "the second operator leaves")
        stack.apply(admin, run("after"), ns)
        wait_for(lambda: patched(tmp_path / "first", ns, "after"), "the first resumes and reconciles")
    finally:
        second.stop()
        first.stop()
        kube.delete_namespace(admin, ns)


def test_a_peering_that_cannot_be_created_is_refused_in_one_line(cluster: Any, admin: Any) -> None:
    stack.install_crds(admin)
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "oasis_operator.cli",
            "operator",
            "run",
            "--kubeconfig",
            str(cluster.dev.operator_kubeconfig),
            "--audit-log",
            str(cluster.audit_log),
            "--namespace",
            "default",
            "--peering",
            "Not_A_Name",
        ],
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert done.returncode == 2
    # (A served namespace that does not exist yet is a warning, not a refusal: the walkthrough's
    # operator starts before its agents' namespace is made.)
    assert (
        "--peering Not_A_Name: creating KopfPeering Not_A_Name in namespace default: HTTP 422" in done.stderr
    )
    assert "Traceback" not in done.stderr
