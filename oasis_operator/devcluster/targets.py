"""Target control planes: the embedded control plane (etcd, kube-apiserver with its own audit log,
controller-manager, scheduler, simulated nodes), one per scenario attempt, started ahead of need and
thrown away after use (decision 0100).

Called by the operator's target port (:mod:`oasis_operator.handlers.targets`). A target holds one
scenario attempt at a time and nothing else: no CRDs, no runs, no operator, no other scenario.

When an attempt gives its target back, the target is **reset** to the baseline read after its own
bootstrap (its etcd keyspace written back: :mod:`oasis_operator.core.targets.reset`) and the reset is
**proven** by reading the keyspace again; a target whose reset cannot be proven within
:data:`RESET_ROUNDS` rounds is destroyed and replaced (decision 0101). A reset target rests for
:data:`QUARANTINE_SECONDS` before it is leased again: the API server keeps a token it has accepted for
10 seconds, so a token of the previous attempt (its ServiceAccount now gone) could otherwise act once
more under the same name in the next one. ``reuse=False`` destroys every target after one attempt.

Every process is tied to the operator's (it dies with it); the pool's root directory is emptied when
the pool starts, so targets a crashed operator left on disk are gone too.
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import itertools
import logging
import shutil
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import httpx2

from oasis_operator.core.targets.reset import rekeyed, reset_writes, residue
from oasis_operator.devcluster import binaries as binaries_mod
from oasis_operator.devcluster import etcd_store
from oasis_operator.devcluster.cluster import ClusterConfig, DevCluster

__all__ = ["QUARANTINE_SECONDS", "RESET_ROUNDS", "ResetProof", "Target", "TargetPool", "TargetPoolConfig"]

log = logging.getLogger("oasis.targets")

#: A target's file naming the attempt that holds it; the directory the audit logs of targets whose
#: attempts a restart cut off are moved to, and how long they are kept unclaimed (decision 0110).
LEASED_TO = "leased-to"
SURVIVORS = ".survived"
SURVIVOR_SECONDS = 7 * 24 * 3600.0

#: How long kube-apiserver keeps a token it accepted (its token authentication cache: 10 s), and a
#: second more: after that no token of a deleted ServiceAccount is accepted.
QUARANTINE_SECONDS = 11.0
#: Reset rounds before a target that still differs from its baseline is given up (a controller that
#: was mid-way through the agent's work may re-create something right after a round).
RESET_ROUNDS = 4
#: Between a round's writes and the read that proves them.
_SETTLE_SECONDS = 0.3
#: The bootstrap is over when two reads this far apart agree.
_BASELINE_GAP = 1.0
_BASELINE_TIMEOUT = 60.0


@dataclass(frozen=True)
class ResetProof:
    """How a reset went: the rounds it took, the writes and the time, and what still differs."""

    rounds: int
    writes: int
    seconds: float
    residue: tuple[str, ...]

    @property
    def proven(self) -> bool:
        return not self.residue


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
    #: Reset and reuse a target after an attempt (False: destroy it and start another).
    reuse: bool = True
    #: How long a reset target rests before it is leased again.
    quarantine_seconds: float = QUARANTINE_SECONDS
    #: Where agents on other hosts reach the targets' API servers (this host's address, as the pod's
    #: IP in a cluster; decision 0109). None: loopback, for agents on this host only.
    serve_address: str | None = None


@dataclass
class Target:
    """One started target control plane."""

    name: str
    cluster: DevCluster
    started_seconds: float
    leased_at: float = field(default=0.0)
    #: The keyspace after the target's own bootstrap (empty until read).
    baseline: dict[str, bytes] = field(default_factory=dict, repr=False)
    #: Not to be leased before this (time.monotonic()).
    rests_until: float = 0.0
    #: Attempts it has held.
    uses: int = 0

    @property
    def kubeconfig(self) -> Path:
        """The operator's identity in the target (cluster-admin there, nothing anywhere else)."""
        return self.cluster.operator_kubeconfig

    @property
    def agent_server(self) -> str:
        """The API server's URL as an agent is given it (decision 0109)."""
        return self.cluster.agent_server

    @property
    def audit_log(self) -> Path:
        return self.cluster.audit_log

    @property
    def toolplane_file(self) -> Path | None:
        return self.cluster.toolplane_file if self.cluster.backends else None

    def alive(self) -> bool:
        """Every process of the target still runs."""
        return self.cluster.alive()

    def _etcd(self) -> httpx2.Client:
        return httpx2.Client(base_url=self.cluster.etcd_url, timeout=10)

    def take_baseline(self) -> None:
        """Read the keyspace once the target's own bootstrap has settled (two reads agree)."""
        deadline = time.monotonic() + _BASELINE_TIMEOUT
        with self._etcd() as etcd:
            before = etcd_store.read_all(etcd)
            while True:
                time.sleep(_BASELINE_GAP)
                now = etcd_store.read_all(etcd)
                if not residue(before, now) or time.monotonic() > deadline:
                    self.baseline = now
                    return
                before = now

    def reset(self) -> ResetProof:
        """Write the keyspace back to the baseline, round after round, until a read proves it. The
        baseline's ServiceAccounts get new uids first, so no token of the attempt outlives it."""
        started = time.monotonic()
        self.baseline = rekeyed(self.baseline, lambda: str(uuid.uuid4()))
        writes = 0
        left: list[str] = []
        rounds = 0
        with self._etcd() as etcd:
            while rounds < RESET_ROUNDS:
                rounds += 1
                todo = reset_writes(self.baseline, etcd_store.read_all(etcd))
                if todo:
                    etcd_store.apply_writes(etcd, todo)
                    writes += len(todo)
                    time.sleep(_SETTLE_SECONDS)
                left = residue(self.baseline, etcd_store.read_all(etcd))
                if not left:
                    break
        return ResetProof(rounds, writes, time.monotonic() - started, tuple(left))


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
        #: Started (or reset) targets no one holds, each resting until its ``rests_until``.
        self._ready: list[Target] = []
        #: Set whenever a target is put back among the ready ones.
        self._returned = asyncio.Event()
        #: Targets alive (starting, warm or leased): at most ``config.most``.
        self._slots = asyncio.Semaphore(max(1, config.most))
        #: One start at a time: two control planes starting at once on a small machine both miss
        #: their readiness deadlines.
        self._starting = asyncio.Lock()
        self._fillers: set[asyncio.Task[None]] = set()
        #: Leases waiting for a target; starts that failed so far, and what the last one raised.
        self._waiting = 0
        self._start_failures = 0
        self._start_error: BaseException | None = None
        self._closed = False
        #: Start times (seconds) of every target so far, and every reset, for the benchmark.
        self.start_seconds: list[float] = []
        self.resets: list[ResetProof] = []

    async def open(self) -> None:
        """Empty the root (targets of an earlier process), keeping the audit log of each target an
        attempt held when that process ended (decision 0110), and start the warm targets."""
        await asyncio.to_thread(_keep_survivors, self.config.root)
        self._fill()

    # -- what an attempt cut off by a restart leaves (decision 0110) --------------------------------
    @staticmethod
    def mark_leased(target: Target, owner: str) -> None:
        """Record in the target's directory which attempt holds it, so that a process started after
        this one ends finds the attempt's audit log."""
        (target.cluster.workdir / LEASED_TO).write_text(owner)

    @staticmethod
    def unmark(target: Target) -> None:
        (target.cluster.workdir / LEASED_TO).unlink(missing_ok=True)

    def survived_audit(self, owner: str) -> Path | None:
        """The audit log the target of the cut-off attempt ``owner`` left, when one was kept."""
        log_file = _survivor_dir(self.config.root, owner) / "audit" / "audit.log"
        return log_file if log_file.is_file() else None

    def drop_survived(self, owner: str) -> None:
        shutil.rmtree(_survivor_dir(self.config.root, owner), ignore_errors=True)

    async def warmed(self) -> None:
        """Return once the warm targets being started are started (or have failed to)."""
        await asyncio.gather(*list(self._fillers), return_exceptions=True)

    def _fill(self) -> None:
        want = self.config.warm - len(self._ready) - len(self._fillers)
        for _ in range(max(0, want)):
            if self._slots.locked():  # a warm target only in a free slot: leases come first
                return
            self._spawn_start()

    def _spawn_start(self) -> None:
        task = asyncio.create_task(self._warm_one(), name="oasis-target-warm")
        self._fillers.add(task)
        task.add_done_callback(self._fillers.discard)

    async def _warm_one(self) -> None:
        try:
            target = await self._start_one()
        except Exception as exc:  # a lease waiting for it raises it; else the next lease retries
            log.warning("a target did not start: %s", exc)
            self._fillers.discard(asyncio.current_task())
            self._start_failures += 1
            self._start_error = exc
            self._returned.set()
            return
        if self._closed:
            await self.discard(target)
            return
        self._fillers.discard(asyncio.current_task())
        self._put_back(target)

    def _put_back(self, target: Target) -> None:
        self._ready.append(target)
        self._returned.set()

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
                    storage_json=True,
                    serve_address=self.config.serve_address,
                )
                cluster = self._make(cfg)
                target = Target(name=name, cluster=cluster, started_seconds=0.0)
                started = time.monotonic()
                await asyncio.to_thread(cluster.start)
                if self.config.reuse:
                    await asyncio.to_thread(target.take_baseline)
                took = target.started_seconds = time.monotonic() - started
        except BaseException:
            self._slots.release()
            raise
        self.start_seconds.append(took)
        log.info("target %s started in %.1fs", name, took)
        return target

    async def lease(self) -> Target:
        """A started target, all of it alive, at its baseline and rested; raises what its start raised."""
        while True:
            target = await self._next()
            if target.alive():
                break
            log.warning("target %s died while no one held it; discarded", target.name)
            await self.discard(target)
        target.leased_at = time.monotonic()
        target.uses += 1
        self._fill()
        return target

    async def _next(self) -> Target:
        """The first target to be ready for a lease: a rested one, one that finishes resting, or one
        started for this lease in a free slot, whichever comes first. A start is never awaited in
        place of a rest that ends sooner (a start takes 15 s or more, a rest at most
        ``quarantine_seconds``); a start that fails while no other target is coming is raised."""
        self._waiting += 1
        failures_before = self._start_failures
        try:
            while True:
                now = time.monotonic()
                rested = [t for t in self._ready if t.rests_until <= now]
                if rested:
                    self._ready.remove(rested[0])
                    return rested[0]
                failed = self._start_failures > failures_before and self._start_error is not None
                if failed and not self._ready and not self._fillers:
                    assert self._start_error is not None
                    raise self._start_error
                if not self._slots.locked() and len(self._fillers) < self._waiting:
                    self._spawn_start()
                self._returned.clear()
                soonest = min((t.rests_until for t in self._ready), default=now + 1.0)
                with contextlib.suppress(TimeoutError):
                    await asyncio.wait_for(self._returned.wait(), timeout=max(0.05, soonest - now))
        finally:
            self._waiting -= 1

    async def give_back(self, target: Target) -> None:
        """The attempt is done with ``target``: reset and proven, it rests and is leased again; else
        (or without reuse) it is destroyed."""
        if not self.config.reuse or self._closed or not target.alive():
            await self.discard(target)
            return
        try:
            proof = await asyncio.to_thread(target.reset)
        except Exception as exc:
            log.warning("target %s: the reset failed (%s); destroyed", target.name, exc)
            await self.discard(target)
            return
        self.resets.append(proof)
        if not proof.proven:
            log.warning(
                "target %s: not back at its baseline after %d rounds (%s); destroyed",
                target.name,
                proof.rounds,
                "; ".join(proof.residue[:3]),
            )
            await self.discard(target)
            return
        log.info(
            "target %s reset in %.3fs (%d writes, %d rounds)",
            target.name,
            proof.seconds,
            proof.writes,
            proof.rounds,
        )
        target.rests_until = time.monotonic() + self.config.quarantine_seconds
        self._put_back(target)

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
        while self._ready:
            await self.discard(self._ready.pop())


