"""Where the HTTP agent adapter may connect: checked after the name is resolved, and again on the
connected socket.

Called by the HTTP agent adapter (as the network layer of its HTTP client) for every connection it
opens to ``agent.endpoint``. The URL was checked before (:func:`~oasis_operator.core.model.endpoint.url_problem`),
but a name can resolve anywhere: here every address the name resolves to is checked
(:func:`~oasis_operator.core.model.endpoint.address_problem`, plus the operator's own addresses:
any address this process can bind is one), the connection is made to a checked address itself (no
second resolution that could answer differently), and the peer of the connected socket is checked once
more before a byte is sent. TLS still verifies the certificate against the name in the URL.

``allow_local`` (the operator's ``--allow-local-agent-endpoints``, set by the local stack and
``oasis run``, where the agent under test is a process on the same machine) lets loopback and the
machine's own addresses through; link-local, unspecified and multicast addresses never are.
"""

from __future__ import annotations

import asyncio
import contextlib
import ipaddress
import socket
import ssl
from collections.abc import Awaitable, Callable, Iterable

import httpcore2
import httpx2

from oasis_operator.core.model.endpoint import address_problem

__all__ = ["GuardedBackend", "GuardedTransport", "own_address", "refusal"]

Resolver = Callable[[str, int], Awaitable[list[str]]]


def own_address(address: str) -> bool:
    """Whether ``address`` belongs to this machine (or this pod): it can be bound here."""
    family = socket.AF_INET6 if ":" in address else socket.AF_INET
    with contextlib.closing(socket.socket(family, socket.SOCK_STREAM)) as probe:
        try:
            probe.bind((address, 0))
        except OSError:
            return False
    return True


def refusal(address: str, *, allow_local: bool) -> str | None:
    """Why the adapter must not connect to ``address``, or None."""
    try:
        ip = ipaddress.ip_address(address.split("%", 1)[0])
    except ValueError:
        return f"{address!r} is not an IP address"
    if why := address_problem(ip, allow_loopback=allow_local):
        return why
    if not allow_local and own_address(str(ip)):
        return f"{ip} is one of the operator's own addresses"
    return None


async def _resolve(host: str, port: int) -> list[str]:
    found = await asyncio.get_running_loop().getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return list(dict.fromkeys(str(sockaddr[0]) for _f, _t, _p, _c, sockaddr in found))


class GuardedBackend(httpcore2.AsyncNetworkBackend):
    """httpcore's network layer, refusing the addresses :func:`refusal` names."""

    def __init__(
        self,
        *,
        allow_local: bool,
        inner: httpcore2.AsyncNetworkBackend | None = None,
        resolve: Resolver = _resolve,
    ) -> None:
        self.allow_local = allow_local
        self._inner = inner or httpcore2.AnyIOBackend()
        self._resolve = resolve

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        try:
            addresses = await self._resolve(host, port)
        except OSError as exc:
            raise httpcore2.ConnectError(f"{host} does not resolve: {exc.strerror or exc}") from None
        refused = {a: why for a in addresses if (why := refusal(a, allow_local=self.allow_local))}
        allowed = [a for a in addresses if a not in refused]
        if not allowed:
            why = "; ".join(refused.values()) or "no address"
            raise httpcore2.ConnectError(f"{host}: refused, {why} (decision 0099)")
        failure: Exception | None = None
        for address in allowed:
            try:
                stream = await self._inner.connect_tcp(
                    address, port, timeout=timeout, local_address=local_address, socket_options=socket_options
                )
            except (httpcore2.ConnectError, httpcore2.ConnectTimeout) as exc:
                failure = exc
                continue
            peer = stream.get_extra_info("server_addr")
            why = refusal(str(peer[0]), allow_local=self.allow_local) if peer else "no peer address"
            if why:
                await stream.aclose()
                raise httpcore2.ConnectError(f"{host}: the connection reached {why}: refused (decision 0099)")
            return stream
        assert failure is not None
        raise failure

    async def connect_unix_socket(
        self,
        path: str,
        timeout: float | None = None,
        socket_options: Iterable[httpcore2.SOCKET_OPTION] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        raise httpcore2.ConnectError("an agent endpoint is never a UNIX socket")

    async def sleep(self, seconds: float) -> None:
        await self._inner.sleep(seconds)


class GuardedTransport(httpx2.AsyncHTTPTransport):
    """httpx's own transport over a connection pool whose network layer is a :class:`GuardedBackend`
    (httpx takes no network layer of its own, so the pool it made is replaced by one that has it)."""

    def __init__(self, *, verify: ssl.SSLContext | bool, backend: GuardedBackend) -> None:
        super().__init__(verify=verify, trust_env=False)
        self._pool = httpcore2.AsyncConnectionPool(
            ssl_context=httpx2.create_ssl_context(verify=verify, trust_env=False),
            network_backend=backend,
        )
