"""`oasis dev-cluster up --backends ...` starts the chosen back-ends with the cluster; `status` shows
them and `down` stops them with it."""

from __future__ import annotations

import os

import httpx2
import pytest

from oasis_operator.devcluster import binaries, load_state
from oasis_operator.devcluster.backends import resolve_binaries
from tests.devcluster.test_cli import oasis
from tests.devcluster.test_setup_errors import processes_mentioning

pytestmark = pytest.mark.cluster


def test_up_with_logs_and_metrics_then_down(tmp_path):
    env = {
        **os.environ,
        "OASIS_CACHE_DIR": str(tmp_path / "cache"),
        "OASIS_BIN_DIR": str(binaries.resolve(quiet=True).directory),
        "OASIS_BACKENDS_DIR": str(resolve_binaries(["logs", "metrics"]).directory),
    }
    up = oasis("dev-cluster", "--name", "tools", "up", "--nodes", "1", "--backends", "logs,metrics", env=env)
    assert up.returncode == 0, up.stderr
    try:
        assert "back-ends:" in up.stdout
        assert any(line.split()[:2] == ["metrics:", "prometheus"] for line in up.stdout.splitlines()), (
            up.stdout
        )
        state = load_state(tmp_path / "cache" / "clusters" / "tools")
        assert state is not None
        assert {"kubelet-tunnel", "victoria-metrics", "vmauth"} <= set(state.pids)
        assert httpx2.get(f"{state.backends['metrics']['store']}/health").text == "OK"
        status = oasis("dev-cluster", "--name", "tools", "status", env=env)
        assert status.returncode == 0, status.stdout
        for name in ("kubelet-tunnel", "victoria-metrics", "vmauth"):
            assert any(line.split()[:2] == [name, "running"] for line in status.stdout.splitlines()), (
                status.stdout
            )
    finally:
        down = oasis("dev-cluster", "--name", "tools", "down", env=env)
    assert down.returncode == 0
    assert "vmauth" in down.stdout
    assert processes_mentioning(str(tmp_path / "cache")) == []


def test_an_unknown_back_end_is_refused_before_anything_starts(tmp_path):
    env = {**os.environ, "OASIS_CACHE_DIR": str(tmp_path)}
    out = oasis("dev-cluster", "--name", "x", "up", "--backends", "grafana", env=env)
    assert out.returncode == 2
    assert "unknown back-end grafana" in out.stderr
    assert not (tmp_path / "clusters" / "x").exists()
