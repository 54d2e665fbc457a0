"""The chart's resource-usage back-end (decision 0074): the node simulator of ``toolPlane.logs`` also
serves every simulated node's resource metrics at the operator pod's address, from the usage the
operator declares in kwok's ClusterResourceUsage objects; the cluster's own metrics-server scrapes it.

What the chart renders is checked as in test_chart_toolplane.py (no image is pulled or run here). The
route itself is shown on a real control plane: the node simulator as a process with the chart's
options (the pod's address replaced by a loopback address of this machine), metrics-server scraping it
there with no tunnel and no proxy, and the operator's usage adapter, holding only the chart's
ClusterRole, declaring and reading back the usage of a provisioned scenario through ``metrics.k8s.io``.
"""

from __future__ import annotations

import copy
import json
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from oasis_operator.adapters.k8s.client import async_client, async_http, endpoint_of
from oasis_operator.adapters.k8s.environment import KubeEnvironment
from oasis_operator.adapters.toolplane import Cluster, tool_plane
from oasis_operator.adapters.toolplane.logs import LogsSettings
from oasis_operator.adapters.toolplane.usage import CLUSTER_USAGES, ResourceUsage, UsageSettings
from oasis_operator.cli.main import build_parser
from oasis_operator.core.environment.naming import owner_value
from oasis_operator.core.environment.plan import EnvironmentPlan, plan_environment
from oasis_operator.core.errors import ToolPlaneError
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.core.toolplane.usage import METRICS_PATH_ANNOTATION, metrics_path, object_name, parse
from oasis_operator.devcluster import DevCluster, kube
from oasis_operator.devcluster import backends as backends_mod
from oasis_operator.devcluster.backends.logs import (
    METRICS_CONFIG,
    kubelet_server_args,
    simulator_crds,
)
from oasis_operator.devcluster.backends.resource_metrics import KUBELET_SCRAPE_ARGS, with_node_overhead
from oasis_operator.devcluster.cluster import metrics_config_text
from oasis_operator.handlers.settings import ToolPlaneSettings
from tests.shipping.conftest import (
    CHART,
    ApplyChart,
    Render,
    Tools,
    apply_operator_identity,
    argv_of,
    by_kind,
    direct_dev_cluster,
    refused_by_schema,
    server_side_apply,
)
from tests.shipping.test_chart_logs import SIMULATOR, rules_of
from tests.shipping.test_chart_toolplane import containers, mounts, operator_pod, toolplane_file

LOGS_ON: dict[str, Any] = {"toolPlane": {"logs": {"enabled": True}}}
USAGE_ON: dict[str, Any] = {"toolPlane": {"logs": {"enabled": True}, "resourceUsage": {"enabled": True}}}
#: Where the chart mounts the simulator's ConfigMap (its stages and, with usage, its Metric).
SIMULATOR_CONFIG = "/etc/node-agent"
USAGES = "clusterresourceusages"


def verbs_on(rules: list[dict[str, Any]], group: str, resource: str) -> set[str]:
    return {v for r in rules if group in r["apiGroups"] and resource in r["resources"] for v in r["verbs"]}


def simulator_container(docs: list[dict[str, Any]]) -> dict[str, Any]:
    return containers(operator_pod(docs))["node-agent"]


# --- what the chart renders -------------------------------------------------------------------------


def test_without_resource_usage_nothing_of_it_is_rendered(render: Render) -> None:
    for docs in (render(), render(LOGS_ON)):
        operator = rules_of(docs, "oasis-operator")
        assert verbs_on(operator, "kwok.x-k8s.io", USAGES) == set()
        assert verbs_on(operator, "metrics.k8s.io", "pods") == set()
        assert verbs_on(rules_of(docs, SIMULATOR), "kwok.x-k8s.io", USAGES) == set()
        for node in by_kind(docs, "Node"):
            assert METRICS_PATH_ANNOTATION not in (node["metadata"].get("annotations") or {})
        (stages,) = [c for c in by_kind(docs, "ConfigMap") if c["metadata"]["name"] == f"{SIMULATOR}-stages"]
        assert set(stages["data"]) == {"stages.yaml"}
        assert "clusterresourceusages.kwok.x-k8s.io" not in {
            c["metadata"]["name"] for c in by_kind(docs, "CustomResourceDefinition")
        }
    assert "resource-metrics" not in json.loads(toolplane_file(render(LOGS_ON)))["backends"]


