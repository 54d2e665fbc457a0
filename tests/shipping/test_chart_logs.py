"""The chart's logs back-end (decision 0070): the node simulator moves into the operator's pod, shares
the tool-plane volume, and is the simulated nodes' kubelet at the pod's address; the API server reads
a pod's log from it directly, with no tunnel.

What the chart renders is checked as in test_chart_toolplane.py (no image is pulled or run here). The
route itself is shown on a real control plane: the node simulator as a process with the chart's
kubelet-server options (the pod's address replaced by a loopback address of this machine), an API
server with no egress selector and no tunnel, and a log read through ``pods/{name}/log``, audited.
"""

from __future__ import annotations

import datetime as dt
import json
import ssl
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import httpx2
import pytest
import yaml

from oasis_operator.adapters.audit.file_tail import AuditFileTail
from oasis_operator.adapters.toolplane.logs import LogsSettings
from oasis_operator.cli.main import build_parser
from oasis_operator.core.environment.manifests import POOL_TAINT
from oasis_operator.devcluster import DevCluster, kube
from oasis_operator.devcluster import backends as backends_mod
from oasis_operator.devcluster.backends.logs import KUBELET_PORT, LogLine, PodLogsBackend, kubelet_server_args
from oasis_operator.handlers.settings import ToolPlaneSettings
from tests.shipping.conftest import (
    CHART,
    NAMESPACE,
    ApplyChart,
    Render,
    Tools,
    argv_of,
    by_kind,
    direct_dev_cluster,
    helm_template,
    refused_by_schema,
)
from tests.shipping.test_chart_toolplane import containers, mounts, operator_pod, toolplane_file

LOGS_ON: dict[str, Any] = {"toolPlane": {"logs": {"enabled": True}}}
SIMULATOR = "oasis-operator-node-agent"
CLUSTER_LOGS_RULE = {"apiGroups": ["kwok.x-k8s.io"], "resources": ["clusterlogs"]}


def simulator_deployments(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d for d in by_kind(docs, "Deployment") if d["metadata"]["name"] == SIMULATOR]


def rules_of(docs: list[dict[str, Any]], name: str) -> list[dict[str, Any]]:
    (role,) = [r for r in by_kind(docs, "ClusterRole") if r["metadata"]["name"] == name]
    rules: list[dict[str, Any]] = role["rules"]
    return rules


def clusterlogs_verbs(rules: list[dict[str, Any]]) -> set[str]:
    return {
        v
        for r in rules
        if {k: r[k] for k in ("apiGroups", "resources")} == CLUSTER_LOGS_RULE
        for v in r["verbs"]
    }


# --- what the chart renders -------------------------------------------------------------------------


def test_without_logs_the_simulator_keeps_its_own_deployment_and_identity(render: Render) -> None:
    docs = render()
    (deployment,) = simulator_deployments(docs)
    pod = deployment["spec"]["template"]["spec"]
    assert pod["serviceAccountName"] == SIMULATOR
    (agent,) = pod["containers"]
    assert "--server-address=0.0.0.0:10247" in agent["args"]
    assert not [a for a in agent["args"] if a.startswith("--enable-crds")]
    assert "node-agent" not in containers(operator_pod(docs))
    assert clusterlogs_verbs(rules_of(docs, SIMULATOR)) == set()
    assert clusterlogs_verbs(rules_of(docs, "oasis-operator")) == set()
    assert not [c for c in by_kind(docs, "CustomResourceDefinition") if "kwok" in c["metadata"]["name"]]


