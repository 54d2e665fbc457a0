"""Where the HTTP agent adapter connects, in the operator: never into the operator itself (decision
0099, review finding M-2). The endpoint's name is resolved and every address checked, the connection
is made to a checked address, and the connected socket's peer is checked again; what a refused or
failed endpoint answered never reaches the run's status."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Iterable
from typing import Any

import httpcore2
import pytest

from oasis_operator.adapters.agents.egress import GuardedBackend, refusal
from oasis_operator.adapters.agents.http import HttpAgent, HttpAgentSettings
from oasis_operator.core.contract import CONNECTION_FAILED, MALFORMED_RESPONSE
from oasis_operator.core.errors import AgentUnavailable

IDENTITY = {"identity": {"name": "a", "version": "1"}, "configuration": {}}


class Recorder:
    """A raw HTTP/1.1 server that records the request lines it got and answers ``answer``."""

    def __init__(self, answer: bytes) -> None:
        self.answer = answer
        self.requests: list[bytes] = []
        self.server: asyncio.Server | None = None

    async def handle(self, reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        head = await reader.readuntil(b"\r\n\r\n")
        self.requests.append(head.split(b"\r\n", 1)[0])
        writer.write(self.answer)
        await writer.drain()
        writer.close()

    async def start(self, host: str) -> int:
        self.server = await asyncio.start_server(self.handle, host, 0)
        return int(self.server.sockets[0].getsockname()[1])


def http_answer(status: int, body: bytes) -> bytes:
    return (
        f"HTTP/1.1 {status} X\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n"
        "Connection: close\r\n\r\n"
    ).encode() + body


@pytest.fixture
async def recorders() -> AsyncIterator[list[Recorder]]:
    made: list[Recorder] = []
    yield made
    for r in made:
        if r.server is not None:
            r.server.close()


async def serve(recorders: list[Recorder], host: str, answer: bytes) -> tuple[Recorder, int]:
    recorder = Recorder(answer)
    recorders.append(recorder)
    return recorder, await recorder.start(host)


def own_non_loopback_address() -> str:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        probe.connect(("192.0.2.1", 9))  # picks the outgoing address; sends nothing
        return str(probe.getsockname()[0])


async def identify(url: str, allow_local: bool | None) -> Any:
    async with HttpAgent(HttpAgentSettings(url=url, allow_local=allow_local)) as agent:
        return await agent.identify()


@pytest.mark.parametrize("host", ["127.0.0.1", "localhost", "own"])
async def test_the_operator_itself_is_refused_after_resolution(recorders: list[Recorder], host: str) -> None:
    address = own_non_loopback_address() if host == "own" else "127.0.0.1"
    recorder, port = await serve(recorders, address, http_answer(200, json.dumps(IDENTITY).encode()))
    url = f"http://{address if host == 'own' else host}:{port}/"
    with pytest.raises(AgentUnavailable) as refused:
        await identify(url, allow_local=False)
    assert refused.value.reason == CONNECTION_FAILED
    assert "refused" in refused.value.detail
    assert recorder.requests == []  # nothing was sent
    # A local operator (its agents run beside it) reaches the same endpoint.
    assert (await identify(url, allow_local=True)).identity.name == "a"
    assert recorder.requests == [b"GET /identity-and-configuration HTTP/1.1"]


class Redirected(httpcore2.AsyncNetworkBackend):
    """A network where every connection lands on one local port (a NAT, a transparent proxy, a
    resolver that answered one address and a route that led elsewhere)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.inner = httpcore2.AnyIOBackend()

    async def connect_tcp(
        self,
        host: str,
        port: int,
        timeout: float | None = None,
        local_address: str | None = None,
        socket_options: Iterable[Any] | None = None,
    ) -> httpcore2.AsyncNetworkStream:
        return await self.inner.connect_tcp("127.0.0.1", self.port, timeout=timeout)

    async def sleep(self, seconds: float) -> None:
        await asyncio.sleep(seconds)


async def test_the_connected_peer_is_checked_again(recorders: list[Recorder]) -> None:
    recorder, port = await serve(recorders, "127.0.0.1", http_answer(200, b"{}"))

    async def resolve(host: str, port: int) -> list[str]:
        return ["192.0.2.10"]  # an address the guard accepts

    backend = GuardedBackend(allow_local=False, inner=Redirected(port), resolve=resolve)
    with pytest.raises(httpcore2.ConnectError, match=r"the connection reached 127\.0\.0\.1 is a loopback"):
        await backend.connect_tcp("agent.example", 80, timeout=5)
    assert recorder.requests == []


@pytest.mark.parametrize(
    "address",
    ["169.254.169.254", "fe80::1", "0.0.0.0", "::", "224.0.0.1", "::ffff:169.254.169.254"],
)
def test_link_local_unspecified_and_multicast_are_refused_even_to_a_local_operator(address: str) -> None:
    assert refusal(address, allow_local=True) is not None


async def test_a_wrong_shape_answer_is_described_without_its_content(recorders: list[Recorder]) -> None:
    """An endpoint pointed at another service reads back nothing of it, not even a wrong shape."""
    leak = {"identity": {"name": "", "version": "sk-live-0123456789"}, "data": "internal secret"}
    _recorder, port = await serve(recorders, "127.0.0.1", http_answer(200, json.dumps(leak).encode()))
    with pytest.raises(AgentUnavailable) as bad:
        await identify(f"http://127.0.0.1:{port}/", allow_local=True)
    assert bad.value.reason == MALFORMED_RESPONSE
    assert "identity.name" in bad.value.detail
    assert "sk-live" not in bad.value.detail
    assert "secret" not in bad.value.detail


async def test_an_error_body_never_reaches_the_identity_failure(recorders: list[Recorder]) -> None:
    body = b'{"status":"success","data":{"deleted_series":12345}}\x1b[31m'
    _recorder, port = await serve(recorders, "127.0.0.1", http_answer(503, body))
    with pytest.raises(AgentUnavailable) as failed:
        await identify(f"http://127.0.0.1:{port}/", allow_local=True)
    assert "HTTP 503" in failed.value.detail
    assert "deleted_series" not in failed.value.detail
    assert "\x1b" not in failed.value.detail
