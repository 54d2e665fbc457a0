"""Benchmark of the tool-plane back-ends on the embedded control plane: per process, the time from
start to ready and the resident memory after settling; per back-end, injection round trips (declared
data written by the harness, then read back through the agent-facing endpoint until it is there).

Run with ``make bench`` (or ``.venv/bin/python tools/benchmarks/bench_backends.py [--backends all] [--rounds N]``).
Prints figures; asserts nothing. Back-ends not built yet are built first (tools/build-backends.sh).
"""

from __future__ import annotations

import argparse
import datetime as dt
import secrets
import tempfile
import time
from collections.abc import Callable
from pathlib import Path

import httpx2

from oasis_operator.devcluster import ClusterConfig, DevCluster, kube
from oasis_operator.devcluster.backends import parse_selection
from oasis_operator.devcluster.backends.gitops import GitOpsBackend, manifests
from oasis_operator.devcluster.backends.logs import LogLine, PodLogsBackend
from oasis_operator.devcluster.backends.metrics import MetricsBackend, Series
from oasis_operator.devcluster.backends.resource_metrics import ResourceMetricsBackend
from oasis_operator.devcluster.backends.traces import Span, TracesBackend


def rss_mib(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, round(q * (len(ordered) - 1)))]


def until(check: Callable[[], bool], timeout: float = 60) -> None:
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise SystemExit("an injected datum never became readable")
        time.sleep(0.01)


def timed(rounds: int, one: Callable[[int], None]) -> str:
    took = []
    for i in range(rounds):
        t0 = time.monotonic()
        one(i)
        took.append((time.monotonic() - t0) * 1000)
    return f"p50 {pct(took, 0.5):.0f} ms, p95 {pct(took, 0.95):.0f} ms ({rounds} rounds)"


def bench_logs(dev: DevCluster, http: httpx2.Client, ns: str, rounds: int) -> str:
    logs = dev.backends["logs"]
    assert isinstance(logs, PodLogsBackend)

    def one(i: int) -> None:
        pod = f"web-{i}"
        body = {
            "metadata": {"name": pod},
            "spec": {"nodeName": dev.nodes[0], "containers": [{"name": "app", "image": "web:1"}]},
        }
        kube.expect(http.post(f"/api/v1/namespaces/{ns}/pods", json=body), "create pod", 201)
        marker = secrets.token_hex(8)
        logs.declare(http, ns, pod, {"app": [LogLine(dt.datetime.now(dt.UTC), f"line {marker}")]})
        until(lambda: marker in http.get(f"/api/v1/namespaces/{ns}/pods/{pod}/log").text)

    return "declare a pod's log -> GET pods/log returns it: " + timed(rounds, one)


def bench_usage(dev: DevCluster, http: httpx2.Client, ns: str, rounds: int) -> str:
    usage = dev.backends["resource-metrics"]
    assert isinstance(usage, ResourceMetricsBackend)

    def one(i: int) -> None:
        pod = f"top-{i}"
        body = {
            "metadata": {"name": pod},
            "spec": {"nodeName": dev.nodes[0], "containers": [{"name": "app", "image": "web:1"}]},
        }
        kube.expect(http.post(f"/api/v1/namespaces/{ns}/pods", json=body), "create pod", 201)
        usage.declare_usage(http, ns, pod, {"app": {"cpu": "100m", "memory": f"{100 + i}Mi"}})
        until(
            lambda: http.get(f"/apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods/{pod}").status_code == 200,
            timeout=120,
        )

    return "declare a new pod's usage -> metrics.k8s.io serves it (10 s scrape period): " + timed(rounds, one)


def bench_metrics(dev: DevCluster, ns: str, rounds: int) -> str:
    metrics = dev.backends["metrics"]
    assert isinstance(metrics, MetricsBackend)
    token = metrics.grant(ns)

    def one(i: int) -> None:
        now = time.time()
        metrics.import_series(
            [
                Series(
                    {"__name__": f"bench_metric_{i}", "namespace": ns},
                    [(now - 3600 + 60 * k, float(k)) for k in range(61)],
                )
            ]
        )
        until(
            lambda: bool(
                httpx2.get(
                    f"{metrics.url}/api/v1/query",
                    params={"query": f"bench_metric_{i}"},
                    headers={"Authorization": f"Bearer {token}"},
                ).json()["data"]["result"]
            )
        )

    return "back-fill 1 h (61 samples) -> PromQL through vmauth returns it: " + timed(rounds, one)


