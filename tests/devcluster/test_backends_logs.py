"""Declared container logs are what an agent reads through the API server (``pods/{name}/log``), the
read is in the audit log, and one namespace's agent cannot read another's logs."""

from __future__ import annotations

import datetime as dt
import os
import subprocess
import threading
import time
from typing import Any

import httpx2
import pytest

from oasis_operator.adapters.audit.file_tail import AuditFileTail
from oasis_operator.devcluster import DevCluster, binaries, kube
from oasis_operator.devcluster.backends.logs import LogLine, PodLogsBackend

pytestmark = pytest.mark.cluster

READ_LOGS = [{"apiGroups": [""], "resources": ["pods", "pods/log"], "verbs": ["get", "list"]}]
#: When each namespace's lines were declared: the lines are placed relative to that moment, so a test
#: that runs long after collection (a full suite on a loaded machine) still reads "30 s ago" as recent.
DECLARED_AT: dict[str, dt.datetime] = {}


def make_pod(http: httpx2.Client, namespace: str, name: str, containers: list[str]) -> None:
    # Bound to a node at creation: the API server finds the kubelet through spec.nodeName.
    pod = {
        "metadata": {"name": name},
        "spec": {
            "nodeName": "worker-1",
            "containers": [{"name": c, "image": f"registry.example/{c}:1.0"} for c in containers],
        },
    }
    kube.expect(http.post(f"/api/v1/namespaces/{namespace}/pods", json=pod), "create pod", 201)


def read_log(
    http: httpx2.Client, namespace: str, pod: str, timeout: float = 10.0, **params: str
) -> httpx2.Response:
    """The log as the agent reads it; the simulator picks up a new ClusterLogs object within moments,
    so the first read may find none yet."""
    deadline = time.monotonic() + timeout
    while True:
        resp = http.get(f"/api/v1/namespaces/{namespace}/pods/{pod}/log", params=params)
        if resp.status_code == 200 or time.monotonic() > deadline:
            return resp
        time.sleep(0.1)


@pytest.fixture
def declared(tool_admin: httpx2.Client, tool_namespaces: tuple[str, str], pod_logs: PodLogsBackend) -> str:
    ns, _ = tool_namespaces
    now = DECLARED_AT[ns] = dt.datetime.now(dt.UTC).replace(microsecond=0)
    make_pod(tool_admin, ns, "checkout-7d9f", ["app", "sidecar"])
    pod_logs.declare(
        tool_admin,
        ns,
        "checkout-7d9f",
        {
            "app": [
                LogLine(now - dt.timedelta(minutes=30), "listening on :8080"),
                LogLine(
                    now - dt.timedelta(minutes=2), "ERROR upstream payments: connection refused", "stderr"
                ),
                LogLine(now - dt.timedelta(seconds=30), "retrying in 5s"),
            ],
            "sidecar": [LogLine(now - dt.timedelta(minutes=29), "proxy ready")],
        },
        previous={"app": [LogLine(now - dt.timedelta(hours=1), "panic: nil map\ngoroutine 1 [running]:")]},
    )
    return ns


CASES: list[tuple[str, dict[str, str], str]] = [
    (
        "the current log is the declared lines in order",
        {"container": "app"},
        "listening on :8080\nERROR upstream payments: connection refused\nretrying in 5s\n",
    ),
    ("each container has its own log", {"container": "sidecar"}, "proxy ready\n"),
    (
        "--previous reads the previous instance's log, a multi-line record as lines",
        {"container": "app", "previous": "true"},
        "panic: nil map\ngoroutine 1 [running]:\n",
    ),
    (
        "--since keeps only the lines after the cut",
        {"container": "app", "sinceSeconds": "300"},
        "ERROR upstream payments: connection refused\nretrying in 5s\n",
    ),
    ("--tail keeps the last lines", {"container": "app", "tailLines": "1"}, "retrying in 5s\n"),
    (
        "--previous of a container with no previous log declared is empty",
        {"container": "sidecar", "previous": "true"},
        "",
    ),
    (
        "--timestamps shows the declared times",
        {"container": "sidecar", "timestamps": "true"},
        "{sidecar_at}.000000000Z proxy ready\n",
    ),
]


