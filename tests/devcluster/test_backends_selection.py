"""Choosing back-ends (``--backends``), and the kubelet tunnel's handling of what the API server asks."""

from __future__ import annotations

import asyncio
import datetime as dt

import pytest

from oasis_operator.devcluster.backends import BACKENDS, parse_selection, with_requirements
from oasis_operator.devcluster.backends.logs import LogLine
from oasis_operator.devcluster.backends.metrics import Series
from oasis_operator.devcluster.errors import SetupError
from oasis_operator.devcluster.kubelet_tunnel import Tunnel, parse_connect

SELECTIONS = [
    ("nothing chosen starts nothing", "", ()),
    ("all is every back-end in start order", "all", tuple(BACKENDS)),
    ("alerts bring the metrics store they read", "alerts", ("metrics", "alerts")),
    ("order and repetition do not matter", "gitops, logs,logs", ("logs", "gitops")),
]


@pytest.mark.parametrize(("case", "text", "expected"), SELECTIONS, ids=[c[0] for c in SELECTIONS])
def test_selection(case, text, expected):
    assert parse_selection(text) == expected


def test_an_unknown_back_end_is_a_clear_error():
    with pytest.raises(
        SetupError, match=r"unknown back-end grafana; known: all, logs, resource-metrics, metrics"
    ):
        parse_selection("logs,grafana")
    with pytest.raises(SetupError, match="unknown back-end nope"):
        with_requirements(["nope"])


CONNECTS = [
    (
        "a kubelet by host name",
        b"CONNECT worker-1:10250 HTTP/1.1\r\nHost: worker-1:10250\r\n\r\n",
        ("worker-1", 10250),
    ),
    ("an IPv6 node address", b"CONNECT [fd00::1]:10250 HTTP/1.1\r\n\r\n", ("fd00::1", 10250)),
    ("not a CONNECT", b"GET / HTTP/1.1\r\n\r\n", None),
    ("no port", b"CONNECT worker-1 HTTP/1.1\r\n\r\n", None),
    ("garbage", b"\x16\x03\x01\r\n\r\n", None),
]


@pytest.mark.parametrize(("case", "head", "expected"), CONNECTS, ids=[c[0] for c in CONNECTS])
def test_parse_connect(case, head, expected):
    assert parse_connect(head) == expected


async def _through_tunnel(request: bytes, route: tuple[str, int] | None = None) -> bytes:
    async def upstream(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        writer.write(b"pong:" + await reader.readexactly(4))
        await writer.drain()
        writer.close()

    server = await asyncio.start_server(upstream, "127.0.0.1", 0)
    port = server.sockets[0].getsockname()[1]
    routes = {route: ("127.0.0.1", port)} if route else {}
    # The kubelet target is a closed port: only a route can reach the upstream when one is given.
    target = 1 if route else port
    tunnel = await asyncio.start_server(Tunnel("127.0.0.1", target, routes).handle, "127.0.0.1", 0)
    tport = tunnel.sockets[0].getsockname()[1]
    async with server, tunnel:
        reader, writer = await asyncio.open_connection("127.0.0.1", tport)
        writer.write(request)
        await writer.drain()
        answer = await asyncio.wait_for(reader.read(), 5)
        writer.close()
        return answer


async def test_the_kubelet_port_is_joined_to_the_simulator():
    answer = await _through_tunnel(b"CONNECT worker-2:10250 HTTP/1.1\r\n\r\nping")
    assert answer == b"HTTP/1.1 200 Connection established\r\n\r\npong:ping"


async def test_any_other_port_is_refused():
    answer = await _through_tunnel(b"CONNECT 10.0.0.15:80 HTTP/1.1\r\n\r\nping")
    assert answer.startswith(b"HTTP/1.1 403 Forbidden")


async def test_a_routed_endpoint_is_joined_and_only_that_one():
    routed = await _through_tunnel(b"CONNECT 10.244.0.250:4443 HTTP/1.1\r\n\r\nping", ("10.244.0.250", 4443))
    assert routed == b"HTTP/1.1 200 Connection established\r\n\r\npong:ping"
    other = await _through_tunnel(b"CONNECT 10.244.0.251:4443 HTTP/1.1\r\n\r\nping", ("10.244.0.250", 4443))
    assert other.startswith(b"HTTP/1.1 403 Forbidden")


RECORDS = [
    (
        "a line as the runtime writes it",
        LogLine(dt.datetime(2026, 1, 2, 3, 4, 5, 600000, tzinfo=dt.UTC), "ready"),
        "2026-01-02T03:04:05.600000Z stdout F ready\n",
    ),
    (
        "stderr, and a multi-line text as one record per line",
        LogLine(
            dt.datetime(2026, 1, 2, 3, 4, 5, tzinfo=dt.timezone(dt.timedelta(hours=2))), "a\nb", "stderr"
        ),
        "2026-01-02T01:04:05.000000Z stderr F a\n2026-01-02T01:04:05.000000Z stderr F b\n",
    ),
]


@pytest.mark.parametrize(("case", "line", "expected"), RECORDS, ids=[c[0] for c in RECORDS])
def test_log_record_format(case, line, expected):
    assert line.cri() == expected


def test_a_log_line_without_a_time_zone_is_refused():
    with pytest.raises(ValueError, match="no time zone"):
        LogLine(dt.datetime(2026, 1, 2), "x").cri()


def test_series_import_line_has_millisecond_timestamps():
    line = Series(
        {"__name__": "up", "namespace": "a"}, [(1700000000.0, 1.0), (1700000060.5, 0.0)]
    ).import_line()
    assert line == (
        '{"metric": {"__name__": "up", "namespace": "a"}, "values": [1.0, 0.0], '
        '"timestamps": [1700000000000, 1700000060500]}'
    )
