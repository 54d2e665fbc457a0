"""The Helm chart: lint, values schema, what it renders (security, simulator, CRDs from crds/,
dashboard, monitoring), strict validation with kubeconform against schemas made from the embedded
API server, and a server-side dry-run of every rendered object."""

from __future__ import annotations

import json
import re
import subprocess
import time
from pathlib import Path
from typing import Any

import pytest
import yaml

from oasis_operator.cli.main import build_parser
from oasis_operator.handlers.settings import GatewaySettings
from tests.conftest import ClusterHandle
from tests.shipping.conftest import (
    CHART,
    FULL_VALUES,
    NAMESPACE,
    REPO,
    THIRD_PARTY,
    Render,
    Tools,
    by_kind,
    helm_template,
    kubeconform,
    refused_by_schema,
    server_side_apply,
)

#: Metric names the operator exports (adapters/metrics.py); the dashboard must show each of them.
METRICS = (
    "oasis_runs_total",
    "oasis_scenarios_total",
    "oasis_scenario_duration_seconds",
    "oasis_provider_failures_total",
    "oasis_active_runs",
    "oasis_scenario_namespaces",
    "oasis_audit_events_ingested_total",
    "oasis_audit_barrier_seconds",
    "oasis_audit_last_event_timestamp_seconds",
    "oasis_agent_runs_total",
    "oasis_agent_incomplete_runs_total",
    "oasis_agent_last_run_timestamp_seconds",
)
#: The values docs/kind.md installs with (the API server reaches the receiver at a fixed address).
KIND_VALUES: dict[str, Any] = {"auditWebhook": {"service": {"clusterIP": "10.96.0.250"}}}


# --- lint and values ------------------------------------------------------------------------------


@pytest.mark.parametrize("values", [None, FULL_VALUES], ids=["defaults", "everything-on"])
def test_helm_lint_is_clean(tools: Tools, tmp_path: Path, values: dict[str, Any] | None) -> None:
    args = [str(tools.helm), "lint", str(CHART), "--strict", "--namespace", NAMESPACE]
    if values:
        (tmp_path / "v.yaml").write_text(yaml.safe_dump(values))
        args += ["--values", str(tmp_path / "v.yaml")]
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[ERROR]" not in done.stdout
    assert "[WARNING]" not in done.stdout
    assert "1 chart(s) linted, 0 chart(s) failed" in done.stdout


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        ({"nodePool": {"namePrefix": "kwok-node"}}, "namePrefix"),
        ({"nodePool": {"namePrefix": "fake-pool"}}, "namePrefix"),
        ({"replicaCount": 2}, "replicaCount"),
        ({"crds": {"instal": True}}, "instal"),
        ({"auditWebhook": {"service": {"nodePort": 80}}}, "nodePort"),
        ({"image": {"pullPolicy": "Sometimes"}}, "pullPolicy"),
        ({"prometheusRule": {"auditSilentFor": "1h30m"}}, "auditSilentFor"),
        ({"operator": {"logFormat": "yaml"}}, "logFormat"),
        ({"toolGateway": {"url": "gw:8090"}}, "url"),
        ({"toolGateway": {"port": 0}}, "port"),
    ],
)
def test_the_values_schema_rejects_bad_values(
    tools: Tools, tmp_path: Path, values: dict[str, Any], complaint: str
) -> None:
    refused_by_schema(tools, tmp_path, values, complaint)


# --- what the chart renders ---------------------------------------------------------------------


