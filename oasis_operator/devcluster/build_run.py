"""One build script run with its progress on the terminal as it happens (decision 0114).

Called by :mod:`oasis_operator.devcluster.binaries` and :mod:`oasis_operator.devcluster.backends.binaries`;
turns a script's command line into a :class:`BuildResult`. The scripts print progress on stderr (what
they build, n of m, an estimate, elapsed time) and the cache directory on stdout. Each stderr line is
passed on as it arrives, not after the build (a first `make demo` once sat silent for 25 minutes), and
every line is kept for the error message.
"""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Sequence
from dataclasses import dataclass
from typing import TextIO


@dataclass(frozen=True)
class BuildResult:
    returncode: int
    stdout: str
    stderr: str


def run_build(argv: Sequence[str], *, quiet: bool, sink: TextIO | None = None) -> BuildResult:
    """Run ``argv``; unless ``quiet``, write each stderr line to ``sink`` (stderr) as it arrives."""
    out = sink if sink is not None else sys.stderr
    proc = subprocess.Popen(list(argv), stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
    stdout, stderr = proc.stdout, proc.stderr
    if stdout is None or stderr is None:  # pragma: no cover - both are pipes
        raise RuntimeError("no pipes to the build script")
    stdout_parts: list[str] = []
    reader = threading.Thread(target=lambda: stdout_parts.append(stdout.read()))
    reader.start()
    lines: list[str] = []
    for line in stderr:
        lines.append(line)
        if not quiet:
            out.write(line)
            out.flush()
    reader.join()
    return BuildResult(proc.wait(), "".join(stdout_parts), "".join(lines))
