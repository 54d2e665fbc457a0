"""Fixtures for the agent adapter tests: misbehaving local agent servers on 127.0.0.1.

Every server binds an ephemeral port, every loop in a handler is bounded, and every server is shut
down at the end of its test, hanging handlers included.
"""

from __future__ import annotations

import asyncio
import contextlib
import socket
from collections.abc import AsyncIterator, Awaitable, Callable

import pytest
from aiohttp import web

Handler = Callable[[web.Request], Awaitable[web.StreamResponse]]
RawHandler = Callable[[asyncio.StreamReader, asyncio.StreamWriter], Awaitable[None]]


def _bound_socket() -> socket.socket:
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.bind(("127.0.0.1", 0))
    return sock


@pytest.fixture
async def serve() -> AsyncIterator[Callable[..., Awaitable[str]]]:
    """Start an aiohttp app from ``{(method, path): handler}``; returns its base URL."""
    runners: list[web.AppRunner] = []

    async def start(routes: dict[tuple[str, str], Handler], ssl_context: object = None) -> str:
        app = web.Application()
        for (method, path), handler in routes.items():
            app.router.add_route(method, path, handler)
        runner = web.AppRunner(app, shutdown_timeout=0.1, handler_cancellation=True, access_log=None)
        await runner.setup()
        runners.append(runner)
        sock = _bound_socket()
        site = web.SockSite(runner, sock, ssl_context=ssl_context)  # type: ignore[arg-type]
        await site.start()
        scheme = "https" if ssl_context is not None else "http"
        return f"{scheme}://127.0.0.1:{sock.getsockname()[1]}"

    yield start
    for runner in runners:
        await runner.cleanup()


@pytest.fixture
async def serve_raw() -> AsyncIterator[Callable[[RawHandler], Awaitable[str]]]:
    """Start a raw TCP server whose handler does whatever it likes to the connection."""
    servers: list[asyncio.Server] = []
    writers: list[asyncio.StreamWriter] = []
    release = asyncio.Event()

    async def start(handler: RawHandler) -> str:
        async def wrapped(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            writers.append(writer)
            with contextlib.suppress(ConnectionError, asyncio.CancelledError):
                await handler(reader, writer)
            with contextlib.suppress(ConnectionError, asyncio.CancelledError, TimeoutError):
                async with asyncio.timeout(5):
                    await release.wait()

        server = await asyncio.start_server(wrapped, "127.0.0.1", 0)
        servers.append(server)
        port = server.sockets[0].getsockname()[1]
        return f"http://127.0.0.1:{port}"

    yield start
    release.set()
    for writer in writers:
        writer.transport.abort()
    for server in servers:
        server.close()
        await server.wait_closed()


@pytest.fixture
def unused_url() -> str:
    """A URL on which nothing listens (the port was bound, then released)."""
    sock = _bound_socket()
    port = sock.getsockname()[1]
    sock.close()
    return f"http://127.0.0.1:{port}"
