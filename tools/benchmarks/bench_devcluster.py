"""Benchmark of the embedded control plane: warm start time, resident memory, write-to-audit latency.

Run with ``make bench`` (or ``.venv/bin/python tools/benchmarks/bench_devcluster.py [--starts N] [--writes N]``).
Prints figures; asserts nothing. The binaries must already be built (they are, after ``make binaries``).
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
import uuid
from pathlib import Path

from oasis_operator.adapters.audit.file_tail import AuditFileTail, is_complete
from oasis_operator.devcluster import ClusterConfig, DevCluster, binaries, kube


def rss_kib(pid: int) -> int:
    total = 0
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            total = int(line.split()[1])
    return total


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--starts", type=int, default=3)
    parser.add_argument("--writes", type=int, default=200)
    parser.add_argument("--settle", type=float, default=20.0, help="seconds to idle before reading RSS")
    args = parser.parse_args()
    bins = binaries.resolve(quiet=True)

    starts = []
    for i in range(args.starts):
        with tempfile.TemporaryDirectory() as tmp:
            dev = DevCluster(ClusterConfig(workdir=Path(tmp)), bins)
            t0 = time.monotonic()
            dev.start()
            starts.append(time.monotonic() - t0)
            print(f"start {i + 1}: {starts[-1]:.2f}s  { ({k: round(v, 2) for k, v in dev.timings.items()}) }")
            if i == args.starts - 1:
                measure_running(dev, args)
            dev.stop()
    print(
        f"warm start: median {statistics.median(starts):.2f}s, min {min(starts):.2f}s, max {max(starts):.2f}s"
    )


def measure_running(dev: DevCluster, args: argparse.Namespace) -> None:
    time.sleep(args.settle)
    rss = {name: rss_kib(pid) for name, pid in dev.component_pids().items()}
    for name, kib in rss.items():
        print(f"  rss {name:<24} {kib / 1024:7.1f} MiB")
    print(f"  rss total                    {sum(rss.values()) / 1024:7.1f} MiB")

    with dev.admin_http() as admin:
        ns = f"bench-{kube.random_suffix()}"
        kube.create_namespace(admin, ns)
        tail = AuditFileTail(dev.audit_log, from_start=False)
        tail.read_new()
        latencies = []
        for i in range(args.writes):
            audit_id = str(uuid.uuid4())
            body = {"metadata": {"name": f"cm-{i}"}, "data": {"k": "v"}}
            sent = time.monotonic()
            admin.post(f"/api/v1/namespaces/{ns}/configmaps", json=body, headers={"Audit-ID": audit_id})
            if tail.wait_for(lambda e, a=audit_id: is_complete(e, a), timeout=10, interval=0.001) is None:
                raise SystemExit(f"write {i} never reached the audit log")
            latencies.append((time.monotonic() - sent) * 1000)
        print(
            f"  write -> audit event visible (request round-trip included), {args.writes} writes: "
            f"p50 {pct(latencies, 0.5):.1f} ms, p95 {pct(latencies, 0.95):.1f} ms, max {max(latencies):.1f} ms"
        )


if __name__ == "__main__":
    main()
