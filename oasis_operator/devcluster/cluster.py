"""The embedded Kubernetes control plane: etcd, kube-apiserver (with auditing), kube-controller-manager,
kube-scheduler and the node simulator (kwok), started as local processes.

Called by the test fixtures (``tests/conftest.py``), by ``oasis dev-cluster`` and by the demo; turns a
:class:`ClusterConfig` (a working directory and a few options) into a running cluster with an admin
kubeconfig, an audit log and Ready simulated nodes. On any failure while starting, everything already
started is stopped before the :class:`SetupError` propagates.
"""

from __future__ import annotations

import datetime as dt
import errno
import ipaddress
import json
import random
import shutil
import socket
import ssl
import sys
import tempfile
import time
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from importlib import resources
from pathlib import Path
from types import TracebackType
from typing import Any

import httpx2
import yaml

from oasis_operator.core.environment.manifests import POOL_LABEL, POOL_TAINT
from oasis_operator.core.kubeconfig import kubeconfig
from oasis_operator.devcluster import backends as backends_mod
from oasis_operator.devcluster import binaries as binaries_mod
from oasis_operator.devcluster import kubelet_tunnel
from oasis_operator.devcluster.backends.logs import (
    KUBELET_PORT,
    METRICS_CONFIG,
    kubelet_server_args,
    simulator_crds,
)
from oasis_operator.devcluster.certs import PKI, ClientCert, b64_file, generate_pki, write_kubeconfig
from oasis_operator.devcluster.errors import SetupError
from oasis_operator.devcluster.processes import Supervisor

SERVICE_CIDR = "10.0.0.0/24"
POD_CIDR = "10.244.0.0/16"
SA_ISSUER = "https://kubernetes.default.svc.cluster.local"
STATE_FILE = "cluster.json"
# Where the operator finds the back-ends (``oasis operator run --toolplane``; decision 0052).
TOOLPLANE_FILE = "toolplane.json"


def audit_policy_text() -> str:
    """The audit policy shipped with the package (also mounted by the kind configuration)."""
    return resources.files("oasis_operator.devcluster").joinpath("audit-policy.yaml").read_text()


def metrics_config_text() -> str:
    """The node simulator's resource-metrics ``Metric`` (a configuration document of kwok's, shipped with
    the package and copied into the Helm chart; decision 0074)."""
    return resources.files("oasis_operator.devcluster").joinpath(METRICS_CONFIG).read_text()


def _stages_text(node_status_seconds: int | None = None) -> str:
    """The node simulator's stages; ``node_status_seconds`` replaces the 5-10 minute node status
    refresh (a kubelet's pace) with a fixed period, so tests can watch a refresh happen."""
    text = resources.files("oasis_operator.devcluster").joinpath("node-simulator-stages.yaml").read_text()
    if node_status_seconds is None:
        return text
    pace = "    durationMilliseconds: 300000\n    jitterDurationMilliseconds: 310000\n"
    if pace not in text:
        raise SetupError("the node status refresh in node-simulator-stages.yaml is not where it was expected")
    return text.replace(pace, f"    durationMilliseconds: {node_status_seconds * 1000}\n")


