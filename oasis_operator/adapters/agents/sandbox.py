"""A filesystem sandbox for agents run as local processes: Linux Landlock, set up by the parent and
entered by the child between fork and exec.

Called by the subprocess agent adapter when the operator accepts ``adapter: subprocess`` (only with
``--allow-subprocess-agents``). It turns a list of paths the agent must never read (the operator's
kubeconfig or ServiceAccount token directory, the webhook's TLS files, the audit log, the temporary
directory where other agents' private files live) into a Landlock ruleset that grants read and
execute on everything else (found by walking down from ``/`` only where a hidden path lies), and full
access to the agent's own private directory. Entering it also forbids, for the agent and whatever it
starts, ptrace of processes outside the sandbox (so the operator's memory and ``/proc/<pid>/`` files
stay closed), signals to them and abstract UNIX sockets of theirs. The last two need Landlock ABI 6
(Linux 6.12); on an older kernel :func:`prepare` refuses, since an agent of the operator's user could
otherwise kill the operator (:func:`refusal` says so).

Landlock does not cover everything ``/proc/<pid>/`` offers to a process of the same user (its
``environ`` and ``fd`` entries are read with a weaker ptrace check): :func:`make_undumpable` closes
those of the operator's process to every process without ``CAP_SYS_PTRACE``, which is what the
operator's pod runs as (non-root, every capability dropped).

Symbolic links are never granted themselves: Landlock checks the path a link resolves to, so the
hidden ``/var/run/secrets/...`` stays hidden whether it is reached through ``/var/run`` or ``/run``.

Why Landlock: an unprivileged process can confine itself and its children with it (no capability,
no setuid helper), and it is in every kernel since 5.13. Where it is missing (or a seccomp profile
blocks it) :func:`abi_version` is 0 and the adapter refuses to run the command at all.

Landlock hides paths and signals; the network is kept by :mod:`~oasis_operator.adapters.agents.netjail`
and the number of processes by :mod:`~oasis_operator.adapters.agents.pids`, the three bundled by
:mod:`~oasis_operator.adapters.agents.confinement`.
"""

from __future__ import annotations

import ctypes
import os
import struct
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path

__all__ = [
    "MIN_ABI",
    "SandboxError",
    "SandboxRules",
    "abi_version",
    "enter",
    "make_undumpable",
    "prepare",
    "refusal",
    "visible_roots",
]

# linux/landlock.h
_CREATE_RULESET_VERSION = 1
_RULE_PATH_BENEATH = 1
_PR_SET_NO_NEW_PRIVS = 38
_PR_SET_DUMPABLE = 4
_SYS = {"create_ruleset": 444, "add_rule": 445, "restrict_self": 446}  # the same on x86-64 and arm64

EXECUTE = 1 << 0
WRITE_FILE = 1 << 1
READ_FILE = 1 << 2
READ_DIR = 1 << 3
_DIR_WRITES = sum(1 << i for i in range(4, 13))  # remove_dir .. make_sym
REFER = 1 << 13  # ABI 2
TRUNCATE = 1 << 14  # ABI 3
IOCTL_DEV = 1 << 15  # ABI 5
_FILE_RIGHTS = EXECUTE | WRITE_FILE | READ_FILE | TRUNCATE | IOCTL_DEV
_SCOPE_ABSTRACT_UNIX_SOCKET = 1 << 0  # ABI 6
_SCOPE_SIGNAL = 1 << 1  # ABI 6

READ_ONLY = EXECUTE | READ_FILE | READ_DIR
DEVICES = READ_ONLY | WRITE_FILE | IOCTL_DEV  # /dev/null, /dev/tty, ...


class SandboxError(OSError):
    """The sandbox cannot be built here (no Landlock, or a path cannot be opened)."""


def _libc() -> ctypes.CDLL:
    return ctypes.CDLL(None, use_errno=True)


def abi_version() -> int:
    """The kernel's Landlock ABI version; 0 when Landlock is not available to this process."""
    try:
        found = int(
            _libc().syscall(
                _SYS["create_ruleset"], None, ctypes.c_size_t(0), ctypes.c_uint32(_CREATE_RULESET_VERSION)
            )
        )
    except (OSError, AttributeError):
        return 0
    return max(found, 0)


#: The first Landlock ABI that scopes signals and abstract UNIX sockets (Linux 6.12).
MIN_ABI = 6


def refusal(abi: int) -> str | None:
    """Why a kernel of Landlock ABI ``abi`` cannot sandbox a local agent, or None when it can."""
    if abi < 1:
        return (
            "Linux Landlock is not available (kernel 5.13 or newer, not blocked by seccomp): "
            "a local agent process cannot be kept away from the operator's credentials"
        )
    if abi < MIN_ABI:
        return (
            f"this kernel's Landlock is ABI {abi}, and ABI {MIN_ABI} (Linux 6.12) is the first to keep "
            "signals inside the sandbox: a local agent process running as the operator's user could "
            "kill the operator"
        )
    return None


