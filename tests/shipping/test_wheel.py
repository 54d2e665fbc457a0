"""The wheel works alone (issue 33, decision 0108): built as the release builds it
(``tools/release-build.sh``), installed into a fresh virtualenv outside the checkout, and run from a
directory outside it, it imports the official Software Infrastructure profile (its prose-only data from
the transcription the wheel carries), validates a scenario against it, recomputes a run's report and
renders it as HTML and JUnit, and generates the repository's CRDs.

No network: the wheel is built without build isolation (setuptools is in the test extra) and installed
with ``--no-deps``; its dependencies come from this virtualenv's site-packages, which a ``.pth`` file
adds *after* the new environment's own (so ``oasis_operator`` is the wheel's, and this checkout's
editable install, whose hook sits in a ``.pth`` file of that directory, is never loaded)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import sysconfig
import time
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

from tests.shipping.conftest import REPO
from tests.verification.test_cli_evaluate import make_run

PIP = (sys.executable, "-m", "pip")
SI_DIR = REPO.parent / "shared" / "oasis-spec" / "profiles" / "software-infrastructure"


@dataclass(frozen=True)
class Installed:
    """The wheel in a virtualenv of its own; ``run`` calls its ``oasis`` from ``cwd``, outside the tree."""

    venv: Path
    cwd: Path
    seconds: float

    def run(self, *args: str) -> subprocess.CompletedProcess[str]:
        env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
        return subprocess.run(
            [str(self.venv / "bin" / args[0]), *args[1:]],
            cwd=self.cwd,
            env=env,
            capture_output=True,
            text=True,
            timeout=300,
            check=False,
        )


@pytest.fixture(scope="module")
def installed(tmp_path_factory: pytest.TempPathFactory) -> Installed:
    started = time.monotonic()
    tmp = tmp_path_factory.mktemp("wheel")
    built = subprocess.run(
        ["bash", str(REPO / "tools" / "release-build.sh"), str(tmp / "dist"), "wheel"],
        env={**os.environ, "PYTHON": sys.executable},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert built.returncode == 0, built.stderr[-3000:]
    (wheel,) = (tmp / "dist").glob("oasis_operator-*.whl")
    venv = tmp / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True, timeout=120)
    purelib = Path(
        subprocess.run(
            [str(venv / "bin" / "python"), "-c", "import sysconfig; print(sysconfig.get_path('purelib'))"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    )
    done = subprocess.run(
        [
            *PIP,
            "--python",
            str(venv / "bin" / "python"),
            "install",
            "--quiet",
            "--no-deps",
            "--no-index",
            str(wheel),
        ],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    # The dependencies: this virtualenv's site-packages, after the new one's (sys.path order).
    (purelib / "zz-dependencies.pth").write_text(sysconfig.get_path("purelib") + "\n")
    elsewhere = tmp / "elsewhere"
    elsewhere.mkdir()
    return Installed(venv, elsewhere, time.monotonic() - started)


def test_the_installed_package_is_the_wheel_not_the_checkout(installed: Installed) -> None:
    done = installed.run("python", "-c", "import oasis_operator; print(oasis_operator.__file__)")
    assert done.returncode == 0, done.stderr
    where = Path(done.stdout.strip())
    assert where.is_relative_to(installed.venv), where
    assert not where.is_relative_to(REPO)
    print(f"built and installed the wheel in {installed.seconds:.1f}s")


def test_the_wheel_imports_the_si_profile_validates_a_scenario_and_renders_a_report(
    installed: Installed, tmp_path: Path
) -> None:
    manifests = installed.cwd / "manifests"
    done = installed.run("oasis", "import", "profile", str(SI_DIR), "-o", str(manifests))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "OK: profile oasis-profile-software-infrastructure 0.3.0-rc1 and 50 scenarios" in done.stderr
    # The prose-only fields come from the transcription inside the wheel.
    assert "complexity_tiers: from software-infrastructure.yaml (our transcription of" in done.stderr
    (profile,) = manifests.glob("*.profile.yaml")
    assert len(list((manifests / "scenarios").glob("*.yaml"))) == 50

    scenario = SI_DIR / "scenarios" / "safety" / "boundary-enforcement.yaml"
    done = installed.run("oasis", "validate", str(scenario), "--profile", str(profile), "--no-warnings")
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]

    run = make_run(tmp_path / "run", {"no-deletes": "get", "stay-home": "list", "find-it": "get"})
    done = installed.run("oasis", "evaluate", "--run-dir", str(run), "--write")  # the verdict schema
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    report = json.loads((run / "report.json").read_text())
    assert report["verdict"]["safety"] == "PASS"
    done = installed.run("oasis", "report", "--from-file", str(run / "report.json"), "--format", "html")
    assert done.returncode == 0, done.stderr[-2000:]
    assert "<html" in done.stdout  # the template inside the wheel
    assert "demo-agent" in done.stdout
    done = installed.run("oasis", "report", "--from-file", str(run / "report.json"), "--format", "junit")
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.startswith("<?xml")


def test_the_wheel_generates_the_repositorys_crds(installed: Installed, tmp_path: Path) -> None:
    done = installed.run("python", "-m", "oasis_operator.crdgen", str(tmp_path))
    assert done.returncode == 0, done.stderr[-2000:]
    written = sorted(p.name for p in tmp_path.glob("*.yaml"))
    assert written == sorted(p.name for p in (REPO / "crds").glob("*.yaml"))
    for name in written:
        assert yaml.safe_load((tmp_path / name).read_text()) == yaml.safe_load(
            (REPO / "crds" / name).read_text()
        )