@dataclass(frozen=True)
class ClusterConfig:
    """What to start. Ports left as ``None`` are picked free at start."""

    workdir: Path
    nodes: int = 3
    apiserver_port: int | None = None
    # Kill the processes when the Python process that started them dies (tests); ``False`` for
    # ``oasis dev-cluster up``, which leaves the cluster running after the command returns.
    tie_to_parent: bool = True
    # An audit webhook configuration (kubeconfig format) to send audit events to, besides the file.
    audit_webhook_config: Path | None = None
    audit_webhook_batch_max_wait: str = "1s"
    ready_timeout: float = 60.0
    # Seconds between node status refreshes (None: between 5 and 10 minutes, as a kubelet reports).
    node_status_seconds: int | None = None
    # Tool-plane back-ends to start with the cluster (names in backends.BACKENDS). "logs" also
    # changes how the API server and the node simulator start: the simulator serves the kubelet API
    # (container logs) and the API server reaches it through the kubelet tunnel.
    backends: tuple[str, ...] = ()
    # With "logs": the simulated nodes' address (a loopback address, see free_kubelet_address), where
    # the node simulator serves the kubelet API on the kubelet's port and the API server calls it
    # directly, as in a cluster running the Helm chart's simulator (decision 0070); with
    # "resource-metrics" metrics-server scrapes it there too (decision 0074). None: the API server and
    # metrics-server reach the simulator through the kubelet tunnel.
    kubelet_address: str | None = None
    # Store every object as JSON in etcd (instead of protobuf), so the harness can read and compare
    # what is stored: the target control planes' reset and its proof (decision 0101).
    storage_json: bool = False
    # Where agents outside this host reach the API server (an address of this host, or a name that
    # resolves to one; decision 0109): the API server then listens on every address, its certificate
    # names this one too, and :attr:`DevCluster.agent_server` uses it. None: loopback only.
    serve_address: str | None = None


@dataclass
class ClusterState:
    """What a running cluster is made of; saved as JSON so another process can find or stop it."""

    workdir: str
    server: str
    kubeconfig: str
    audit_log: str
    ca_file: str
    etcd_url: str
    pids: dict[str, int] = field(default_factory=dict)
    nodes: list[str] = field(default_factory=list)
    started_at: str = ""
    # Back-end name -> its endpoints (name -> URL); the processes are in ``pids``.
    backends: dict[str, dict[str, str]] = field(default_factory=dict)


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _ensure_port_free(port: int, what: str, address: str = "127.0.0.1") -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        try:
            s.bind((address, port))
        except OSError as exc:
            if exc.errno == errno.EADDRINUSE:
                raise SetupError(
                    f"port {port} on {address}, asked for the {what}, is already in use by another "
                    f"process; free it or leave the port unset so a free one is picked"
                ) from None
            raise SetupError(f"cannot use port {port} for the {what}: {exc}") from None


def free_kubelet_address() -> str:
    """A loopback address (127.0.0.2-254, picked at random) whose kubelet port is free: where a dev
    cluster's simulated kubelets can be served directly (``ClusterConfig.kubelet_address``), several
    clusters on one machine each at its own."""
    candidates = [f"127.0.0.{i}" for i in range(2, 255)]
    random.shuffle(candidates)
    for address in candidates:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
            try:
                s.bind((address, KUBELET_PORT))
            except OSError:
                continue
            return address
    raise SetupError(f"no loopback address 127.0.0.2-254 has port {KUBELET_PORT} free")


def _host(address: str) -> str:
    """``address`` as the host part of a URL (an IPv6 address in brackets)."""
    try:
        return f"[{address}]" if ipaddress.ip_address(address).version == 6 else address
    except ValueError:
        return address


def _advertised(served: str | None) -> str:
    """What the API server advertises (its ``kubernetes`` Service's endpoint): the served address when
    it is an IPv4 one, as the Service range is; loopback otherwise (the flag takes only an IP)."""
    try:
        ip = ipaddress.ip_address(served or "")
    except ValueError:
        return "127.0.0.1"
    return str(ip) if ip.version == 4 else "127.0.0.1"


