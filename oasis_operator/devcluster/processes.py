"""Starting, watching and stopping the control-plane processes.

Called by :class:`oasis_operator.devcluster.cluster.DevCluster`; turns command lines into running
processes, each with its own log file, and turns a process that dies early into a
:class:`SetupError` quoting the end of its log. Stopping is SIGTERM, a bounded wait, then SIGKILL
of the whole process group, in reverse start order.
"""

from __future__ import annotations

import contextlib
import ctypes
import os
import signal
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from oasis_operator.devcluster.errors import SetupError

_PR_SET_PDEATHSIG = 1


def log_tail(path: Path, lines: int = 20) -> str:
    """The last ``lines`` lines of a log file (empty if it does not exist)."""
    try:
        with path.open("rb") as fh:
            fh.seek(0, os.SEEK_END)
            size = fh.tell()
            fh.seek(max(0, size - 64 * 1024))
            data = fh.read().decode("utf-8", "replace")
    except OSError:
        return ""
    return "\n".join(data.splitlines()[-lines:])


def _die_with_parent() -> None:  # pragma: no cover - runs in the child between fork and exec
    # Ask the kernel to SIGKILL this child when the process that started it dies, so a test run that
    # is killed never leaves an API server behind.
    with contextlib.suppress(OSError, AttributeError):
        libc = ctypes.CDLL(None, use_errno=True)
        libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


@dataclass
class Component:
    name: str
    argv: list[str]
    log_path: Path
    process: subprocess.Popen[bytes]

    @property
    def pid(self) -> int:
        return self.process.pid

    def exited(self) -> int | None:
        return self.process.poll()

    def failure(self, doing: str) -> SetupError:
        code = self.process.poll()
        tail = log_tail(self.log_path)
        what = f"exited with code {code}" if code is not None else "is still running but not ready"
        return SetupError(
            f"{self.name} {what} while {doing}.\n"
            f"Last lines of its log ({self.log_path}):\n{tail or '(the log is empty)'}"
        )


@dataclass
class Supervisor:
    """Owns the processes of one cluster."""

    log_dir: Path
    tie_to_parent: bool = True
    components: list[Component] = field(default_factory=list)

    def start(
        self,
        name: str,
        argv: Sequence[str],
        env: dict[str, str] | None = None,
        *,
        argv0: str | None = None,
        cwd: Path | None = None,
    ) -> Component:
        """Start ``argv``; ``argv0`` replaces the program name the process sees (not the file run);
        ``cwd`` is its working directory (default: ours)."""
        self.log_dir.mkdir(parents=True, exist_ok=True)
        log_path = self.log_dir / f"{name}.log"
        if not os.access(argv[0], os.X_OK):
            raise SetupError(f"{name}: {argv[0]} is not an executable file")
        with log_path.open("ab") as log:
            proc = subprocess.Popen(
                [argv0 or argv[0], *argv[1:]],
                executable=argv[0],
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                env={**os.environ, **(env or {})},
                cwd=cwd,
                start_new_session=True,
                preexec_fn=_die_with_parent if self.tie_to_parent else None,
            )
        component = Component(name, list(argv), log_path, proc)
        self.components.append(component)
        return component

    def get(self, name: str) -> Component:
        for c in self.components:
            if c.name == name:
                return c
        raise KeyError(name)

    def check_alive(self, doing: str) -> None:
        for c in self.components:
            if c.exited() is not None:
                raise c.failure(doing)

    def wait_until(
        self,
        ready: Callable[[], bool],
        *,
        what: str,
        timeout: float,
        owner: Component | None = None,
        interval: float = 0.1,
    ) -> None:
        """Poll ``ready`` until it is true; fail early when a process exits, or at the deadline."""
        deadline = time.monotonic() + timeout
        while True:
            self.check_alive(f"waiting for {what}")
            try:
                if ready():
                    return
            except Exception:  # not ready yet: connection refused, 5xx, ... (retried)
                pass
            if time.monotonic() > deadline:
                if owner is not None:
                    raise owner.failure(f"waiting {timeout:.0f}s for {what}")
                raise SetupError(f"timed out after {timeout:.0f}s waiting for {what}")
            time.sleep(interval)

    def stop_all(self, grace: float = 10.0) -> None:
        """Stop every process, newest first. Safe to call more than once."""
        for c in reversed(self.components):
            terminate(c.process.pid, c.process, grace)
        self.components.clear()


def terminate(pid: int, process: subprocess.Popen[bytes] | None = None, grace: float = 10.0) -> None:
    """SIGTERM the process group of ``pid``, wait up to ``grace`` seconds, then SIGKILL it."""
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if not _alive(pid, process):
            return
        time.sleep(0.05)
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pid, signal.SIGKILL)
    if process is not None:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.wait(timeout=5)


def _alive(pid: int, process: subprocess.Popen[bytes] | None) -> bool:
    if process is not None:
        return process.poll() is None
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except PermissionError:
        return True
    # A zombie we are not the parent of still answers kill(0); look at its state.
    try:
        state = Path(f"/proc/{pid}/stat").read_text().split(")")[-1].split()[0]
    except OSError:
        return False
    return state != "Z"


def pid_alive(pid: int) -> bool:
    return _alive(pid, None)
