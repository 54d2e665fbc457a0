"""Resource usage of simulated pods and nodes (``kubectl top``, the HorizontalPodAutoscaler's CPU and
memory metrics): metrics-server, registered as the ``metrics.k8s.io`` aggregated API, scraping the
kubelet resource-metrics endpoint that the node simulator (kwok) computes from declared usage.

Called by :mod:`oasis_operator.devcluster.backends`. Like pod logs, this shapes how the cluster
starts (so it must be chosen in ``ClusterConfig.backends``): the API server gets the aggregation
layer's flags, kwok reads ``ClusterResourceUsage`` objects and serves the resource-metrics ``Metric``
of its configuration (``node-simulator-metrics.yaml``), and the kubelet tunnel carries both the API
server's calls to metrics-server (an endpoint address routed to the local process) and
metrics-server's scrapes of the kubelets (it reaches them through the tunnel as an HTTPS proxy, so
node addresses stay ordinary). With ``ClusterConfig.kubelet_address`` there is no tunnel: the API
server calls metrics-server at its Service's external name (``localhost``), and metrics-server
scrapes the simulator at the nodes' InternalIP, as a cluster's own metrics-server scrapes the Helm
chart's simulator (:data:`KUBELET_SCRAPE_ARGS`, decision 0074). The harness declares a pod's usage with a cluster-scoped
``ClusterResourceUsage`` (out of a namespaced agent's sight); the agent reads it through the API
server (``/apis/metrics.k8s.io``), audited like any read.
"""

from __future__ import annotations

import datetime as dt
import json
import time
from collections.abc import Mapping
from typing import Any

import httpx2

from oasis_operator.adapters.plumbing.apply import server_side_apply_sync
from oasis_operator.core.toolplane.usage import METRICS_PATH_ANNOTATION, NODE_CPU_OVERHEAD, metrics_path
from oasis_operator.devcluster.backends.base import Backend, BackendContext
from oasis_operator.devcluster.errors import SetupError

# Where the API server believes metrics-server runs (a pod address in the pod range); the tunnel
# joins it to the local process.
ENDPOINT_ADDRESS = "10.244.255.10"
ENDPOINT_PORT = 4443
USER = "system:serviceaccount:kube-system:metrics-server"
CLUSTER_USAGES = "/apis/kwok.x-k8s.io/v1alpha1/clusterresourceusages"
FIELD_MANAGER = "oasis-resource-usage"
# metrics-server reads a node's resource-metrics path from this annotation (it exists for simulators);
# kwok serves each node's endpoint under the node's name.
PATH_ANNOTATION = METRICS_PATH_ANNOTATION
#: How a metrics-server scrapes simulated kubelets served at the nodes' InternalIP (the Helm chart's
#: simulator, the local stack's direct route): without verifying kwok's built-in certificate, at the
#: InternalIP (the only address the simulated nodes report, listed first in case others are added). The
#: chart's README asks the same of a cluster's own metrics-server.
KUBELET_SCRAPE_ARGS = (
    "--kubelet-insecure-tls",
    "--kubelet-preferred-address-types=InternalIP,ExternalIP,Hostname",
)


def with_node_overhead(metric: dict[str, Any]) -> dict[str, Any]:
    """kwok's resource-metrics ``Metric`` with each node's CPU counter raised by the overhead the node
    carries in its annotation (cores; decision 0065): the node's rate is its pods' plus its own share."""
    key = NODE_CPU_OVERHEAD
    extra = (
        f'("{key}" in node.metadata.annotations ? '
        f'double(node.metadata.annotations["{key}"]) * node.SinceSecond() : 0.0)'
    )
    for m in metric["spec"]["metrics"]:
        if m["name"] == "node_cpu_usage_seconds_total":
            m["value"] = f"{m['value']} + {extra}"
            return metric
    raise SetupError("kwok's resource-metrics Metric has no node_cpu_usage_seconds_total")