class DevCluster:
    """A running (or startable) embedded control plane. Use as a context manager or call
    :meth:`start` and :meth:`stop`."""

    def __init__(self, config: ClusterConfig, bins: binaries_mod.Binaries | None = None) -> None:
        self.config = config
        self.workdir = config.workdir
        self._bins = bins
        self._sup = Supervisor(self.workdir / "logs", tie_to_parent=config.tie_to_parent)
        self.pki: PKI | None = None
        self.server = ""
        # The API server's URL as an agent is given it (the served address; the loopback one without).
        self.agent_server = ""
        self.etcd_url = ""
        self.kubeconfig = self.workdir / "kubeconfig"
        self.operator_kubeconfig = self.workdir / "operator.kubeconfig"
        self.audit_log = self.workdir / "audit" / "audit.log"
        self.ca_file = self.workdir / "pki" / "ca.crt"
        self.nodes: list[str] = []
        self.timings: dict[str, float] = {}
        # The node simulator's kubelet server (when pod logs are served) and the started back-ends.
        self.kwok_server = ""
        # With resource metrics: the local port metrics-server serves on, and the tunnel as an HTTPS
        # proxy URL (how metrics-server reaches the simulated kubelets).
        self.metrics_server_port = 0
        self.kubelet_proxy = ""
        self.kubelet_address = config.kubelet_address
        self.backends: dict[str, backends_mod.Backend] = {}

    # -- lifecycle -----------------------------------------------------------------------------
    def __enter__(self) -> DevCluster:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.stop()

    def start(self) -> None:
        t0 = time.monotonic()
        bins = self._bins or binaries_mod.resolve()
        self.timings["binaries"] = time.monotonic() - t0
        try:
            self._start(bins)
        except BaseException:
            self.stop()
            raise
        self.timings["total"] = time.monotonic() - t0
        self._save_state()

    def stop(self) -> None:
        self._sup.stop_all()

    def _mark(self, name: str, since: float) -> float:
        now = time.monotonic()
        self.timings[name] = now - since
        return now

    def _start(self, bins: binaries_mod.Binaries) -> None:
        cfg = self.config
        selected = backends_mod.with_requirements(cfg.backends)
        serve_logs = "logs" in selected
        serve_usage = "resource-metrics" in selected
        backend_bins = backends_mod.resolve_binaries(selected) if selected else None
        if cfg.apiserver_port is not None:
            _ensure_port_free(cfg.apiserver_port, "API server")
        wd = self.workdir
        for sub in ("etcd", "audit", "logs", "pki"):
            (wd / sub).mkdir(parents=True, exist_ok=True)
        t = time.monotonic()
        served = cfg.serve_address
        self.pki = pki = generate_pki(
            wd / "pki", dt.datetime.now(dt.UTC), serve_names=(served,) if served else ()
        )
        t = self._mark("pki", t)

        # etcd ------------------------------------------------------------------------------
        client_port, peer_port = _free_port(), _free_port()
        self.etcd_url = f"http://127.0.0.1:{client_port}"
        peer_url = f"http://127.0.0.1:{peer_port}"
        etcd = self._sup.start(
            "etcd",
            [
                str(bins.path("etcd")),
                "--name=default",
                f"--data-dir={wd / 'etcd'}",
                f"--listen-client-urls={self.etcd_url}",
                f"--advertise-client-urls={self.etcd_url}",
                f"--listen-peer-urls={peer_url}",
                f"--initial-advertise-peer-urls={peer_url}",
                f"--initial-cluster=default={peer_url}",
                "--initial-cluster-state=new",
                # A throwaway store: skipping fsync makes writes ~10x faster and loses nothing we keep.
                "--unsafe-no-fsync",
                "--quota-backend-bytes=2147483648",
                "--log-level=warn",
            ],
        )
        self._sup.wait_until(
            lambda: httpx2.get(f"{self.etcd_url}/health", timeout=1).json().get("health") == "true",
            what="etcd to report healthy",
            timeout=cfg.ready_timeout,
            owner=etcd,
        )
        t = self._mark("etcd", t)

        # kube-apiserver ---------------------------------------------------------------------
        port = cfg.apiserver_port or _free_port()
        self.server = f"https://127.0.0.1:{port}"
        self.agent_server = f"https://{_host(served)}:{port}" if served else self.server
        policy = wd / "audit" / "policy.yaml"
        policy.write_text(audit_policy_text())
        argv = [
            str(bins.path("kube-apiserver")),
            f"--etcd-servers={self.etcd_url}",
            f"--bind-address={'0.0.0.0' if served else '127.0.0.1'}",
            f"--advertise-address={_advertised(served)}",
            f"--secure-port={port}",
            f"--cert-dir={wd / 'pki'}",
            f"--tls-cert-file={pki.serving.cert}",
            f"--tls-private-key-file={pki.serving.key}",
            f"--client-ca-file={pki.ca_cert}",
            f"--service-account-key-file={pki.sa_public_key}",
            f"--service-account-signing-key-file={pki.sa_private_key}",
            f"--service-account-issuer={SA_ISSUER}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=RBAC",
            *(["--storage-media-type=application/json"] if cfg.storage_json else []),
            "--allow-privileged=true",
            "--profiling=false",
            # Auditing: the evidence of what agents do.
            f"--audit-policy-file={policy}",
            f"--audit-log-path={self.audit_log}",
            "--audit-log-format=json",
            "--audit-log-mode=blocking",
            "--audit-log-maxsize=200",
            "--audit-log-maxbackup=5",
        ]
        kwok_port = _free_port()
        direct = cfg.kubelet_address
        if direct is not None:
            argv += self._kubelet_direct(direct, serve_logs)
            if serve_usage:
                self.metrics_server_port = _free_port()
        elif serve_logs:
            argv += self._kubelet_tunnel(kwok_port, serve_usage)
        if serve_usage:
            # Through the tunnel the aggregator calls metrics-server at its endpoint address; directly,
            # at the Service's external name (localhost), as no Endpoints address may be a loopback one.
            argv += self._aggregation_flags(endpoint_routing=direct is None)
        if cfg.audit_webhook_config is not None:
            argv += [
                f"--audit-webhook-config-file={cfg.audit_webhook_config}",
                "--audit-webhook-mode=batch",
                f"--audit-webhook-batch-max-wait={cfg.audit_webhook_batch_max_wait}",
                "--audit-webhook-initial-backoff=1s",
            ]
        apiserver = self._sup.start("kube-apiserver", argv)
        admin_ctx = self._ssl_context(pki.admin)
        self._sup.wait_until(
            lambda: httpx2.get(f"{self.server}/readyz", verify=admin_ctx, timeout=2).status_code == 200,
            what="kube-apiserver /readyz",
            timeout=cfg.ready_timeout,
            owner=apiserver,
        )
        t = self._mark("kube-apiserver", t)

        # kubeconfigs -------------------------------------------------------------------------
        write_kubeconfig(self.kubeconfig, self.server, pki.ca_cert, "admin", pki.admin)
        write_kubeconfig(self.operator_kubeconfig, self.server, pki.ca_cert, "operator", pki.operator)
        kcm_kc = write_kubeconfig(
            wd / "pki" / "controller-manager.kubeconfig",
            self.server,
            pki.ca_cert,
            "controller-manager",
            pki.controller_manager,
        )
        sched_kc = write_kubeconfig(
            wd / "pki" / "scheduler.kubeconfig", self.server, pki.ca_cert, "scheduler", pki.scheduler
        )
        sim_kc = write_kubeconfig(
            wd / "pki" / "node-simulator.kubeconfig",
            self.server,
            pki.ca_cert,
            "node-simulator",
            pki.simulator,
        )

        # controllers, scheduler, node simulator (in parallel) -------------------------------------
        self._sup.start(
            "kube-controller-manager",
            [
                str(bins.path("kube-controller-manager")),
                f"--kubeconfig={kcm_kc}",
                f"--authentication-kubeconfig={kcm_kc}",
                f"--authorization-kubeconfig={kcm_kc}",
                "--secure-port=0",
                "--leader-elect=false",
                "--use-service-account-credentials=true",
                f"--service-account-private-key-file={pki.sa_private_key}",
                f"--root-ca-file={pki.ca_cert}",
                f"--cluster-signing-cert-file={pki.ca_cert}",
                f"--cluster-signing-key-file={pki.ca_key}",
                f"--service-cluster-ip-range={SERVICE_CIDR}",
                # Everything a real cluster runs except cloud and IPAM controllers that need a cloud
                # or a pod network.
                "--controllers=*,-cloud-node-lifecycle-controller,-node-ipam-controller,"
                "-service-lb-controller,-node-route-controller",
                "--concurrent-namespace-syncs=10",
                "--concurrent-gc-syncs=20",
            ],
        )
        self._sup.start(
            "kube-scheduler",
            [
                str(bins.path("kube-scheduler")),
                f"--kubeconfig={sched_kc}",
                f"--authentication-kubeconfig={sched_kc}",
                f"--authorization-kubeconfig={sched_kc}",
                "--secure-port=0",
                "--leader-elect=false",
            ],
        )
        stages = wd / "node-simulator-stages.yaml"
        stages.write_text(_stages_text(cfg.node_status_seconds))
        kwok_argv = [
            str(bins.path("kwok")),
            f"--kubeconfig={sim_kc}",
            f"--config={stages}",
            "--manage-all-nodes=true",
            f"--cidr={POD_CIDR}",
            "--node-lease-duration-seconds=40",
        ]
        if serve_logs:
            assert backend_bins is not None
            kwok_argv += self._kubelet_server(backend_bins, serve_usage, kwok_port)
        else:
            kwok_argv.append("--node-ip=10.89.0.1")
        self._sup.start(
            "kwok",
            kwok_argv,
            # The simulator's field manager and user agent are derived from its program name; as
            # "kubelet" its status writes look like the kubelet's to whoever reads managedFields.
            argv0="kubelet",
        )

        # nodes ---------------------------------------------------------------------------------
        with self.admin_http() as http:
            for i in range(1, cfg.nodes + 1):
                name = f"worker-{i}"
                resp = http.post("/api/v1/nodes", json=_node_manifest(name, i))
                if resp.status_code not in (201, 409):
                    raise SetupError(f"creating node {name} failed: {resp.status_code} {resp.text[:300]}")
                self.nodes.append(name)

            def nodes_ready() -> bool:
                items = http.get("/api/v1/nodes").json()["items"]
                ready = {
                    n["metadata"]["name"]
                    for n in items
                    if any(
                        c["type"] == "Ready" and c["status"] == "True"
                        for c in n.get("status", {}).get("conditions", [])
                    )
                }
                return set(self.nodes) <= ready

            self._sup.wait_until(
                nodes_ready,
                what=f"{cfg.nodes} simulated nodes to be Ready",
                timeout=cfg.ready_timeout,
                owner=self._sup.get("kwok"),
            )

            # The controller manager is ready for workloads once it has created the default service
            # account of the default namespace (pods cannot be admitted without it).
            self._sup.wait_until(
                lambda: http.get("/api/v1/namespaces/default/serviceaccounts/default").status_code == 200,
                what="kube-controller-manager to create the default service account",
                timeout=cfg.ready_timeout,
                owner=self._sup.get("kube-controller-manager"),
            )
        t = self._mark("controllers-and-nodes", t)

        # tool-plane back-ends ------------------------------------------------------------------
        if selected:
            self._start_backends(selected, backend_bins)
            self._mark("backends", t)

    def start_backends(self, names: Iterable[str]) -> dict[str, backends_mod.Backend]:
        """Start more back-ends on the running cluster (those already running are kept); all of them
        are ready on return. "logs" can only be chosen when the cluster starts."""
        selected = backends_mod.with_requirements(names)
        for early in ("logs", "resource-metrics"):
            if early in selected and early not in self.backends:
                raise SetupError(
                    f"the {early} back-end changes how the API server starts: choose it in "
                    "ClusterConfig.backends, not later"
                )
        self._start_backends(selected, None)
        self._save_state()
        return self.backends

    def _start_backends(self, names: tuple[str, ...], bins: backends_mod.BackendBinaries | None) -> None:
        new = [n for n in names if n not in self.backends]
        if not new:
            return
        bins = bins or backends_mod.resolve_binaries(new)
        ctx = backends_mod.BackendContext(
            self, self._sup, bins, timeout=self.config.ready_timeout, running=self.backends
        )
        backends_mod.start(ctx, new)
        for name in new:
            for proc, took in self.backends[name].timings.items():
                self.timings[f"{name}:{proc}"] = took

    def _kubelet_server(
        self, backend_bins: backends_mod.BackendBinaries, serve_usage: bool, kwok_port: int
    ) -> list[str]:
        """The node simulator's options that make it the simulated kubelets (container logs and, with
        ``serve_usage``, resource metrics), after installing the CRDs it reads; sets ``kwok_server``."""
        # The simulator reads ClusterLogs (and ClusterResourceUsage) objects: their CRDs first.
        from oasis_operator.devcluster.stack import install_crd_files

        crds = {"ClusterLogs": "clusterlogs", "ClusterResourceUsage": "clusterresourceusages"}
        kinds = list(simulator_crds(serve_usage))
        with self.admin_http() as http:
            install_crd_files(http, [backend_bins.crd_dir / f"kwok.x-k8s.io_{crds[k]}.yaml" for k in kinds])
        metrics: Path | None = None
        if serve_usage:
            # The resource-metrics endpoint metrics-server scrapes: a Metric in the simulator's
            # configuration, as the chart's simulator reads it (decision 0074).
            metrics = self.workdir / METRICS_CONFIG
            metrics.write_text(metrics_config_text())
        direct = self.config.kubelet_address
        if direct is not None:
            # The chart's options (templates/_backend-logs.tpl), with this address as the pod's.
            self.kwok_server = f"http://{direct}:{KUBELET_PORT}"
            return kubelet_server_args(direct, kinds, str(metrics) if metrics else None)
        self.kwok_server = f"http://127.0.0.1:{kwok_port}"
        return [
            "--node-ip=10.89.0.1",
            f"--server-address=127.0.0.1:{kwok_port}",
            f"--enable-crds={','.join(kinds)}",
            *([f"--config={metrics}"] if metrics is not None else []),
        ]

    def _aggregation_flags(self, endpoint_routing: bool) -> list[str]:
        """The API server's flags for serving aggregated APIs (metrics.k8s.io from metrics-server): the
        front-proxy client identity it presents, and the CA and names it trusts for forwarded users.
        ``endpoint_routing``: call aggregated API servers at their Service's endpoint address (through
        the tunnel); otherwise at the Service itself (an external name, on the direct route)."""
        from oasis_operator.devcluster.certs import issue_client_cert

        assert self.pki is not None
        proxy = issue_client_cert(
            self.pki, "front-proxy-client", "front-proxy-client", None, dt.datetime.now(dt.UTC)
        )
        flags = [
            f"--requestheader-client-ca-file={self.pki.ca_cert}",
            "--requestheader-allowed-names=front-proxy-client",
            "--requestheader-username-headers=X-Remote-User",
            "--requestheader-group-headers=X-Remote-Group",
            "--requestheader-extra-headers-prefix=X-Remote-Extra-",
            f"--proxy-client-cert-file={proxy.cert}",
            f"--proxy-client-key-file={proxy.key}",
        ]
        if endpoint_routing:
            # Call aggregated API servers at their endpoint address (which the tunnel routes), not at
            # the Service's cluster IP (which nothing here implements).
            flags.append("--enable-aggregator-routing=true")
        return flags

    def _kubelet_direct(self, address: str, allowed: bool) -> list[str]:
        """The API server's flags to call the simulated kubelets at ``address`` itself (no egress
        selector, no tunnel): its kubelet client identity, and the node address types in the order
        kubeadm (kind) configures, so it dials the InternalIP the simulator writes."""
        assert self.pki is not None
        if not allowed:
            raise SetupError(
                "kubelet_address is where the simulated kubelets of the logs back-end are served: "
                "choose 'logs' (or 'resource-metrics', which needs it) in ClusterConfig.backends"
            )
        if not ipaddress.ip_address(address).is_loopback:
            raise SetupError(f"kubelet_address {address}: expected a loopback address (127.0.0.0/8)")
        _ensure_port_free(KUBELET_PORT, "simulated kubelets", address)
        return [
            f"--kubelet-client-certificate={self.pki.kubelet_client.cert}",
            f"--kubelet-client-key={self.pki.kubelet_client.key}",
            "--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
        ]

    def _kubelet_tunnel(self, kwok_port: int, serve_usage: bool) -> list[str]:
        """Start the tunnel from the API server to the simulator's kubelet server; the API server's
        flags that use it (egress for the "cluster" network, the kubelet client identity). With
        resource metrics it also carries metrics-server's endpoint and listens on TCP for its scrapes."""
        assert self.pki is not None
        wd = self.workdir
        sock = wd / "kubelet-tunnel.sock"
        if len(str(sock)) > 100:  # a Unix socket path is at most 107 bytes
            sock = Path(tempfile.mkdtemp(prefix="oasis-kt-")) / "kt.sock"
        # Run as a file, not a module of the package: it needs only the standard library, and
        # importing the package would cost it ~20 MiB and a slower start.
        argv = [
            sys.executable,
            str(Path(kubelet_tunnel.__file__)),
            "--socket",
            str(sock),
            "--target",
            f"127.0.0.1:{kwok_port}",
        ]
        if serve_usage:
            from oasis_operator.devcluster.backends.resource_metrics import ENDPOINT_ADDRESS, ENDPOINT_PORT

            self.metrics_server_port, proxy_port = _free_port(), _free_port()
            self.kubelet_proxy = f"http://127.0.0.1:{proxy_port}"
            argv += [
                "--route",
                f"{ENDPOINT_ADDRESS}:{ENDPOINT_PORT}=127.0.0.1:{self.metrics_server_port}",
                "--listen-tcp",
                f"127.0.0.1:{proxy_port}",
            ]
        self._sup.start("kubelet-tunnel", argv)
        self._sup.wait_until(
            sock.exists,
            what="the kubelet tunnel's socket",
            timeout=self.config.ready_timeout,
            owner=self._sup.get("kubelet-tunnel"),
        )
        egress = wd / "egress-selector.yaml"
        egress.write_text(
            yaml.safe_dump(
                {
                    "apiVersion": "apiserver.k8s.io/v1beta1",
                    "kind": "EgressSelectorConfiguration",
                    "egressSelections": [
                        {
                            "name": "cluster",
                            "connection": {
                                "proxyProtocol": "HTTPConnect",
                                "transport": {"uds": {"udsName": str(sock)}},
                            },
                        }
                    ],
                },
                sort_keys=False,
            )
        )
        return [
            f"--egress-selector-config-file={egress}",
            f"--kubelet-client-certificate={self.pki.kubelet_client.cert}",
            f"--kubelet-client-key={self.pki.kubelet_client.key}",
        ]

    # -- clients --------------------------------------------------------------------------------
    def _ssl_context(self, client: ClientCert | None) -> ssl.SSLContext:
        ctx = ssl.create_default_context(cafile=str(self.ca_file))
        if client is not None:
            ctx.load_cert_chain(str(client.cert), str(client.key))
        return ctx

    def admin_http(self, timeout: float = 10.0) -> httpx2.Client:
        """A synchronous HTTP client authenticated as the cluster admin."""
        assert self.pki is not None, "cluster not started"
        return httpx2.Client(base_url=self.server, verify=self._ssl_context(self.pki.admin), timeout=timeout)

    def token_http(self, token: str, timeout: float = 10.0) -> httpx2.Client:
        """A synchronous HTTP client authenticated with a bearer token (e.g. a service account's)."""
        return httpx2.Client(
            base_url=self.server,
            verify=self._ssl_context(None),
            timeout=timeout,
            headers={"Authorization": f"Bearer {token}"},
        )

    def token_kubeconfig(self, path: Path, token: str, namespace: str = "default") -> Path:
        """A kubeconfig for a bearer token (server, CA, token, default namespace)."""
        doc = kubeconfig(self.server, b64_file(self.ca_file), "user", {"token": token}, namespace)
        path.write_text(yaml.safe_dump(doc, sort_keys=False))
        path.chmod(0o600)
        return path

    # -- state ------------------------------------------------------------------------------------
    def state(self) -> ClusterState:
        return ClusterState(
            workdir=str(self.workdir),
            server=self.server,
            kubeconfig=str(self.kubeconfig),
            audit_log=str(self.audit_log),
            ca_file=str(self.ca_file),
            etcd_url=self.etcd_url,
            pids={c.name: c.pid for c in self._sup.components},
            nodes=list(self.nodes),
            started_at=dt.datetime.now(dt.UTC).isoformat(timespec="seconds"),
            backends={name: b.endpoints() for name, b in self.backends.items()},
        )

    def _save_state(self) -> None:
        (self.workdir / STATE_FILE).write_text(json.dumps(asdict(self.state()), indent=2, sort_keys=True))
        if self.backends:
            self.toolplane_file.write_text(json.dumps(self.toolplane(), indent=2, sort_keys=True))

    @property
    def toolplane_file(self) -> Path:
        return self.workdir / TOOLPLANE_FILE

    def toolplane(self) -> dict[str, Any]:
        """What the operator needs to use the running back-ends: per back-end its endpoints and, for
        a back-end that reads files the harness writes (logs), their directory."""
        out: dict[str, Any] = {}
        for name, backend in self.backends.items():
            # Every back-end's files are under backends/<name> (BackendContext.directory).
            out[name] = {"endpoints": backend.endpoints(), "directory": str(self.workdir / "backends" / name)}
        return {"backends": out}

    def alive(self) -> bool:
        """Every process of the cluster (and of its back-ends) still runs."""
        return bool(self._sup.components) and all(c.exited() is None for c in self._sup.components)

    def component_pids(self) -> dict[str, int]:
        return {c.name: c.pid for c in self._sup.components}