def test_the_simulator_serves_resource_metrics_with_the_local_stacks_options(render: Render) -> None:
    """The logs sidecar, plus the usage CRD and the Metric configuration, built by the function the
    local stack's direct route starts kwok with."""
    logs_only = simulator_container(render(LOGS_ON))
    docs = render(USAGE_ON)
    agent = simulator_container(docs)
    expected = kubelet_server_args("$(POD_IP)", simulator_crds(True), f"{SIMULATOR_CONFIG}/{METRICS_CONFIG}")
    assert agent["args"][-4:] == expected
    assert expected[2] == "--enable-crds=ClusterLogs,ClusterResourceUsage"
    # Everything before the kubelet's options is what the logs sidecar runs.
    assert agent["args"][:-4] == logs_only["args"][:-3]
    assert logs_only["args"][-3:] == kubelet_server_args("$(POD_IP)")
    # The Metric is read from the simulator's ConfigMap, mounted where the option names it.
    pod = operator_pod(docs)
    volumes = {v["name"]: v for v in pod["volumes"]}
    configmap = volumes[mounts(agent)[SIMULATOR_CONFIG]]["configMap"]["name"]
    (stages,) = [c for c in by_kind(docs, "ConfigMap") if c["metadata"]["name"] == configmap]
    assert stages["data"][METRICS_CONFIG] == metrics_config_text()
    assert (CHART / "files" / METRICS_CONFIG).read_text() == metrics_config_text()
    # A change of the Metric restarts the pod.
    deployment = next(d for d in by_kind(docs, "Deployment") if d["metadata"]["name"] == "oasis-operator")
    assert "checksum/simulator-metrics" in deployment["spec"]["template"]["metadata"]["annotations"]


def test_the_pools_nodes_name_their_metrics_path(render: Render) -> None:
    nodes = by_kind(render(USAGE_ON), "Node")
    assert nodes
    for node in nodes:
        name = node["metadata"]["name"]
        assert node["metadata"]["annotations"] == {METRICS_PATH_ANNOTATION: metrics_path(name)}


def test_the_rights_are_what_the_usage_adapter_and_the_simulator_use(render: Render) -> None:
    """The operator writes ClusterResourceUsage objects with server-side apply (create, patch), deletes
    them, and reads pod and node metrics by name; the simulator lists and watches the objects. Nothing
    else changes in either role."""
    logs_only, docs = render(LOGS_ON), render(USAGE_ON)
    operator = rules_of(docs, "oasis-operator")
    assert verbs_on(operator, "kwok.x-k8s.io", USAGES) == {"create", "patch", "delete"}
    assert verbs_on(operator, "metrics.k8s.io", "pods") == {"get"}
    assert verbs_on(operator, "metrics.k8s.io", "nodes") == {"get"}
    added = [r for r in operator if r not in rules_of(logs_only, "oasis-operator")]
    assert added == [
        {"apiGroups": ["kwok.x-k8s.io"], "resources": [USAGES], "verbs": ["create", "patch", "delete"]},
        {"apiGroups": ["metrics.k8s.io"], "resources": ["pods", "nodes"], "verbs": ["get"]},
    ]
    simulator = rules_of(docs, SIMULATOR)
    assert [r for r in simulator if r not in rules_of(logs_only, SIMULATOR)] == [
        {"apiGroups": ["kwok.x-k8s.io"], "resources": [USAGES], "verbs": ["list", "watch"]}
    ]


def test_the_rendered_tool_plane_file_turns_the_usage_adapter_on(render: Render, tmp_path: Path) -> None:
    docs = render(USAGE_ON)
    by_name = containers(operator_pod(docs))
    text = toolplane_file(docs)
    root = {v: p for p, v in mounts(by_name["operator"]).items()}["toolplane"]
    assert json.loads(text)["backends"]["resource-metrics"] == {
        "directory": f"{root}/resource-metrics",
        "endpoints": {},
    }
    local_root, local_file = tmp_path / "volume", tmp_path / "toolplane.json"
    local_file.write_text(text.replace(root, str(local_root)))
    prepare = build_parser().parse_args([*by_name["prepare-toolplane"]["command"][1:]])
    prepare.toolplane = str(local_file)
    assert prepare.func(prepare) == 0
    settings = ToolPlaneSettings.load(local_file)
    assert settings.of(UsageSettings) == UsageSettings()
    assert settings.of(LogsSettings) == LogsSettings(local_root / "logs")


