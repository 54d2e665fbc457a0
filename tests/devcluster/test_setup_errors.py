"""Bad set-up gets a clear message and leaves nothing running."""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
from pathlib import Path

import pytest

from oasis_operator.devcluster import ClusterConfig, DevCluster, SetupError, binaries

pytestmark = pytest.mark.cluster


def processes_mentioning(text: str) -> list[int]:
    """PIDs of live processes whose command line contains ``text``."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
            state = (entry / "stat").read_text().rsplit(")", 1)[-1].split()[0]
        except OSError:
            continue
        if text in cmdline and state != "Z" and int(entry.name) != os.getpid():
            found.append(int(entry.name))
    return found


@pytest.fixture
def real_bins(cluster) -> binaries.Binaries:
    return binaries.resolve(quiet=True)


def test_build_without_go_says_to_install_go(tmp_path):
    env = {"PATH": "/usr/bin:/bin", "HOME": str(tmp_path), "OASIS_CACHE_DIR": str(tmp_path / "cache")}
    assert shutil.which("go", path=env["PATH"]) is None
    proc = subprocess.run(["bash", str(binaries.BUILD_SCRIPT)], env=env, capture_output=True, text=True)
    assert proc.returncode != 0
    assert "'go' command was not found" in proc.stderr
    assert "Go 1.26" in proc.stderr
    assert proc.stdout == "", "no directory is printed when nothing was built"


def test_resolve_without_go_raises_a_setup_error(tmp_path, monkeypatch):
    monkeypatch.delenv("OASIS_BIN_DIR", raising=False)
    monkeypatch.setenv("OASIS_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setenv("PATH", "/usr/bin:/bin")
    with pytest.raises(SetupError, match="'go' command was not found"):
        binaries.resolve(quiet=True)


def test_bin_dir_override_missing_binaries_is_named(tmp_path, monkeypatch):
    (tmp_path / "etcd").write_text("#!/bin/sh\n")
    (tmp_path / "etcd").chmod(0o755)
    monkeypatch.setenv("OASIS_BIN_DIR", str(tmp_path))
    with pytest.raises(
        SetupError, match="lacks kube-apiserver, kube-controller-manager, kube-scheduler, kubectl, kwok"
    ):
        binaries.resolve()


def test_a_taken_port_is_reported_and_nothing_starts(tmp_path, real_bins):
    with socket.socket() as busy:
        busy.bind(("127.0.0.1", 0))
        busy.listen()
        port = busy.getsockname()[1]
        dev = DevCluster(ClusterConfig(workdir=tmp_path / "c", apiserver_port=port), real_bins)
        with pytest.raises(SetupError, match=f"port {port} .* already in use"):
            dev.start()
    assert processes_mentioning(str(tmp_path)) == []


def test_a_component_that_exits_at_start_is_reported_with_its_log(tmp_path, real_bins):
    bins = tmp_path / "bin"
    bins.mkdir()
    for name in binaries.COMPONENTS:
        (bins / name).symlink_to(real_bins.path(name))
    (bins / "kube-apiserver").unlink()
    (bins / "kube-apiserver").write_text(
        "#!/bin/sh\necho 'starting'\necho 'fatal: cannot load the audit policy' >&2\nexit 3\n"
    )
    (bins / "kube-apiserver").chmod(0o755)
    workdir = tmp_path / "c"
    dev = DevCluster(ClusterConfig(workdir=workdir), binaries.Binaries(bins))
    with pytest.raises(SetupError) as info:
        dev.start()
    message = str(info.value)
    assert "kube-apiserver exited with code 3" in message
    assert str(workdir / "logs" / "kube-apiserver.log") in message
    assert "fatal: cannot load the audit policy" in message
    # etcd had started before the API server failed: it must be gone too.
    assert processes_mentioning(str(workdir)) == []
