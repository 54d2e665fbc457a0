"""First-run progress (decision 0114): the build scripts say what they build, n of m, an estimate and
the elapsed time, and the dev cluster passes each line on as it arrives, not after the build. The
scripts run here with a stand-in `go` that writes empty binaries, so nothing is compiled."""

from __future__ import annotations

import io
import os
import re
import subprocess
from pathlib import Path

import pytest

from oasis_operator.devcluster.backends import binaries as backend_binaries
from oasis_operator.devcluster.build_run import run_build

REPO = Path(__file__).resolve().parents[2]
BACKENDS_SCRIPT = REPO / "tools" / "build-backends.sh"
BINARIES_SCRIPT = REPO / "tools" / "build-binaries.sh"

FAKE_GO = """#!/usr/bin/env bash
# A stand-in for go: `env GOVERSION`, and `install`/`build -o` writing an empty executable.
case "$1" in
  env) echo go1.26.0 ;;
  install) pkg="${@: -1}"; name="${pkg%@*}"; touch "$GOBIN/${name##*/}"; chmod +x "$GOBIN/${name##*/}" ;;
  build) while [ $# -gt 0 ]; do if [ "$1" = -o ]; then touch "$2"; chmod +x "$2"; fi; shift; done ;;
  *) echo "fake go: $*" >&2; exit 1 ;;
esac
"""


class Recorder(io.StringIO):
    """A sink that lets the script go on only once it has received its first line."""

    def __init__(self, gate: Path) -> None:
        super().__init__()
        self.gate = gate

    def write(self, s: str) -> int:
        self.gate.touch()
        return super().write(s)


def test_each_line_is_passed_on_while_the_build_runs(tmp_path: Path) -> None:
    gate = tmp_path / "seen"
    script = (
        f"echo '[build] 1/2 first' >&2; for i in $(seq 100); do [ -e {gate} ] && break; sleep 0.1; done; "
        f"[ -e {gate} ] || {{ echo 'the first line was held back' >&2; exit 1; }}; echo '[build] 2/2 second' >&2; echo /the/dir"
    )
    sink = Recorder(gate)
    done = run_build(["bash", "-c", script], quiet=False, sink=sink)
    assert done.returncode == 0, done.stderr
    assert sink.getvalue() == done.stderr == "[build] 1/2 first\n[build] 2/2 second\n"
    assert done.stdout == "/the/dir\n"


def test_quiet_passes_nothing_on_but_keeps_the_lines(tmp_path: Path) -> None:
    sink = io.StringIO()
    done = run_build(["bash", "-c", "echo oops >&2; exit 3"], quiet=True, sink=sink)
    assert (done.returncode, done.stderr, sink.getvalue()) == (3, "oops\n", "")


@pytest.mark.parametrize("script", [BACKENDS_SCRIPT, BINARIES_SCRIPT], ids=lambda p: p.name)
def test_every_component_has_an_estimate(script: Path) -> None:
    text = script.read_text()
    estimated = set(re.findall(r"\[([a-z-]+)\]=\d+", text))
    listed = re.search(r"^(?:ALL|want)=\(([^)]*)\)", text, re.MULTILINE)
    assert listed is not None
    assert set(listed[1].split()) == estimated


@pytest.fixture
def fake_go(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    bin_dir = tmp_path / "gobin"
    bin_dir.mkdir()
    (bin_dir / "go").write_text(FAKE_GO)
    (bin_dir / "go").chmod(0o755)
    monkeypatch.setenv("PATH", f"{bin_dir}{os.pathsep}{os.environ['PATH']}")
    cache = tmp_path / "cache"
    monkeypatch.setenv("OASIS_CACHE_DIR", str(cache))
    # The back-ends' directory, named as the script names it, with its CRDs already copied.
    mods = REPO / "tools" / "backends"
    key = subprocess.run(
        ["bash", "-c", "cat versions.env */go.mod */go.sum git-server/*.go | sha256sum | cut -c1-12"],
        cwd=mods,
        capture_output=True,
        text=True,
        check=True,
    ).stdout.strip()
    crds = cache / "bin" / f"backends-{key}" / "crds"
    crds.mkdir(parents=True)
    version = re.search(r"^GATEWAY_API_VERSION=(\S+)", BACKENDS_SCRIPT.read_text(), re.MULTILINE)
    assert version is not None
    (crds / f".complete-3-gateway-api-{version[1]}").touch()
    return cache


def test_the_back_ends_build_says_what_n_of_m_how_long_and_what_is_left(
    fake_go: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    found = backend_binaries.resolve(["vmauth", "jaeger"])
    assert not found.missing(["vmauth", "jaeger"])
    err = capsys.readouterr().err
    assert "building 2 back-end binaries (about 7 min on 2 cores; once, then cached in" in err
    assert "[1/2] building jaeger (about 5 min; about 7 min left; 0 min elapsed) ..." in err
    assert "[2/2] building vmauth (about 2 min; about 2 min left; 0 min elapsed) ..." in err
    assert "[2/2] vmauth built in " in err
    assert "all 2 back-end binaries built in 0 min" in err
    backend_binaries.resolve(["vmauth"])  # cached now: not a word
    assert capsys.readouterr().err == ""


def test_the_control_plane_build_says_what_n_of_m_and_how_long(fake_go: Path) -> None:
    done = run_build(["bash", str(BINARIES_SCRIPT)], quiet=True)
    assert done.returncode == 0, done.stderr
    assert "building 6 control-plane binaries (about 8 min on 2 cores" in done.stderr
    assert "[1/6] kube-apiserver: about 3 min; about 8 min left; 0 min elapsed" in done.stderr
    assert "[6/6] kwok built in " in done.stderr
    assert done.stdout.strip().endswith("kwok-v0.8.0")
