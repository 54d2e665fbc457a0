"""A private network for a local agent process: its own user and network namespaces, in which only
the endpoints its request names are reachable, through a relay the operator runs.

Called by the subprocess agent adapter for a sandboxed command (the operator's
``--allow-subprocess-agents``, and so ``oasis run``). The parent (:func:`prepare`) resolves the
allowed endpoints and builds everything the child needs; the child, between fork and exec
(:func:`enter`), leaves the operator's network:

1. ``unshare(CLONE_NEWUSER | CLONE_NEWNET)`` (and ``CLONE_NEWNS`` when a name must resolve): a user
   namespace needs no privilege, and owning it is what lets the child own a network namespace. The
   child maps its own uid and gid to themselves, so it is the same user as before, with no capability
   outside.
2. The new network namespace has a loopback interface and nothing else. The child brings it up, adds
   each allowed address that is not already a loopback address (a ``/32`` or ``/128`` on ``lo``), and
   listens on every allowed ``address:port``.
3. It hands those listening sockets to the parent over a UNIX socket pair (``SCM_RIGHTS``) and closes
   its copies. A socket keeps the namespace it was made in, so the parent accepts on them from its own
   namespace and connects each accepted connection to the real endpoint
   (:mod:`~oasis_operator.adapters.agents.relay`): TLS passes through end to end.
4. When an endpoint is a name, the child bind-mounts a copy of ``/etc/hosts`` that also maps that name
   to its addresses, so the agent resolves it without a DNS server it could not reach anyway.

So the agent sees the API server and the gateway at the very addresses its kubeconfig and tool
endpoints name, and nothing else: no loopback back-end (etcd, PostgreSQL, VictoriaMetrics, kwok), no
cloud metadata, no other host. Abstract UNIX sockets belong to a network namespace, so the operator's
are gone too.

Where user namespaces are not available to the operator (``kernel.unprivileged_userns_clone=0``, a
seccomp profile that blocks ``unshare``, as container runtimes' defaults do) :func:`unavailable`
says why and the adapter refuses to run the command.
"""

from __future__ import annotations

import contextlib
import ctypes
import ipaddress
import os
import socket
import struct
import subprocess
import sys
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from oasis_operator.adapters.agents.reach import Endpoint, is_ip_literal

__all__ = [
    "JailError",
    "JailPlan",
    "Listener",
    "enter",
    "hosts_overlay",
    "netlink_messages",
    "prepare",
    "unavailable",
]

CLONE_NEWNS = 0x00020000
CLONE_NEWUSER = 0x10000000
CLONE_NEWNET = 0x40000000
_MS_BIND = 4096
_MS_REC = 16384
_MS_PRIVATE = 1 << 18
_PR_SET_DUMPABLE = 4

# linux/netlink.h, linux/rtnetlink.h, linux/if_addr.h
_NLM_F_REQUEST, _NLM_F_ACK, _NLM_F_EXCL, _NLM_F_CREATE = 0x1, 0x4, 0x200, 0x400
_RTM_NEWLINK, _RTM_NEWADDR, _NLMSG_ERROR = 16, 20, 2
_IFF_UP = 0x1
_IFA_ADDRESS, _IFA_LOCAL = 1, 2
_IFA_F_NODAD = 0x02
_RT_SCOPE_HOST = 254
_LOOPBACK_INDEX = 1  # lo is always the first interface of a new network namespace

#: At most this many listening sockets (one SCM_RIGHTS message carries up to 253 descriptors).
MAX_LISTENERS = 64
_OK = b"ok"
_ERROR = b"error:"


class JailError(OSError):
    """The private network cannot be made (user namespaces unavailable, an address that cannot be
    bound); the message says which step failed and why."""


@dataclass(frozen=True)
class Listener:
    """One socket the child listens on: ``address:port`` in the agent's namespace, relayed to ``target``."""

    family: int
    address: str
    port: int
    target: Endpoint