def test_with_logs_the_simulator_is_a_container_of_the_operators_pod(render: Render) -> None:
    """The same container as the Deployment's, with the kubelet server of the local stack's direct
    route (the same function builds both) at the pod's address, reading the shared volume."""
    alone = simulator_deployments(render())[0]["spec"]["template"]["spec"]["containers"][0]
    docs = render(LOGS_ON)
    assert simulator_deployments(docs) == []
    pod = operator_pod(docs)
    by_name = containers(pod)
    agent = by_name["node-agent"]
    # Everything but the server's options is what the Deployment runs.
    server = ("--node-ip=", "--server-address=", "--enable-crds=")
    assert [a for a in agent["args"] if not a.startswith(server)] == [
        a for a in alone["args"] if not a.startswith(server)
    ]
    assert agent["args"][-3:] == kubelet_server_args("$(POD_IP)")
    assert {e["name"]: e["valueFrom"]["fieldRef"]["fieldPath"] for e in agent["env"]} == {
        "POD_IP": "status.podIP"
    }
    assert agent["ports"] == [{"name": "kubelet", "containerPort": KUBELET_PORT, "protocol": "TCP"}]
    assert agent["readinessProbe"]["httpGet"] == {"path": "/healthz", "port": "kubelet"}
    assert (agent["image"], agent["resources"], agent["securityContext"]) == (
        alone["image"],
        alone["resources"],
        alone["securityContext"],
    )
    # It reads the log files where the operator writes them, and writes nothing there.
    root = {v: p for p, v in mounts(by_name["operator"]).items()}["toolplane"]
    assert mounts(agent)[root] == "toolplane"
    assert [m["readOnly"] for m in agent["volumeMounts"] if m["name"] == "toolplane"] == [True]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts(agent)["/etc/node-agent"]]["configMap"]["name"] == f"{SIMULATOR}-stages"
    assert "emptyDir" in volumes[mounts(agent)["/tmp"]]
    assert pod["securityContext"]["runAsUser"] == 65532
    # A change of the stages restarts the pod, as it restarted the Deployment.
    deployment = next(d for d in by_kind(docs, "Deployment") if d["metadata"]["name"] == "oasis-operator")
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    assert (
        annotations["checksum/stages"]
        == (
            simulator_deployments(render())[0]["spec"]["template"]["metadata"]["annotations"][
                "checksum/stages"
            ]
        )
    )


def test_with_logs_the_simulators_rights_go_to_the_operators_service_account(render: Render) -> None:
    """No ServiceAccount of its own: the simulator's ClusterRole (plus reading ClusterLogs) is bound
    to the operator's, which writes the ClusterLogs objects."""
    docs = render(LOGS_ON)
    assert SIMULATOR not in {s["metadata"]["name"] for s in by_kind(docs, "ServiceAccount")}
    (binding,) = [b for b in by_kind(docs, "ClusterRoleBinding") if b["metadata"]["name"] == SIMULATOR]
    assert binding["roleRef"]["name"] == SIMULATOR
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "oasis-operator", "namespace": NAMESPACE}
    ]
    assert clusterlogs_verbs(rules_of(docs, SIMULATOR)) == {"get", "list", "watch"}
    assert clusterlogs_verbs(rules_of(docs, "oasis-operator")) == {
        "get",
        "list",
        "watch",
        "create",
        "patch",
        "delete",
    }
    # The rest of the simulator's role is what it was.
    without = rules_of(render(), SIMULATOR)
    assert [r for r in rules_of(docs, SIMULATOR) if r["apiGroups"] != ["kwok.x-k8s.io"]] == without


def test_the_rendered_tool_plane_file_names_the_log_directory_the_simulator_reads(
    render: Render, tmp_path: Path
) -> None:
    docs = render(LOGS_ON)
    by_name = containers(operator_pod(docs))
    text = toolplane_file(docs)
    directory = json.loads(text)["backends"]["logs"]["directory"]
    root = {v: p for p, v in mounts(by_name["operator"]).items()}["toolplane"]
    assert directory == f"{root}/logs"
    operator = build_parser().parse_args(["operator", "run", *by_name["operator"]["args"]])
    assert operator.toolplane == "/etc/oasis/toolplane/toolplane.json"
    assert operator.tool_gateway_url
    # The real init container, under a temporary root, then the operator's own settings.
    local_root, local_file = tmp_path / "volume", tmp_path / "toolplane.json"
    local_file.write_text(text.replace(root, str(local_root)))
    prepare = build_parser().parse_args([*by_name["prepare-toolplane"]["command"][1:]])
    prepare.toolplane = str(local_file)
    assert prepare.func(prepare) == 0
    settings = ToolPlaneSettings.load(local_file)
    assert settings.backends == {"logs": LogsSettings(local_root / "logs")}
    assert (local_root / "logs").is_dir()


