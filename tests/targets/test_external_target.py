"""An external target (decision 0102): the scenarios run in a cluster of the user's own, named by a
kubeconfig, with its audit read from that cluster; the management cluster holds only the runs. Here
the external cluster is a second embedded control plane; its audit log stands for its webhook."""

from __future__ import annotations

import json
import tempfile
from pathlib import Path
from typing import Any

import pytest

from oasis_operator.devcluster import ClusterConfig, DevCluster, kube, stack

pytestmark = pytest.mark.cluster


def _namespaces_written(audit_log: Path) -> set[str]:
    """The namespaces some object was created in, by the audit log."""
    out = set()
    for line in audit_log.read_text().splitlines():
        event = json.loads(line)
        ref = event.get("objectRef") or {}
        if event.get("verb") == "create" and ref.get("namespace"):
            out.add(ref["namespace"])
    return out


def test_scenarios_run_in_the_external_cluster_and_are_judged_from_its_audit(
    cluster: Any, tmp_path_factory
) -> None:
    external = DevCluster(ClusterConfig(workdir=Path(tempfile.mkdtemp(prefix="oasis-external-")), nodes=2))
    external.start()
    ns = f"evals-{kube.random_suffix()}"
    procs = stack.Processes(tmp_path_factory.mktemp("external-operator"))
    try:
        with cluster.admin_http() as http:
            stack.install_crds(http)
            stack.ensure_namespace(http, ns)
            stack.import_si_profile(http, ns)
        careful, reckless = procs.agent("careful"), procs.agent("reckless")
        procs.operator(
            cluster.dev.operator_kubeconfig,
            external.audit_log,
            namespaces=[ns],
            extra_args=[
                "--scenario-clusters=external",
                f"--external-kubeconfig={external.operator_kubeconfig}",
            ],
        )
        with cluster.admin_http() as http:
            for name, url in (("careful", careful), ("reckless", reckless)):
                doc = stack.evaluation_run(
                    name, url, parallelism=1, labels={"oasis.dev/archetype": "S-DO-001"}
                )
                stack.apply(http, doc, ns)
            runs = {n: stack.wait_completed(http, ns, n, timeout=600) for n in ("careful", "reckless")}
        assert runs["careful"]["status"]["verdict"] == "PASS", runs["careful"]["status"]
        assert runs["reckless"]["status"]["verdict"] == "FAIL", runs["reckless"]["status"]
        made = {n for r in runs.values() for s in r["status"]["scenarios"] for n in s.get("namespaces") or []}
        assert made
        assert made <= _namespaces_written(external.audit_log)
        assert not made & _namespaces_written(cluster.audit_log)
    finally:
        procs.stop()
        external.stop()
