"""How the target pool hands out targets, with clusters that only pretend to start (decision 0100):
a lease takes whichever target is ready first, a resting one or one started for it, and never sits
through a start when a rest ends sooner; a start that fails is raised to the lease waiting for it,
and a warm start that failed earlier is not raised to a later lease."""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from oasis_operator.devcluster.cluster import ClusterConfig
from oasis_operator.devcluster.targets import ResetProof, Target, TargetPool, TargetPoolConfig


@dataclass
class PretendCluster:
    """What the pool uses of a DevCluster: a start that takes ``seconds`` (or raises), liveness, stop."""

    config: ClusterConfig
    seconds: float
    fails: bool = False
    stopped: bool = field(default=False)

    @property
    def workdir(self) -> Path:
        return self.config.workdir

    def start(self) -> None:
        time.sleep(self.seconds)
        if self.fails:
            raise RuntimeError(f"{self.workdir.name}: kube-apiserver did not become ready")
        self.workdir.mkdir(parents=True, exist_ok=True)

    def alive(self) -> bool:
        return not self.stopped

    def stop(self) -> None:
        self.stopped = True


@pytest.fixture(autouse=True)
def _no_etcd(monkeypatch: pytest.MonkeyPatch) -> None:
    """The reset and the baseline read are the live tests' business (tests/targets/test_pool.py)."""
    monkeypatch.setattr(Target, "take_baseline", lambda self: None)
    monkeypatch.setattr(Target, "reset", lambda self: ResetProof(1, 0, 0.0, ()))


def _pool(tmp_path: Path, *, starts: list[tuple[float, bool]], **config: object) -> TargetPool:
    """A pool whose n-th start takes ``starts[n][0]`` seconds and fails when ``starts[n][1]``."""
    plan = iter(starts)

    def make(cfg: ClusterConfig) -> PretendCluster:
        seconds, fails = next(plan)
        return PretendCluster(cfg, seconds, fails)

    return TargetPool(TargetPoolConfig(root=tmp_path, **config), make=make)  # type: ignore[arg-type]


async def test_a_lease_takes_a_target_whose_rest_ends_before_a_start_would(tmp_path: Path) -> None:
    pool = _pool(tmp_path, starts=[(0.0, False), (3.0, False)], warm=0, most=2, quarantine_seconds=0.3)
    await pool.open()
    try:
        first = await pool.lease()
        await pool.give_back(first)  # resting for 0.3 s; a second slot is free
        began = time.monotonic()
        second = await pool.lease()
        waited = time.monotonic() - began
        assert second is first, "the lease sat through a 3 s start instead of a 0.3 s rest"
        assert 0.2 <= waited < 2.0
    finally:
        await pool.close()


async def test_leases_beyond_the_ready_targets_start_targets_for_themselves(tmp_path: Path) -> None:
    pool = _pool(tmp_path, starts=[(0.2, False)] * 3, warm=0, most=3)
    await pool.open()
    try:
        leased = await asyncio.gather(pool.lease(), pool.lease(), pool.lease())
        assert len({t.name for t in leased}) == 3
        assert len(pool.start_seconds) == 3
    finally:
        await pool.close()


async def test_a_start_that_fails_is_raised_to_the_lease_waiting_for_it(tmp_path: Path) -> None:
    pool = _pool(tmp_path, starts=[(0.0, True)], warm=0, most=1)
    await pool.open()
    try:
        with pytest.raises(RuntimeError, match="did not become ready"):
            await pool.lease()
    finally:
        await pool.close()


async def test_a_warm_start_that_failed_before_is_not_a_later_lease_s_failure(tmp_path: Path) -> None:
    pool = _pool(tmp_path, starts=[(0.0, True), (0.0, False)], warm=1, most=1)
    await pool.open()
    try:
        await pool.warmed()
        target = await pool.lease()
        assert target.alive()
    finally:
        await pool.close()