@dataclass
class JailPlan:
    """What the child needs, computed in the parent; the socket pair carries the listeners back."""

    uid: int
    gid: int
    listeners: tuple[Listener, ...]
    netlink: tuple[bytes, ...]
    hosts_file: str | None
    parent: socket.socket
    child: socket.socket

    def close_child_end(self) -> None:
        self.child.close()

    def close(self) -> None:
        self.child.close()
        self.parent.close()

    def receive(self) -> list[tuple[socket.socket, Endpoint]]:
        """After the child has exec'd: the listening sockets it made, each with where it leads."""
        self.parent.settimeout(10.0)
        try:
            message, fds, _flags, _addr = socket.recv_fds(self.parent, 4096, MAX_LISTENERS)
        except OSError as exc:
            raise JailError(f"the agent's network namespace did not report back: {exc}") from None
        sockets = [socket.socket(fileno=fd) for fd in fds]
        if message != _OK or len(sockets) != len(self.listeners):
            for s in sockets:
                s.close()
            raise JailError(self.failure(message) or "the agent's network namespace reported no listeners")
        return [(s, listener.target) for s, listener in zip(sockets, self.listeners, strict=True)]

    def failure(self, message: bytes | None = None) -> str | None:
        """The child's own account of why it could not set the namespace up, if it sent one."""
        if message is None:
            self.parent.settimeout(0.5)
            try:
                message = self.parent.recv(4096)
            except OSError:
                return None
        if message.startswith(_ERROR):
            return message[len(_ERROR) :].decode("utf-8", "replace")
        return None


def _rtattr(kind: int, data: bytes) -> bytes:
    length = 4 + len(data)
    return struct.pack("=HH", length, kind) + data + b"\0" * (-length % 4)


def _nlmsg(kind: int, flags: int, seq: int, body: bytes) -> bytes:
    return struct.pack("=IHHII", 16 + len(body), kind, _NLM_F_REQUEST | _NLM_F_ACK | flags, seq, 0) + body


def netlink_messages(addresses: Sequence[str]) -> tuple[bytes, ...]:
    """The rtnetlink requests that bring ``lo`` up and add ``addresses`` (those that are not loopback
    addresses already) to it as host routes."""
    messages = [_nlmsg(_RTM_NEWLINK, 0, 1, struct.pack("=BxHiII", 0, 0, _LOOPBACK_INDEX, _IFF_UP, _IFF_UP))]
    for seq, text in enumerate(sorted(set(addresses)), start=2):
        ip = ipaddress.ip_address(text)
        if ip.is_loopback:
            continue
        family = socket.AF_INET if ip.version == 4 else socket.AF_INET6
        flags = _IFA_F_NODAD if ip.version == 6 else 0
        head = struct.pack("=BBBBI", family, ip.max_prefixlen, flags, _RT_SCOPE_HOST, _LOOPBACK_INDEX)
        body = head + _rtattr(_IFA_LOCAL, ip.packed) + _rtattr(_IFA_ADDRESS, ip.packed)
        messages.append(_nlmsg(_RTM_NEWADDR, _NLM_F_CREATE | _NLM_F_EXCL, seq, body))
    return tuple(messages)


def hosts_overlay(original: str, names: dict[str, list[str]]) -> str:
    """``/etc/hosts`` as the agent sees it: the original, then each allowed name's addresses."""
    lines = [original.rstrip("\n"), "# oasis: the endpoints this agent may reach"]
    lines += [f"{address} {name}" for name, addresses in sorted(names.items()) for address in addresses]
    return "\n".join(lines) + "\n"


Resolver = Callable[[str, int], list[tuple[int, str]]]


def _resolve(host: str, port: int) -> list[tuple[int, str]]:
    try:
        found = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    except OSError:
        return []
    return sorted({(family, str(sockaddr[0])) for family, _t, _p, _c, sockaddr in found})


def prepare(endpoints: Sequence[Endpoint], private: Path, resolve: Resolver = _resolve) -> JailPlan:
    """Resolve ``endpoints`` and plan the child's namespace; a name that does not resolve is left out
    (the agent could not reach it either way). Writes the ``/etc/hosts`` overlay into ``private``."""
    listeners: list[Listener] = []
    names: dict[str, list[str]] = {}
    for endpoint in endpoints:
        found = resolve(endpoint.host, endpoint.port)
        if not is_ip_literal(endpoint.host) and found:
            names[endpoint.host] = [address for _family, address in found]
        listeners += [Listener(family, address, endpoint.port, endpoint) for family, address in found]
    unique = {(entry.family, entry.address, entry.port): entry for entry in listeners}
    if len(unique) > MAX_LISTENERS:
        raise JailError(f"the request names {len(unique)} addresses; at most {MAX_LISTENERS} are relayed")
    hosts_file = None
    if names:
        hosts_file = str(private / "hosts")
        original = Path("/etc/hosts").read_text() if Path("/etc/hosts").is_file() else ""
        Path(hosts_file).write_text(hosts_overlay(original, names))
        os.chmod(hosts_file, 0o644)
    parent, child = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    return JailPlan(
        uid=os.getuid(),
        gid=os.getgid(),
        listeners=tuple(unique.values()),
        netlink=netlink_messages([entry.address for entry in unique.values()]),
        hosts_file=hosts_file,
        parent=parent,
        child=child,
    )


