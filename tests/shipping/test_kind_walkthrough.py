"""docs/kind.md, steps 4 to 7, run command by command against the embedded control plane, with the
operator started exactly as the chart's Deployment starts it: its arguments and environment as
installed, its Secret and ServiceAccount token laid out as the kubelet mounts them, the audit stream
arriving over the webhook with step 1's client certificate. Then everything it serves is checked the
way Prometheus and Grafana use it: the metrics endpoint scraped from another address than loopback,
the dashboard's and the alert rules' queries parsed with Prometheus' PromQL parser and every metric
they name found in that scrape.

What cannot run without Docker is replaced, and each replacement is named where it happens:
``kind create cluster`` (the embedded control plane instead), the image (the same program, started
as a process), ``--wait`` and ``rollout status`` (no container runtime: pods stay Pending), the
port-forward (a scrape from the host's address instead), ``git clone`` (the spec checkout next to
the project), the agent's pod (a process on this machine, so the operator is told to allow agent
endpoints on its own addresses), the API server's webhook sender (a forwarder of the audit log, with the same
certificate). The fixed ClusterIP becomes one of the embedded cluster's service range, and the ports
free ones of this machine.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import ssl
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml
from prometheus_client.parser import text_string_to_metric_families

from oasis_operator.adapters.audit.file_tail import AuditFileTail
from oasis_operator.devcluster import binaries, stack
from oasis_operator.devcluster.cluster import SERVICE_CIDR
from tests.addresses import this_hosts_address
from tests.conftest import SPEC_DIR, ClusterHandle
from tests.operator.test_operator_config import kubelet_swap
from tests.shipping.conftest import CHART, REPO, Tools
from tests.shipping.test_kind import bash_blocks, pki  # noqa: F401  (step 1's PKI, run as written)

pytestmark = pytest.mark.cluster

SYSTEM, AGENTS, RELEASE = "oasis-system", "agents", "oasis-operator"
#: The fixed ClusterIP of docs/kind.md (10.96.0.250) moved into the embedded cluster's service range.
CLUSTER_IP = SERVICE_CIDR.rsplit(".", 1)[0] + ".250"


class Shell:
    """Runs a documented command as written, with kubectl, helm and the oasis CLI on PATH and
    KUBECONFIG pointing at the embedded control plane, from a directory laid out as the repo root."""

    def __init__(self, cluster: ClusterHandle, tools: Tools, root: Path) -> None:
        kubectl = binaries.resolve(quiet=True).path("kubectl")
        self.root = root
        self.env = {
            **os.environ,
            "KUBECONFIG": str(cluster.kubeconfig),
            "PATH": os.pathsep.join(
                [
                    str(kubectl.parent),
                    str(tools.helm.parent),
                    str(Path(sys.executable).parent),
                    os.environ.get("PATH", ""),
                ]
            ),
        }

    def __call__(
        self, command: str, *, check: bool = True, stdin: str | None = None, timeout: float = 300
    ) -> subprocess.CompletedProcess[str]:
        done = subprocess.run(
            ["bash", "-euo", "pipefail", "-c", command],
            cwd=self.root,
            env=self.env,
            text=True,
            capture_output=True,
            input=stdin,
            timeout=timeout,
        )
        if check:
            assert done.returncode == 0, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-3000:]}"
        return done


def commands(section: str) -> list[str]:
    """The commands of a section's bash blocks, continuation lines joined, comments dropped."""
    out = []
    for block in bash_blocks(section):
        for line in block.replace("\\\n", " ").splitlines():
            line = re.sub(r"\s+#.*$", "", line).strip()
            if line and not line.startswith("#"):
                out.append(line)
    return out


class AuditForwarder:
    """The API server's audit webhook sender, replaced: new lines of the audit log, posted in batches
    as an ``audit.k8s.io/v1`` EventList over TLS with the API server's client certificate."""

    def __init__(self, log: Path, url: str, pki_dir: Path, server_name: str) -> None:
        self.log, self.url, self.server_name = log, url, server_name
        ctx = ssl.create_default_context(cafile=str(pki_dir / "ca.crt"))
        ctx.load_cert_chain(str(pki_dir / "client.crt"), str(pki_dir / "client.key"))
        self.http = httpx2.Client(verify=ctx, timeout=10)
        # From the end of the log on, through a rotation (the shared test cluster's log rotates at 200 MiB).
        self.tail = AuditFileTail(log, from_start=False)
        self.tail.read_new_raw()
        self.pending: list[dict[str, Any]] = []  # read, not yet accepted by the webhook
        self.sent = self.refused = 0
        self.running = True
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        while self.running:
            self.pending.extend(self.tail.read_new())
            if self.pending:
                items = self.pending[:2000]
                try:
                    r = self.http.post(
                        self.url,
                        json={"kind": "EventList", "apiVersion": "audit.k8s.io/v1", "items": items},
                        extensions={"sni_hostname": self.server_name},
                    )
                    if r.status_code == 200:
                        del self.pending[: len(items)]
                        self.sent += len(items)
                    else:
                        self.refused += 1
                except httpx2.HTTPError:
                    self.refused += 1  # not listening yet: retried, as the API server retries
            time.sleep(0.2)

    def stop(self) -> None:
        self.running = False
        self.thread.join(5)
        self.http.close()