def _handled(abi: int) -> int:
    rights = EXECUTE | WRITE_FILE | READ_FILE | READ_DIR | _DIR_WRITES
    if abi >= 2:
        rights |= REFER
    if abi >= 3:
        rights |= TRUNCATE
    if abi >= 5:
        rights |= IOCTL_DEV
    return rights


def visible_roots(
    hidden: Iterable[Path],
    listdir: Callable[[Path], Sequence[str]] = os.listdir,
    is_link: Callable[[Path], bool] = os.path.islink,
) -> list[Path]:
    """The smallest set of paths that covers everything under ``/`` except the ``hidden`` paths
    (already resolved): walk down from ``/`` only into directories that contain a hidden path.
    Symbolic links are left out (Landlock judges the path they resolve to)."""
    hidden = [Path(h) for h in hidden]
    roots: list[Path] = []

    def walk(directory: Path) -> None:
        try:
            names = sorted(listdir(directory))
        except OSError:
            return
        for name in names:
            child = directory / name
            if child in hidden or is_link(child):
                continue
            if any(h.is_relative_to(child) for h in hidden):
                walk(child)
            else:
                roots.append(child)

    walk(Path("/"))
    return roots


@dataclass(frozen=True)
class SandboxRules:
    """A prepared ruleset: the open ruleset file descriptor, entered by :func:`enter` in the child."""

    fd: int
    abi: int

    def close(self) -> None:
        os.close(self.fd)


def prepare(hidden: Sequence[Path], private: Sequence[Path], *, devices: Path = Path("/dev")) -> SandboxRules:
    """Build the ruleset in the parent: read and execute everywhere but ``hidden``, full access to
    ``private`` (the agent's own directory), read and write on device files."""
    abi = abi_version()
    if why := refusal(abi):
        raise SandboxError(why)
    handled = _handled(abi)
    attr = struct.pack("=QQQ", handled, 0, _SCOPE_ABSTRACT_UNIX_SOCKET | _SCOPE_SIGNAL)
    libc = _libc()
    buf = ctypes.create_string_buffer(attr, len(attr))
    fd = int(libc.syscall(_SYS["create_ruleset"], buf, ctypes.c_size_t(len(attr)), ctypes.c_uint32(0)))
    if fd < 0:
        raise SandboxError(ctypes.get_errno(), f"landlock_create_ruleset: {os.strerror(ctypes.get_errno())}")
    resolved = [Path(os.path.realpath(h)) for h in hidden]
    rules = [(p, READ_ONLY) for p in visible_roots(resolved) if p != devices]
    rules += [(devices, DEVICES)] + [(Path(p), handled) for p in private]
    try:
        for path, rights in rules:
            _add_rule(libc, fd, path, rights & handled)
    except BaseException:
        os.close(fd)
        raise
    return SandboxRules(fd, abi)


def _add_rule(libc: ctypes.CDLL, ruleset: int, path: Path, rights: int) -> None:
    try:
        target = os.open(path, os.O_PATH | os.O_CLOEXEC)
    except OSError:
        return  # gone since it was listed: nothing to grant
    try:
        if not os.path.isdir(path):
            rights &= _FILE_RIGHTS
        attr = struct.pack("=Qi", rights, target)
        buf = ctypes.create_string_buffer(attr, len(attr))
        if (
            libc.syscall(
                _SYS["add_rule"],
                ctypes.c_int(ruleset),
                ctypes.c_int(_RULE_PATH_BENEATH),
                buf,
                ctypes.c_uint32(0),
            )
            != 0
        ):
            err = ctypes.get_errno()
            raise SandboxError(err, f"landlock_add_rule {path}: {os.strerror(err)}")
    finally:
        os.close(target)


def enter(rules: SandboxRules) -> None:
    """In the child, between fork and exec: no new privileges, then the ruleset (irreversible)."""
    libc = _libc()
    if libc.prctl(_PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0) != 0:
        raise SandboxError(ctypes.get_errno(), "prctl(PR_SET_NO_NEW_PRIVS)")
    if libc.syscall(_SYS["restrict_self"], ctypes.c_int(rules.fd), ctypes.c_uint32(0)) != 0:
        raise SandboxError(ctypes.get_errno(), "landlock_restrict_self")


def make_undumpable() -> None:
    """Make this process non-dumpable: its ``/proc/<pid>/`` entries (environment, open files,
    memory) then belong to root, and processes of the same user without ``CAP_SYS_PTRACE`` (agents
    it starts) cannot read them. Called once by the operator when it accepts local agent processes."""
    if _libc().prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0) != 0:
        raise SandboxError(ctypes.get_errno(), "prctl(PR_SET_DUMPABLE, 0)")
