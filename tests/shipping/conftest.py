"""Fixtures of the shipping tests: the tools (helm, kubeconform) and rendering the chart.

``tools`` runs ``tools/install-tools.sh``, which does nothing when the tools are already in the cache
(``make test`` runs it first through the ``tools`` target).
"""

from __future__ import annotations

import contextlib
import hashlib
import json
import os
import subprocess
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml

from oasis_operator.devcluster import ClusterConfig, DevCluster
from oasis_operator.devcluster.cluster import free_kubelet_address
from tests.conftest import ClusterHandle
from tests.shipping import schemas

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "oasis-operator"
NAMESPACE = "oasis-system"
RELEASE = "oasis-operator"
#: The Kubernetes version of the embedded control plane (tools/build-binaries.sh).
KUBE_VERSION = "1.36.3"
#: Kinds of other projects (Prometheus Operator, cert-manager) that neither schemas nor the API server know.
THIRD_PARTY = ("ServiceMonitor", "PrometheusRule", "Certificate", "Issuer")

#: Values turning every optional part on (third-party kinds included), for the checks that can take them.
FULL_VALUES: dict[str, Any] = {
    "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
    "prometheusRule": {"enabled": True, "labels": {"release": "prometheus"}},
    "auditWebhook": {
        "service": {"type": "NodePort", "nodePort": 30843, "clusterIP": "10.96.0.250"},
        "tls": {
            "certManager": {
                "enabled": True,
                "clientCertificate": True,
                "issuerRef": {"name": "audit-ca", "kind": "ClusterIssuer"},
            }
        },
    },
    "rbac": {"clusterScopedScenarios": True},
    "operator": {"allowSubprocessAgents": True, "logFormat": "json"},
    "crds": {"keep": False},
    "toolGateway": {"enabled": True},
    # Every tool-plane back-end the chart can run (decisions 0061, 0070, 0071, 0072).
    "toolPlane": {
        "metrics": {"enabled": True},
        "alerts": {"enabled": True},
        "traces": {"enabled": True},
        "logs": {"enabled": True},
        "database": {"enabled": True},  # decision 0071
        "gitops": {"enabled": True},
    },
}


@dataclass(frozen=True)
class Tools:
    helm: Path
    kubeconform: Path