def mount_secret(http: httpx2.Client, namespace: str, name: str, directory: Path) -> None:
    """The Secret laid out as the kubelet mounts a secret volume (..data symlinks)."""
    import base64

    secret = http.get(f"/api/v1/namespaces/{namespace}/secrets/{name}").json()
    directory.mkdir(parents=True)
    kubelet_swap(directory, {k: base64.b64decode(v) for k, v in secret["data"].items()})


def wait_gone(http: httpx2.Client, path: str, timeout: float = 90) -> None:
    deadline = time.monotonic() + timeout
    while http.get(path).status_code != 404:
        assert time.monotonic() < deadline, f"{path} still there"
        time.sleep(0.5)


@pytest.fixture(scope="module")
def walkthrough(
    cluster: ClusterHandle,
    tools: Tools,
    pki: Path,  # noqa: F811
    tmp_path_factory: pytest.TempPathFactory,
) -> Iterator[dict[str, Any]]:
    root = pki.parent.parent  # the directory holding .kind/, laid out as the repository root
    for name in ("charts", "docs", "examples", ".venv"):
        if not (root / name).exists():
            (root / name).symlink_to(REPO / name)
    sh = Shell(cluster, tools, root)
    work = tmp_path_factory.mktemp("pod")
    procs = stack.Processes(work / "logs")
    ports = {k: stack.free_port() for k in ("metrics", "health", "audit")}
    state: dict[str, Any] = {"sh": sh, "ports": ports, "procs": procs, "work": work}
    forwarder: AuditForwarder | None = None
    with cluster.admin_http() as http:
        stack.install_crds(http)  # what the chart's crds.install does; the session shares them
        wait_gone(http, f"/api/v1/namespaces/{SYSTEM}")  # another test's namespace of that name, going away
        try:
            # -- step 4 --------------------------------------------------------------------------------
            install = commands("4.")
            assert install[0] == f"kubectl create namespace {SYSTEM}"
            sh(install[0])
            assert install[1].startswith(f"kubectl -n {SYSTEM} create secret generic {RELEASE}-audit-tls")
            sh(install[1])
            helm = shlex.split(install[2])
            assert helm[:4] == ["helm", "install", RELEASE, "charts/oasis-operator"]
            assert "--wait" in helm
            # No container runtime here: without --wait; the embedded cluster has its own CRDs, node
            # simulator and pool; its service range and this machine's free ports.
            helm = [a for a in helm if a not in ("--wait", "--timeout", "5m")]
            helm = [a.replace("10.96.0.250", CLUSTER_IP) for a in helm]
            helm += [
                "--set",
                "crds.install=false",
                "--set",
                "kwok.enabled=false",
                "--set",
                "nodePool.enabled=false",
                "--set",
                f"metrics.port={ports['metrics']}",
                "--set",
                f"health.port={ports['health']}",
                "--set",
                f"auditWebhook.port={ports['audit']}",
                # Only this walkthrough's namespace: the session's other operators own the rest.
                "--set-json",
                f'operator.extraArgs=["--namespace={AGENTS}"]',
            ]
            state["notes"] = sh(shlex.join(helm)).stdout
            for line in install[3:5]:  # kubectl get nodes -l ..., kubectl -n oasis-system get pods
                state.setdefault("gets", []).append(sh(line).stdout)
            # -- the operator, as the chart's Deployment starts it ----------------------------------
            deployment = http.get(f"/apis/apps/v1/namespaces/{SYSTEM}/deployments/{RELEASE}").json()
            pod = deployment["spec"]["template"]["spec"]
            (container,) = pod["containers"]
            mounts = {m["name"]: m["mountPath"] for m in container["volumeMounts"]}
            local = {mounts["tmp"]: str(work / "tmp"), mounts["audit-tls"]: str(work / "audit-tls")}
            (work / "tmp").mkdir()
            secret = next(v["secret"]["secretName"] for v in pod["volumes"] if v["name"] == "audit-tls")
            mount_secret(http, SYSTEM, secret, work / "audit-tls")
            sa_dir = work / "serviceaccount"
            sa_dir.mkdir()
            token = http.post(
                f"/api/v1/namespaces/{SYSTEM}/serviceaccounts/{pod['serviceAccountName']}/token",
                json={
                    "apiVersion": "authentication.k8s.io/v1",
                    "kind": "TokenRequest",
                    "spec": {"expirationSeconds": 3600},
                },
            ).json()["status"]["token"]
            (sa_dir / "token").write_text(token)
            (sa_dir / "ca.crt").write_bytes(cluster.ca_file.read_bytes())
            (sa_dir / "namespace").write_text(SYSTEM)

            def mapped(text: str) -> str:
                for path, here in local.items():
                    text = text.replace(path, here)
                return text

            args = [mapped(a) for a in container["args"]]
            env = {
                "PATH": os.environ.get("PATH", ""),
                "POD_NAMESPACE": SYSTEM,
                **{e["name"]: mapped(e["value"]) for e in container["env"] if "value" in e},
            }
            host, port = cluster.server.removeprefix("https://").rsplit(":", 1)
            env.update(KUBERNETES_SERVICE_HOST=host, KUBERNETES_SERVICE_PORT=port)
            state["args"], state["env"] = args, env
            comp = procs.sup.start(
                "operator-in-pod",
                [
                    sys.executable,
                    "-m",
                    "oasis_operator.cli",
                    "operator",
                    "run",
                    *args,
                    f"--service-account-dir={sa_dir}",
                    # The agent's pod is a process of this machine here, at one of the operator's own
                    # addresses, which the chart's operator refuses (decision 0099): let those through.
                    "--allow-local-agent-endpoints",
                ],
                env=env,
            )
            state["metrics_url"] = f"http://{this_hosts_address()}:{ports['metrics']}/metrics"
            procs.sup.wait_until(
                lambda: httpx2.get(state["metrics_url"], timeout=1).status_code == 200,
                what="the operator's metrics on the host's address",
                timeout=60,
                owner=comp,
            )
            forwarder = AuditForwarder(
                cluster.audit_log,
                f"https://127.0.0.1:{ports['audit']}/audit",
                pki,
                f"{RELEASE}-audit.{SYSTEM}.svc",
            )
            state["forwarder"] = forwarder
            yield state
        finally:
            if forwarder is not None:
                forwarder.stop()
            procs.stop()
            subprocess.run(
                [
                    str(tools.helm),
                    "uninstall",
                    RELEASE,
                    "-n",
                    SYSTEM,
                    "--kubeconfig",
                    str(cluster.kubeconfig),
                ],
                capture_output=True,
                check=False,
            )
            for ns in (AGENTS, SYSTEM):
                http.delete(f"/api/v1/namespaces/{ns}")


