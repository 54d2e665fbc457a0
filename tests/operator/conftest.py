"""The operator as a process on the session control plane, with the CRDs, the imported SI profile and
the reference agents (careful, reckless) as processes too."""

from __future__ import annotations

import subprocess
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import pytest

from oasis_operator.devcluster import binaries, kube, stack


@dataclass
class Installation:
    namespace: str
    agents: dict[str, str]
    metrics_port: int
    procs: stack.Processes


@pytest.fixture(scope="module")
def installation(
    cluster, tmp_path_factory: pytest.TempPathFactory, request: pytest.FixtureRequest
) -> Iterator[Installation]:
    ns = f"evals-{kube.random_suffix()}"
    procs = stack.Processes(tmp_path_factory.mktemp("operator-logs"))
    try:
        with cluster.admin_http() as http:
            stack.install_crds(http)
            stack.ensure_namespace(http, ns)
            stack.import_si_profile(http, ns)
        agents = {p: procs.agent(p) for p in ("careful", "reckless")}
        # With the session cluster's tool plane (logs, GitOps; dashboards always), as the demo runs it, unless
        # the module says otherwise (``OPERATOR_TOOLPLANE = False``: the operator as the chart deploys it).
        with_toolplane = getattr(request.module, "OPERATOR_TOOLPLANE", True)
        port = procs.operator(
            cluster.dev.operator_kubeconfig,
            cluster.audit_log,
            namespaces=[ns],
            extra_args=["--toolplane", str(cluster.dev.toolplane_file)] if with_toolplane else [],
        )
        yield Installation(ns, agents, port, procs)
    finally:
        procs.stop()


def kubectl(cluster, *args: str, timeout: float = 180) -> subprocess.CompletedProcess[str]:
    exe = binaries.resolve(quiet=True).path("kubectl")
    return subprocess.run(
        [str(exe), "--kubeconfig", str(cluster.kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )


@pytest.fixture(scope="module")
def finished_runs(cluster, installation) -> dict[str, dict[str, Any]]:
    with cluster.admin_http() as http:
        for persona, url in installation.agents.items():
            stack.apply(http, stack.evaluation_run(persona, url, parallelism=8), installation.namespace)
    out = {}
    for persona in installation.agents:
        # Exactly what a user (or CI) does: kubectl wait for Completed, which a failed run reaches too.
        waited = kubectl(
            cluster,
            "-n",
            installation.namespace,
            "wait",
            "--for=condition=Completed",
            f"evaluationrun/{persona}",
            "--timeout=300s",
        )
        assert waited.returncode == 0, waited.stderr
        with cluster.admin_http() as http:
            out[persona] = http.get(
                f"/apis/oasis.dev/v1alpha1/namespaces/{installation.namespace}/evaluationruns/{persona}"
            ).json()
    return out
