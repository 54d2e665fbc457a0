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
from typing import Any

from oasis_operator.core.environment.naming import OWNER_LABEL
from oasis_operator.devcluster import ClusterConfig, DevCluster, binaries, stack

#: Cluster-wide kinds the harness makes per scenario, looked for after the runs.
_CLUSTER_WIDE = (
    "/api/v1/namespaces",
    "/apis/rbac.authorization.k8s.io/v1/clusterroles",
    "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
)


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
    parser.add_argument("--concurrent", type=int, default=0, help="apply this many runs at once instead")
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
                if args.concurrent:
                    _at_once(http, urls, args.concurrent, args.parallelism, pid)
                    return
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


def _at_once(http: Any, urls: dict[str, str], count: int, parallelism: int, pid: int) -> None:
    personas = list(urls)
    names = [f"many-{i}" for i in range(count)]
    t0 = time.monotonic()
    for i, name in enumerate(names):
        url = urls[personas[i % len(personas)]]
        stack.apply(http, stack.evaluation_run(name, url, parallelism=parallelism), "bench")
    runs = [stack.wait_completed(http, "bench", name, 3600) for name in names]
    wall = time.monotonic() - t0
    verdicts = sorted(str(r["status"].get("verdict")) for r in runs)
    print(
        f"{count} runs at once, parallelism {parallelism} each: apply->all Completed {wall:.1f}s; "
        f"verdicts {verdicts}; operator rss {vm(pid, 'VmRSS'):.0f} MiB (peak {vm(pid, 'VmHWM'):.0f} MiB)"
    )
    time.sleep(60)
    left = {
        path.rsplit("/", 1)[-1]: len(http.get(path, params={"labelSelector": OWNER_LABEL}).json()["items"])
        for path in _CLUSTER_WIDE
    }
    print(f"left a minute after the runs (objects with {OWNER_LABEL}): {left}")


if __name__ == "__main__":
    main()
