"""Benchmark of the recording gateway: the time one tool call spends in it (routing, token check, bounds,
forwarding, recording) — per call, the same request made directly to the back-end and through the
gateway, interleaved, over keep-alive connections, p50 / p95 of each and of their difference.

Two back-ends: a trivial local HTTP server (answers a fixed 1 KiB JSON body: isolates the gateway's own
cost) and, unless ``--no-cluster``, VictoriaMetrics behind vmauth on the embedded control plane (a real
PromQL instant query of a back-filled series, with the scenario token the gateway adds).

Run with ``.venv/bin/python tools/benchmarks/bench_gateway.py [--rounds N] [--no-cluster]``. Prints figures;
asserts nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import tempfile
import time
from pathlib import Path

import httpx2
from aiohttp import web

from oasis_operator.adapters.gateway import ToolGateway
from oasis_operator.core.gateway.port import GatewayLimits, Upstream

BODY = json.dumps(
    {
        "status": "success",
        "data": {"result": [{"metric": {"pod": f"p{i}"}, "value": [0, "1"]} for i in range(20)]},
    }
).encode()


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


async def measure(
    label: str,
    direct_url: str,
    direct_headers: dict[str, str],
    upstream: Upstream,
    path: str,
    params: dict[str, str],
    rounds: int,
) -> None:
    gw = ToolGateway()
    await gw.start()
    route = await gw.open(
        {upstream.interface: upstream},
        limits=GatewayLimits(rate_per_second=1e9, burst=10**9, max_records=10**9),
    )
    ep = route.endpoints[upstream.interface]
    direct, through, extra = [], [], []
    async with httpx2.AsyncClient(timeout=30) as a, httpx2.AsyncClient(timeout=30) as b:
        for _ in range(20):  # warm both connections
            await a.get(direct_url + path, params=params, headers=direct_headers)
            await b.get(ep.url + path, params=params, headers={"Authorization": f"Bearer {ep.token}"})
        for _ in range(rounds):
            t0 = time.perf_counter()
            r1 = await a.get(direct_url + path, params=params, headers=direct_headers)
            t1 = time.perf_counter()
            r2 = await b.get(ep.url + path, params=params, headers={"Authorization": f"Bearer {ep.token}"})
            t2 = time.perf_counter()
            assert r1.status_code == r2.status_code == 200, (r1.text, r2.text)
            direct.append((t1 - t0) * 1000)
            through.append((t2 - t1) * 1000)
            extra.append(through[-1] - direct[-1])
    records = len(route.records)
    await gw.stop()
    print(f"{label}: {rounds} calls, {records - 20} recorded")
    for name, values in (("direct", direct), ("through the gateway", through), ("gateway overhead", extra)):
        print(f"  {name:22s} p50 {pct(values, 0.5):6.2f} ms   p95 {pct(values, 0.95):6.2f} ms")


async def local(rounds: int) -> None:
    async def answer(_: web.Request) -> web.Response:
        return web.Response(body=BODY, content_type="application/json")

    app = web.Application()
    app.router.add_get("/{tail:.*}", answer)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
    url = f"http://127.0.0.1:{port}/"
    try:
        await measure(
            f"trivial local back-end ({len(BODY)} B JSON)",
            url,
            {},
            Upstream("observability-metrics", url),
            "api/v1/query",
            {"query": "up"},
            rounds,
        )
    finally:
        await runner.cleanup()


def victoria(rounds: int) -> None:
    from oasis_operator.devcluster import ClusterConfig, DevCluster
    from oasis_operator.devcluster.backends.metrics import MetricsBackend, Series

    with tempfile.TemporaryDirectory(prefix="bench-gateway-") as tmp:
        dev = DevCluster(ClusterConfig(workdir=Path(tmp)))
        dev.start()
        try:
            metrics = dev.start_backends(["metrics"])["metrics"]
            assert isinstance(metrics, MetricsBackend)
            now = time.time()
            metrics.import_series(
                [
                    Series(
                        {"__name__": "mem", "namespace": "bench", "pod": f"p{i}"},
                        [(now - 600 + 60 * k, float(k)) for k in range(11)],
                    )
                    for i in range(20)
                ]
            )
            token = metrics.grant("bench")
            auth = {"Authorization": f"Bearer {token}"}
            asyncio.run(
                measure(
                    "VictoriaMetrics via vmauth (PromQL instant query, 20 series)",
                    metrics.url + "/",
                    auth,
                    Upstream("observability-metrics", metrics.url, tuple(auth.items())),
                    "api/v1/query",
                    {"query": "mem"},
                    rounds,
                )
            )
        finally:
            dev.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=500)
    parser.add_argument("--no-cluster", action="store_true")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs")
    asyncio.run(local(args.rounds))
    if not args.no_cluster:
        victoria(args.rounds)


if __name__ == "__main__":
    main()