def test_the_clusterlogs_crd_is_installed_with_the_crds(render: Render) -> None:
    (crd,) = [
        c for c in by_kind(render(LOGS_ON), "CustomResourceDefinition") if "kwok" in c["metadata"]["name"]
    ]
    assert crd["metadata"]["name"] == "clusterlogs.kwok.x-k8s.io"
    assert crd["spec"]["scope"] == "Cluster"
    without = render({**LOGS_ON, "crds": {"install": False}})
    assert not [c for c in by_kind(without, "CustomResourceDefinition")]


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        ({"toolPlane": {"logs": {"enabled": True, "port": 10250}}}, "'port' not allowed"),
        ({"toolPlane": {"logs": {"enabled": "yes"}}}, "/toolPlane/logs/enabled"),
        ({"toolPlane": {"logs": {"enabled": True}}, "kwok": {"enabled": False}}, "/kwok/enabled"),
        ({"toolPlane": {"logs": {"enabled": True, "kubeletFrom": [{}]}}}, "/toolPlane/logs/kubeletFrom/0"),
        (
            {"toolPlane": {"logs": {"enabled": True, "kubeletFrom": [{"ipBlock": {}}]}}},
            "/toolPlane/logs/kubeletFrom/0/ipBlock",
        ),
        (
            {"toolPlane": {"logs": {"enabled": True, "kubeletFrom": [{"cidr": "10.0.0.0/8"}]}}},
            "'cidr' not allowed",
        ),
    ],
)
def test_the_values_schema_refuses_bad_log_values(
    tools: Tools, tmp_path: Path, values: dict[str, Any], complaint: str
) -> None:
    refused_by_schema(tools, tmp_path, values, complaint)


def test_the_kubelet_port_cannot_be_taken_by_another_back_end(tools: Tools, tmp_path: Path) -> None:
    values = {
        "toolPlane": {"logs": {"enabled": True}, "metrics": {"enabled": True, "store": {"port": 10250}}}
    }
    done = helm_template(tools, tmp_path, values)
    assert done.returncode != 0
    assert "is already used in the operator's pod" in done.stderr


# -- who reaches the simulated kubelet ------------------------------------------------------------------
API_SERVER = {"ipBlock": {"cidr": "172.18.0.0/24"}}
METRICS_SERVER = {
    "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kube-system"}},
    "podSelector": {"matchLabels": {"k8s-app": "metrics-server"}},
}


def admitted(policies: list[dict[str, Any]], pod: dict[str, Any], source: dict[str, Any], port: int) -> bool:
    """Whether some policy admits a connection from ``source`` (``ip``, ``namespace`` labels, pod
    ``labels``) to ``port`` of the operator's pod, as a network plugin adds policies up (the chart's
    peers: an ipBlock alone, or label selectors)."""
    import ipaddress

    names = {p["name"]: p["containerPort"] for c in pod["containers"] for p in c.get("ports", [])}

    def labels_match(selector: dict[str, Any], have: dict[str, str]) -> bool:
        assert set(selector) <= {"matchLabels"}, selector
        return selector.get("matchLabels", {}).items() <= have.items()

    def peer_matches(peer: dict[str, Any]) -> bool:
        if "ipBlock" in peer:
            return ipaddress.ip_address(source["ip"]) in ipaddress.ip_network(peer["ipBlock"]["cidr"])
        return labels_match(peer.get("namespaceSelector", {}), source.get("namespace", {})) and labels_match(
            peer.get("podSelector", {}), source.get("labels", {})
        )

    for policy in policies:
        for rule in policy["spec"]["ingress"]:
            ports = {names.get(p["port"], p["port"]) for p in rule.get("ports", [])}
            if rule.get("ports") and port not in ports:
                continue
            if not rule.get("from") or any(peer_matches(peer) for peer in rule["from"]):
                return True
    return False


