"""A refused connection to the metrics store is asked again (the request never left); any other failure
is not, so nothing can be imported twice."""

from __future__ import annotations

import asyncio

import httpx2
import pytest

from oasis_operator.adapters.toolplane.metrics import _connected


def _flaky(failures: list[Exception]) -> tuple[list[int], object]:
    calls: list[int] = []

    async def request() -> httpx2.Response:
        calls.append(1)
        if failures:
            raise failures.pop(0)
        return httpx2.Response(204)

    return calls, request


def test_a_refused_connection_is_asked_again() -> None:
    calls, request = _flaky([httpx2.ConnectError("All connection attempts failed")] * 2)
    assert asyncio.run(_connected(request, 5.0)).status_code == 204  # type: ignore[arg-type]
    assert len(calls) == 3


def test_a_request_that_was_sent_is_never_repeated() -> None:
    calls, request = _flaky([httpx2.ReadTimeout("slow")])
    with pytest.raises(httpx2.ReadTimeout):
        asyncio.run(_connected(request, 5.0))  # type: ignore[arg-type]
    assert len(calls) == 1


def test_a_store_that_stays_unreachable_is_a_failure_after_the_deadline() -> None:
    calls, request = _flaky([httpx2.ConnectError("refused")] * 100)
    with pytest.raises(httpx2.ConnectError):
        asyncio.run(_connected(request, 0.3))  # type: ignore[arg-type]
    assert 1 < len(calls) < 100