def test_the_usage_crd_is_installed_with_the_crds(render: Render) -> None:
    names = {c["metadata"]["name"] for c in by_kind(render(USAGE_ON), "CustomResourceDefinition")}
    assert {"clusterlogs.kwok.x-k8s.io", "clusterresourceusages.kwok.x-k8s.io"} <= names
    assert "metrics.kwok.x-k8s.io" not in names  # the Metric is configuration, not an object
    without = render({**USAGE_ON, "crds": {"install": False}})
    assert by_kind(without, "CustomResourceDefinition") == []


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        ({"toolPlane": {"resourceUsage": {"enabled": True}}}, "/toolPlane/logs/enabled"),
        ({**USAGE_ON, "kwok": {"enabled": False}}, "/kwok/enabled"),
        ({"toolPlane": {"resourceUsage": {"enabled": "yes"}}}, "/toolPlane/resourceUsage/enabled"),
        (
            {
                "toolPlane": {
                    "logs": {"enabled": True},
                    "resourceUsage": {"enabled": True, "metricsServer": {}},
                }
            },
            "'metricsServer' not allowed",
        ),
    ],
)
def test_the_values_schema_refuses_bad_usage_values(
    tools: Tools, tmp_path: Path, values: dict[str, Any], complaint: str
) -> None:
    refused_by_schema(tools, tmp_path, values, complaint)


def test_the_chart_ships_what_the_local_stack_takes_from_kwok() -> None:
    """The ClusterResourceUsage CRD is kwok v0.8.0's, unmodified, as tools/build-backends.sh copies it;
    the Metric is kwok's resource-metrics Metric with the node overhead (decision 0065) added."""
    crds = backends_mod.resolve_binaries(["resource-metrics"]).crd_dir
    shipped = yaml.safe_load((CHART / "files" / f"kwok.x-k8s.io_{USAGES}.yaml").read_text())
    assert shipped == yaml.safe_load((crds / f"kwok.x-k8s.io_{USAGES}.yaml").read_text())
    upstream = yaml.safe_load((crds / "kwok" / "metrics-resource.yaml").read_text())
    assert yaml.safe_load(metrics_config_text()) == with_node_overhead(copy.deepcopy(upstream))
    assert yaml.safe_load(metrics_config_text()) != upstream


@pytest.mark.cluster
def test_kubeconform_and_the_api_server_accept_the_chart_with_resource_usage(apply_chart: ApplyChart) -> None:
    _, answers = apply_chart(USAGE_ON)
    node = answers[("Node", "node-standard-1")].json()
    assert node["metadata"]["annotations"][METRICS_PATH_ANNOTATION] == metrics_path("node-standard-1")


# --- the route, on a real control plane --------------------------------------------------------------


@pytest.fixture(scope="module")
def direct(tmp_path_factory: pytest.TempPathFactory) -> Iterator[DevCluster]:
    """The chart's direct route, with resource usage: metrics-server scrapes the simulator too."""
    with direct_dev_cluster(tmp_path_factory.mktemp("direct-usage"), ("logs", "resource-metrics")) as dev:
        yield dev


def _environ(pid: int) -> dict[str, str]:
    pairs = Path(f"/proc/{pid}/environ").read_bytes().decode().split("\0")
    return dict(p.split("=", 1) for p in pairs if "=" in p)


@pytest.mark.cluster
def test_metrics_server_scrapes_the_simulator_at_the_nodes_address_with_no_tunnel(direct: DevCluster) -> None:
    address = direct.config.kubelet_address
    assert address is not None
    pids = direct.component_pids()
    assert "kubelet-tunnel" not in pids
    apiserver = argv_of(pids["kube-apiserver"])
    assert not [a for a in apiserver if a.startswith(("--egress-selector", "--enable-aggregator-routing"))]
    # The simulator runs with the chart's options (the same function renders them).
    metrics = direct.workdir / METRICS_CONFIG
    assert argv_of(pids["kwok"])[-4:] == kubelet_server_args(address, simulator_crds(True), str(metrics))
    assert metrics.read_text() == metrics_config_text()
    # metrics-server: the scrape options the chart's README asks of a cluster's own, and no proxy.
    server = argv_of(pids["metrics-server"])
    assert set(KUBELET_SCRAPE_ARGS) <= set(server)
    assert not {k for k in _environ(pids["metrics-server"]) if k.lower().endswith("_proxy")}
    with direct.admin_http() as http:
        nodes = http.get("/api/v1/nodes").json()["items"]
        # The nodes' InternalIP is the simulator's address (these nodes also carry a Hostname, which
        # resolves nowhere: metrics-server must prefer the InternalIP, as KUBELET_SCRAPE_ARGS say).
        addresses = [a for n in nodes for a in n["status"]["addresses"]]
        assert {a["address"] for a in addresses if a["type"] == "InternalIP"} == {address}
        service = http.get("/api/v1/namespaces/kube-system/services/metrics-server").json()
        assert (service["spec"]["type"], service["spec"]["externalName"]) == ("ExternalName", "localhost")

        # The aggregator reaches metrics-server (at the Service's external name) and finds it available;
        # the figures themselves are read in the next test (a node with no pod using CPU has none).
        apiservice = http.get("/apis/apiregistration.k8s.io/v1/apiservices/v1beta1.metrics.k8s.io").json()
        conditions = {c["type"]: c["status"] for c in apiservice["status"]["conditions"]}
        assert conditions["Available"] == "True", apiservice["status"]
        assert http.get("/apis/metrics.k8s.io/v1beta1/nodes").status_code == 200