def test_the_operator_runs_unprivileged_with_a_read_only_root(render: Render) -> None:
    docs = render()
    (operator,) = [d for d in by_kind(docs, "Deployment") if d["metadata"]["name"] == "oasis-operator"]
    pod = operator["spec"]["template"]["spec"]
    assert pod["securityContext"]["runAsNonRoot"] is True
    assert pod["securityContext"]["runAsUser"] == 65532
    assert pod["securityContext"]["seccompProfile"] == {"type": "RuntimeDefault"}
    (container,) = pod["containers"]
    sc = container["securityContext"]
    assert sc["readOnlyRootFilesystem"] is True
    assert sc["allowPrivilegeEscalation"] is False
    assert sc["capabilities"] == {"drop": ["ALL"]}
    assert container["resources"]["limits"]["memory"]
    assert "command" not in container  # the image's entrypoint, `oasis operator run`
    assert "--audit-webhook-port=8443" in container["args"]
    assert "--metrics-addr=0.0.0.0" in container["args"], "Prometheus must reach the endpoint"
    assert not [a for a in container["args"] if a.startswith("--kubeconfig")], (
        "the ServiceAccount, from its files"
    )
    assert "--allow-subprocess-agents" not in container["args"]
    assert "--cluster-scoped-scenarios" not in container["args"]
    assert not [e for e in container["env"] if e["name"].startswith("OASIS_") or e["name"] == "KUBECONFIG"]
    assert {p["name"]: p["containerPort"] for p in container["ports"]} == {
        "metrics": 8080,
        "health": 8081,
        "audit-webhook": 8443,
    }
    assert container["livenessProbe"]["httpGet"]["path"] == "/healthz"
    mounts = {m["mountPath"] for m in container["volumeMounts"]}
    assert mounts == {"/tmp", "/etc/oasis/audit-tls"}
    assert pod["serviceAccountName"] == "oasis-operator"


@pytest.mark.parametrize(
    "values", [None, {"auditWebhook": {"enabled": False}, "operator": {"logLevel": "debug"}}]
)
def test_the_operator_command_line_is_one_the_cli_accepts(
    render: Render, values: dict[str, Any] | None
) -> None:
    """The chart's arguments, after the image's entrypoint, parse with `oasis operator run`'s parser."""
    (operator,) = [
        d for d in by_kind(render(values), "Deployment") if d["metadata"]["name"] == "oasis-operator"
    ]
    args = operator["spec"]["template"]["spec"]["containers"][0]["args"]
    parsed = build_parser().parse_args(["operator", "run", *args])
    assert (parsed.metrics_addr, parsed.metrics_port) == ("0.0.0.0", 8080)
    assert parsed.liveness == "http://0.0.0.0:8081/healthz"
    assert parsed.node_selector == "node.platform.k8s.io/pool=standard"
    assert parsed.pool_taint == ["node.platform.k8s.io/pool=standard:NoSchedule"]
    if values is None:
        assert parsed.audit_webhook_port == 8443
        assert parsed.tls_cert == "/etc/oasis/audit-tls/tls.crt"
        assert parsed.audit_client_ca == "/etc/oasis/audit-tls/ca.crt"
    else:
        assert parsed.audit_webhook_port is None
        assert parsed.verbose is True


def test_services_expose_metrics_and_the_audit_receiver(render: Render) -> None:
    services = {s["metadata"]["name"]: s for s in by_kind(render(FULL_VALUES), "Service")}
    metrics = services["oasis-operator-metrics"]
    assert metrics["spec"]["ports"][0]["targetPort"] == "metrics"
    audit = services["oasis-operator-audit"]
    assert audit["spec"]["type"] == "NodePort"
    assert audit["spec"]["clusterIP"] == "10.96.0.250"
    assert audit["spec"]["ports"] == [
        {
            "name": "https-audit",
            "port": 8443,
            "targetPort": "audit-webhook",
            "protocol": "TCP",
            "nodePort": 30843,
        }
    ]


def words(obj: Any) -> str:
    return json.dumps(obj).lower()


def test_the_node_pool_and_its_simulator(render: Render) -> None:
    docs = render()
    nodes = by_kind(docs, "Node")
    assert [n["metadata"]["name"] for n in nodes] == ["node-standard-1", "node-standard-2", "node-standard-3"]
    for node in nodes:
        assert node["metadata"]["labels"]["node.platform.k8s.io/pool"] == "standard"
        # Tainted: nothing but scenario pods (which the operator makes tolerate it) lands there.
        assert node["spec"]["taints"] == [
            {"key": "node.platform.k8s.io/pool", "value": "standard", "effect": "NoSchedule"}
        ]
        visible = words({"name": node["metadata"], "spec": node["spec"]})
        for word in ("kwok", "fake", "test", "oasis", "simulat", "helm"):
            assert word not in visible, f"node {node['metadata']['name']} shows {word!r}"
    assert [n["metadata"]["labels"]["topology.kubernetes.io/zone"] for n in nodes] == [
        "zone-a",
        "zone-b",
        "zone-c",
    ]
    (sim,) = [d for d in by_kind(docs, "Deployment") if d["metadata"]["name"] != "oasis-operator"]
    container = sim["spec"]["template"]["spec"]["containers"][0]
    assert container["image"] == "registry.k8s.io/kwok/kwok:v0.8.0"
    assert "--manage-all-nodes=false" in container["args"]
    assert "--manage-nodes-with-label-selector=node.platform.k8s.io/pool=standard" in container["args"]
    assert container["securityContext"]["readOnlyRootFilesystem"] is True
    stages = next(c for c in by_kind(docs, "ConfigMap") if c["metadata"]["name"].endswith("-stages"))
    source = (REPO / "oasis_operator" / "devcluster" / "node-simulator-stages.yaml").read_text()
    assert stages["data"]["stages.yaml"].strip() == source.strip()
    assert len(list(yaml.safe_load_all(stages["data"]["stages.yaml"]))) >= 3


