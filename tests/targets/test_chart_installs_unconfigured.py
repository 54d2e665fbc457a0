"""The chart in targets mode on a management cluster that is configured for nothing (issue 27, decisions
0100 and 0109), live: `helm install` with `scenarioClusters.mode=targets`, no audit webhook, no node
simulator, no simulated pool; the operator started exactly as the chart's Deployment starts it (its
arguments and environment, its ServiceAccount's mounted files, its volumes, the pod's IP). An
EvaluationRun reaches a verdict, nothing of the scenario is created in the management cluster, and
nothing the operator asked there was refused."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import httpx2
import pytest

from oasis_operator.devcluster import binaries, kube, stack
from tests.addresses import this_hosts_address
from tests.conftest import ClusterHandle
from tests.shipping.conftest import CHART, Tools

pytestmark = pytest.mark.cluster

ZONE = "infra.safety.be.zone-violation-001"  # declares the payments namespace


def _helm(tools: Tools, cluster: ClusterHandle, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(tools.helm), *args, "--kubeconfig", str(cluster.kubeconfig)], capture_output=True, text=True
    )


def test_the_chart_in_targets_mode_runs_on_an_unconfigured_cluster_and_a_run_reaches_a_verdict(
    cluster: ClusterHandle, tools: Tools, tmp_path: Path
) -> None:
    suffix = kube.random_suffix()
    release, system, evals = f"tgt-{suffix}", f"oasis-tgt-{suffix}", f"evals-tgt-{suffix}"
    ports = {k: stack.free_port() for k in ("metrics", "health", "gateway")}
    procs = stack.Processes(tmp_path / "logs")
    with cluster.admin_http() as http:
        stack.install_crds(http)  # what crds.install does; the session's tests share the CRDs
        stack.ensure_namespace(http, evals)
        stack.import_si_profile(http, evals)
        try:
            done = _helm(
                tools,
                cluster,
                "install",
                release,
                str(CHART),
                "--namespace",
                system,
                "--create-namespace",
                "--set",
                "scenarioClusters.mode=targets",
                "--set",
                "scenarioClusters.targets.warm=1",
                "--set",
                "scenarioClusters.targets.most=2",
                "--set",
                "scenarioClusters.targets.nodes=1",
                "--set",
                "auditWebhook.enabled=false",
                "--set",
                "kwok.enabled=false",
                "--set",
                "nodePool.enabled=false",
                "--set",
                "crds.install=false",
                "--set",
                f"metrics.port={ports['metrics']}",
                "--set",
                f"health.port={ports['health']}",
                "--set",
                f"toolGateway.port={ports['gateway']}",
                "--set-json",
                f'operator.extraArgs=["--namespace={evals}"]',
            )
            assert done.returncode == 0, done.stderr
            args, env, user = _as_the_pod_starts_it(http, cluster, release, system, tmp_path)
            url = procs.agent("careful")
            comp = procs.sup.start(
                "operator-in-pod",
                [
                    sys.executable,
                    "-m",
                    "oasis_operator.cli",
                    "operator",
                    "run",
                    *args,
                    "--allow-local-agent-endpoints",  # the agent is a process of this machine here
                ],
                env=env,
            )
            procs.sup.wait_until(
                lambda: (
                    httpx2.get(f"http://127.0.0.1:{ports['metrics']}/metrics", timeout=1).status_code == 200
                ),
                what="the operator's metrics",
                timeout=90,
                owner=comp,
            )
            stack.apply(
                http,
                stack.evaluation_run("chart", url, parallelism=1, labels={"oasis.dev/archetype": "S-BE-001"}),
                evals,
            )
            run = stack.wait_completed(http, evals, "chart", timeout=900)
            (entry,) = [s for s in run["status"]["scenarios"] if s["id"] == ZONE]
            assert entry["verdict"] == "PASS", entry
            assert run["status"]["verdict"] == "PASS", run["status"]
            # The scenario ran in a target: nothing of it in the management cluster.
            assert http.get("/api/v1/namespaces/payments").status_code == 404
            refused = _refused(cluster, user)
            assert refused == [], refused
        finally:
            procs.stop()
            _helm(tools, cluster, "uninstall", release, "--namespace", system)
            for ns in (system, evals):
                http.delete(f"/api/v1/namespaces/{ns}")


def _as_the_pod_starts_it(
    http: httpx2.Client, cluster: ClusterHandle, release: str, system: str, tmp_path: Path
) -> tuple[list[str], dict[str, str], str]:
    """The operator container's arguments and environment as its Deployment gives them, with its
    volumes mapped to directories here, its ServiceAccount's mounted files (``--service-account-dir``,
    as the pod reads them), the pod IP and what the image sets; and the ServiceAccount's user name."""
    name = f"{release}-oasis-operator"
    deployment = http.get(f"/apis/apps/v1/namespaces/{system}/deployments/{name}").json()
    pod = deployment["spec"]["template"]["spec"]
    (container,) = [c for c in pod["containers"] if c["name"] == "operator"]
    mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
    local = {mounts[v]: str(tmp_path / v) for v in ("tmp", "targets")}
    for directory in local.values():
        Path(directory).mkdir()
    sa_dir = tmp_path / "serviceaccount"
    sa_dir.mkdir()
    (sa_dir / "token").write_text(kube.request_token(http, system, pod["serviceAccountName"], 3600))
    (sa_dir / "ca.crt").write_bytes(cluster.ca_file.read_bytes())
    (sa_dir / "namespace").write_text(system)

    def mapped(text: str) -> str:
        for path, here in local.items():
            text = text.replace(path, here)
        return text

    address = this_hosts_address()
    # What the image sets (its ENV): where the control plane's binaries are.
    image_bins = binaries.resolve().path("kube-apiserver").parent
    env = {
        "PATH": os.environ.get("PATH", ""),
        "POD_NAMESPACE": system,
        "OASIS_BIN_DIR": str(image_bins),
    }
    for e in container["env"]:
        if "value" in e:
            env[e["name"]] = mapped(e["value"])
        elif e["valueFrom"].get("fieldRef", {}).get("fieldPath") == "status.podIP":
            env[e["name"]] = address
    host, port = cluster.server.removeprefix("https://").rsplit(":", 1)
    env.update(KUBERNETES_SERVICE_HOST=host, KUBERNETES_SERVICE_PORT=port)
    args = [*(mapped(a) for a in container["args"]), f"--service-account-dir={sa_dir}"]
    assert "--scenario-clusters=targets" in args
    assert not [a for a in args if a.startswith(("--audit", "--kubeconfig", "--node-selector"))], args
    return args, env, f"system:serviceaccount:{system}:{pod['serviceAccountName']}"


def _refused(cluster: ClusterHandle, user: str) -> list[tuple[str, str]]:
    """What the management API server refused ``user`` (403), from its audit log."""
    out: set[tuple[str, str]] = set()
    for path in sorted(cluster.audit_log.parent.glob("audit*.log")):
        for line in path.read_bytes().splitlines():
            if user.encode() not in line:
                continue
            e: dict[str, Any] = json.loads(line)
            if e.get("user", {}).get("username") == user and e.get("responseStatus", {}).get("code") == 403:
                out.add((e["verb"], e.get("requestURI", "")))
    return sorted(out)
