"""Target control planes: the embedded control plane (etcd, kube-apiserver with its own audit log,
controller-manager, scheduler, simulated nodes), one per scenario attempt, started ahead of need and
thrown away after use (decision 0100).

Called by the operator's target port (:mod:`oasis_operator.handlers.targets`). A target holds one
scenario attempt and nothing else: no CRDs, no runs, no operator, no other scenario. It is never
reset and never reused: what an agent did there (a ClusterRoleBinding, a webhook, a planted object,
a token it minted) is gone with the processes and the directory, so no later scenario can inherit it
and no proof of a clean reset is needed. The cost is a start per attempt, hidden by keeping ``warm``
targets started before they are asked for.

Every process is tied to the operator's (it dies with it); the pool's root directory is emptied when
the pool starts, so targets a crashed operator left on disk are gone too.
"""

from __future__ import annotations

import asyncio
import contextlib
import itertools
import logging
import shutil
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from oasis_operator.devcluster import binaries as binaries_mod
from oasis_operator.devcluster.cluster import ClusterConfig, DevCluster

__all__ = ["Target", "TargetPool", "TargetPoolConfig"]

log = logging.getLogger("oasis.targets")


@dataclass(frozen=True)
class TargetPoolConfig:
    """How targets are made and how many live at once."""

    #: Where the targets' directories go (emptied when the pool starts: it is the pool's alone).
    root: Path
    #: Simulated nodes per target.
    nodes: int = 3
    #: Tool-plane back-ends each target starts with (names of the dev cluster's back-ends).
    backends: tuple[str, ...] = ()
    #: Targets kept started ahead of need.
    warm: int = 1
    #: Targets alive at once (leased and warm): a bound on memory (~0.5 GiB each without back-ends).
    most: int = 4
    #: Seconds a target may take to become ready.
    ready_timeout: float = 120.0


@dataclass
class Target:
    """One started target control plane."""

    name: str
    cluster: DevCluster
    started_seconds: float
    leased_at: float = field(default=0.0)

    @property
    def kubeconfig(self) -> Path:
        """The operator's identity in the target (cluster-admin there, nothing anywhere else)."""
        return self.cluster.operator_kubeconfig

    @property
    def audit_log(self) -> Path:
        return self.cluster.audit_log

    @property
    def toolplane_file(self) -> Path | None:
        return self.cluster.toolplane_file if self.cluster.backends else None

    def alive(self) -> bool:
        """Every process of the target still runs."""
        return self.cluster.alive()


class TargetPool:
    """Starts targets (in threads: a start is minutes of blocking process management at worst), keeps
    ``warm`` of them ready, hands each out once (:meth:`lease`) and destroys it when given back
    (:meth:`discard`)."""

    def __init__(
        self,
        config: TargetPoolConfig,
        *,
        bins: binaries_mod.Binaries | None = None,
        make: Callable[[ClusterConfig], DevCluster] | None = None,
    ) -> None:
        self.config = config
        self._bins = bins
        self._make = make or (lambda cfg: DevCluster(cfg, self._bins))
        self._numbers = itertools.count(1)
        self._ready: asyncio.Queue[Target] = asyncio.Queue()
        #: Targets alive (starting, warm or leased): at most ``config.most``.
        self._slots = asyncio.Semaphore(max(1, config.most))
        #: One start at a time: two control planes starting at once on a small machine both miss
        #: their readiness deadlines.
        self._starting = asyncio.Lock()
        self._fillers: set[asyncio.Task[None]] = set()
        self._closed = False
        #: Start times (seconds) of every target so far, for the metrics and the benchmark.
        self.start_seconds: list[float] = []

    async def open(self) -> None:
        """Empty the root (targets of an earlier process) and start the warm targets."""
        await asyncio.to_thread(_empty, self.config.root)
        self._fill()

    async def warmed(self) -> None:
        """Return once the warm targets being started are started (or have failed to)."""
        await asyncio.gather(*list(self._fillers), return_exceptions=True)

    def _fill(self) -> None:
        want = self.config.warm - self._ready.qsize() - len(self._fillers)
        for _ in range(max(0, want)):
            task = asyncio.create_task(self._warm_one(), name="oasis-target-warm")
            self._fillers.add(task)
            task.add_done_callback(self._fillers.discard)

    async def _warm_one(self) -> None:
        try:
            target = await self._start_one()
        except Exception as exc:  # a warm start that fails is retried by the next lease
            log.warning("a warm target did not start: %s", exc)
            return
        if self._closed:
            await self.discard(target)
            return
        await self._ready.put(target)

    async def _start_one(self) -> Target:
        await self._slots.acquire()
        try:
            async with self._starting:
                name = f"target-{next(self._numbers)}"
                cfg = ClusterConfig(
                    workdir=self.config.root / name,
                    nodes=self.config.nodes,
                    backends=self.config.backends,
                    ready_timeout=self.config.ready_timeout,
                    tie_to_parent=True,
                )
                cluster = self._make(cfg)
                started = time.monotonic()
                await asyncio.to_thread(cluster.start)
                took = time.monotonic() - started
        except BaseException:
            self._slots.release()
            raise
        self.start_seconds.append(took)
        log.info("target %s started in %.1fs", name, took)
        return Target(name=name, cluster=cluster, started_seconds=took)

    async def lease(self) -> Target:
        """A started target, all of it alive, used by no one before; raises what its start raised."""
        while True:
            try:
                target = self._ready.get_nowait()
            except asyncio.QueueEmpty:
                target = await self._start_one()
            if target.alive():
                break
            log.warning("warm target %s died before it was leased; discarded", target.name)
            await self.discard(target)
        target.leased_at = time.monotonic()
        self._fill()
        return target

    async def discard(self, target: Target) -> None:
        """Stop the target's processes and remove its directory: nothing of it is kept."""
        try:
            await asyncio.to_thread(_destroy, target.cluster)
        finally:
            self._slots.release()

    async def close(self) -> None:
        """Destroy every warm target (leased ones are their holders' to give back)."""
        self._closed = True
        for task in list(self._fillers):
            task.cancel()
            with contextlib.suppress(asyncio.CancelledError, Exception):
                await task
        while not self._ready.empty():
            await self.discard(self._ready.get_nowait())


def _destroy(cluster: DevCluster) -> None:
    cluster.stop()
    shutil.rmtree(cluster.workdir, ignore_errors=True)


def _empty(root: Path) -> None:
    if root.exists():
        for child in root.iterdir():
            if child.is_dir() and not child.is_symlink():
                shutil.rmtree(child, ignore_errors=True)
            else:
                child.unlink(missing_ok=True)
    root.mkdir(parents=True, exist_ok=True)