def test_the_simulator_and_its_nodes_are_optional(render: Render) -> None:
    docs = render({"kwok": {"enabled": False}, "nodePool": {"enabled": False}})
    assert by_kind(docs, "Node") == []
    assert [d["metadata"]["name"] for d in by_kind(docs, "Deployment")] == ["oasis-operator"]


def test_crd_templates_render_the_crds_of_the_repository(render: Render) -> None:
    rendered = {
        d["metadata"]["name"]: d
        for d in by_kind(render(), "CustomResourceDefinition")
        if d["spec"]["group"] == "oasis.dev"  # kopf's peering CRDs: test_chart_peering.py
    }
    sources = {p.name: yaml.safe_load(p.read_text()) for p in sorted((REPO / "crds").glob("*.yaml"))}
    assert set(rendered) == {s["metadata"]["name"] for s in sources.values()}
    for source in sources.values():
        crd = rendered[source["metadata"]["name"]]
        assert crd["spec"] == source["spec"]
        assert crd["metadata"]["annotations"]["helm.sh/resource-policy"] == "keep"


def test_crds_can_be_left_out_or_not_kept(render: Render) -> None:
    assert by_kind(render({"crds": {"install": False, "keep": True}}), "CustomResourceDefinition") == []
    for crd in by_kind(render({"crds": {"install": True, "keep": False}}), "CustomResourceDefinition"):
        assert "helm.sh/resource-policy" not in crd["metadata"]["annotations"]


def test_the_chart_crds_and_stages_are_in_step_with_their_sources() -> None:
    done = subprocess.run(
        ["python3", str(REPO / "charts" / "sync.py"), "--check"], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stderr


def test_a_stale_crd_template_is_detected(tmp_path: Path) -> None:
    """The drift check compares content: an edited copy is reported."""
    import importlib.util

    spec = importlib.util.spec_from_file_location("chart_sync", REPO / "charts" / "sync.py")
    assert spec is not None
    assert spec.loader is not None
    sync = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sync)
    name = "evaluationruns.oasis.dev.yaml"
    source = (REPO / "crds" / name).read_text()
    current = sync.crd_template(name, source)
    assert current == (CHART / "templates" / "crds" / name).read_text()
    assert sync.crd_template(name, source.replace("shortNames:", "shortNames:\n    - er")) != current
    with pytest.raises(sync.SyncError, match="template syntax"):
        sync.crd_template(name, source + "# {{ .Values }}\n")


def test_the_dashboard_shows_every_metric(render: Render) -> None:
    (cm,) = [c for c in by_kind(render(), "ConfigMap") if c["metadata"]["name"].endswith("-dashboard")]
    assert cm["metadata"]["labels"]["grafana_dashboard"] == "1"
    dashboard = json.loads(cm["data"]["oasis-operator.json"])
    assert dashboard["uid"] == "oasis-operator"
    exprs = [t["expr"] for p in dashboard["panels"] for t in p.get("targets", [])]
    for metric in METRICS:
        assert any(re.search(rf"\b{metric}(_bucket|_sum|_count)?\b", e) for e in exprs), metric
    histograms = [e for e in exprs if "histogram_quantile" in e]
    assert any("oasis_scenario_duration_seconds_bucket" in e for e in histograms)
    assert any("oasis_audit_barrier_seconds_bucket" in e for e in histograms)
    ids = [p["id"] for p in dashboard["panels"]]
    assert len(ids) == len(set(ids))