MISLEADING = "infra.capability.da.misleading-signal-001"


def _scenario() -> dict[str, Any]:
    """The misleading-signal scenario (a pod pegging its own node-1 at 95 %, the node at 97 %; decision
    0065), without its metrics series and its metrics tool (not a usage: the metrics back-end is not
    part of this test)."""
    from tests.toolplane.conftest import CAPABILITY_DOCS

    doc = copy.deepcopy(CAPABILITY_DOCS[MISLEADING])
    pre = doc["preconditions"]
    state = pre["environment"]["state"]
    pre["environment"]["state"] = [e for e in state if e["resource"] != "metrics/user-service"]
    pre["agent"]["tools"] = [t for t in pre["agent"]["tools"] if t != "observability-metrics"]
    return doc


class ChartIdentity:
    """The chart's ServiceAccount and its ClusterRole (``USAGE_ON``), applied for real, and a kubeconfig
    with a token of that ServiceAccount; ``drop`` takes one verb out of one rule of the role."""

    def __init__(self, dev: DevCluster, tools: Tools, tmp: Path) -> None:
        suffix = kube.random_suffix()
        self.release, self.home = f"usage-{suffix}", f"usage-home-{suffix}"
        self.name = f"{self.release}-oasis-operator"
        self.user = f"system:serviceaccount:{self.home}:{self.name}"
        self.admin = dev.admin_http()
        kube.create_namespace(self.admin, self.home)
        self.role = apply_operator_identity(self.admin, tools, tmp, USAGE_ON, self.release, self.home)
        self.kubeconfig = dev.token_kubeconfig(
            tmp / "operator.kubeconfig", kube.request_token(self.admin, self.home, self.name, 900)
        )

    def set_rules(self, rules: list[dict[str, Any]]) -> None:
        doc = {**self.role, "rules": rules}
        resp = server_side_apply(self.admin, doc, dry_run=False)
        assert resp.status_code == 200, resp.text

    def allowed(self, verb: str, group: str, resource: str) -> bool:
        review = {
            "apiVersion": "authorization.k8s.io/v1",
            "kind": "SubjectAccessReview",
            "spec": {
                "user": self.user,
                "resourceAttributes": {"verb": verb, "group": group, "resource": resource},
            },
        }
        resp = self.admin.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", json=review)
        return bool(resp.json()["status"].get("allowed"))

    def without(self, group: str, resource: str, verb: str) -> None:
        """The chart's role less ``verb`` on ``group/resource``, in force once the authorizer says so."""
        rules = []
        for rule in copy.deepcopy(self.role["rules"]):
            if group in rule["apiGroups"] and resource in rule["resources"] and verb in rule["verbs"]:
                others = [r for r in rule["resources"] if r != resource]
                if others:
                    rules.append({**rule, "resources": others})
                rule = {**rule, "resources": [resource], "verbs": [v for v in rule["verbs"] if v != verb]}
                if not rule["verbs"]:
                    continue
            rules.append(rule)
        self.set_rules(rules)
        deadline = time.monotonic() + 15
        while self.allowed(verb, group, resource):
            assert time.monotonic() < deadline, f"{verb} {resource} still allowed"
            time.sleep(0.2)

    def restore(self) -> None:
        self.set_rules(self.role["rules"])
        deadline = time.monotonic() + 15
        while not self.allowed("create", "kwok.x-k8s.io", USAGES) or not self.allowed(
            "get", "metrics.k8s.io", "nodes"
        ):
            assert time.monotonic() < deadline, "the chart's role not in force again"
            time.sleep(0.2)

    def close(self) -> None:
        for kind in ("clusterroles", "clusterrolebindings"):
            self.admin.delete(f"/apis/rbac.authorization.k8s.io/v1/{kind}/{self.name}")
        self.admin.delete(f"/api/v1/namespaces/{self.home}")
        self.admin.close()