def bench_traces(dev: DevCluster, ns: str, rounds: int) -> tuple[str, float, float]:
    traces = dev.backends["traces"]
    assert isinstance(traces, TracesBackend)
    t0 = time.monotonic()
    store = traces.instance(ns)
    started = time.monotonic() - t0

    def one(i: int) -> None:
        now = time.time()
        trace = secrets.token_hex(16)
        store.load([Span(trace, secrets.token_hex(8), "frontend", "GET /", now - 60, now - 59)])

    line = "OTLP export -> query API returns the trace: " + timed(rounds, one)
    return line, started, rss_mib(store.process.pid)


def bench_gitops(dev: DevCluster, http: httpx2.Client, ns: str, rounds: int) -> str:
    gitops = dev.backends["gitops"]
    assert isinstance(gitops, GitOpsBackend)
    cm = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "bench"}, "data": {"round": "-1"}}
    gitops.push(ns, "bench", {"cm.yaml": manifests(cm)})
    gitops.sync(http, ns, "bench", "bench", interval="1s")

    def value() -> str | None:
        resp = http.get(f"/api/v1/namespaces/{ns}/configmaps/bench")
        return resp.json()["data"]["round"] if resp.status_code == 200 else None

    until(lambda: value() == "-1", timeout=120)

    def one(i: int) -> None:
        gitops.push(ns, "bench", {"cm.yaml": manifests({**cm, "data": {"round": str(i)}})})
        until(lambda: value() == str(i), timeout=120)

    return "git push -> object applied in the cluster (interval 1s): " + timed(rounds, one)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--backends", default="all")
    parser.add_argument("--rounds", type=int, default=20)
    parser.add_argument("--settle", type=float, default=10.0, help="seconds to idle before reading RSS")
    args = parser.parse_args()
    selected = parse_selection(args.backends)
    with tempfile.TemporaryDirectory() as tmp:
        dev = DevCluster(ClusterConfig(workdir=Path(tmp), backends=selected))
        t0 = time.monotonic()
        dev.start()
        try:
            print(
                f"cluster + back-ends ready in {time.monotonic() - t0:.1f}s "
                f"(back-ends: {dev.timings.get('backends', 0.0):.2f}s)"
            )
            time.sleep(args.settle)
            print(f"{'process':<24} {'start->ready':>12} {'RSS':>10}")
            if "kubelet-tunnel" in dev.component_pids():
                pid = dev.component_pids()["kubelet-tunnel"]
                print(
                    f"{'kubelet-tunnel':<24} {'(cluster)':>12} {rss_mib(pid):>7.1f} MiB   (logs, resource-metrics)"
                )
            for name, backend in dev.backends.items():
                for proc in backend.processes:
                    took = backend.timings.get(proc.name, 0.0)
                    print(f"{proc.name:<24} {took:>11.2f}s {rss_mib(proc.pid):>7.1f} MiB   ({name})")
            with dev.admin_http() as http:
                ns = f"bench-{kube.random_suffix()}"
                kube.create_namespace(http, ns)
                if "logs" in dev.backends:
                    print("logs:    " + bench_logs(dev, http, ns, args.rounds))
                if "resource-metrics" in dev.backends:
                    print("usage:   " + bench_usage(dev, http, ns, max(3, args.rounds // 4)))
                if "metrics" in dev.backends:
                    print("metrics: " + bench_metrics(dev, ns, args.rounds))
                if "traces" in dev.backends:
                    line, started, rss = bench_traces(dev, ns, args.rounds)
                    print(
                        f"traces:  a namespace's own Jaeger: ready in {started:.2f}s, {rss:.1f} MiB; " + line
                    )
                if "gitops" in dev.backends:
                    print("gitops:  " + bench_gitops(dev, http, ns, max(3, args.rounds // 4)))
        finally:
            dev.stop()


if __name__ == "__main__":
    main()