def _apply(http: httpx2.Client, path: str, doc: dict[str, Any]) -> None:
    refused = server_side_apply_sync(http, path, doc, FIELD_MANAGER)
    if refused:
        raise SetupError(f"applying {doc['kind']} {doc['metadata']['name']}: {refused}")


class ResourceMetricsBackend(Backend):
    name = "resource-metrics"
    components = ("metrics-server",)
    # The simulated kubelet API and the tunnel come with the logs back-end.
    requires = ("logs",)

    def __init__(self) -> None:
        super().__init__()
        self.url = ""

    def start(self, ctx: BackendContext) -> None:
        from oasis_operator.devcluster.certs import issue_client_cert, write_kubeconfig

        cluster = ctx.cluster
        assert cluster.pki is not None
        direct = cluster.kubelet_address is not None
        if not cluster.metrics_server_port or not (direct or cluster.kubelet_proxy):
            raise SetupError("the resource-metrics back-end must be chosen when the cluster starts")
        d = ctx.directory(self.name)
        with cluster.admin_http() as http:
            self._register_service(http, cluster.metrics_server_port if direct else None)
            for node in http.get("/api/v1/nodes").json()["items"]:
                self.annotate_node(http, node["metadata"]["name"])
        cert = issue_client_cert(
            cluster.pki, "metrics-server", USER, "system:masters", dt.datetime.now(dt.UTC)
        )
        kc = write_kubeconfig(
            d / "metrics-server.kubeconfig", cluster.server, cluster.ca_file, "metrics-server", cert
        )
        port = cluster.metrics_server_port
        self.url = f"https://127.0.0.1:{port}"
        self._run(
            ctx,
            "metrics-server",
            [
                str(ctx.bins.path("metrics-server")),
                f"--kubeconfig={kc}",
                f"--authentication-kubeconfig={kc}",
                f"--authorization-kubeconfig={kc}",
                "--bind-address=127.0.0.1",
                f"--secure-port={port}",
                f"--cert-dir={d / 'certs'}",
                # Kubelet serving certificates are not verified (as the API server does not verify them).
                *(
                    KUBELET_SCRAPE_ARGS
                    if direct
                    else ("--kubelet-insecure-tls", "--kubelet-preferred-address-types=Hostname,InternalIP")
                ),
                "--metric-resolution=10s",
                "--kubelet-request-timeout=5s",
            ],
            lambda: httpx2.get(f"{self.url}/livez", verify=False, timeout=2).status_code == 200,
            "metrics-server /livez",
            # Through the tunnel (an HTTPS proxy); directly, no proxy at all.
            env=None if direct else {"HTTPS_PROXY": cluster.kubelet_proxy, "NO_PROXY": "127.0.0.1,localhost"},
        )
        t0 = time.monotonic()
        with cluster.admin_http() as http:
            ctx.supervisor.wait_until(
                lambda: _available(http),
                what="the metrics.k8s.io API to be Available",
                timeout=ctx.timeout,
                owner=self.processes[-1],
            )
        self.timings["metrics.k8s.io available"] = time.monotonic() - t0

    def _register_service(self, http: httpx2.Client, direct_port: int | None) -> None:
        """``direct_port``: metrics-server's port on this machine when there is no tunnel (None: the tunnel)."""
        ns = "kube-system"
        labels = {"k8s-app": "metrics-server"}
        if direct_port is not None:
            # No tunnel to route an endpoint address, and an Endpoints address may not be a loopback one:
            # the aggregator (without endpoint routing) calls an ExternalName Service at its name and
            # the APIService's port, which is metrics-server's own on this machine.
            _apply(
                http,
                f"/api/v1/namespaces/{ns}/services/metrics-server",
                {
                    "apiVersion": "v1",
                    "kind": "Service",
                    "metadata": {"name": "metrics-server", "namespace": ns, "labels": labels},
                    "spec": {"type": "ExternalName", "externalName": "localhost"},
                },
            )
        else:
            self._register_endpoints(http, ns, labels)
        _apply(
            http,
            "/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.metrics.k8s.io",
            {
                "apiVersion": "apiregistration.k8s.io/v1",
                "kind": "APIService",
                "metadata": {"name": "v1beta1.metrics.k8s.io", "labels": labels},
                "spec": {
                    "service": {"name": "metrics-server", "namespace": ns, "port": direct_port or 443},
                    "group": "metrics.k8s.io",
                    "version": "v1beta1",
                    "insecureSkipTLSVerify": True,
                    "groupPriorityMinimum": 100,
                    "versionPriority": 100,
                },
            },
        )

    def _register_endpoints(self, http: httpx2.Client, ns: str, labels: dict[str, str]) -> None:
        _apply(
            http,
            f"/api/v1/namespaces/{ns}/services/metrics-server",
            {
                "apiVersion": "v1",
                "kind": "Service",
                "metadata": {"name": "metrics-server", "namespace": ns, "labels": labels},
                "spec": {
                    "ports": [{"name": "https", "port": 443, "protocol": "TCP", "targetPort": ENDPOINT_PORT}]
                },
            },
        )
        # A Service without a selector: its endpoints are ours (mirrored into an EndpointSlice).
        _apply(
            http,
            f"/api/v1/namespaces/{ns}/endpoints/metrics-server",
            {
                "apiVersion": "v1",
                "kind": "Endpoints",
                "metadata": {"name": "metrics-server", "namespace": ns, "labels": labels},
                "subsets": [
                    {
                        "addresses": [{"ip": ENDPOINT_ADDRESS}],
                        "ports": [{"name": "https", "port": ENDPOINT_PORT, "protocol": "TCP"}],
                    }
                ],
            },
        )

    def endpoints(self) -> dict[str, str]:
        return {"metrics-server": self.url}

    # -- the harness side -------------------------------------------------------------------------
    def annotate_node(self, http: httpx2.Client, node: str) -> None:
        """Point metrics-server at ``node``'s endpoint on the simulator (for nodes created later)."""
        body = {"metadata": {"annotations": {PATH_ANNOTATION: metrics_path(node)}}}
        resp = http.patch(
            f"/api/v1/nodes/{node}",
            content=json.dumps(body),
            headers={"Content-Type": "application/merge-patch+json"},
        )
        if resp.status_code != 200:
            raise SetupError(f"annotating node {node}: HTTP {resp.status_code}: {resp.text[:300]}")

    def declare_usage(
        self,
        http: httpx2.Client,
        namespace: str,
        pod: str | None,
        containers: Mapping[str, Mapping[str, str]],
    ) -> None:
        """Set the usage of ``pod``'s containers (container -> {"cpu": "250m", "memory": "300Mi"}); with
        ``pod=None``, of every pod of the namespace that has such containers (a Deployment's replicas).
        Declare a namespace either way, not both (kwok takes the first declaration that matches)."""
        name = f"{namespace}.{pod}" if pod else namespace
        selector: dict[str, list[str]] = {"matchNamespaces": [namespace]}
        if pod:
            selector["matchNames"] = [pod]
        doc = {
            "apiVersion": "kwok.x-k8s.io/v1alpha1",
            "kind": "ClusterResourceUsage",
            "metadata": {"name": name},
            "spec": {
                "selector": selector,
                "usages": [
                    {"containers": [c], "usage": {k: {"value": v} for k, v in usage.items()}}
                    for c, usage in containers.items()
                ],
            },
        }
        _apply(http, f"{CLUSTER_USAGES}/{name}", doc)


def _available(http: httpx2.Client) -> bool:
    svc = http.get("/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.metrics.k8s.io").json()
    conds = (svc.get("status") or {}).get("conditions") or []
    return any(c["type"] == "Available" and c["status"] == "True" for c in conds)