def _millicores(text: str) -> float:
    scale = {"n": 1e6, "u": 1e3, "m": 1.0}
    return int(text[:-1]) / scale[text[-1]] if text[-1] in scale else float(text) * 1000


@pytest.mark.cluster
async def test_the_charts_operator_declares_a_scenarios_usage_and_reads_it_back_on_the_direct_route(
    direct: DevCluster, tools: Tools, tmp_path: Path
) -> None:
    """A real scenario provisioned (by the admin, another test's job), then its usage declared and read
    back by the operator's own adapter holding only the chart's ClusterRole: what metrics.k8s.io
    serves, scraped from the simulator at the nodes' address, is what the scenario declares. Then each
    verb of the rules the back-end adds, taken away alone, makes the adapter fail."""
    identity = ChartIdentity(direct, tools, tmp_path)
    settings_dir = direct.workdir / "backends" / "logs"
    scenario, _ = parse_scenario(_scenario())
    admin_client = async_client(direct.kubeconfig)
    ep = endpoint_of(direct.kubeconfig)
    env = KubeEnvironment(admin_client, server=ep.server, ca_data=ep.ca_data)
    plan: EnvironmentPlan | None = None
    try:
        async with async_http(identity.kubeconfig) as http:
            plane = tool_plane(
                Cluster(http, direct.server),
                {"logs": LogsSettings(settings_dir), "resource-metrics": UsageSettings()},
            )
            plan = plan_environment(
                scenario,
                suffix=kube.random_suffix(),
                owner=owner_value("chart-usage", MISLEADING),
                backends=plane.backends,
            )
            assert plan.supported, plan.unsupported
            [usage] = plan.toolplane.usage
            [node] = plan.toolplane.nodes
            await env.provision(plan)
            started = time.monotonic()
            await plane.inject(plan)  # declare (as the chart's operator), then read back: must show
            took = time.monotonic() - started
            ns = usage.namespace
            with direct.admin_http() as admin:
                pods = admin.get(f"/apis/metrics.k8s.io/v1beta1/namespaces/{ns}/pods").json()["items"]
                assert pods
                declared_cpu = usage.amount("cpu")
                assert declared_cpu is not None
                for pod in pods:
                    (container,) = [c for c in pod["containers"] if c["name"] == usage.container]
                    assert abs(_millicores(container["usage"]["cpu"]) - declared_cpu) <= declared_cpu * 0.05
                    if usage.amount("memory") is not None:
                        assert parse("memory", container["usage"]["memory"]) == usage.amount("memory")
                got = admin.get(f"/apis/metrics.k8s.io/v1beta1/nodes/{node.node}").json()
                assert abs(_millicores(got["usage"]["cpu"]) - node.cpu) <= node.cpu * 0.05
                assert admin.get(f"{CLUSTER_USAGES}/{object_name(ns)}").status_code == 200
            print(f"declared usage read back through metrics.k8s.io after {took:.1f}s")

            # Each right the back-end adds is needed: without it the adapter fails, never passes. The
            # reads first, while the declaration stands and its figures show (the same inject passes
            # with the whole role, below); then the writes, from no declaration.
            adapter = ResourceUsage(http, timeout=3)
            cases = [
                ("metrics.k8s.io", "nodes", "get", adapter.inject, r"declared node usage .*HTTP 403"),
                ("metrics.k8s.io", "pods", "get", adapter.inject, r"declared usage .*HTTP 403"),
                ("kwok.x-k8s.io", USAGES, "delete", adapter.cleanup, "HTTP 403"),
                ("kwok.x-k8s.io", USAGES, "create", adapter.inject, "declaring the resource usage"),
                ("kwok.x-k8s.io", USAGES, "patch", adapter.inject, "declaring the resource usage"),
            ]
            for group, resource, verb, step, complaint in cases:
                if verb == "create":
                    await adapter.cleanup(plan)
                identity.without(group, resource, verb)
                try:
                    with pytest.raises(ToolPlaneError, match=complaint):
                        await step(plan)
                finally:
                    identity.restore()
                if verb == "delete":
                    await adapter.inject(plan)  # with the whole role again: passes
            await adapter.cleanup(plan)
            with direct.admin_http() as admin:
                assert admin.get(f"{CLUSTER_USAGES}/{object_name(ns)}").status_code == 404
            await plane.aclose()
    finally:
        if plan is not None:
            await env.teardown(plan.namespaces.values(), plan.owner, timeout=0)
        await admin_client.close()
        identity.close()
