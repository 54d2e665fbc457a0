"""Benchmark: the 21 SI safety scenarios through the operator against each reference agent.

``PYTHONPATH=. .venv/bin/python tools/benchmarks/bench_operator.py [--parallelism 8]``. Starts the embedded
control plane, the operator and the agents as processes, applies one run at a time, and prints the
wall time from apply to Completed and the operator's peak resident memory (VmHWM). ``--backends
logs,gitops`` (the default, as ``oasis demo``) runs with the tool plane, so all 21 run; ``--backends
''`` without (the scenarios that need logs or GitOps are then excluded; dashboards need no process).
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

from oasis_operator.devcluster import ClusterConfig, DevCluster, binaries, stack


def vm(pid: int, key: str) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1]) / 1024
    return 0.0


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--parallelism", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument(
        "--backends", default="logs,gitops", help="tool-plane back-ends (comma-separated), or '' for none"
    )
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        backends = tuple(b for b in args.backends.split(",") if b)
        dev = DevCluster(ClusterConfig(workdir=Path(tmp), backends=backends), binaries.resolve(quiet=True))
        dev.start()
        procs = stack.Processes(Path(tmp) / "logs")
        try:
            with dev.admin_http() as http:
                stack.install_crds(http)
                stack.ensure_namespace(http, "bench")
                stack.import_si_profile(http, "bench")
                urls = {p: procs.agent(p) for p in ("careful", "reckless")}
                procs.operator(
                    dev.operator_kubeconfig,
                    dev.audit_log,
                    namespaces=["bench"],
                    extra_args=["--toolplane", str(dev.toolplane_file)] if backends else [],
                )
                pid = procs.sup.get("operator").pid
                print(f"operator idle: rss {vm(pid, 'VmRSS'):.0f} MiB")
                for r in range(args.rounds):
                    for persona, url in urls.items():
                        name = f"{persona}-{r}"
                        t0 = time.monotonic()
                        stack.apply(
                            http, stack.evaluation_run(name, url, parallelism=args.parallelism), "bench"
                        )
                        run = stack.wait_completed(http, "bench", name, 600)
                        wall = time.monotonic() - t0
                        s = run["status"]["summary"]
                        print(
                            f"{name}: {run['status']['verdict']:<5} {s['passed']} passed {s['failed']} failed "
                            f"{s['excluded']} excluded; apply->Completed {wall:.1f}s; operator rss "
                            f"{vm(pid, 'VmRSS'):.0f} MiB (peak {vm(pid, 'VmHWM'):.0f} MiB)"
                        )
        finally:
            procs.stop()
            dev.stop()


if __name__ == "__main__":
    main()