def test_step_4_installs_and_the_operator_starts_from_the_charts_arguments(walkthrough, cluster):
    notes = walkthrough["notes"]
    assert "DEDICATED EVALUATION CLUSTER" in notes
    nodes, pods = walkthrough["gets"]
    assert "Ready" in nodes
    assert "oasis-operator" in pods
    args = walkthrough["args"]
    assert "--metrics-addr=0.0.0.0" in args
    assert not any(a.startswith("--kubeconfig") for a in args), "no kubeconfig: the pod's ServiceAccount"
    assert "KUBECONFIG" not in walkthrough["env"]


def test_steps_5_to_7_a_run_passes_and_kubectl_sees_it(walkthrough, cluster):
    sh = walkthrough["sh"]
    # -- step 5: the spec checkout next to the project stands for `git clone`.
    five = commands("5.")
    assert five[0].startswith("git clone")
    sh(five[1])  # kubectl create namespace agents
    sh(five[2].replace("../oasis-spec", str(SPEC_DIR)))
    listed = sh(five[3]).stdout
    assert "oasis-profile-software-infrastructure" in listed
    # -- step 6: the agent's Deployment cannot start here: the same program runs as a process.
    six = commands("6.")
    sh(six[0])  # kubectl apply -f docs/kind/reference-agent.yaml
    url = walkthrough["procs"].agent("careful")
    run = yaml.safe_load((REPO / "docs" / "kind" / "evaluation-run.yaml").read_text())
    assert six[2] == "kubectl apply -f docs/kind/evaluation-run.yaml"
    run["spec"]["agent"]["endpoint"] = url
    sh("kubectl apply -f -", stdin=yaml.safe_dump(run))
    # -- step 7, as written.
    seven = commands("7.")
    sh(seven[0], timeout=600)  # kubectl wait --for=condition=Completed
    assert "PASS" in sh(seven[1]).stdout
    assert sh(seven[2]).stdout.strip() == "PASS"
    assert "RunCompleted" in sh(seven[3]).stdout
    # The report formats the run asked for are stored; `oasis report` exports one.
    with cluster.admin_http() as http:
        st = http.get(f"/apis/oasis.dev/v1alpha1/namespaces/{AGENTS}/evaluationruns/careful").json()["status"]
    assert set(st["report"]["formats"]) == {"json", "html", "junit"}
    sh("oasis report careful -n agents --format html -o report.html")
    assert "infra.safety.do.unqualified-destruction-001" in (sh.root / "report.html").read_text()
    # Installed with the defaults: the scenario with a PersistentVolume is excluded, and says why.
    excluded = {s["id"]: s.get("reason", "") for s in st["scenarios"] if s["step"] == "Excluded"}
    reason = excluded["infra.safety.do.irreversible-operation-001"]
    assert reason.startswith("needs cluster-scoped PersistentVolume")
    assert "rbac.clusterScopedScenarios" in reason
    assert walkthrough["forwarder"].sent > 0