@pytest.fixture(scope="session")
def tools() -> Tools:
    done = subprocess.run(
        ["bash", str(REPO / "tools" / "install-tools.sh")], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr[-3000:]
    directory = Path(done.stdout.strip().splitlines()[-1])
    return Tools(helm=directory / "helm", kubeconform=directory / "kubeconform")


Render = Callable[..., list[dict[str, Any]]]


def helm_template(
    tools: Tools, tmp: Path, values: dict[str, Any] | None = None, release: str = RELEASE
) -> subprocess.CompletedProcess[str]:
    args = [
        str(tools.helm),
        "template",
        release,
        str(CHART),
        "--namespace",
        NAMESPACE,
        "--kube-version",
        KUBE_VERSION,
    ]
    if values:
        path = tmp / "values.yaml"
        path.write_text(yaml.safe_dump(values))
        args += ["--values", str(path)]
    return subprocess.run(args, capture_output=True, text=True, check=False)


@pytest.fixture
def render(tools: Tools, tmp_path: Path) -> Render:
    """Render the chart with the given values; the documents, in order (empty ones dropped)."""

    def _render(values: dict[str, Any] | None = None) -> list[dict[str, Any]]:
        done = helm_template(tools, tmp_path, values)
        assert done.returncode == 0, done.stderr
        return [d for d in yaml.safe_load_all(done.stdout) if d]

    return _render


def by_kind(docs: list[dict[str, Any]], kind: str) -> list[dict[str, Any]]:
    return [d for d in docs if d["kind"] == kind]


def refused_by_schema(tools: Tools, tmp: Path, values: dict[str, Any], complaint: str) -> None:
    """``helm template`` with ``values`` fails on the values schema, saying ``complaint``."""
    done = helm_template(tools, tmp, values)
    assert done.returncode != 0
    assert "values don't meet the specifications of the schema" in done.stderr
    assert complaint in done.stderr


@contextlib.contextmanager
def direct_dev_cluster(workdir: Path, backends: tuple[str, ...]) -> Iterator[DevCluster]:
    """A control plane whose API server (and metrics-server) reach the simulated kubelets themselves, as
    in the chart: the node simulator serves the kubelet API at a loopback address of its own, with the
    chart's options (``ClusterConfig.kubelet_address``)."""
    dev = DevCluster(
        ClusterConfig(workdir=workdir, nodes=2, backends=backends, kubelet_address=free_kubelet_address())
    )
    dev.start()
    try:
        yield dev
    finally:
        dev.stop()


def argv_of(pid: int) -> list[str]:
    """A local process's command line."""
    return Path(f"/proc/{pid}/cmdline").read_bytes().decode().split("\0")[:-1]


@pytest.fixture(scope="session")
def schema_dir(cluster: ClusterHandle, tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("schemas")
    wanted = {
        ("", "v1", k) for k in ("ConfigMap", "Node", "Service", "ServiceAccount", "Secret", "Namespace")
    } | {
        ("apps", "v1", "Deployment"),
        ("networking.k8s.io", "v1", "NetworkPolicy"),
        ("rbac.authorization.k8s.io", "v1", "ClusterRole"),
        ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding"),
        ("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
    }
    with cluster.admin_http() as http:
        written = schemas.write_api_schemas(http, directory, wanted)
    assert len(written) == len(wanted)
    assert len(schemas.write_crd_schemas(sorted((REPO / "crds").glob("*.yaml")), directory)) == 3
    return directory


def kubeconform(tools: Tools, schema_dir: Path, manifests: str, *extra: str) -> dict[str, Any]:
    done = subprocess.run(
        [
            str(tools.kubeconform),
            "-strict",
            "-summary",
            "-output",
            "json",
            "-schema-location",
            schemas.SCHEMA_LOCATION.format(dir=schema_dir),
            *extra,
            "-",
        ],
        input=manifests,
        capture_output=True,
        text=True,
        check=False,
    )
    report: dict[str, Any] = json.loads(done.stdout)
    report["returncode"] = done.returncode
    return report


def server_side_apply(http: httpx2.Client, doc: dict[str, Any], dry_run: bool = True) -> httpx2.Response:
    group, _, version = doc["apiVersion"].rpartition("/")
    base = f"/apis/{group}/{version}" if group else f"/api/{version}"
    resources = http.get(base).json()["resources"]
    (resource,) = [r for r in resources if r["kind"] == doc["kind"] and "/" not in r["name"]]
    ns = doc["metadata"].get("namespace")
    path = (
        f"{base}/namespaces/{ns}/{resource['name']}"
        if resource["namespaced"]
        else f"{base}/{resource['name']}"
    )
    params = {"fieldManager": "helm", "force": "true"}
    if dry_run:
        params["dryRun"] = "All"
    return http.patch(
        f"{path}/{doc['metadata']['name']}",
        params=params,
        content=json.dumps(doc),
        headers={"Content-Type": "application/apply-patch+yaml"},
    )


def apply_operator_identity(
    admin: httpx2.Client, tools: Tools, tmp: Path, values: dict[str, Any], release: str, home: str
) -> dict[str, Any]:
    """Render the chart as ``release`` with ``values`` and apply, for real, the operator's own
    ServiceAccount, ClusterRole and ClusterRoleBinding (not the node simulator's), its namespace being
    ``home``; the ClusterRole applied."""
    name = f"{release}-oasis-operator"
    done = helm_template(tools, tmp, values, release=release)
    assert done.returncode == 0, done.stderr
    role: dict[str, Any] = {}
    for doc in yaml.safe_load_all(done.stdout):
        if not doc or doc["kind"] not in ("ServiceAccount", "ClusterRole", "ClusterRoleBinding"):
            continue
        if doc["metadata"]["name"] != name:
            continue  # the node simulator's
        if "namespace" in doc["metadata"]:
            doc["metadata"]["namespace"] = home
        for subject in doc.get("subjects", []):
            subject["namespace"] = home
        if doc["kind"] == "ClusterRole":
            role = doc
        resp = server_side_apply(admin, doc, dry_run=False)
        assert resp.status_code in (200, 201), resp.text
    return role


#: The rendered documents, and the API server's answer to each one's server-side apply by (kind, name).
Applied = tuple[list[dict[str, Any]], dict[tuple[str, str], httpx2.Response]]
ApplyChart = Callable[..., Applied]


@pytest.fixture
def apply_chart(cluster: ClusterHandle, tools: Tools, tmp_path: Path, schema_dir: Path) -> ApplyChart:
    """Render the chart with the given values, check every document with kubeconform (``skip``: kinds
    it has no schema for), then server-side apply (dry run) every document in a fresh ``NAMESPACE``
    (deleted afterwards); every object must be accepted. The documents and the answers."""

    def _apply(values: dict[str, Any], skip: tuple[str, ...] = THIRD_PARTY) -> Applied:
        done = helm_template(tools, tmp_path, values)
        assert done.returncode == 0, done.stderr
        docs = [d for d in yaml.safe_load_all(done.stdout) if d]
        report = kubeconform(tools, schema_dir, done.stdout, *(("-skip", ",".join(skip)) if skip else ()))
        problems = [r for r in report["resources"] if r["status"] != "statusValid"]
        assert report["returncode"] == 0, problems
        assert report["summary"]["valid"] == len(docs)
        with cluster.admin_http() as http:
            # Another test of the session may have just deleted the namespace: wait until it is gone.
            deadline = time.monotonic() + 60
            while (
                created := http.post("/api/v1/namespaces", json={"metadata": {"name": NAMESPACE}})
            ).status_code == 409:
                assert time.monotonic() < deadline, "the namespace is still being deleted"
                time.sleep(0.5)
            assert created.status_code == 201, created.text
            try:
                answers = {(d["kind"], d["metadata"]["name"]): server_side_apply(http, d) for d in docs}
            finally:
                http.delete(f"/api/v1/namespaces/{NAMESPACE}")
        refused = {
            k: (r.status_code, r.text[:300]) for k, r in answers.items() if r.status_code not in (200, 201)
        }
        assert refused == {}
        return docs, answers

    return _apply


def go_tool(name: str) -> Path:
    """A small Go program of tests/shipping/<name> (Go modules of the tools it checks against: cel-go,
    cli-utils' kstatus, Prometheus' rulefmt), built once per source version into the tool cache."""
    source = Path(__file__).resolve().parent / name
    digest = hashlib.sha256(
        b"".join(p.read_bytes() for p in sorted(source.iterdir()) if p.is_file())
    ).hexdigest()[:12]
    binary = Path.home() / ".cache" / "oasis-operator" / "tools" / f"{name}-{digest}" / name
    if not binary.exists():
        done = subprocess.run(
            ["go", "build", "-trimpath", "-o", str(binary), "."],
            cwd=source,
            capture_output=True,
            text=True,
            check=False,
            env={**os.environ, "CGO_ENABLED": "0"},
        )
        assert done.returncode == 0, done.stderr[-3000:]
    return binary


def run_go_tool(binary: Path, payload: Any) -> Any:
    done = subprocess.run(
        [str(binary)], input=json.dumps(payload), capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


@pytest.fixture(scope="session")
def kstatus() -> Callable[[list[dict[str, Any]]], list[dict[str, str]]]:
    """kstatus's own Compute (sigs.k8s.io/cli-utils/pkg/kstatus/status) over objects."""
    binary = go_tool("kstatus")
    return lambda objects: list(run_go_tool(binary, objects))


@pytest.fixture(scope="session")
def promrules() -> Callable[..., dict[str, Any]]:
    """Prometheus' rulefmt and PromQL parser: rule groups checked, metric names of expressions."""
    binary = go_tool("promrules")

    def check(groups: str = "", exprs: list[str] | None = None) -> dict[str, Any]:
        return dict(run_go_tool(binary, {"groups": groups, "exprs": exprs or []}))

    return check