def test_service_monitor_and_certificate_point_at_the_right_objects(render: Render) -> None:
    docs = render(FULL_VALUES)
    (monitor,) = by_kind(docs, "ServiceMonitor")
    (metrics,) = [s for s in by_kind(docs, "Service") if s["metadata"]["name"].endswith("-metrics")]
    selector = monitor["spec"]["selector"]["matchLabels"]
    assert selector.items() <= metrics["metadata"]["labels"].items()
    assert monitor["spec"]["endpoints"][0]["port"] in {p["name"] for p in metrics["spec"]["ports"]}
    assert monitor["metadata"]["labels"]["release"] == "prometheus"
    serving, client = sorted(by_kind(docs, "Certificate"), key=lambda c: c["metadata"]["name"])
    (deployment,) = [d for d in by_kind(docs, "Deployment") if d["metadata"]["name"] == "oasis-operator"]
    volumes = {v["name"]: v for v in deployment["spec"]["template"]["spec"]["volumes"]}
    assert serving["spec"]["secretName"] == volumes["audit-tls"]["secret"]["secretName"]
    assert "oasis-operator-audit.oasis-system.svc" in serving["spec"]["dnsNames"]
    assert serving["spec"]["ipAddresses"] == ["10.96.0.250"]
    # Both from the CA issuer named: the receiver trusts the Secret's ca.crt for the client.
    assert (
        serving["spec"]["issuerRef"]
        == client["spec"]["issuerRef"]
        == {"name": "audit-ca", "kind": "ClusterIssuer"}
    )
    assert "client auth" in client["spec"]["usages"]
    assert "server auth" in serving["spec"]["usages"]
    assert by_kind(docs, "Issuer") == []


def test_cert_manager_with_a_client_ca_needs_a_ca_issuer(tools: Tools, tmp_path: Path) -> None:
    """A self-signed receiver certificate cannot be the CA of the API server's client certificate:
    with requireClientCert, the chart refuses to render a setup that would reject every audit batch."""
    done = helm_template(tools, tmp_path, {"auditWebhook": {"tls": {"certManager": {"enabled": True}}}})
    assert done.returncode != 0
    assert "auditWebhook.tls.certManager.issuerRef" in done.stderr
    assert "self-signed certificate cannot" in done.stderr
    allowed = helm_template(
        tools,
        tmp_path,
        {"auditWebhook": {"tls": {"certManager": {"enabled": True}, "requireClientCert": False}}},
    )
    assert allowed.returncode == 0, allowed.stderr
    docs = [d for d in yaml.safe_load_all(allowed.stdout) if d]
    assert [d["metadata"]["name"] for d in by_kind(docs, "Issuer")] == ["oasis-operator-selfsigned"]


def test_the_opt_ins_reach_the_operators_command_line(render: Render) -> None:
    (operator,) = [
        d for d in by_kind(render(FULL_VALUES), "Deployment") if d["metadata"]["name"] == "oasis-operator"
    ]
    args = operator["spec"]["template"]["spec"]["containers"][0]["args"]
    parsed = build_parser().parse_args(["operator", "run", *args])
    assert parsed.allow_subprocess_agents is True
    assert parsed.cluster_scoped_scenarios is True
    assert parsed.log_format == "json"


def test_the_tool_gateway_is_off_by_default(render: Render) -> None:
    docs = render()
    assert "oasis-operator-tool-gateway" not in {s["metadata"]["name"] for s in by_kind(docs, "Service")}
    (operator,) = [d for d in by_kind(docs, "Deployment") if d["metadata"]["name"] == "oasis-operator"]
    container = operator["spec"]["template"]["spec"]["containers"][0]
    assert "tool-gateway" not in {p["name"] for p in container["ports"]}
    assert not [a for a in container["args"] if a.startswith("--tool-gateway")]


