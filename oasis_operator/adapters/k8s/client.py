"""Kubernetes API clients for the adapters.

Called by the operator's start-up, the local runner and tests; turns a kubeconfig path into an async
lightkube client, and reads the cluster's server URL and CA from it (agents get kubeconfigs that point
at the same server with the same CA).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import yaml
from lightkube import AsyncClient
from lightkube.config.kubeconfig import KubeConfig


@dataclass(frozen=True)
class ClusterEndpoint:
    server: str
    ca_data: str  # base64 PEM


def async_client(kubeconfig: Path, *, field_manager: str = "kubectl") -> AsyncClient:
    return AsyncClient(KubeConfig.from_file(str(kubeconfig)), field_manager=field_manager)


def endpoint_of(kubeconfig: Path) -> ClusterEndpoint:
    doc = yaml.safe_load(Path(kubeconfig).read_text())
    ctx = next(c["context"] for c in doc["contexts"] if c["name"] == doc["current-context"])
    cluster = next(c["cluster"] for c in doc["clusters"] if c["name"] == ctx["cluster"])
    return ClusterEndpoint(server=cluster["server"], ca_data=cluster["certificate-authority-data"])