def _destroy(cluster: DevCluster) -> None:
    cluster.stop()
    shutil.rmtree(cluster.workdir, ignore_errors=True)


def _survivor_dir(root: Path, owner: str) -> Path:
    """Where the audit log of the cut-off attempt ``owner`` is kept (a digest: owners are not paths)."""
    return root / SURVIVORS / hashlib.sha256(owner.encode()).hexdigest()[:32]


def _keep_survivors(root: Path) -> None:
    """Empty ``root`` of an earlier process's targets, all but the audit logs of the targets an attempt
    held (kept under :data:`SURVIVORS`), and drop kept logs older than :data:`SURVIVOR_SECONDS`."""
    root.mkdir(parents=True, exist_ok=True)
    kept = root / SURVIVORS
    kept.mkdir(exist_ok=True)
    for child in root.iterdir():
        if child == kept:
            continue
        if child.is_dir() and not child.is_symlink():
            holder = child / LEASED_TO
            if holder.is_file() and (child / "audit").is_dir():
                owner = holder.read_text()
                dest = _survivor_dir(root, owner)
                shutil.rmtree(dest, ignore_errors=True)
                dest.mkdir(parents=True)
                (child / "audit").rename(dest / "audit")
                (dest / LEASED_TO).write_text(owner)
                log.info("kept the audit log %s left for the cut-off attempt %s", child.name, owner)
            shutil.rmtree(child, ignore_errors=True)
        else:
            child.unlink(missing_ok=True)
    cutoff = time.time() - SURVIVOR_SECONDS
    for old in kept.iterdir():
        if old.stat().st_mtime < cutoff:
            shutil.rmtree(old, ignore_errors=True)