@pytest.mark.parametrize(
    ("values", "url"),
    [
        ({"toolGateway": {"enabled": True}}, f"http://oasis-operator-tool-gateway.{NAMESPACE}.svc:8090"),
        (
            {
                "toolGateway": {
                    "enabled": True,
                    "port": 9000,
                    "url": "https://tools.example:443/gw",
                    "service": {"type": "NodePort", "port": 9443},
                }
            },
            "https://tools.example:443/gw",
        ),
    ],
    ids=["its own Service", "a URL of the user's"],
)
def test_the_enabled_tool_gateway_is_served_and_its_url_is_what_agents_are_told(
    render: Render, values: dict[str, Any], url: str
) -> None:
    """The Service leads to the container port the operator listens on, and the operator's settings (as
    in its pod, with a tool plane) accept the arguments."""
    docs = render(values)
    port = values["toolGateway"].get("port", 8090)
    (service,) = [
        s for s in by_kind(docs, "Service") if s["metadata"]["name"] == "oasis-operator-tool-gateway"
    ]
    assert service["spec"]["ports"] == [
        {
            "name": "http-tool-gateway",
            "port": values["toolGateway"].get("service", {}).get("port", 8090),
            "targetPort": "tool-gateway",
            "protocol": "TCP",
        }
    ]
    (operator,) = [d for d in by_kind(docs, "Deployment") if d["metadata"]["name"] == "oasis-operator"]
    assert service["spec"]["selector"] == operator["spec"]["selector"]["matchLabels"]
    container = operator["spec"]["template"]["spec"]["containers"][0]
    assert {"name": "tool-gateway", "containerPort": port, "protocol": "TCP"} in container["ports"]
    parsed = build_parser().parse_args(["operator", "run", *container["args"]])
    settings = GatewaySettings.parse(
        parsed.tool_gateway_addr,
        parsed.tool_gateway_port,
        parsed.tool_gateway_url,
        in_cluster=True,
        toolplane=True,
    )
    assert settings == GatewaySettings("0.0.0.0", port, url)


def test_the_prometheus_rules_parse_with_prometheus_and_name_only_known_metrics(
    render: Render, promrules
) -> None:
    (rule,) = by_kind(render(FULL_VALUES), "PrometheusRule")
    assert rule["metadata"]["labels"]["release"] == "prometheus"
    checked = promrules(groups=yaml.safe_dump({"groups": rule["spec"]["groups"]}))
    assert checked["errors"] == []
    alerts = {r["name"]: r for r in checked["rules"]}
    assert set(alerts) == {
        "OasisEvaluationRunStalled",
        "OasisProviderFailures",
        "OasisAuditStreamSilent",
        "OasisOperatorAbsent",
    }
    named = {m for r in checked["rules"] for m in r["metrics"]} - {"up"}
    exported = {
        m for metric in METRICS for m in (metric, f"{metric}_bucket", f"{metric}_count", f"{metric}_sum")
    }
    assert named <= exported, named - exported
    assert all(r["labels"] == {"severity": "warning"} for r in checked["rules"])
    # The negative control: a broken expression is reported.
    assert promrules(groups="groups: [{name: g, rules: [{alert: A, expr: 'rate(x[5m'}]}]")["errors"]


def test_every_rbac_rule_says_why() -> None:
    text = (CHART / "templates" / "rbac.yaml").read_text()
    rules = text.split("rules:", 1)[1].split("---", 1)[0]
    chunks = re.split(r"\n(?=  - apiGroups:)", rules)
    assert len(chunks) > 10
    for chunk in chunks[1:]:
        before = chunks[chunks.index(chunk) - 1].rstrip().splitlines()[-1]
        assert before.lstrip().startswith("#") or "{{-" in before, f"rule without a comment:\n{chunk[:200]}"


# --- kubeconform and the API server -------------------------------------------------------------


def kinds_of(docs: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    out = set()
    for d in docs:
        group, _, version = d["apiVersion"].rpartition("/")
        out.add((group, version, d["kind"]))
    return out


@pytest.mark.cluster
@pytest.mark.parametrize("values", [None, FULL_VALUES], ids=["defaults", "everything-on"])
def test_kubeconform_strict_accepts_the_rendered_chart(
    tools: Tools, tmp_path: Path, schema_dir: Path, values: dict[str, Any] | None
) -> None:
    done = helm_template(tools, tmp_path, values)
    assert done.returncode == 0, done.stderr
    docs = [d for d in yaml.safe_load_all(done.stdout) if d]
    third_party = sum(1 for d in docs if d["kind"] in THIRD_PARTY)
    report = kubeconform(tools, schema_dir, done.stdout, "-skip", ",".join(THIRD_PARTY))
    summary = report["summary"]
    problems = [r for r in report["resources"] if r["status"] != "statusValid"]
    assert report["returncode"] == 0, problems
    assert summary["valid"] == len(docs) - third_party, summary
    assert summary["skipped"] == third_party
    assert (summary["invalid"], summary["errors"]) == (0, 0)
    assert third_party == (4 if values else 0)  # ServiceMonitor, PrometheusRule, two Certificates


@pytest.mark.cluster
def test_kubeconform_with_our_schemas_rejects_a_misspelt_field(tools: Tools, schema_dir: Path) -> None:
    """The negative control: the generated schemas are strict, so a typo does not pass."""
    bad = {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "x"},
        "spec": {
            "selector": {"matchLabels": {"a": "b"}},
            "template": {
                "metadata": {"labels": {"a": "b"}},
                "spec": {"containers": [{"name": "c", "image": "i", "securityContxt": {}}]},
            },
        },
    }
    report = kubeconform(tools, schema_dir, yaml.safe_dump(bad))
    assert report["summary"]["invalid"] == 1
    assert "securityContxt" in json.dumps(report["resources"])
    run = {
        "apiVersion": "oasis.dev/v1alpha1",
        "kind": "EvaluationRun",
        "metadata": {"name": "r"},
        "spec": {"tierr": 1},
    }
    report = kubeconform(tools, schema_dir, yaml.safe_dump(run))
    assert report["summary"]["invalid"] == 1


