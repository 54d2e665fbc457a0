"""How many scenarios the operator runs at once, across every run it drives.

Each run bounds itself (``spec.parallelism``), but nothing bounded their sum: ten runs at parallelism
four put forty scenarios on the cluster at once, and on a 2-core machine the harness's own deadlines
(pods running within 30 s, the audit barrier within 15 s) then tripped and runs ended in
PROVIDER_FAILURE. ``--max-scenarios`` (``OASIS_MAX_SCENARIOS``) is that sum's bound: a scenario
waits for a slot before anything of it exists, and the wait is not its time (``timeouts.scenario``
starts after). ``None``: no bound. Called by :class:`~oasis_operator.workflows.scheduling.Scheduler`.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

__all__ = ["ScenarioSlots"]


class ScenarioSlots:
    """At most ``limit`` holders at once, served in the order they asked."""

    def __init__(self, limit: int | None = None) -> None:
        if limit is not None and limit < 1:
            raise ValueError(f"max scenarios {limit}: expected at least 1, or no bound")
        self.limit = limit
        self._slots = asyncio.Semaphore(limit) if limit is not None else None
        self.running = 0
        self.waiting = 0

    @asynccontextmanager
    async def hold(self) -> AsyncIterator[None]:
        if self._slots is None:
            self.running += 1
            try:
                yield
            finally:
                self.running -= 1
            return
        self.waiting += 1
        try:
            await self._slots.acquire()
        finally:
            self.waiting -= 1
        self.running += 1
        try:
            yield
        finally:
            self.running -= 1
            self._slots.release()
