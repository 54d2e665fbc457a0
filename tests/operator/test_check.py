"""``oasis check``: against the embedded control plane with the operator running, every check passes;
each thing a user can get wrong makes its check fail with what to do, and the exit code is 1."""

from __future__ import annotations

import json
import subprocess
import sys
from typing import Any

import httpx2
import pytest

from oasis_operator.cli.check import _check_audit_file, first_difference
from oasis_operator.devcluster import kube


def oasis_check(cluster: Any, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "oasis_operator.cli", "check", "--kubeconfig", str(cluster.kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=120,
    )


def lines(out: str) -> dict[str, tuple[str, str]]:
    found = {}
    for line in out.splitlines():
        parts = line.split(None, 2)
        if len(parts) == 3 and parts[0] in ("OK", "WARN", "FAIL"):
            found[parts[1]] = (parts[0], parts[2])
    return found


@pytest.mark.cluster
def test_everything_in_place_passes(cluster, installation):
    done = oasis_check(
        cluster,
        "--operator-user",
        "oasis-operator",
        "--operator-group",
        "system:masters",
        "--audit-log",
        str(cluster.audit_log),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    found = lines(done.stdout)
    assert {k: v[0] for k, v in found.items()} == {
        "api": "OK",
        "crds": "OK",
        "rbac": "OK",
        "audit": "OK",
        "nodes": "OK",
    }
    assert "installed and current" in found["crds"][1]
    assert "logged after" in found["audit"][1]
    assert "may also write cluster-scoped" in found["rbac"][1]
    assert "Ready and tainted" in found["nodes"][1]
    assert done.stdout.strip().endswith("5 of 5 checks passed")


@pytest.mark.cluster
def test_each_problem_fails_its_check_and_says_what_to_do(cluster, installation, admin, namespace, tmp_path):
    # A ServiceAccount bound to nothing, an audit log nobody writes, a pool no node is in.
    kube.expect(
        admin.post(f"/api/v1/namespaces/{namespace}/serviceaccounts", json={"metadata": {"name": "bare"}}),
        "create sa",
        201,
    )
    silent = tmp_path / "audit.log"
    silent.write_text("")
    done = oasis_check(
        cluster,
        "--operator",
        f"{namespace}/bare",
        "--audit-log",
        str(silent),
        "--audit-timeout",
        "2",
        "--pool",
        "pool.example/name=none",
    )
    assert done.returncode == 1
    found = lines(done.stdout)
    assert found["rbac"][0] == "FAIL"
    assert f"ServiceAccount {namespace}/bare may not:" in found["rbac"][1]
    assert "rbac.create" in found["rbac"][1]
    assert found["audit"][0] == "FAIL"
    assert "was not logged within 2 s" in found["audit"][1]
    assert found["nodes"][0] == "FAIL"
    assert "no node carries pool.example/name=none" in found["nodes"][1]
    assert found["crds"][0] == "OK"
    missing_sa = oasis_check(
        cluster, "--operator", f"{namespace}/nobody", "--audit-log", str(cluster.audit_log)
    )
    assert lines(missing_sa.stdout)["rbac"] == (
        "FAIL",
        f"ServiceAccount {namespace}/nobody does not exist (is the chart installed there? --operator)",
    )


@pytest.mark.parametrize(
    ("want", "got", "where"),
    [
        ({"a": {"b": [1, 2]}}, {"a": {"b": [1, 2]}, "server": "default"}, None),
        ({"a": {"b": [1, 2]}}, {"a": {"b": [1, 3]}}, ".a.b[1]"),
        ({"versions": [{"schema": {"x": 1}}]}, {"versions": [{"schema": {}}]}, ".versions[0].schema.x"),
        (
            {"names": {"shortNames": ["orun"]}},
            {"names": {"shortNames": ["orun", "old"]}},
            ".names.shortNames",
        ),
    ],
    ids=["what-the-server-adds-is-no-difference", "a-changed-item", "a-missing-field", "a-longer-list"],
)
def test_a_stale_crd_is_found_at_its_first_difference(want, got, where):
    assert first_difference(want, got) == where


async def test_the_audit_check_follows_the_log_through_a_rotation(tmp_path) -> None:
    """The API server renames a full log and starts a new one; the check's own request may land in
    either. Here the log rotates just as the request is made, so its event is in the new file only."""
    log = tmp_path / "audit.log"
    log.write_bytes(b'{"auditID": "earlier", "stage": "ResponseComplete"}\n' * 1000)

    def api_server(request: httpx2.Request) -> httpx2.Response:
        log.rename(tmp_path / "audit-2026-12-02T03-00-00.000.log")
        log.write_text(
            json.dumps({"auditID": request.headers["Audit-ID"], "stage": "ResponseComplete"}) + "\n"
        )
        return httpx2.Response(200, json={"kind": "Namespace"})

    async with httpx2.AsyncClient(transport=httpx2.MockTransport(api_server), base_url="https://api") as http:
        finding = await _check_audit_file(http, log, timeout=3.0)
    assert finding.status == "OK", finding