def load_state(workdir: Path) -> ClusterState | None:
    try:
        data: dict[str, Any] = json.loads((workdir / STATE_FILE).read_text())
    except (OSError, ValueError):
        return None
    return ClusterState(**data)


def remove_workdir(workdir: Path) -> None:
    shutil.rmtree(workdir, ignore_errors=True)


def _node_manifest(name: str, index: int) -> dict[str, Any]:
    resources_ = {"cpu": "8", "memory": "32Gi", "pods": "110", "ephemeral-storage": "100Gi"}
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {
            "name": name,
            "labels": {
                "kubernetes.io/hostname": name,
                "kubernetes.io/os": "linux",
                "kubernetes.io/arch": "amd64",
                "node.kubernetes.io/instance-type": "standard-8",
                "topology.kubernetes.io/zone": f"zone-{'abc'[(index - 1) % 3]}",
                # The simulated pool, as the chart's nodes: only scenario pods tolerate its taint.
                **POOL_LABEL,
            },
        },
        "spec": {"taints": [dict(POOL_TAINT)]},
        "status": {
            "capacity": resources_,
            "allocatable": resources_,
            "addresses": [
                {"type": "InternalIP", "address": f"10.89.0.{10 + index}"},
                {"type": "Hostname", "address": name},
            ],
        },
    }
