"""Benchmark: per-scenario tool-plane injection on the embedded control plane, per back-end.

``PYTHONPATH=. .venv/bin/python tools/benchmarks/bench_toolplane.py [--rounds N] [--parallel 8] [--backend NAME]``.
For each SI scenario (safety and capability) that runs and needs a tool-plane back-end (logs: S-BE-002,
S-PI-001...; dashboards: S-PI-003; GitOps: S-SC-003; metrics and alerts: C-OI-001, C-EJ-001...; with
``--backend``, only those needing that one),
provisions its environment, then times each back-end's ``inject`` (write + read back through the API
server as the agent would), and prints p50/p95 per back-end, one scenario at a time and ``--parallel``
at once. The cluster runs with the back-ends ``oasis demo`` starts.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

import yaml

from oasis_operator.adapters.k8s.client import async_client, endpoint_of
from oasis_operator.adapters.k8s.environment import KubeEnvironment
from oasis_operator.adapters.toolplane import Cluster, ToolPlane, tool_plane
from oasis_operator.cli.demo import DEMO_BACKENDS
from oasis_operator.core.environment.naming import owner_value
from oasis_operator.core.environment.plan import plan_environment
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.devcluster import ClusterConfig, DevCluster, binaries, kube
from oasis_operator.handlers.settings import ClusterAccess, ToolPlaneSettings
from tests.conftest import SPEC_DIR
from tests.environments.conftest import SAFETY

CAPABILITY = [
    parse_scenario(d)[0]
    for p in sorted(
        (SPEC_DIR / "profiles" / "software-infrastructure" / "scenarios" / "capability").glob("*.yaml")
    )
    for d in yaml.safe_load_all(p.read_text())
    if isinstance(d, dict) and "id" in d
]


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


async def one(env: KubeEnvironment, toolplane: ToolPlane, scenario) -> dict[str, float]:
    plan = plan_environment(
        scenario,
        suffix=kube.random_suffix(),
        owner=owner_value("bench", scenario.id),
        backends=toolplane.backends,
    )
    await env.provision(plan)
    out: dict[str, float] = {}
    try:
        for name in sorted(plan.toolplane.backends):
            t0 = time.perf_counter()
            await toolplane.adapters[name].inject(plan)
            out[name] = time.perf_counter() - t0
    finally:
        await toolplane.cleanup(plan)
        await env.teardown(plan.namespaces.values(), plan.owner, timeout=0)
    return out


async def run(args: argparse.Namespace, dev: DevCluster) -> None:
    client = async_client(dev.kubeconfig)
    ep = endpoint_of(dev.kubeconfig)
    env = KubeEnvironment(client, server=ep.server, ca_data=ep.ca_data)
    http = ClusterAccess.discover(str(dev.kubeconfig), Path("/nonexistent"), {}).http()
    settings = ToolPlaneSettings.load(dev.toolplane_file)
    toolplane = tool_plane(Cluster(http, dev.server), settings.backends)
    chosen = [
        s
        for s in [*SAFETY, *CAPABILITY]
        if (p := plan_environment(s, suffix="bbbbb", owner="o", backends=toolplane.backends)).supported
        and p.toolplane.backends
        and (not args.backend or args.backend in p.toolplane.backends)
    ]
    if not chosen:
        raise SystemExit(f"no scenario needs the back-end {args.backend!r} (or it did not start)")
    print(f"scenarios: {', '.join(s.id for s in chosen)}")
    for parallel in (1, args.parallel):
        rows: list[dict[str, float]] = []
        for _ in range(args.rounds):
            batch = [chosen[i % len(chosen)] for i in range(max(parallel, len(chosen)))]
            if parallel > 1:
                rows += await asyncio.gather(*(one(env, toolplane, s) for s in batch))
            else:
                for s in batch:
                    rows.append(await one(env, toolplane, s))
        print(f"parallel {parallel}:")
        for name in sorted({k for r in rows for k in r}):
            xs = [r[name] for r in rows if name in r]
            print(
                f"  inject {name:<12} n={len(xs):<3} p50 {pct(xs, 0.5) * 1000:7.0f} ms   "
                f"p95 {pct(xs, 0.95) * 1000:7.0f} ms"
            )
    await toolplane.aclose()
    await http.aclose()
    await client.close()


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--rounds", type=int, default=10)
    ap.add_argument("--parallel", type=int, default=8)
    ap.add_argument("--backend", default="", help="only the scenarios that need this back-end")
    args = ap.parse_args()
    with tempfile.TemporaryDirectory(prefix="oasis-bench-tp-") as tmp:
        dev = DevCluster(ClusterConfig(workdir=Path(tmp), backends=DEMO_BACKENDS), binaries.resolve())
        dev.start()
        try:
            asyncio.run(run(args, dev))
        finally:
            dev.stop()


if __name__ == "__main__":
    main()
