"""What every tool-plane back-end of the dev cluster has: a name, the binaries it runs, the back-ends
it builds on, and a ``start`` that leaves it ready (or raises :class:`SetupError`).

Called by :mod:`oasis_operator.devcluster.backends` and the back-end modules beside this one.
"""

from __future__ import annotations

import socket
import time
from abc import ABC, abstractmethod
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import ClassVar, Protocol

import httpx2

from oasis_operator.devcluster.backends.binaries import BackendBinaries
from oasis_operator.devcluster.certs import PKI
from oasis_operator.devcluster.processes import Component, Supervisor


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def http_ok(
    url: str, *, expect: Callable[[httpx2.Response], bool] | None = None, timeout: float = 1.0
) -> Callable[[], bool]:
    """A readiness probe: GET ``url`` answers 200 (or satisfies ``expect``)."""

    def probe() -> bool:
        resp = httpx2.get(url, timeout=timeout)
        return expect(resp) if expect is not None else resp.status_code == 200

    return probe


class ClusterView(Protocol):
    """What back-ends use of the running dev cluster (:class:`~oasis_operator.devcluster.cluster.DevCluster`
    satisfies it; stated here so that back-ends do not import the cluster that starts them)."""

    workdir: Path
    server: str
    ca_file: Path
    pki: PKI | None
    kwok_server: str
    kubelet_proxy: str
    metrics_server_port: int
    # The simulated kubelets' address when they are reached directly (no tunnel); None: the tunnel.
    kubelet_address: str | None

    def admin_http(self, timeout: float = ...) -> httpx2.Client: ...


@dataclass
class BackendContext:
    """What a back-end gets to start with: the cluster, its process supervisor and the binaries."""

    cluster: ClusterView
    supervisor: Supervisor
    bins: BackendBinaries
    timeout: float = 60.0
    # Back-ends already started, by name (a back-end can build on another: alerts on metrics).
    running: dict[str, Backend] = field(default_factory=dict)

    def directory(self, name: str) -> Path:
        d = self.cluster.workdir / "backends" / name
        d.mkdir(parents=True, exist_ok=True)
        return d

    def start_process(
        self,
        name: str,
        argv: list[str],
        ready: Callable[[], bool],
        what: str,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> tuple[Component, float]:
        """Start one process and wait for its probe; returns it and the seconds it took."""
        t0 = time.monotonic()
        comp = self.supervisor.start(name, argv, env, cwd=cwd)
        self.supervisor.wait_until(ready, what=what, timeout=self.timeout, owner=comp)
        return comp, time.monotonic() - t0


class Backend(ABC):
    name: ClassVar[str]
    # Binaries from tools/build-backends.sh this back-end runs.
    components: ClassVar[tuple[str, ...]] = ()
    # Back-ends that must be started before this one.
    requires: ClassVar[tuple[str, ...]] = ()

    def __init__(self) -> None:
        # Seconds from start to ready, per process (what the benchmark reports).
        self.timings: dict[str, float] = {}
        self.processes: list[Component] = []

    @abstractmethod
    def start(self, ctx: BackendContext) -> None:
        """Start the back-end's processes and return once it serves requests."""

    @abstractmethod
    def endpoints(self) -> dict[str, str]:
        """Where the back-end answers (name -> URL), as saved in the cluster's state file."""

    def _run(
        self,
        ctx: BackendContext,
        name: str,
        argv: list[str],
        ready: Callable[[], bool],
        what: str,
        env: dict[str, str] | None = None,
        cwd: Path | None = None,
    ) -> Component:
        comp, took = ctx.start_process(name, argv, ready, what, env, cwd)
        self.timings[name] = took
        self.processes.append(comp)
        return comp
