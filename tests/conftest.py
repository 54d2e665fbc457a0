"""Shared fixtures. The embedded control plane is started once per test session, on first use.

``cluster`` yields a :class:`ClusterHandle`; ``namespace`` a fresh namespace (deleted afterwards);
``audit`` an audit-log reader positioned at the end of the log when the test starts.
"""

from __future__ import annotations

import os
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest

from oasis_operator.adapters.audit.file_tail import AuditEvent, AuditFileTail
from oasis_operator.adapters.audit.source import FileAuditSource
from oasis_operator.adapters.k8s.client import async_client, endpoint_of
from oasis_operator.adapters.k8s.environment import KubeEnvironment
from oasis_operator.adapters.toolplane import Cluster, ToolPlane, discovered, tool_plane
from oasis_operator.devcluster import ClusterConfig, DevCluster, kube
from oasis_operator.devcluster.cluster import free_kubelet_address
from oasis_operator.handlers.settings import ClusterAccess, ToolPlaneSettings
from tests import report_schema

REPO_ROOT = Path(__file__).resolve().parents[1]
SPEC_DIR = REPO_ROOT.parent / "shared" / "oasis-spec"

#: Fixtures that reach outside the Python process for more than a child Python: the control plane,
#: helm/kubeconform/go tools, chromium.
OUTSIDE_FIXTURES = frozenset({"cluster", "tools", "chromium", "kstatus", "promrules"})
#: Directories whose tests need tools or take minutes (the chart, the red-team campaign).
OUTSIDE_DIRS = frozenset({"shipping", "adversarial"})


def pytest_collection_finish(session: pytest.Session) -> None:
    """Every report rendered in this process is checked against the verdict-file schema."""
    report_schema.install()


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """A report that broke the schema anywhere (even one no test asserted on) fails the session."""
    worker_output = getattr(session.config, "workeroutput", None)
    if worker_output is not None:  # a pytest-xdist worker (`make unit`): its controller judges
        worker_output["schema_checked"] = dict(report_schema.CHECKED)
        worker_output["schema_problems"] = list(report_schema.PROBLEMS)
        return
    if report_schema.CHECKED:
        checked = ", ".join(f"{n} {how}" for how, n in sorted(report_schema.CHECKED.items()))
        print(f"\nverdict-file schema: {checked} report(s) checked, {len(report_schema.PROBLEMS)} invalid")
    if report_schema.PROBLEMS:
        print("\nverdict files that break the schema:\n  " + "\n  ".join(report_schema.PROBLEMS))
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: Any) -> None:
    """pytest-xdist's controller: what each worker checked counts as if checked here."""
    found = getattr(node, "workeroutput", {}) or {}
    for how, n in (found.get("schema_checked") or {}).items():
        report_schema.CHECKED[how] += n
    report_schema.PROBLEMS.extend(found.get("schema_problems") or [])


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    """Mark ``unit`` every test that needs neither the control plane nor an outside tool, so that
    ``pytest -m unit`` is the pure suite (docs/CONTRIBUTING.md "Checks")."""
    tests_dir = REPO_ROOT / "tests"
    for item in items:
        part = item.path.relative_to(tests_dir).parts[0] if item.path.is_relative_to(tests_dir) else ""
        fixtures = set(getattr(item, "fixturenames", ()))
        if item.get_closest_marker("cluster") or part in OUTSIDE_DIRS or fixtures & OUTSIDE_FIXTURES:
            continue
        item.add_marker(pytest.mark.unit)


@dataclass
class ClusterHandle:
    """What tests see of the running control plane."""

    dev: DevCluster

    @property
    def kubeconfig(self) -> Path:
        return self.dev.kubeconfig

    @property
    def server(self) -> str:
        return self.dev.server

    @property
    def audit_log(self) -> Path:
        return self.dev.audit_log

    @property
    def ca_file(self) -> Path:
        return self.dev.ca_file

    @property
    def workdir(self) -> Path:
        return self.dev.workdir

    def admin_http(self, timeout: float = 10.0) -> httpx2.Client:
        return self.dev.admin_http(timeout)

    def token_http(self, token: str, timeout: float = 10.0) -> httpx2.Client:
        return self.dev.token_http(token, timeout)

    def audit_tail(self) -> AuditFileTail:
        """A reader positioned at the current end of the audit log."""
        tail = AuditFileTail(self.audit_log, from_start=False)
        tail.read_new()
        return tail


