"""Container logs of simulated pods, served through the API server (``GET pods/{name}/log``, audited).

The node simulator (kwok) serves the kubelet API for every simulated node; for a pod it answers
``containerLogs`` from a file named by a ``ClusterLogs`` object (kwok's CRD) whose selector names the
pod. The harness writes one file per container in the container runtime's log format
(``<RFC 3339 time> <stream> F <text>``, what a kubelet reads), so ``kubectl logs`` options work as on
a real node: ``--timestamps``, ``--since``/``--since-time``, ``--tail``, ``--limit-bytes``,
``--previous`` (a second file) and ``--follow`` (lines appended later are streamed).

ClusterLogs objects are cluster-scoped, so an agent confined to namespaces never sees them. The API
server reaches the simulator through :mod:`oasis_operator.devcluster.kubelet_tunnel`, or, with
``ClusterConfig.kubelet_address``, directly at the simulated nodes' address, as the Helm chart's
simulator is reached (:func:`kubelet_server_args`, decision 0070); the cluster side of the wiring is in
:mod:`oasis_operator.devcluster.cluster` (``backends=("logs",)``).
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Literal

import httpx2

from oasis_operator.adapters.plumbing.apply import server_side_apply_sync
from oasis_operator.core.toolplane.logs import (
    CLUSTER_LOGS,
    FIELD_MANAGER,
    cluster_logs,
    cri_record,
    log_file,
    object_name,
)
from oasis_operator.devcluster.backends.base import Backend, BackendContext, http_ok
from oasis_operator.devcluster.errors import SetupError

#: The port the API server calls a node's kubelet at when the node reports none (the simulator's
#: stages write no ``daemonEndpoints``, as a kubelet on its default port).
KUBELET_PORT = 10250


#: kwok's CRDs the simulated kubelets read: which file answers a container's log, and (with resource
#: usage) what each container uses. The resource-metrics endpoint itself is a ``Metric`` kwok reads from
#: its configuration (:data:`METRICS_CONFIG`), not a CRD (decision 0074).
LOG_CRDS = ("ClusterLogs",)
USAGE_CRDS = ("ClusterLogs", "ClusterResourceUsage")
#: The file name of the node simulator's resource-metrics configuration, beside its stages (the chart
#: mounts both from one ConfigMap at /etc/node-agent/).
METRICS_CONFIG = "node-simulator-metrics.yaml"


def simulator_crds(usage: bool) -> tuple[str, ...]:
    """The CRDs the node simulator watches when it is the simulated kubelets (with resource usage or not)."""
    return USAGE_CRDS if usage else LOG_CRDS


def kubelet_server_args(
    node_ip: str, crds: Sequence[str] = LOG_CRDS, metrics_config: str | None = None
) -> list[str]:
    """The node simulator's options that make it every simulated node's kubelet at ``node_ip``: the
    nodes' InternalIP, and its kubelet server (HTTPS and HTTP on one port; kwok's built-in certificate,
    which an API server without ``--kubelet-certificate-authority`` does not verify) listening there
    on the kubelet's port, answering container logs from the ClusterLogs objects (``crds``). The Helm
    chart passes ``$(POD_IP)``, the pod's address; the local stack a loopback address of its own.
    With ``metrics_config`` (the path of :data:`METRICS_CONFIG`; ``crds`` then :data:`USAGE_CRDS`) it
    also serves each node's resource metrics from the declared usage (decision 0074)."""
    args = [
        f"--node-ip={node_ip}",
        # Bracketed: an IPv6 address needs it, an IPv4 address is read the same (Go's SplitHostPort).
        f"--server-address=[{node_ip}]:{KUBELET_PORT}",
        f"--enable-crds={','.join(crds)}",
    ]
    if metrics_config is not None:
        args.append(f"--config={metrics_config}")
    return args


@dataclass(frozen=True)
class LogLine:
    time: dt.datetime
    text: str
    stream: Literal["stdout", "stderr"] = "stdout"

    def cri(self) -> str:
        """The line as a container runtime writes it (one record per text line)."""
        if self.time.tzinfo is None:
            raise ValueError(f"log line time {self.time!r} has no time zone")
        return cri_record(self.time, self.stream, self.text)


def cri_text(lines: Iterable[LogLine]) -> str:
    return "".join(line.cri() for line in lines)


class PodLogsBackend(Backend):
    name = "logs"

    def __init__(self) -> None:
        super().__init__()
        self.directory: Path | None = None
        self.kwok_server = ""
        self._ctx: BackendContext | None = None

    def start(self, ctx: BackendContext) -> None:
        # The processes (the simulator's server, the tunnel) were started with the cluster; here we
        # only wait until the simulator answers, so the first read does not race its start.
        self._ctx = ctx
        self.directory = ctx.directory(self.name)
        self.kwok_server = ctx.cluster.kwok_server
        if not self.kwok_server:
            raise SetupError("the logs back-end needs a cluster started with backends=('logs', ...)")
        ctx.supervisor.wait_until(
            http_ok(f"{self.kwok_server}/healthz"),
            what="the node simulator's server",
            timeout=ctx.timeout,
            owner=ctx.supervisor.get("kwok"),
        )

    def endpoints(self) -> dict[str, str]:
        return {"kubelet": self.kwok_server}

    # -- the harness side -------------------------------------------------------------------------
    def _file(self, namespace: str, pod: str, container: str, previous: bool) -> Path:
        assert self.directory is not None, "logs back-end not started"
        d = self.directory / namespace / pod
        d.mkdir(parents=True, exist_ok=True)
        return d / log_file(container, previous=previous)

    def declare(
        self,
        http: httpx2.Client,
        namespace: str,
        pod: str,
        containers: dict[str, Sequence[LogLine]],
        previous: dict[str, Sequence[LogLine]] | None = None,
    ) -> None:
        """Set the logs of ``pod``'s containers (replacing any declared before) and, optionally, of
        their previous instances (what ``--previous`` reads after a restart; empty when not given).
        Declare every pod of a scenario that serves logs, with no lines if it has none: for a pod
        without a declaration the simulator answers an error ("no logs found for container")."""
        previous = previous or {}
        if unknown := set(previous) - set(containers):
            raise ValueError(f"previous logs for containers with no current log: {sorted(unknown)}")
        files = {}
        for container, lines in containers.items():
            current = self._file(namespace, pod, container, previous=False)
            current.write_text(cri_text(lines))
            # Always a previous log, empty when none is declared: without one kwok answers --previous
            # with an error naming its own file handling.
            prev = self._file(namespace, pod, container, previous=True)
            prev.write_text(cri_text(previous.get(container, ())))
            files[container] = (str(current), str(prev))
        doc = cluster_logs(namespace, pod, files)
        refused = server_side_apply_sync(
            http, f"{CLUSTER_LOGS}/{object_name(namespace, pod)}", doc, FIELD_MANAGER
        )
        if refused:
            raise SetupError(f"declaring logs of {namespace}/{pod}: {refused}")

    def append(self, namespace: str, pod: str, container: str, lines: Sequence[LogLine]) -> None:
        """Add lines to a container's current log (a follower sees them as they are written)."""
        path = self._file(namespace, pod, container, previous=False)
        if not path.exists():
            raise ValueError(f"no log declared for container {container} of {namespace}/{pod}")
        with path.open("a") as fh:
            fh.write(cri_text(lines))

    def forget(self, http: httpx2.Client, namespace: str, pod: str) -> None:
        http.delete(f"{CLUSTER_LOGS}/{object_name(namespace, pod)}")