@pytest.mark.cluster
def test_the_api_server_accepts_every_rendered_object_in_a_server_side_dry_run(
    cluster: ClusterHandle, render: Render
) -> None:
    docs = render({"auditWebhook": {"service": {"type": "NodePort", "nodePort": 30843}}})
    with cluster.admin_http() as http:
        created = http.post("/api/v1/namespaces", json={"metadata": {"name": NAMESPACE}})
        assert created.status_code in (201, 409), created.text
        try:
            answers = {(d["kind"], d["metadata"]["name"]): server_side_apply(http, d) for d in docs}
        finally:
            http.delete(f"/api/v1/namespaces/{NAMESPACE}")
        refused = {
            key: (r.status_code, r.text[:300])
            for key, r in answers.items()
            if r.status_code not in (200, 201)
        }
        assert refused == {}
        assert len(answers) == len(docs)
        # A dry run changes nothing: the simulated nodes of the chart were not created.
        assert http.get("/api/v1/nodes/node-standard-1").status_code == 404


@pytest.mark.cluster
@pytest.mark.parametrize("values", [None, KIND_VALUES], ids=["defaults", "kind"])
def test_the_install_notes_render_and_say_what_to_do_next(
    cluster: ClusterHandle, tools: Tools, tmp_path: Path, values: dict[str, Any] | None
) -> None:
    args = [str(tools.helm), "install", "oasis-operator", str(CHART), "--namespace", NAMESPACE]
    args += ["--dry-run=client", "--kubeconfig", str(cluster.kubeconfig)]
    # Helm checks ownership of cluster objects even on a client dry run; the session cluster may
    # already hold our CRDs (installed by the end-to-end tests), which the notes do not depend on.
    kind = values is not None
    values = {**(values or {}), "crds": {"install": False}}
    (tmp_path / "v.yaml").write_text(yaml.safe_dump(values))
    args += ["--values", str(tmp_path / "v.yaml")]
    done = subprocess.run(args, capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr
    notes = done.stdout.split("NOTES:", 1)[1]
    assert "rollout status deployment/oasis-operator" in notes
    assert "--for=condition=Completed" in notes
    assert "<no value>" not in notes
    assert not re.search(r"^\s*kubectl .*create secret tls", notes, re.M), (
        "create secret tls cannot add ca.crt"
    )
    assert "--from-file=ca.crt=ca.crt" in notes
    assert "examples/scenarios/" not in notes.replace("examples/scenarios/ holds", ""), "not manifests"
    assert "DEDICATED EVALUATION CLUSTER" in notes
    assert "oasis check" in notes
    if kind:
        assert "https://10.96.0.250:8443/audit" in notes
    else:
        assert "https://oasis-operator-audit.oasis-system.svc:8443/audit" in notes


def test_install_tools_does_nothing_when_the_tools_are_there(tools: Tools) -> None:
    started = time.monotonic()
    done = subprocess.run(
        ["bash", str(REPO / "tools" / "install-tools.sh")], capture_output=True, text=True, check=False
    )
    assert done.returncode == 0
    assert time.monotonic() - started < 5
    assert "go install" not in done.stderr
    assert "apt-get" not in done.stderr
    assert Path(done.stdout.strip()) == tools.helm.parent
    version = subprocess.run(
        [str(tools.helm), "version", "--short"], capture_output=True, text=True, check=True
    )
    assert version.stdout.startswith("v3.22.0")
