"""A bound on the number of processes a local agent may start (a fork bomb stops at it).

Called by the subprocess agent adapter for a sandboxed command. Two mechanisms, chosen by who the
operator runs as:

- **Not root** (the chart's pod, a user's ``oasis run``): ``RLIMIT_NPROC``, set by the child *after*
  it has entered its own user namespace (:mod:`~oasis_operator.adapters.agents.netjail`). The kernel
  counts processes per user namespace and user, so the limit counts the agent's own processes and
  not the operator's threads or other processes of the same uid on the node; the namespace's parent
  level keeps the operator's own limit.
- **Root**: the kernel does not enforce ``RLIMIT_NPROC`` for uid 0, so the agent is put in a
  ``pids`` cgroup of its own with ``pids.max``. The cgroup also finds every process the agent left
  behind, even one that started a session of its own, and :meth:`PidsCgroup.remove` kills them all.
  Where no ``pids`` controller is writable, :func:`PidsCgroup.create` says so and the adapter refuses
  the command rather than run it unbounded.
"""

from __future__ import annotations

import contextlib
import os
import secrets
import signal
import time
from dataclasses import dataclass
from pathlib import Path

__all__ = ["PidsCgroup", "PidsUnavailable", "controller_directory"]

_REMOVE_SECONDS = 5.0


class PidsUnavailable(OSError):
    """No ``pids`` cgroup can be made here; the message says why."""


def controller_directory(mountinfo: str, own_cgroups: str) -> Path | None:
    """Where this process may create a ``pids`` cgroup: under its own cgroup of a v1 ``pids``
    hierarchy, else at the root of the v2 hierarchy (whose root admits processes beside children).
    ``mountinfo`` and ``own_cgroups`` are the texts of ``/proc/self/mountinfo`` and ``/proc/self/cgroup``."""
    v1_path: str | None = None
    v2_mount: Path | None = None
    for line in own_cgroups.splitlines():
        _number, _sep, rest = line.partition(":")
        controllers, _sep, path = rest.partition(":")
        if "pids" in controllers.split(","):
            v1_path = path
    for line in mountinfo.splitlines():
        before, _sep, after = line.partition(" - ")
        fields, tail = before.split(), after.split()
        if len(fields) < 5 or len(tail) < 3:
            continue
        root, mount_point, fstype, options = fields[3], fields[4], tail[0], tail[2].split(",")
        if fstype == "cgroup" and "pids" in options and v1_path is not None:
            inside = v1_path[len(root) :] if v1_path.startswith(root) and root != "/" else v1_path
            return Path(mount_point) / inside.lstrip("/")
        if fstype == "cgroup2" and v2_mount is None:
            v2_mount = Path(mount_point)
    return v2_mount if v1_path is None else None


@dataclass
class PidsCgroup:
    """One agent run's ``pids`` cgroup; ``procs`` is an open descriptor of its ``cgroup.procs`` that
    the child writes ``0`` to (join) before it execs."""

    path: Path
    procs: int

    @classmethod
    def create(cls, limit: int) -> PidsCgroup:
        try:
            base = controller_directory(
                Path("/proc/self/mountinfo").read_text(), Path("/proc/self/cgroup").read_text()
            )
        except OSError as exc:
            raise PidsUnavailable(f"cannot read this process's cgroups: {exc.strerror}") from None
        if base is None:
            raise PidsUnavailable("no pids cgroup controller is mounted")
        path = base / f"oasis-agent-{secrets.token_hex(6)}"
        try:
            if not (base / "pids.max").exists() and (base / "cgroup.subtree_control").exists():
                (base / "cgroup.subtree_control").write_text("+pids")  # v2: the root's children get pids
            path.mkdir(mode=0o755)
        except OSError as exc:
            raise PidsUnavailable(f"cannot create a pids cgroup under {base}: {exc.strerror}") from None
        try:
            (path / "pids.max").write_text(str(limit))
            procs = os.open(path / "cgroup.procs", os.O_WRONLY | os.O_CLOEXEC)
        except OSError as exc:
            with contextlib.suppress(OSError):
                path.rmdir()
            raise PidsUnavailable(f"cannot bound the pids cgroup {path}: {exc.strerror}") from None
        return cls(path, procs)

    def join(self) -> None:
        """In the child, before exec: move itself into the cgroup."""
        os.write(self.procs, b"0")

    def members(self) -> list[int]:
        try:
            return [int(p) for p in (self.path / "cgroup.procs").read_text().split()]
        except OSError:
            return []

    def remove(self) -> None:
        """Kill every process still in the cgroup, then remove it."""
        with contextlib.suppress(OSError):
            os.close(self.procs)
        deadline = time.monotonic() + _REMOVE_SECONDS
        while True:
            for pid in self.members():
                with contextlib.suppress(ProcessLookupError, PermissionError):
                    os.kill(pid, signal.SIGKILL)
            try:
                self.path.rmdir()
                return
            except FileNotFoundError:
                return
            except OSError:
                if time.monotonic() > deadline:
                    return  # left for the next start's sweep; nothing in it can fork past pids.max
                time.sleep(0.02)
