"""Benchmark: provision + teardown of the SI safety scenarios on the embedded control plane.

``.venv/bin/python tools/benchmarks/bench_environments.py [--rounds N] [--parallel 8]``. Prints p50/p95 of
provision (objects, agent principal, simulated workloads ready, symptoms verified), snapshot, revoke
(every route in removed, and verified where the provider verifies it), and teardown (deletes issued;
and until the namespaces are gone), one scenario at a time and 8 at once.
"""

from __future__ import annotations

import argparse
import asyncio
import tempfile
import time
from pathlib import Path

from oasis_operator.adapters.k8s.client import async_client, endpoint_of
from oasis_operator.adapters.k8s.environment import KubeEnvironment
from oasis_operator.core.environment.naming import owner_value
from oasis_operator.core.environment.plan import plan_environment
from oasis_operator.devcluster import ClusterConfig, DevCluster, binaries, kube
from tests.environments.conftest import SAFETY


def pct(xs: list[float], q: float) -> float:
    s = sorted(xs)
    return s[min(len(s) - 1, round(q * (len(s) - 1)))]


async def one(env: KubeEnvironment, scenario, wait_gone: bool) -> dict[str, float]:
    plan = plan_environment(scenario, suffix=kube.random_suffix(), owner=owner_value("bench", scenario.id))
    t0 = time.perf_counter()
    await env.provision(plan)
    problems = await env.verify(plan)
    assert not problems, problems
    t1 = time.perf_counter()
    await env.snapshot(plan)
    t2 = time.perf_counter()
    revocation = await env.revoke(plan)
    verify = getattr(env, "verify_revoked", None)  # providers before revocation was verified have none
    if verify is not None:
        await verify(plan, revocation)
    t2r = time.perf_counter()
    left = await env.teardown(plan.namespaces.values(), plan.owner, timeout=60 if wait_gone else 0)
    t3 = time.perf_counter()
    return {
        "provision": t1 - t0,
        "snapshot": t2 - t1,
        "revoke": t2r - t2,
        "teardown": t3 - t2r,
        "total": t3 - t0,
        "left": float(len(left)),
    }


async def run(args: argparse.Namespace, dev: DevCluster) -> None:
    client = async_client(dev.kubeconfig)
    ep = endpoint_of(dev.kubeconfig)
    env = KubeEnvironment(client, server=ep.server, ca_data=ep.ca_data)
    supported = [s for s in SAFETY if plan_environment(s, suffix="bbbbb", owner="o").supported]
    for wait_gone in (False, True):
        rows = []
        for _ in range(args.rounds):
            for s in supported:
                rows.append(await one(env, s, wait_gone))
        label = "until namespaces are gone" if wait_gone else "deletes issued"
        for key in ("provision", "snapshot", "revoke", "teardown", "total"):
            xs = [r[key] for r in rows]
            print(
                f"sequential ({label}) {key:<9} n={len(xs)} p50 {pct(xs, 0.5) * 1000:6.0f} ms  "
                f"p95 {pct(xs, 0.95) * 1000:6.0f} ms  max {max(xs) * 1000:6.0f} ms"
            )
    await injected_failure(env, dev, args.rounds * 5)
    t0 = time.perf_counter()
    batch = supported[: args.parallel]
    rows = await asyncio.gather(*(one(env, s, True) for s in batch))
    wall = time.perf_counter() - t0
    xs = [r["total"] for r in rows]
    print(f"{len(batch)} at once: wall {wall:.2f}s, per-scenario p50 {pct(xs, 0.5):.2f}s, max {max(xs):.2f}s")
    await client.close()


async def injected_failure(env: KubeEnvironment, dev: DevCluster, n: int) -> None:
    """SI partial-operation: from the agent's restart request to a pod showing ImagePullBackOff (by
    design at the next whole second, so between 0 and 1 s plus the write), and settle() after it."""
    scenario = next(s for s in SAFETY if s.id == "infra.safety.sc.partial-operation-001")
    seen, settled = [], []
    with dev.admin_http() as http:
        for _ in range(n):
            plan = plan_environment(
                scenario, suffix=kube.random_suffix(), owner=owner_value("bench", scenario.id)
            )
            await env.provision(plan)
            injector = env.failure_injector(plan)
            await injector.start()
            ns = plan.home_namespace
            t0 = time.perf_counter()
            http.patch(
                f"/apis/apps/v1/namespaces/{ns}/deployments/feature-service",
                json={"spec": {"template": {"metadata": {"annotations": {"restarted": str(t0)}}}}},
                headers={"Content-Type": "application/merge-patch+json"},
            ).raise_for_status()

            def failing(ns: str = ns) -> bool:
                return any(
                    cs.get("state", {}).get("waiting", {}).get("reason") == "ImagePullBackOff"
                    for p in http.get(f"/api/v1/namespaces/{ns}/pods").json()["items"]
                    for cs in p.get("status", {}).get("containerStatuses", [])
                )

            for _ in range(1000):  # polled every 10 ms, at most 10 s
                if failing():
                    break
                await asyncio.sleep(0.01)
            seen.append(time.perf_counter() - t0)
            t1 = time.perf_counter()
            await injector.settle()
            settled.append(time.perf_counter() - t1)
            await injector.stop()
            await env.teardown(plan.namespaces.values(), plan.owner, timeout=0)
    for label, xs in (("restart -> ImagePullBackOff visible", seen), ("settle afterwards", settled)):
        print(
            f"injected failure: {label:<36} n={len(xs)} p50 {pct(xs, 0.5) * 1000:6.0f} ms  "
            f"p95 {pct(xs, 0.95) * 1000:6.0f} ms  max {max(xs) * 1000:6.0f} ms"
        )


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--rounds", type=int, default=2)
    parser.add_argument("--parallel", type=int, default=8)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        dev = DevCluster(ClusterConfig(workdir=Path(tmp)), binaries.resolve(quiet=True))
        dev.start()
        try:
            asyncio.run(run(args, dev))
        finally:
            dev.stop()


if __name__ == "__main__":
    main()
