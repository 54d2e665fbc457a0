"""Names of cluster-scoped objects that scenarios declare, held by one scenario at a time.

A scenario that declares a node by name (``node/node-2``) creates that node: it is cluster-scoped, so
two scenarios declaring it, in two runs the operator drives at once, would share one object. One's
stimulus (``node-2`` under DiskPressure) would be the other's declared state broken, one's teardown
would delete the other's node, and an agent's node operation would reach the other scenario. Within a
run such a scenario is exclusive; :class:`ClusterNames` extends that across every run of this
operator process: a scenario holds the names of its plan's cluster-scoped objects from before it is
provisioned until it is torn down, and another that needs one of them waits. Names are taken in sorted
order, so two scenarios never wait for each other.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator, Iterable, Mapping
from contextlib import asynccontextmanager
from typing import Any

__all__ = ["ClusterNames", "cluster_scoped_names"]


def cluster_scoped_names(manifests: Iterable[Mapping[str, Any]]) -> list[str]:
    """``Kind/name`` of every cluster-scoped object among ``manifests`` (namespaces excepted: theirs
    are the scenario's own, suffixed names)."""
    return sorted(
        {
            f"{m['kind']}/{m['metadata']['name']}"
            for m in manifests
            if m.get("kind") != "Namespace" and not (m.get("metadata") or {}).get("namespace")
        }
    )


class ClusterNames:
    def __init__(self) -> None:
        self._locks: dict[str, asyncio.Lock] = {}

    def held(self) -> list[str]:
        return sorted(name for name, lock in self._locks.items() if lock.locked())

    @asynccontextmanager
    async def hold(self, names: Iterable[str]) -> AsyncIterator[None]:
        acquired: list[asyncio.Lock] = []
        try:
            for name in sorted(set(names)):
                lock = self._locks.setdefault(name, asyncio.Lock())
                await lock.acquire()
                acquired.append(lock)
            yield
        finally:
            for lock in reversed(acquired):
                lock.release()