#: The session cluster's back-ends, as the demo runs them; ``OASIS_TEST_BACKENDS=logs,database`` starts only
#: those (the tests of the others then fail, so it is for running a few tests while the rest are not built).
BACKENDS = tuple(
    b.strip()
    for b in os.environ.get(
        "OASIS_TEST_BACKENDS",
        "logs,gitops,metrics,alerts,traces,resource-metrics,traffic-routing,database",
    ).split(",")
    if b.strip()
)


@pytest.fixture(scope="session")
def cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ClusterHandle]:
    workdir = (
        Path(os.environ["OASIS_TEST_CLUSTER_DIR"])
        if os.environ.get("OASIS_TEST_CLUSTER_DIR")
        else tmp_path_factory.mktemp("cluster")
    )
    # With the log, GitOps, metrics, alerting, tracing, resource-usage and traffic-routing back-ends, as the demo runs it (the node simulator's kubelet API behind the API
    # server): the tool-plane scenarios run on the same cluster as the others.
    dev = DevCluster(
        ClusterConfig(
            workdir=workdir,
            backends=BACKENDS,
            # OASIS_TEST_KUBELET=direct: the API server reads pod logs, and metrics-server scrapes
            # resource usage, from the simulator at the nodes' address, as with the Helm chart, instead
            # of through the tunnel (decisions 0070, 0074).
            kubelet_address=free_kubelet_address()
            if os.environ.get("OASIS_TEST_KUBELET") == "direct"
            else None,
        )
    )
    dev.start()
    handle = ClusterHandle(dev)
    try:
        yield handle
        with handle.admin_http() as http:  # the operator process's reports, before the cluster goes
            report_schema.sweep_cluster(http)
    finally:
        dev.stop()


@pytest.fixture
def admin(cluster: ClusterHandle) -> Iterator[httpx2.Client]:
    with cluster.admin_http() as http:
        yield http


@pytest.fixture
def namespace(admin: httpx2.Client) -> Iterator[str]:
    """A fresh namespace for one test, deleted (without waiting) when the test ends."""
    name = f"ns-{kube.random_suffix(6)}"
    kube.create_namespace(admin, name)
    yield name
    kube.delete_namespace(admin, name)


class AuditReader:
    """Collects the audit events that arrive during one test."""

    def __init__(self, cluster: ClusterHandle, admin: httpx2.Client) -> None:
        self._tail = cluster.audit_tail()
        self._admin = admin
        self.events: list[AuditEvent] = []

    def barrier(self, timeout: float = 10.0) -> list[AuditEvent]:
        """Wait until everything requested so far is in the log; return all events of the test."""
        found = kube.audit_barrier(self._admin, self._tail, timeout, sink=self.events)
        assert found is not None, f"audit barrier not reached within {timeout}s"
        return self.events


@pytest.fixture
def audit(cluster: ClusterHandle, admin: httpx2.Client) -> AuditReader:
    return AuditReader(cluster, admin)


@pytest.fixture
async def audit_source(cluster: ClusterHandle) -> AsyncIterator[FileAuditSource]:
    """The session cluster's audit log as the operator's audit port reads it (a workflow's evidence)."""
    source = FileAuditSource(cluster.audit_log)
    await source.start()
    yield source
    await source.stop()


@pytest.fixture
async def toolplane(cluster: ClusterHandle) -> AsyncIterator[ToolPlane]:
    """The operator's tool plane on the session cluster (logs, dashboards, GitOps, metrics, alerts, traces), as the
    cluster admin."""
    access = ClusterAccess.discover(str(cluster.kubeconfig), Path("/nonexistent"), {})
    http = access.http()
    settings = ToolPlaneSettings.load(cluster.dev.toolplane_file)
    on = Cluster(http, cluster.dev.server)
    plane = tool_plane(on, {**settings.backends, **await discovered(on)})
    try:
        yield plane
    finally:
        await plane.aclose()
        await http.aclose()


@pytest.fixture
async def env(cluster: ClusterHandle) -> AsyncIterator[KubeEnvironment]:
    """The Kubernetes environment provider on the session cluster, as the cluster admin."""
    client = async_client(cluster.kubeconfig)
    ep = endpoint_of(cluster.kubeconfig)
    try:
        yield KubeEnvironment(client, server=ep.server, ca_data=ep.ca_data)
    finally:
        await client.close()
