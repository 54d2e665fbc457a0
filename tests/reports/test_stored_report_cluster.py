"""A run's report on the API server, read with kubectl alone (decision 0114): the JSON report and the
JUnit file are plain ``data`` keys of their ConfigMaps; an oversize file falls back to gzipped parts,
which the store and ``oasis report`` still read."""

from __future__ import annotations

import json
import subprocess
from typing import Any

import pytest

from oasis_operator.adapters.k8s.client import async_client
from oasis_operator.adapters.k8s.store import Store
from oasis_operator.cli.main import main
from oasis_operator.core import stored_parts
from oasis_operator.core.reporting.verdict_object import render_json
from oasis_operator.devcluster import binaries, kube, stack
from oasis_operator.reports import FORMATS

pytestmark = pytest.mark.cluster


def kubectl(cluster: Any, *args: str) -> str:
    exe = binaries.resolve(quiet=True).path("kubectl")
    done = subprocess.run(
        [str(exe), "--kubeconfig", str(cluster.kubeconfig), *args], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


async def test_the_report_and_junit_are_plain_keys_and_an_oversize_file_is_gzipped(
    cluster: Any, admin: Any, reports: dict[str, dict[str, Any]], capsys: pytest.CaptureFixture[str]
) -> None:
    report = reports["fail"]  # a real one: the session checks every stored report.json against the schema
    ns = f"stored-{kube.random_suffix(6)}"
    stack.install_crds(admin)
    stack.ensure_namespace(admin, ns)
    run = stack.apply(
        admin,
        {
            "apiVersion": "oasis.dev/v1alpha1",
            "kind": "EvaluationRun",
            "metadata": {"name": "stored"},
            "spec": {
                "profileRef": {"name": "p"},
                "agent": {"adapter": "http", "endpoint": "http://agent"},
                "tier": 1,
                "incomplete": True,
                "scenarios": {"suite": "s"},
            },
        },
        ns,
    )
    client = async_client(cluster.kubeconfig)
    try:
        store = Store(client)
        text = render_json(report)
        json_parts = await store.put_blob(run, "report", "report.json", text.encode())
        junit = FORMATS["junit"].render(report)
        junit_parts = await store.put_blob(run, "report", FORMATS["junit"].file_name, junit.encode())
        big = ("z" * 1023 + "\n") * (stored_parts.PLAIN_LIMIT // 1024 + 1)
        big_parts = await store.put_blob(run, "report", "big.txt", big.encode())
        await store.patch_run_status(
            ns, "stored", {"report": {"configMaps": json_parts, "formats": {"junit": junit_parts}}}
        )

        # Exactly the commands the docs and the CI recipes give.
        name = kubectl(
            cluster,
            "-n",
            ns,
            "get",
            "evaluationrun",
            "stored",
            "-o",
            "jsonpath={.status.report.configMaps[0]}",
        )
        assert (
            kubectl(cluster, "-n", ns, "get", "configmap", name, "-o", r"jsonpath={.data.report\.json}")
            == text
        )
        junit_cm = kubectl(
            cluster,
            "-n",
            ns,
            "get",
            "evaluationrun",
            "stored",
            "-o",
            "jsonpath={.status.report.formats.junit[0]}",
        )
        got = kubectl(
            cluster, "-n", ns, "get", "configmap", junit_cm, "-o", r"jsonpath={.data.report\.junit\.xml}"
        )
        assert got == junit
        assert "<testsuites" in got

        big_cm = admin.get(f"/api/v1/namespaces/{ns}/configmaps/{big_parts[0]}").json()
        assert not big_cm.get("data")
        assert "data.gz" in big_cm["binaryData"]
        assert big_cm["metadata"]["annotations"]["oasis.dev/encoding"] == "gzip"
        assert await store.get_blob(ns, big_parts) == big.encode()
        assert await store.get_blob(ns, json_parts) == text.encode()

        assert (
            main(["report", "stored", "-n", ns, "--kubeconfig", str(cluster.kubeconfig), "--format", "json"])
            == 0
        )
        assert json.loads(capsys.readouterr().out) == report
    finally:
        await client.close()
        kube.delete_namespace(admin, ns)
