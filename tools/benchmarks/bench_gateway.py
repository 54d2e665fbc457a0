"""Benchmark of the recording gateway: the time one tool call spends in it (routing, token check, bounds,
forwarding, recording) — per call, the same request made directly to the back-end and through the
gateway, interleaved, over keep-alive connections, p50 / p95 of each and of their difference.

Two back-ends: a trivial local HTTP server (answers a fixed 1 KiB JSON body: isolates the gateway's own
cost) and, unless ``--no-cluster``, VictoriaMetrics behind vmauth on the embedded control plane (a real
PromQL instant query of a back-filled series, with the scenario token the gateway adds).

Run with ``.venv/bin/python tools/benchmarks/bench_gateway.py [--rounds N] [--no-cluster]``. Prints figures;
asserts nothing.

``--flood N`` (decision 0096, security review H-2): the memory of this process, which holds the gateway
as the operator does, before and after an agent posts N one-MiB JSON bodies through one route (the
back-end and the agent are another process), with the default byte budgets and with none
(``--no-budget``, which keeps every body: keep N small there).
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


#: The flood's other side: a back-end answering a small JSON body, and an agent posting one-MiB bodies.
FLOOD_AGENT = r"""
import asyncio, sys, httpx2
from aiohttp import web
async def main():
    async def ok(request):
        await request.read()
        return web.json_response({"status": "success"})
    app = web.Application(client_max_size=1 << 30)
    app.router.add_post("/{tail:.*}", ok)
    runner = web.AppRunner(app, access_log=None)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    print(site._server.sockets[0].getsockname()[1], flush=True)
    url, token, n = (await asyncio.to_thread(sys.stdin.readline)).split()
    body = b'{"data":"' + b"x" * ((1 << 20) - 11) + b'"}'
    async with httpx2.AsyncClient(timeout=60) as c:
        for _ in range(int(n)):
            r = await c.post(url + "api/v1/write", content=body,
                             headers={"Authorization": "Bearer " + token, "Content-Type": "application/json"})
            assert r.status_code == 200, r.status_code
    print("done", flush=True)
    await runner.cleanup()
asyncio.run(main())
"""


def _rss_mib() -> tuple[float, float]:
    """(VmRSS, VmHWM) of this process in MiB."""
    fields = dict(
        line.split(":", 1) for line in Path("/proc/self/status").read_text().splitlines() if ":" in line
    )
    return int(fields["VmRSS"].split()[0]) / 1024, int(fields["VmHWM"].split()[0]) / 1024


async def flood(calls: int, budget: bool) -> None:
    import gc
    import sys

    unbounded = 1 << 62
    gw = ToolGateway(body_budget=None if budget else unbounded)
    await gw.start()
    agent = await asyncio.create_subprocess_exec(
        sys.executable, "-c", FLOOD_AGENT, stdin=asyncio.subprocess.PIPE, stdout=asyncio.subprocess.PIPE
    )
    assert agent.stdin is not None
    assert agent.stdout is not None
    port = int((await agent.stdout.readline()).decode())
    limits = GatewayLimits(rate_per_second=1e9, burst=10**9, max_records=10**9, max_request_bytes=2 << 20)
    if not budget:
        limits = GatewayLimits(
            rate_per_second=1e9,
            burst=10**9,
            max_records=10**9,
            max_request_bytes=2 << 20,
            max_body_bytes=unbounded,
        )
    route = await gw.open(
        {"observability-metrics": Upstream("observability-metrics", f"http://127.0.0.1:{port}")},
        limits=limits,
    )
    gc.collect()
    before, _ = _rss_mib()
    t0 = time.perf_counter()
    ep = route.endpoints["observability-metrics"]
    agent.stdin.write(f"{ep.url} {ep.token} {calls}\n".encode())
    await agent.stdin.drain()
    assert (await agent.stdout.readline()).strip() == b"done"
    took = time.perf_counter() - t0
    gc.collect()
    after, peak = _rss_mib()
    await agent.wait()
    bounds = (
        f"default budgets: route {GatewayLimits().max_body_bytes >> 20} MiB, gateway {gw.body_budget >> 20} MiB"
        if budget
        else "no budget"
    )
    print(
        f"flood of {calls} x 1 MiB JSON bodies ({bounds}): {took:.1f} s; RSS {before:.0f} -> {after:.0f} MiB "
        f"(peak {peak:.0f}); bodies kept {gw.body_bytes >> 20} MiB, {route.bodies_digested} of "
        f"{len(route.records)} calls as size and digest; fault {route.fault}"
    )
    await gw.stop()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--rounds", type=int, default=500)
    parser.add_argument("--no-cluster", action="store_true")
    parser.add_argument("--flood", type=int, default=0, help="only the memory under N one-MiB bodies")
    parser.add_argument("--no-budget", action="store_true", help="with --flood: keep every body")
    args = parser.parse_args()
    print(f"load average {os.getloadavg()[0]:.2f}, {os.cpu_count()} CPUs")
    if args.flood:
        asyncio.run(flood(args.flood, budget=not args.no_budget))
        return
    asyncio.run(local(args.rounds))
    if not args.no_cluster:
        victoria(args.rounds)


if __name__ == "__main__":
    main()
