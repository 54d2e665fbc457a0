"""Fixtures of the shipping tests: the tools (helm, kubeconform) and rendering the chart.

``tools`` runs ``tools/install-tools.sh``, which does nothing when the tools are already in the cache
(``make test`` runs it first through the ``tools`` target).
"""

from __future__ import annotations

import subprocess
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.conftest import ClusterHandle
from tests.shipping import schemas

REPO = Path(__file__).resolve().parents[2]
CHART = REPO / "charts" / "oasis-operator"
NAMESPACE = "oasis-system"
RELEASE = "oasis-operator"
#: The Kubernetes version of the embedded control plane (tools/build-binaries.sh).
KUBE_VERSION = "1.36.3"

#: Values turning every optional part on (third-party kinds included), for the checks that can take them.
FULL_VALUES: dict[str, Any] = {
    "serviceMonitor": {"enabled": True, "labels": {"release": "prometheus"}},
    "auditWebhook": {
        "service": {"type": "NodePort", "nodePort": 30843, "clusterIP": "10.96.0.250"},
        "tls": {"certManager": {"enabled": True}},
    },
    "nodePool": {
        "taints": [{"key": "node.platform.k8s.io/pool", "value": "standard", "effect": "NoSchedule"}]
    },
    "crds": {"keep": False},
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


@pytest.fixture(scope="session")
def schema_dir(cluster: ClusterHandle, tmp_path_factory: pytest.TempPathFactory) -> Path:
    directory = tmp_path_factory.mktemp("schemas")
    wanted = {
        ("", "v1", k) for k in ("ConfigMap", "Node", "Service", "ServiceAccount", "Secret", "Namespace")
    } | {
        ("apps", "v1", "Deployment"),
        ("rbac.authorization.k8s.io", "v1", "ClusterRole"),
        ("rbac.authorization.k8s.io", "v1", "ClusterRoleBinding"),
        ("apiextensions.k8s.io", "v1", "CustomResourceDefinition"),
    }
    with cluster.admin_http() as http:
        written = schemas.write_api_schemas(http, directory, wanted)
    assert len(written) == len(wanted)
    assert len(schemas.write_crd_schemas(sorted((REPO / "crds").glob("*.yaml")), directory)) == 3
    return directory
