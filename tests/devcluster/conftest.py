"""A second control plane for the tool-plane back-end tests, started once per session on first use:
pod logs and resource metrics are served (which changes how the API server and the node simulator
start), and the other back-ends are started on it when a test first asks for them."""

from __future__ import annotations

import os
from collections.abc import Iterator

import httpx2
import pytest

from oasis_operator.devcluster import ClusterConfig, DevCluster, kube
from oasis_operator.devcluster.backends.gitops import GitOpsBackend
from oasis_operator.devcluster.backends.logs import PodLogsBackend
from oasis_operator.devcluster.backends.metrics import AlertsBackend, MetricsBackend
from oasis_operator.devcluster.backends.resource_metrics import ResourceMetricsBackend
from oasis_operator.devcluster.backends.traces import TracesBackend
from oasis_operator.devcluster.cluster import free_kubelet_address


@pytest.fixture(scope="session")
def tool_cluster(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    dev = DevCluster(
        ClusterConfig(
            workdir=tmp_path_factory.mktemp("tool-cluster"),
            nodes=2,
            backends=("logs", "resource-metrics"),
            # OASIS_TEST_KUBELET=direct: the simulated kubelets at their nodes' address, as with the
            # Helm chart, instead of through the tunnel (decisions 0070, 0074).
            kubelet_address=free_kubelet_address()
            if os.environ.get("OASIS_TEST_KUBELET") == "direct"
            else None,
        )
    )
    dev.start()
    try:
        yield dev
    finally:
        dev.stop()


@pytest.fixture
def tool_admin(tool_cluster: DevCluster) -> Iterator[httpx2.Client]:
    with tool_cluster.admin_http() as http:
        yield http


@pytest.fixture
def tool_namespaces(tool_admin: httpx2.Client) -> Iterator[tuple[str, str]]:
    """Two fresh namespaces: one scenario's and another's, for isolation checks."""
    names = (f"sa-{kube.random_suffix(6)}", f"sb-{kube.random_suffix(6)}")
    for n in names:
        kube.create_namespace(tool_admin, n)
    yield names
    for n in names:
        kube.delete_namespace(tool_admin, n)


@pytest.fixture(scope="session")
def pod_logs(tool_cluster: DevCluster) -> PodLogsBackend:
    backend = tool_cluster.backends["logs"]
    assert isinstance(backend, PodLogsBackend)
    return backend


@pytest.fixture(scope="session")
def resource_metrics(tool_cluster: DevCluster) -> ResourceMetricsBackend:
    backend = tool_cluster.backends["resource-metrics"]
    assert isinstance(backend, ResourceMetricsBackend)
    return backend


@pytest.fixture(scope="session")
def metrics(tool_cluster: DevCluster) -> MetricsBackend:
    backend = tool_cluster.start_backends(["metrics"])["metrics"]
    assert isinstance(backend, MetricsBackend)
    return backend


@pytest.fixture(scope="session")
def alerts(tool_cluster: DevCluster, metrics: MetricsBackend) -> AlertsBackend:
    backend = tool_cluster.start_backends(["alerts"])["alerts"]
    assert isinstance(backend, AlertsBackend)
    return backend


@pytest.fixture(scope="session")
def traces(tool_cluster: DevCluster) -> TracesBackend:
    backend = tool_cluster.start_backends(["traces"])["traces"]
    assert isinstance(backend, TracesBackend)
    return backend


@pytest.fixture(scope="session")
def gitops(tool_cluster: DevCluster) -> GitOpsBackend:
    backend = tool_cluster.start_backends(["gitops"])["gitops"]
    assert isinstance(backend, GitOpsBackend)
    return backend
