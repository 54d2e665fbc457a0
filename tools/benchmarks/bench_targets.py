"""Benchmark of target control planes (decision 0100): how long a lease waits with and without a warm
target, how long a target takes to start and to destroy, and its resident memory.

Run with ``make bench`` (or ``.venv/bin/python tools/benchmarks/bench_targets.py [--leases N]``). Prints
figures; asserts nothing. The control-plane binaries must already be built (``make binaries``).
"""

from __future__ import annotations

import argparse
import asyncio
import statistics
import tempfile
import time
from pathlib import Path

from oasis_operator.devcluster.targets import TargetPool, TargetPoolConfig


def rss_mib(pids: list[int]) -> float:
    total = 0
    for pid in pids:
        try:
            for line in Path(f"/proc/{pid}/status").read_text().splitlines():
                if line.startswith("VmRSS:"):
                    total += int(line.split()[1])
        except OSError:
            continue
    return total / 1024


async def measure(leases: int, warm: int, nodes: int) -> dict[str, float]:
    root = Path(tempfile.mkdtemp(prefix="oasis-bench-targets-"))
    pool = TargetPool(TargetPoolConfig(root=root, nodes=nodes, warm=warm, most=warm + 1))
    await pool.open()
    await pool.warmed()  # the warm targets, as an operator has them after its start
    waits, destroys, rss = [], [], []
    for _ in range(leases):
        started = time.monotonic()
        target = await pool.lease()
        waits.append(time.monotonic() - started)
        rss.append(rss_mib(list(target.cluster.component_pids().values())))
        await asyncio.sleep(5 if warm else 0)  # a short scenario: the next warm target starts meanwhile
        started = time.monotonic()
        await pool.discard(target)
        destroys.append(time.monotonic() - started)
    await pool.close()
    return {
        "lease_wait_p50_s": statistics.median(waits),
        "lease_wait_max_s": max(waits),
        "start_p50_s": statistics.median(pool.start_seconds),
        "destroy_p50_s": statistics.median(destroys),
        "rss_p50_mib": statistics.median(rss),
    }


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--leases", type=int, default=4)
    parser.add_argument("--nodes", type=int, default=3)
    args = parser.parse_args()
    for warm in (0, 1):
        figures = asyncio.run(measure(args.leases, warm, args.nodes))
        print(
            f"targets (warm={warm}, {args.leases} leases, {args.nodes} nodes): "
            + ", ".join(f"{k}={v:.2f}" for k, v in figures.items())
        )


if __name__ == "__main__":
    main()
