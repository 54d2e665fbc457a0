"""`oasis dev-cluster` starts a second, independent control plane beside the session's, and stops it."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from oasis_operator.devcluster import binaries
from tests.devcluster.test_setup_errors import processes_mentioning

pytestmark = pytest.mark.cluster


def oasis(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "oasis_operator.cli", *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=180,
    )


def test_up_status_kubeconfig_down(cluster, tmp_path):
    env = {
        **os.environ,
        "OASIS_CACHE_DIR": str(tmp_path / "cache"),
        "OASIS_BIN_DIR": str(binaries.resolve(quiet=True).directory),
    }
    up = oasis("dev-cluster", "--name", "second", "up", "--nodes", "2", env=env)
    assert up.returncode == 0, up.stderr
    assert "export KUBECONFIG=" in up.stdout
    try:
        status = oasis("dev-cluster", "--name", "second", "status", env=env)
        assert status.returncode == 0, status.stdout + status.stderr
        assert "API server ready: True" in status.stdout
        assert status.stdout.count("Ready=True") == 2
        kc = oasis("dev-cluster", "--name", "second", "kubeconfig", env=env)
        assert Path(kc.stdout.strip()).is_file()
        # Its server differs from the session cluster's: two clusters side by side, no collision.
        assert cluster.server not in Path(kc.stdout.strip()).read_text()
        again = oasis("dev-cluster", "--name", "second", "up", env=env)
        assert "already running" in again.stdout
    finally:
        down = oasis("dev-cluster", "--name", "second", "down", env=env)
    assert down.returncode == 0
    assert "stopped" in down.stdout
    assert processes_mentioning(str(tmp_path / "cache")) == []
    after = oasis("dev-cluster", "--name", "second", "status", env=env)
    assert after.returncode == 3
    assert "not running" in after.stdout


def test_kubeconfig_of_a_cluster_that_is_not_running_is_a_clear_error(tmp_path):
    env = {**os.environ, "OASIS_CACHE_DIR": str(tmp_path)}
    out = oasis("dev-cluster", "--name", "nope", "kubeconfig", env=env)
    assert out.returncode == 2
    assert "dev-cluster 'nope' is not running" in out.stderr
    assert "Traceback" not in out.stderr
