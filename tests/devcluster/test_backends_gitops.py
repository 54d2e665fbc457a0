"""Flux applies a namespace's declared manifests from the git server, reverts a direct edit (drift),
and one namespace's git credential does not reach another's repositories."""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from typing import Any

import httpx2
import pytest

from oasis_operator.adapters.audit.file_tail import AuditFileTail
from oasis_operator.devcluster import DevCluster, kube
from oasis_operator.devcluster.backends.gitops import KUSTOMIZE_USER, GitOpsBackend, manifests

pytestmark = pytest.mark.cluster

MERGE = {"Content-Type": "application/merge-patch+json"}


def config_map(data: dict[str, str]) -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "api-service-config"}, "data": data}


def wait_for(what: str, check: Callable[[], Any], timeout: float = 60) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        got = check()
        if got:
            return got
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(0.25)


def data_of(http: httpx2.Client, namespace: str) -> dict[str, str] | None:
    resp = http.get(f"/api/v1/namespaces/{namespace}/configmaps/api-service-config")
    return resp.json().get("data") if resp.status_code == 200 else None


def test_a_kustomization_applies_the_repository_and_reverts_drift(
    tool_cluster: DevCluster, tool_admin, tool_namespaces, gitops: GitOpsBackend
):
    ns, _ = tool_namespaces
    commit = gitops.push(
        ns, "platform", {"deploy/api-service.yaml": manifests(config_map({"replicas": "3"}))}
    )
    tail = AuditFileTail(tool_cluster.audit_log, from_start=False)
    tail.read_new()
    gitops.sync(tool_admin, ns, "api-service", "platform", path="./deploy", interval="2s")

    assert wait_for("the manifest to be applied", lambda: data_of(tool_admin, ns)) == {"replicas": "3"}
    ks_path = f"/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/{ns}/kustomizations/api-service"
    status = wait_for(
        "the Kustomization to report the commit",
        lambda: (tool_admin.get(ks_path).json().get("status") or {}).get("lastAppliedRevision"),
    )
    assert status == f"main@sha1:{commit}"

    # A direct edit (what an agent would do instead of changing git) is drift: it is reverted.
    edited = tool_admin.patch(
        f"/api/v1/namespaces/{ns}/configmaps/api-service-config",
        content=b'{"data":{"replicas":"5"}}',
        headers=MERGE,
    )
    assert edited.status_code == 200
    assert wait_for("the edit to be reverted", lambda: data_of(tool_admin, ns) == {"replicas": "3"})

    # Both the first apply and the revert are the controller's own audited writes.
    events: list[dict[str, Any]] = []
    assert kube.audit_barrier(tool_admin, tail, sink=events) is not None
    writes = [
        e
        for e in events
        if e["stage"] == "ResponseComplete"
        and e.get("objectRef", {}).get("resource") == "configmaps"
        and e["objectRef"].get("namespace") == ns
        and e["verb"] in ("create", "patch", "update")
    ]
    by_controller = [e for e in writes if e["user"]["username"] == KUSTOMIZE_USER]
    assert len(by_controller) >= 2, [(e["user"]["username"], e["verb"]) for e in writes]
    assert all(e["responseStatus"]["code"] in (200, 201) for e in by_controller)

    # A new commit is picked up: git, not the cluster, is the source of truth.
    gitops.push(ns, "platform", {"deploy/api-service.yaml": manifests(config_map({"replicas": "4"}))})
    assert wait_for("the new commit to be applied", lambda: data_of(tool_admin, ns) == {"replicas": "4"})


def test_a_namespaces_git_credential_reaches_only_its_repositories(gitops: GitOpsBackend, tool_namespaces):
    ns, other = tool_namespaces
    gitops.push(ns, "platform", {"a.yaml": manifests(config_map({"k": "v"}))})
    user, password = gitops.grant(other)
    foreign = gitops.repo_url(ns, "platform").replace("http://", f"http://{user}:{password}@", 1)
    own_user, own_password = gitops.grant(ns)
    own = gitops.repo_url(ns, "platform").replace("http://", f"http://{own_user}:{own_password}@", 1)
    env = {"GIT_TERMINAL_PROMPT": "0", "PATH": "/usr/bin:/bin", "HOME": "/tmp"}
    refused = subprocess.run(
        ["git", "ls-remote", foreign], env=env, capture_output=True, text=True, timeout=30, check=False
    )
    allowed = subprocess.run(
        ["git", "ls-remote", own], env=env, capture_output=True, text=True, timeout=30, check=False
    )
    assert refused.returncode != 0
    assert "Authentication failed" in refused.stderr
    assert allowed.returncode == 0, allowed.stderr
    assert "refs/heads/main" in allowed.stdout
