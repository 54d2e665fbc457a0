"""Where the control-plane binaries are, and building them when they are not there yet.

Called by :class:`oasis_operator.devcluster.cluster.DevCluster` and ``oasis dev-cluster``; turns the
environment (``OASIS_BIN_DIR``, the repository's ``tools/build-binaries.sh``, the Go toolchain) into
a :class:`Binaries` value naming each executable, or a :class:`SetupError` that says what to do.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass
from pathlib import Path

from oasis_operator.devcluster.build_run import run_build
from oasis_operator.devcluster.errors import SetupError

COMPONENTS = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kwok")

_REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = _REPO_ROOT / "tools" / "build-binaries.sh"


@dataclass(frozen=True)
class Binaries:
    directory: Path

    def path(self, component: str) -> Path:
        return self.directory / component

    def missing(self) -> list[str]:
        return [c for c in COMPONENTS if not os.access(self.path(c), os.X_OK)]


def resolve(*, build: bool = True, quiet: bool = False) -> Binaries:
    """Return the binaries, building them first if needed and allowed.

    ``OASIS_BIN_DIR`` names a directory that already holds all five executables (used as is, never
    built into). Otherwise the build script picks the versioned cache directory and builds what is
    missing there.
    """
    override = os.environ.get("OASIS_BIN_DIR")
    if override:
        found = Binaries(Path(override))
        if missing := found.missing():
            raise SetupError(
                f"OASIS_BIN_DIR={override} lacks {', '.join(missing)}; unset it to build the binaries "
                f"with {BUILD_SCRIPT}, or point it at a directory holding {', '.join(COMPONENTS)}"
            )
        return found
    if not BUILD_SCRIPT.exists():
        raise SetupError(
            f"no OASIS_BIN_DIR and no build script at {BUILD_SCRIPT}: set OASIS_BIN_DIR to a directory "
            f"holding {', '.join(COMPONENTS)}"
        )
    if not build:
        raise SetupError(f"the control-plane binaries are not built; run {BUILD_SCRIPT}")
    # The script's progress goes to stderr: on the terminal as it happens unless asked to be quiet,
    # and always kept for the error message.
    proc = run_build(["bash", str(BUILD_SCRIPT)], quiet=quiet)
    if proc.returncode != 0:
        errors = [
            ln.removeprefix("[build-binaries] error: ") for ln in proc.stderr.splitlines() if "error:" in ln
        ]
        detail = errors or proc.stderr.strip().splitlines()[-15:]
        raise SetupError(
            f"building the control-plane binaries failed (exit {proc.returncode}, {BUILD_SCRIPT}):\n  "
            + "\n  ".join(detail)
        )
    lines = proc.stdout.strip().splitlines()
    if not lines:
        raise SetupError(f"{BUILD_SCRIPT} printed no directory")
    found = Binaries(Path(lines[-1]))
    if missing := found.missing():
        raise SetupError(f"{BUILD_SCRIPT} finished but {', '.join(missing)} is missing in {found.directory}")
    return found


if __name__ == "__main__":  # pragma: no cover - convenience: python -m oasis_operator.devcluster.binaries
    try:
        print(resolve().directory)
    except SetupError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
