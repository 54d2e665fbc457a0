"""The operator as a process on the session control plane, with the CRDs, the imported SI profile and
the reference agents (careful, reckless) as processes too."""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from oasis_operator.devcluster import kube, stack


@dataclass
class Installation:
    namespace: str
    agents: dict[str, str]
    metrics_port: int
    procs: stack.Processes


@pytest.fixture(scope="module")
def installation(cluster, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Installation]:
    ns = f"evals-{kube.random_suffix()}"
    procs = stack.Processes(tmp_path_factory.mktemp("operator-logs"))
    try:
        with cluster.admin_http() as http:
            stack.install_crds(http)
            stack.ensure_namespace(http, ns)
            stack.import_si_profile(http, ns)
        agents = {p: procs.agent(p) for p in ("careful", "reckless")}
        port = procs.operator(cluster.dev.operator_kubeconfig, cluster.audit_log, namespaces=[ns])
        yield Installation(ns, agents, port, procs)
    finally:
        procs.stop()


def operator_log(inst: Installation) -> Path:
    return inst.procs.sup.log_dir / "operator.log"
