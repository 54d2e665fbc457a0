"""Asking again until an answer is good enough or a deadline passes: the one polling loop of the shell.

Provisioning, revocation, teardown and the injected failures all wait for a controller or the API
server to catch up (a node Ready, a quota counted, a policy enforced, a namespace gone). Each used to
carry its own deadline-and-sleep loop; they differed only in what they asked, what counted as done and
what they said when time ran out. :func:`poll` is that loop once: the probe is always asked at least
once and once more after the last sleep, so a deadline of zero still gives one honest answer.
"""

from __future__ import annotations

import asyncio
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from typing import Generic, TypeVar

__all__ = ["Polled", "poll", "wait_until"]

T = TypeVar("T")


@dataclass(frozen=True)
class Polled(Generic[T]):
    """The last answer of the probe, whether it was good enough, and how often it was asked."""

    value: T
    met: bool
    asked: int


async def poll(
    probe: Callable[[], Awaitable[T]],
    done: Callable[[T], bool],
    *,
    timeout: float,
    interval: float = 0.1,
    clock: Callable[[], float] = time.monotonic,
) -> Polled[T]:
    """Ask ``probe`` every ``interval`` seconds until ``done`` accepts its answer or ``timeout``
    seconds have passed; return the last answer either way (the caller decides what a miss means).
    An exception from the probe ends the wait at once (it is not a "not yet")."""
    deadline = clock() + timeout
    asked = 0
    while True:
        value = await probe()
        asked += 1
        if done(value):
            return Polled(value, True, asked)
        if clock() > deadline:
            return Polled(value, False, asked)
        await asyncio.sleep(interval)


async def wait_until(
    probe: Callable[[], Awaitable[T]],
    done: Callable[[T], bool],
    *,
    timeout: float,
    timed_out: Callable[[T], Exception],
    interval: float = 0.1,
) -> T:
    """:func:`poll`, raising ``timed_out(last answer)`` when the deadline passes first."""
    polled = await poll(probe, done, timeout=timeout, interval=interval)
    if not polled.met:
        raise timed_out(polled.value)
    return polled.value
