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


def profile_run(parallelism: int, most: int, agents: tuple[str, ...]) -> None:
    """The whole SI profile through an operator whose scenarios run in targets: wall time per run,
    verdicts, and the targets' starts and resets as the operator logged them."""
    import re

    from oasis_operator.devcluster import ClusterConfig, DevCluster, stack

    work = Path(tempfile.mkdtemp(prefix="oasis-bench-profile-"))
    dev = DevCluster(ClusterConfig(workdir=work / "management", nodes=1))
    dev.start()
    procs = stack.Processes(work / "logs")
    try:
        with dev.admin_http() as http:
            stack.install_crds(http)
            stack.ensure_namespace(http, "bench")
            stack.import_si_profile(http, "bench")
            urls = {a: procs.agent(a) for a in agents}
            procs.operator(
                dev.operator_kubeconfig,
                dev.audit_log,
                namespaces=["bench"],
                extra_args=[
                    "--scenario-clusters=targets",
                    f"--targets-root={work / 'targets'}",
                    f"--targets-warm={most}",
                    f"--targets-most={most}",
                ],
            )
            started = time.monotonic()
            for agent, url in urls.items():
                doc = stack.evaluation_run(agent, url, classification=None, parallelism=parallelism)
                stack.apply(http, doc, "bench")
            for agent in urls:
                run = stack.wait_completed(http, "bench", agent, timeout=3600)
                verdicts: dict[str, int] = {}
                for s in run["status"].get("scenarios", []):
                    verdicts[str(s.get("verdict"))] = verdicts.get(str(s.get("verdict")), 0) + 1
                print(
                    f"profile run {agent}: {run['status'].get('verdict')} after {time.monotonic() - started:.1f}s; {verdicts}"
                )
        text = (procs.sup.log_dir / "operator.log").read_text()
        starts = [float(x) for x in re.findall(r"started in ([0-9.]+)s", text)]
        resets = sorted(float(x) for x in re.findall(r"reset in ([0-9.]+)s", text))
        if resets:
            print(
                f"targets: {len(starts)} started (p50 {statistics.median(starts):.1f}s), {len(resets)} resets "
                f"(p50 {statistics.median(resets):.3f}s, p95 {resets[min(len(resets) - 1, round(0.95 * (len(resets) - 1)))]:.3f}s)"
            )
    finally:
        procs.stop()
        dev.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--leases", type=int, default=4)
    parser.add_argument("--nodes", type=int, default=3)
    parser.add_argument(
        "--profile", action="store_true", help="also the whole SI profile through the operator"
    )
    parser.add_argument("--parallelism", type=int, default=8)
    parser.add_argument("--most", type=int, default=4)
    parser.add_argument("--agents", default="careful")
    args = parser.parse_args()
    if args.profile:
        profile_run(args.parallelism, args.most, tuple(args.agents.split(",")))
        return
    for warm in (0, 1):
        figures = asyncio.run(measure(args.leases, warm, args.nodes))
        print(
            f"targets (warm={warm}, {args.leases} leases, {args.nodes} nodes): "
            + ", ".join(f"{k}={v:.2f}" for k, v in figures.items())
        )


if __name__ == "__main__":
    main()
