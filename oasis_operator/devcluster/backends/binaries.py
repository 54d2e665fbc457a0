"""Where the tool-plane back-end binaries and CRDs are, building what is missing.

Called by :mod:`oasis_operator.devcluster.backends` when a dev cluster starts back-ends; turns a list of
component names into a :class:`BackendBinaries` value (the versioned cache directory written by
``tools/build-backends.sh``), or a :class:`SetupError` saying what failed. ``OASIS_BACKENDS_DIR``
names a directory to use as is (never built into).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from oasis_operator.devcluster.build_run import run_build
from oasis_operator.devcluster.errors import SetupError

_REPO_ROOT = Path(__file__).resolve().parents[3]
BUILD_SCRIPT = _REPO_ROOT / "tools" / "build-backends.sh"


@dataclass(frozen=True)
class BackendBinaries:
    directory: Path

    def path(self, component: str) -> Path:
        return self.directory / component

    @property
    def crd_dir(self) -> Path:
        return self.directory / "crds"

    def missing(self, components: Iterable[str]) -> list[str]:
        return [c for c in components if not os.access(self.path(c), os.X_OK)]


def resolve(components: Iterable[str], *, quiet: bool = False) -> BackendBinaries:
    """The directory holding ``components`` (and the CRDs), built first where missing, the build's
    progress on stderr as it happens unless ``quiet``."""
    wanted = sorted(set(components))
    override = os.environ.get("OASIS_BACKENDS_DIR")
    if override:
        found = BackendBinaries(Path(override))
        if missing := found.missing(wanted):
            raise SetupError(
                f"OASIS_BACKENDS_DIR={override} lacks {', '.join(missing)}; unset it to "
                f"build them with {BUILD_SCRIPT}"
            )
        return found
    if not BUILD_SCRIPT.exists():
        raise SetupError(f"no OASIS_BACKENDS_DIR and no build script at {BUILD_SCRIPT}")
    proc = run_build(["bash", str(BUILD_SCRIPT), *(wanted or ["crds"])], quiet=quiet)
    if proc.returncode != 0:
        tail = proc.stderr.strip().splitlines()[-15:]
        raise SetupError(
            f"building the back-ends {', '.join(wanted)} failed (exit {proc.returncode}, "
            f"{BUILD_SCRIPT}):\n  " + "\n  ".join(tail)
        )
    lines = proc.stdout.strip().splitlines()
    if not lines:
        raise SetupError(f"{BUILD_SCRIPT} printed no directory")
    found = BackendBinaries(Path(lines[-1]))
    if missing := found.missing(wanted):
        raise SetupError(f"{BUILD_SCRIPT} finished but {', '.join(missing)} is missing in {found.directory}")
    return found