# -- in the child, between fork and exec -----------------------------------------------------------


def _libc() -> Any:
    return ctypes.CDLL(None, use_errno=True)


def _write(path: str, text: str) -> None:
    fd = os.open(path, os.O_WRONLY)
    try:
        os.write(fd, text.encode())
    finally:
        os.close(fd)


def _check(result: int, what: str) -> None:
    if result != 0:
        err = ctypes.get_errno()
        raise JailError(err, f"{what}: {os.strerror(err)}")


def _configure_network(messages: Sequence[bytes]) -> None:
    with socket.socket(socket.AF_NETLINK, socket.SOCK_RAW, socket.NETLINK_ROUTE) as link:
        link.bind((0, 0))
        for message in messages:
            link.send(message)
            answer = link.recv(65536)
            kind = struct.unpack_from("=H", answer, 4)[0]
            error = struct.unpack_from("=i", answer, 16)[0] if kind == _NLMSG_ERROR else 0
            if error:
                raise JailError(-error, f"configuring the loopback interface: {os.strerror(-error)}")


def _listen(listener: Listener) -> socket.socket:
    sock = socket.socket(listener.family, socket.SOCK_STREAM)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        if listener.family == socket.AF_INET6:
            sock.setsockopt(socket.IPPROTO_IPV6, socket.IPV6_V6ONLY, 1)
        sock.bind((listener.address, listener.port))
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise JailError(f"listening on {listener.address} port {listener.port}: {exc.strerror}") from None
    return sock


def _unshare(plan: JailPlan) -> None:
    libc = _libc()
    # The operator makes itself undumpable (sandbox.make_undumpable), and the forked child inherits
    # that: its /proc/self files then belong to root and it could not write its own id maps. The
    # child is about to exec the agent, which resets the flag anyway.
    _check(libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0), "prctl(PR_SET_DUMPABLE)")
    flags = CLONE_NEWUSER | CLONE_NEWNET | (CLONE_NEWNS if plan.hosts_file else 0)
    _check(libc.unshare(flags), "unshare (a user and network namespace)")
    _write("/proc/self/setgroups", "deny")
    _write("/proc/self/uid_map", f"{plan.uid} {plan.uid} 1")
    _write("/proc/self/gid_map", f"{plan.gid} {plan.gid} 1")
    if plan.hosts_file:
        _check(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "making the mounts private")
        _check(
            libc.mount(plan.hosts_file.encode(), b"/etc/hosts", None, _MS_BIND, None),
            "mounting the agent's /etc/hosts",
        )


def enter(plan: JailPlan) -> None:
    """In the child: leave the operator's network, listen on the allowed addresses, hand the
    listeners to the parent. Any failure is sent to the parent before it is raised."""
    made: list[socket.socket] = []
    try:
        _unshare(plan)
        _configure_network(plan.netlink)
        made = [_listen(listener) for listener in plan.listeners]
        if made:
            socket.send_fds(plan.child, [_OK], [s.fileno() for s in made])
        else:
            plan.child.send(_OK)
    except OSError as exc:
        with contextlib.suppress(OSError):
            plan.child.send(_ERROR + str(exc).encode("utf-8", "replace")[:2000])
        raise
    finally:
        for sock in made:
            sock.close()
        plan.parent.close()
        plan.child.close()


_PROBE_SECONDS = 20.0


def unavailable() -> str | None:
    """Why a private network namespace cannot be made here, or None when it can (tried once, in a
    short-lived child of this process, exactly as an agent would get it)."""
    with contextlib.ExitStack() as stack:
        import tempfile

        private = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="netjail-")))
        plan = prepare([Endpoint("localhost", 1)], private)
        stack.callback(plan.close)
        try:
            subprocess.run(
                [sys.executable, "-c", "pass"],
                preexec_fn=lambda: enter(plan),
                check=True,
                timeout=_PROBE_SECONDS,
                capture_output=True,
            )
        except (OSError, subprocess.SubprocessError) as exc:
            return plan.failure() or str(exc)
        try:
            for sock, _target in plan.receive():
                sock.close()
        except JailError as exc:
            return str(exc)
    return None