@pytest.mark.parametrize("gitops", [False, True], ids=["logs alone", "with the GitOps policy"])
def test_kubelet_from_admits_only_its_peers_to_the_kubelet_and_leaves_every_other_port_as_it_was(
    render: Render, gitops: bool
) -> None:
    values: dict[str, Any] = {
        "toolPlane": {
            "logs": {"enabled": True, "kubeletFrom": [API_SERVER, METRICS_SERVER]},
            "resourceUsage": {"enabled": True},
            "gitops": {"enabled": gitops},
        }
    }
    docs = render(values)
    pod = operator_pod(docs)
    policies = by_kind(docs, "NetworkPolicy")
    assert {p["metadata"]["name"] for p in policies} == (
        {"oasis-operator-kubelet", "oasis-operator-git"} if gitops else {"oasis-operator-kubelet"}
    )
    ports = {p["name"]: p["containerPort"] for c in pod["containers"] for p in c.get("ports", [])}
    kubelet = ports.pop("kubelet")
    git = ports.pop("git", None)
    api_server = {"ip": "172.18.0.3"}
    metrics_server = {
        "ip": "10.244.1.7",
        "namespace": {"kubernetes.io/metadata.name": "kube-system"},
        "labels": {"k8s-app": "metrics-server"},
    }
    agent = {
        "ip": "10.244.2.9",
        "namespace": {"kubernetes.io/metadata.name": "shop-1"},
        "labels": {"app": "a"},
    }
    assert admitted(policies, pod, api_server, kubelet)
    assert admitted(policies, pod, metrics_server, kubelet)
    assert not admitted(policies, pod, agent, kubelet)
    assert not admitted(policies, pod, {**metrics_server, "labels": {"k8s-app": "other"}}, kubelet)
    for name, port in ports.items():  # every other port: as open as without the policy
        assert admitted(policies, pod, agent, port), name
    if git is not None:  # the GitOps policy's own rule still holds: the agent never reaches git
        assert not admitted(policies, pod, agent, git)
    # Not set: no kubelet policy, and the GitOps policy leaves the port open as before.
    values["toolPlane"]["logs"]["kubeletFrom"] = []
    docs = render(values)
    policies = by_kind(docs, "NetworkPolicy")
    assert "oasis-operator-kubelet" not in {p["metadata"]["name"] for p in policies}
    if gitops:
        assert admitted(policies, operator_pod(docs), agent, kubelet)


@pytest.mark.cluster
def test_kubeconform_and_the_api_server_accept_the_chart_with_logs(apply_chart: ApplyChart) -> None:
    values = {
        "toolPlane": {
            "logs": {"enabled": True, "kubeletFrom": [API_SERVER, METRICS_SERVER]},
            "metrics": {"enabled": True},
        }
    }
    _, answers = apply_chart(values)
    assert ("NetworkPolicy", "oasis-operator-kubelet") in answers
    applied = answers[("Deployment", "oasis-operator")].json()["spec"]["template"]["spec"]
    assert "node-agent" in [c["name"] for c in applied["containers"]]


# --- the route, on a real control plane --------------------------------------------------------------