@pytest.mark.parametrize(("case", "params", "expected"), CASES, ids=[c[0] for c in CASES])
def test_declared_log_is_what_the_api_server_returns(tool_admin, declared, case, params, expected):
    resp = read_log(tool_admin, declared, "checkout-7d9f", **params)
    assert resp.status_code == 200, resp.text
    sidecar_at = (DECLARED_AT[declared] - dt.timedelta(minutes=29)).strftime("%Y-%m-%dT%H:%M:%S")
    assert resp.text == expected.replace("{sidecar_at}", sidecar_at)


def test_an_agents_read_is_audited_and_another_namespace_is_refused(
    tool_cluster: DevCluster, tool_admin, tool_namespaces, declared
):
    ns, other = tool_namespaces
    make_pod(tool_admin, other, "checkout-7d9f", ["app"])
    agent = kube.create_service_account(tool_admin, ns, "agent", READ_LOGS)
    tail = AuditFileTail(tool_cluster.audit_log, from_start=False)
    tail.read_new()
    with tool_cluster.token_http(agent.token) as http:
        own = read_log(http, ns, "checkout-7d9f", container="app")
        foreign = http.get(f"/api/v1/namespaces/{other}/pods/checkout-7d9f/log", params={"container": "app"})
        declarations = http.get("/apis/kwok.x-k8s.io/v1alpha1/clusterlogs")
    assert own.status_code == 200
    assert "connection refused" in own.text
    assert foreign.status_code == 403
    # The declarations behind the logs are cluster-scoped: out of a namespaced agent's sight.
    assert declarations.status_code == 403

    events: list[dict[str, Any]] = []
    assert kube.audit_barrier(tool_admin, tail, sink=events) is not None

    def reads(namespace: str) -> list[dict[str, Any]]:
        return [
            e
            for e in events
            if e["user"]["username"] == agent.username
            and e.get("objectRef", {}).get("resource") == "pods"
            and e["objectRef"].get("subresource") == "log"
            and e["objectRef"].get("namespace") == namespace
            and e["stage"] == "ResponseComplete"
        ]

    assert [e["responseStatus"]["code"] for e in reads(ns)][-1] == 200
    assert reads(ns)[-1]["verb"] == "get"
    assert reads(ns)[-1]["objectRef"]["name"] == "checkout-7d9f"
    assert [e["responseStatus"]["code"] for e in reads(other)] == [403]


def test_a_pod_without_declared_logs_gets_none_of_another_pods(tool_admin, tool_namespaces, declared):
    _, other = tool_namespaces
    # Same pod name in another namespace, nothing declared for it.
    make_pod(tool_admin, other, "checkout-7d9f", ["app"])
    resp = tool_admin.get(f"/api/v1/namespaces/{other}/pods/checkout-7d9f/log", params={"container": "app"})
    assert resp.status_code != 200
    assert "connection refused" not in resp.text


def test_follow_streams_lines_appended_after_the_read_began(tool_admin, declared, pod_logs):
    received: list[str] = []

    def follow() -> None:
        with tool_admin.stream(
            "GET",
            f"/api/v1/namespaces/{declared}/pods/checkout-7d9f/log",
            params={"container": "sidecar", "follow": "true"},
            timeout=15,
        ) as resp:
            for line in resp.iter_lines():
                received.append(line)
                if "injected" in line:
                    return

    assert read_log(tool_admin, declared, "checkout-7d9f", container="sidecar").status_code == 200
    reader = threading.Thread(target=follow, daemon=True)
    reader.start()
    deadline = time.monotonic() + 10
    while not received and time.monotonic() < deadline:
        time.sleep(0.05)
    assert received == ["proxy ready"]
    pod_logs.append(declared, "checkout-7d9f", "sidecar", [LogLine(dt.datetime.now(dt.UTC), "injected line")])
    reader.join(timeout=10)
    assert received == ["proxy ready", "injected line"]


def test_kubectl_logs_previous_through_the_embedded_api_server(
    tool_cluster: DevCluster, tool_admin, declared, tmp_path
):
    agent = kube.create_service_account(tool_admin, declared, "kubectl-agent", READ_LOGS)
    kubeconfig = tool_cluster.token_kubeconfig(tmp_path / "agent.kubeconfig", agent.token, declared)
    kubectl = binaries.resolve(quiet=True).path("kubectl")
    out = subprocess.run(
        [str(kubectl), "logs", "checkout-7d9f", "-c", "app", "--previous"],
        env={**os.environ, "KUBECONFIG": str(kubeconfig)},
        capture_output=True,
        text=True,
        timeout=30,
        check=False,
    )
    assert out.returncode == 0, out.stderr
    assert out.stdout == "panic: nil map\ngoroutine 1 [running]:\n"