def test_the_metrics_reach_prometheus_and_the_dashboard_and_alerts_name_real_metrics(
    walkthrough, render, promrules, tools
):
    url = walkthrough["metrics_url"]
    assert not url.startswith("http://127.0.0.1")
    text = httpx2.get(url, timeout=5).text
    samples = {s.name: s for f in text_string_to_metric_families(text) for s in f.samples}
    names = set(samples)
    assert samples["oasis_audit_events_ingested_total"].value > 0, "the webhook stream arrived"
    assert samples["oasis_active_runs"].value == 0, "only unfinished runs are active"
    assert any(
        s.name == "oasis_runs_total" and s.labels == {"verdict": "PASS"} and s.value >= 1
        for f in text_string_to_metric_families(text)
        for s in f.samples
    )
    # Every metric the shipped dashboard queries is one the operator exports.
    dashboard = json.loads((CHART / "dashboards" / "oasis-operator.json").read_text())
    exprs = [
        t["expr"].replace("$__rate_interval", "5m").replace("$__range", "1h").replace("$job", ".*")
        for p in dashboard["panels"]
        for t in p.get("targets", [])
    ]
    parsed = promrules(exprs=exprs)["exprs"]
    assert [e.get("error") for e in parsed] == [None] * len(exprs)
    queried = {m for e in parsed for m in e["metrics"]}
    assert queried, "the dashboard queries metrics"
    assert queried <= names, sorted(queried - names)
    # And every metric the alert rules use (besides Prometheus' own `up`).
    (rule,) = [d for d in render({"prometheusRule": {"enabled": True}}) if d["kind"] == "PrometheusRule"]
    checked = promrules(groups=yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    assert checked["errors"] == []
    alerted = {m for r in checked["rules"] for m in r["metrics"]} - {"up"}
    assert alerted <= names, sorted(alerted - names)


def test_oasis_check_passes_against_the_installed_operator(walkthrough, cluster):
    sh = walkthrough["sh"]
    (check,) = [c for c in commands("4.") if c.startswith(".venv/bin/oasis check")]
    # The operator's metrics Service has no pod behind it here: its address is given instead.
    done = sh(f"{check} --metrics-url {walkthrough['metrics_url']}", check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "may make every request the operator makes" in done.stdout
    assert "may not write cluster-scoped scenario objects" in done.stdout
    assert "events arrive" in done.stdout


def test_a_loopback_bind_is_unreachable_from_the_hosts_address():
    """The negative control of the bind: what the old default (127.0.0.1) did to Prometheus."""
    from prometheus_client import CollectorRegistry, start_http_server

    port = stack.free_port()
    server, thread = start_http_server(port, addr="127.0.0.1", registry=CollectorRegistry())
    try:
        assert httpx2.get(f"http://127.0.0.1:{port}/metrics").status_code == 200
        with pytest.raises(httpx2.ConnectError):
            httpx2.get(f"http://{this_hosts_address()}:{port}/metrics", timeout=2)
    finally:
        server.shutdown()
        thread.join(5)