@pytest.fixture(scope="module")
def direct(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    """The chart's direct route: the API server reads the simulated pods' logs from the simulator."""
    with direct_dev_cluster(tmp_path_factory.mktemp("direct-kubelet"), ("logs",)) as dev:
        yield dev


def _eventually(check: Any, what: str, timeout: float = 30.0) -> Any:
    deadline = time.monotonic() + timeout
    while not (found := check()):
        assert time.monotonic() < deadline, what
        time.sleep(0.2)
    return found


@pytest.mark.cluster
def test_the_api_server_reads_a_simulated_pods_log_from_the_simulator_directly(direct: DevCluster) -> None:
    address = direct.config.kubelet_address
    assert address is not None
    pids = direct.component_pids()
    # No tunnel and no egress selector: the API server dials the node's address itself.
    assert "kubelet-tunnel" not in pids
    assert not [a for a in argv_of(pids["kube-apiserver"]) if a.startswith("--egress-selector")]
    # The simulator runs with the chart's kubelet-server options (the same function renders them).
    kwok = argv_of(pids["kwok"])
    assert kwok[-3:] == kubelet_server_args(address)
    # It serves TLS there (its built-in certificate), as the API server calls a kubelet.
    tls = ssl.create_default_context()
    tls.check_hostname, tls.verify_mode = False, ssl.CERT_NONE
    assert httpx2.get(f"https://{address}:{KUBELET_PORT}/healthz", verify=tls, timeout=5).status_code == 200

    logs = direct.backends["logs"]
    assert isinstance(logs, PodLogsBackend)
    ns = f"direct-{kube.random_suffix()}"
    t0 = dt.datetime.now(dt.UTC) - dt.timedelta(minutes=2)
    lines = [
        LogLine(t0, "starting on :8080"),
        LogLine(t0 + dt.timedelta(seconds=30), "upstream timed out", "stderr"),
    ]
    before = [LogLine(t0 - dt.timedelta(minutes=5), "panic: out of memory")]
    tail = AuditFileTail(direct.audit_log, from_start=False)
    tail.read_new()
    with direct.admin_http() as http:
        # The nodes' kubelet address is the simulator's (what the chart's --node-ip=$(POD_IP) writes).
        def internal_ips() -> set[str]:
            nodes = http.get("/api/v1/nodes").json()["items"]
            return {
                a["address"]
                for n in nodes
                for a in n["status"].get("addresses", [])
                if a["type"] == "InternalIP"
            }

        _eventually(lambda: internal_ips() == {address}, f"every node's InternalIP to be {address}")
        kube.create_namespace(http, ns)
        try:
            pod = {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "web", "namespace": ns},
                "spec": {
                    "nodeName": direct.nodes[1],
                    "tolerations": [{**POOL_TAINT, "operator": "Equal"}],
                    "containers": [{"name": "app", "image": "registry.example/web:1.0"}],
                },
            }
            assert http.post(f"/api/v1/namespaces/{ns}/pods", json=pod).status_code == 201
            _eventually(
                lambda: (
                    http.get(f"/api/v1/namespaces/{ns}/pods/web").json()["status"].get("phase") == "Running"
                ),
                "the pod to run on its simulated node",
            )
            logs.declare(http, ns, "web", {"app": lines}, previous={"app": before})
            read = f"/api/v1/namespaces/{ns}/pods/web/log"
            resp = _eventually(
                lambda: (r := http.get(read)).status_code == 200 and r.text and r,
                "the declared log to be served",
            )
            assert resp.text.splitlines() == ["starting on :8080", "upstream timed out"]
            assert http.get(read, params={"tailLines": "1"}).text == "upstream timed out\n"
            assert http.get(read, params={"previous": "true"}).text == "panic: out of memory\n"
            stamped = http.get(read, params={"timestamps": "true"}).text.splitlines()
            assert [s.split(" ", 1)[1] for s in stamped] == ["starting on :8080", "upstream timed out"]
            # A pod with no declaration answers an error, not another pod's log.
            assert http.get(f"/api/v1/namespaces/{ns}/pods/absent/log").status_code == 404
        finally:
            logs.forget(http, ns, "web")
            kube.delete_namespace(http, ns)
    # Each read is in the audit log, answered 200, under the reader's name.
    seen: list[dict[str, Any]] = []

    def reads() -> list[dict[str, Any]]:
        seen.extend(tail.read_new())
        return [
            e
            for e in seen
            if e["objectRef"].get("subresource") == "log"
            and e["objectRef"].get("namespace") == ns
            and e["objectRef"].get("name") == "web"
            and e["stage"] == "ResponseComplete"
        ]

    found = _eventually(lambda: len(reads()) >= 4 and reads(), "the four reads in the audit log", 15)
    assert {e["responseStatus"]["code"] for e in found} == {200}
    assert {e["user"]["username"] for e in found} == {"kubernetes-admin"}


@pytest.mark.cluster
def test_the_chart_ships_the_clusterlogs_crd_the_local_stack_installs(direct: DevCluster) -> None:
    """The chart's copy of kwok's ClusterLogs CRD is the one of the kwok module the local stack runs
    (tools/build-backends.sh copies it into the back-ends' directory)."""
    shipped = yaml.safe_load((CHART / "files" / "kwok.x-k8s.io_clusterlogs.yaml").read_text())
    local = backends_mod.resolve_binaries(["logs"]).crd_dir / "kwok.x-k8s.io_clusterlogs.yaml"
    assert shipped == yaml.safe_load(local.read_text())
