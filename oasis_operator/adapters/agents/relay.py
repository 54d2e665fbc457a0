"""The operator's side of a local agent's private network: each connection the agent opens to an
allowed endpoint, carried to the real endpoint.

Called by the subprocess agent adapter with the listening sockets the agent's network namespace handed
back (:mod:`~oasis_operator.adapters.agents.netjail`). For every connection accepted on one, it
opens a TCP connection to that listener's endpoint from the operator's own network and copies bytes
both ways until either side closes. It reads and changes nothing (TLS passes through), and it lives
exactly as long as the agent's run: :meth:`Relay.close` stops the listeners and cuts every
connection still open.

Bounded: at most :data:`MAX_CONNECTIONS` connections at once (further ones are closed at once), and a
connect to the endpoint gives up after :data:`CONNECT_SECONDS`.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import Awaitable, Callable, Sequence

from oasis_operator.adapters.agents.reach import Endpoint

__all__ = ["CONNECT_SECONDS", "MAX_CONNECTIONS", "Relay"]

MAX_CONNECTIONS = 256
CONNECT_SECONDS = 10.0
_CHUNK = 65536


async def _pipe(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
    try:
        while chunk := await reader.read(_CHUNK):
            writer.write(chunk)
            await writer.drain()
        if writer.can_write_eof():
            writer.write_eof()
    except (ConnectionError, OSError):
        pass


async def _close(writer: asyncio.StreamWriter) -> None:
    writer.close()
    with contextlib.suppress(ConnectionError, OSError):
        await writer.wait_closed()


class Relay:
    """Listeners in the agent's namespace, each leading to one endpoint in ours."""

    def __init__(self) -> None:
        self._servers: list[asyncio.Server] = []
        self._tasks: set[asyncio.Task[None]] = set()
        self.connections = 0

    @classmethod
    async def start(cls, listeners: Sequence[tuple[socket.socket, Endpoint]]) -> Relay:
        relay = cls()
        try:
            for sock, target in listeners:
                sock.setblocking(False)
                relay._servers.append(await asyncio.start_server(relay._handler(target), sock=sock))
        except BaseException:
            for sock, _target in listeners:
                sock.close()
            await relay.close()
            raise
        return relay

    def _handler(
        self, target: Endpoint
    ) -> Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]:
        async def accept(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            await self._accept(reader, writer, target)

        return accept

    async def _accept(
        self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter, target: Endpoint
    ) -> None:
        if len(self._tasks) >= MAX_CONNECTIONS:
            await _close(writer)
            return
        task = asyncio.current_task()
        assert task is not None
        self._tasks.add(task)
        self.connections += 1
        try:
            try:
                async with asyncio.timeout(CONNECT_SECONDS):
                    up_reader, up_writer = await asyncio.open_connection(target.host, target.port)
            except (OSError, TimeoutError):
                return
            try:
                await asyncio.gather(_pipe(reader, up_writer), _pipe(up_reader, writer))
            finally:
                await _close(up_writer)
        finally:
            await _close(writer)
            self._tasks.discard(task)

    async def close(self) -> None:
        for server in self._servers:
            server.close()
        for task in list(self._tasks):
            task.cancel()
        for task in list(self._tasks):
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        for server in self._servers:
            with contextlib.suppress(Exception):
                await server.wait_closed()
        self._servers.clear()
