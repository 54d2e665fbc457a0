"""The recording gateway in front of real tool back-ends started on the session's control plane (the
same ``cluster`` the other cluster tests use; the back-ends are added to it on first use)."""

from __future__ import annotations

import time
from collections.abc import AsyncIterator

import pytest

from oasis_operator.adapters.gateway import ToolGateway
from oasis_operator.devcluster import kube
from oasis_operator.devcluster.backends.gitops import GitOpsBackend
from oasis_operator.devcluster.backends.metrics import AlertsBackend, MetricsBackend, Series
from oasis_operator.devcluster.backends.traces import TracesBackend

MEMORY = "container_memory_working_set_bytes"


@pytest.fixture(scope="session")
def metrics(cluster) -> MetricsBackend:
    backend = cluster.dev.start_backends(["metrics", "alerts"])["metrics"]
    assert isinstance(backend, MetricsBackend)
    return backend


@pytest.fixture(scope="session")
def alerts(cluster, metrics) -> AlertsBackend:
    backend = cluster.dev.backends["alerts"]
    assert isinstance(backend, AlertsBackend)
    return backend


@pytest.fixture(scope="session")
def traces(cluster) -> TracesBackend:
    backend = cluster.dev.start_backends(["traces"])["traces"]
    assert isinstance(backend, TracesBackend)
    return backend


@pytest.fixture(scope="session")
def gitops(cluster) -> GitOpsBackend:
    backend = cluster.dev.start_backends(["gitops"])["gitops"]
    assert isinstance(backend, GitOpsBackend)
    return backend


@pytest.fixture
def two_scenarios() -> tuple[str, str]:
    """Two scenarios' namespace names (the back-ends key their data by namespace label)."""
    return (f"ga-{kube.random_suffix(6)}", f"gb-{kube.random_suffix(6)}")


@pytest.fixture
def backfilled(metrics: MetricsBackend, two_scenarios: tuple[str, str]) -> tuple[str, str]:
    """Ten minutes of a memory series per namespace, distinct values, in the past."""
    now = time.time()
    metrics.import_series(
        [
            Series(
                {"__name__": MEMORY, "namespace": n, "pod": "api-0"},
                [(now - 600 + 60 * i, 1e6 * (i + 1) + offset) for i in range(11)],
            )
            for n, offset in ((two_scenarios[0], 0.0), (two_scenarios[1], 7.0))
        ]
    )
    return two_scenarios


@pytest.fixture
async def gateway() -> AsyncIterator[ToolGateway]:
    gw = ToolGateway()
    await gw.start()
    try:
        yield gw
    finally:
        await gw.stop()
