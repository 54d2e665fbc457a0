"""The chart's tool-plane back-ends (decision 0061): sidecars of the operator's pod from the upstream
images, with the local stack's command lines, a tool-plane file the operator's own settings load, the
gateway on whenever a back-end is, and values the schema guards. Nothing here pulls or runs an image
(there is no container runtime on this machine): what is checked is what the chart renders."""

from __future__ import annotations

import json
import stat
from pathlib import Path
from typing import Any

import pytest
import yaml

from oasis_operator.adapters.toolplane.metrics import AlertsSettings, MetricsSettings, VmauthGrants
from oasis_operator.cli.main import build_parser
from oasis_operator.core.toolplane.metrics import AUTH_CONFIG, GRANTS_FILE, RELOAD_KEY
from oasis_operator.core.toolplane.traces import BINARY
from oasis_operator.devcluster.backends.metrics import (
    label_proxy_args,
    store_args,
    vmalert_args,
    vmauth_args,
)
from oasis_operator.handlers.settings import GatewaySettings, ToolPlaneSettings
from tests.shipping.conftest import (
    NAMESPACE,
    ApplyChart,
    Render,
    Tools,
    by_kind,
    helm_template,
    refused_by_schema,
)

ALL_ON: dict[str, Any] = {
    "toolPlane": {"metrics": {"enabled": True}, "alerts": {"enabled": True}, "traces": {"enabled": True}}
}
#: Selections of back-ends and the containers each brings into the operator's pod.
SELECTIONS: dict[str, tuple[dict[str, Any], set[str], set[str]]] = {
    "all": (
        ALL_ON["toolPlane"],
        {"metrics-store", "metrics-auth", "alerts-rules", "alerts-proxy"},
        {"prepare-toolplane", "jaeger-binary"},
    ),
    "metrics": ({"metrics": {"enabled": True}}, {"metrics-store", "metrics-auth"}, {"prepare-toolplane"}),
    "metrics-and-alerts": (
        {"metrics": {"enabled": True}, "alerts": {"enabled": True}},
        {"metrics-store", "metrics-auth", "alerts-rules", "alerts-proxy"},
        {"prepare-toolplane"},
    ),
    "traces": ({"traces": {"enabled": True}}, set(), {"prepare-toolplane", "jaeger-binary"}),
}


def operator_pod(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (operator,) = [d for d in by_kind(docs, "Deployment") if d["metadata"]["name"] == "oasis-operator"]
    pod: dict[str, Any] = operator["spec"]["template"]["spec"]
    return pod


def containers(pod: dict[str, Any]) -> dict[str, dict[str, Any]]:
    return {c["name"]: c for c in [*pod.get("initContainers", []), *pod["containers"]]}


def toolplane_file(docs: list[dict[str, Any]]) -> str:
    (config,) = [c for c in by_kind(docs, "ConfigMap") if c["metadata"]["name"] == "oasis-operator-toolplane"]
    text: str = config["data"]["toolplane.json"]
    return text


def mounts(container: dict[str, Any]) -> dict[str, str]:
    return {m["mountPath"]: m["name"] for m in container.get("volumeMounts", [])}


def test_no_back_end_by_default(render: Render) -> None:
    docs = render()
    pod = operator_pod(docs)
    assert [c["name"] for c in pod["containers"]] == ["operator"]
    assert "initContainers" not in pod
    assert not [a for a in pod["containers"][0]["args"] if a.startswith(("--toolplane", "--tool-gateway"))]
    assert "oasis-operator-toolplane" not in {c["metadata"]["name"] for c in by_kind(docs, "ConfigMap")}


@pytest.mark.parametrize("selection", list(SELECTIONS))
def test_the_rendered_tool_plane_file_is_what_the_operators_settings_load(
    render: Render, tmp_path: Path, selection: str
) -> None:
    """The ConfigMap is mounted where --toolplane points; its directories are on the volume the
    back-ends share; after the init containers (the real `oasis operator prepare-toolplane`, and the
    Jaeger copy simulated by a file at the path it copies to) the operator's settings load it and have
    exactly the back-ends enabled in values."""
    values, sidecars, inits = SELECTIONS[selection]
    docs = render({"toolPlane": values})
    pod = operator_pod(docs)
    by_name = containers(pod)
    assert set(by_name) == {"operator", *sidecars, *inits}
    operator = by_name["operator"]
    parsed = build_parser().parse_args(["operator", "run", *operator["args"]])
    tp_file = Path(parsed.toolplane)
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes[mounts(operator)[str(tp_file.parent)]]["configMap"]["name"] == "oasis-operator-toolplane"
    root = {name: path for path, name in mounts(operator).items()}["toolplane"]
    assert "emptyDir" in volumes["toolplane"]
    # Every container that uses the shared volume sees it where the operator does.
    for name, container in by_name.items():
        assert {p for p, v in mounts(container).items() if v == "toolplane"} <= {root}, name
    text = toolplane_file(docs)
    doc = json.loads(text)
    for entry in doc["backends"].values():
        assert entry["directory"].startswith(root + "/")
        assert all(u.startswith("http://127.0.0.1:") for u in entry["endpoints"].values())

    # The pod's mounts, under a temporary root.
    local_root = tmp_path / "volume"
    local_file = tmp_path / "config" / tp_file.name
    local_file.parent.mkdir()
    local_file.write_text(text.replace(root, str(local_root)))
    prepare = build_parser().parse_args(by_name["prepare-toolplane"]["command"][1:])
    assert prepare.toolplane == str(tp_file)
    prepare.toolplane = str(local_file)
    assert prepare.func(prepare) == 0
    if "jaeger-binary" in by_name:
        command = by_name["jaeger-binary"]["command"]
        assert command[:2] == ["cp", "/cmd/jaeger/jaeger-linux"]
        Path(command[2].replace(root, str(local_root))).write_text("#!/bin/sh\n")

    settings = ToolPlaneSettings.load(local_file)
    assert set(settings.backends) == {k for k, v in values.items() if v["enabled"]}
    metrics, alerts = settings.of(MetricsSettings), settings.of(AlertsSettings)
    if metrics is not None:
        directory, store, vmauth = metrics.directory, metrics.store, metrics.vmauth
        assert (store, vmauth) == ("http://127.0.0.1:8428", "http://127.0.0.1:8427")
        # vmauth starts with a configuration (no user yet) and a key only the pod's user reads.
        assert yaml.safe_load((directory / AUTH_CONFIG).read_text()) == {"users": []}
        assert stat.S_IMODE((directory / RELOAD_KEY).stat().st_mode) == 0o600
        grants = json.loads((directory / GRANTS_FILE).read_text())
        assert grants["store"] == store
        assert grants["alerts"] == ("http://127.0.0.1:9095" if alerts else None)
        # A grant the operator makes routes to the store named in the file.
        VmauthGrants(directory).grant("scenario-a")
        routes = yaml.safe_load((directory / AUTH_CONFIG).read_text())["users"][0]["url_map"]
        assert routes[0]["url_prefix"].startswith(f"{store}/?extra_label=namespace=scenario-a")
    if alerts is not None:
        rules, vmalert = alerts.rules, alerts.vmalert
        assert [p.name for p in rules.iterdir()] == ["_empty.yaml"]
        assert vmalert == "http://127.0.0.1:8880"
        assert by_name["alerts-rules"]["workingDir"] == str(rules).replace(str(local_root), root)
    # In its pod, with a tool plane, the operator needs the gateway's URL: the chart gives it.
    gateway = GatewaySettings.parse(
        parsed.tool_gateway_addr,
        parsed.tool_gateway_port,
        parsed.tool_gateway_url,
        in_cluster=True,
        toolplane=True,
    )
    assert gateway.url == f"http://oasis-operator-tool-gateway.{NAMESPACE}.svc:8090"
    assert "oasis-operator-tool-gateway" in {s["metadata"]["name"] for s in by_kind(docs, "Service")}


def test_prepare_keeps_a_key_and_grants_already_there(render: Render, tmp_path: Path) -> None:
    """A restarted pod keeps its volume: the init container runs again and must not drop a token."""
    text = toolplane_file(render(ALL_ON)).replace("/var/lib/oasis/toolplane", str(tmp_path))
    (tmp_path / "toolplane.json").write_text(text)
    args = build_parser().parse_args(
        ["operator", "prepare-toolplane", f"--toolplane={tmp_path}/toolplane.json"]
    )
    args.func(args)
    key = (tmp_path / "metrics" / RELOAD_KEY).read_text()
    token, _ = VmauthGrants(tmp_path / "metrics").grant("scenario-a")
    args.func(args)
    assert (tmp_path / "metrics" / RELOAD_KEY).read_text() == key
    assert VmauthGrants(tmp_path / "metrics").grants() == {"scenario-a": token}


def test_every_back_end_runs_the_command_line_of_the_local_stack(render: Render) -> None:
    """The containers' arguments are the ones oasis_operator/devcluster/backends starts the same
    binaries with (the same functions build both), at the chart's directories and ports."""
    values = {
        "toolPlane": {
            "metrics": {"enabled": True, "store": {"port": 18428}, "vmauth": {"port": 18427}},
            "alerts": {"enabled": True, "vmalert": {"port": 18880}, "labelProxy": {"port": 19095}},
            "traces": {"enabled": True},
        }
    }
    docs = render(values)
    by_name = containers(operator_pod(docs))
    doc = json.loads(toolplane_file(docs))["backends"]
    metrics = Path(doc["metrics"]["directory"])
    store = doc["metrics"]["endpoints"]["store"]
    assert store == "http://127.0.0.1:18428"
    assert by_name["metrics-store"]["args"] == store_args(metrics, "127.0.0.1:18428")
    assert by_name["metrics-auth"]["args"] == vmauth_args(metrics, "127.0.0.1:18427")
    assert by_name["alerts-rules"]["args"] == vmalert_args(store, "127.0.0.1:18880")
    assert by_name["alerts-proxy"]["args"] == label_proxy_args("http://127.0.0.1:18880", "127.0.0.1:19095")
    assert doc["metrics"]["endpoints"]["prometheus"] == "http://127.0.0.1:18427"
    assert doc["alerts"]["endpoints"] == {
        "vmalert": "http://127.0.0.1:18880",
        "alerts-proxy": "http://127.0.0.1:19095",
    }
    # The operator starts Jaeger from <traces directory>/jaeger (adapters/toolplane/traces.py).
    assert by_name["jaeger-binary"]["command"][-1] == f"{doc['traces']['directory']}/{BINARY}"
    images = {n: c["image"] for n, c in by_name.items()}
    assert images["metrics-store"] == "victoriametrics/victoria-metrics:v1.151.0"
    assert images["metrics-auth"] == "victoriametrics/vmauth:v1.151.0"
    assert images["alerts-rules"] == "victoriametrics/vmalert:v1.151.0"
    assert images["alerts-proxy"] == "quay.io/prometheuscommunity/prom-label-proxy:v0.11.1"
    assert images["jaeger-binary"] == "jaegertracing/jaeger:2.13.0"


def test_the_image_tags_are_the_versions_the_local_stack_builds() -> None:
    """The chart's pinned tags follow tools/backends/ (versions.env and the jaeger module)."""
    repo = Path(__file__).resolve().parents[2]
    pins = dict(
        line.split("=", 1)
        for line in (repo / "tools/backends/versions.env").read_text().splitlines()
        if line and not line.startswith("#")
    )
    tp = yaml.safe_load((repo / "charts/oasis-operator/values.yaml").read_text())["toolPlane"]
    vm = pins["VICTORIAMETRICS_VERSION"]
    assert {tp["metrics"]["store"]["image"]["tag"], tp["metrics"]["vmauth"]["image"]["tag"]} == {vm}
    assert tp["alerts"]["vmalert"]["image"]["tag"] == vm
    assert tp["alerts"]["labelProxy"]["image"]["tag"] == pins["PROM_LABEL_PROXY_VERSION"]
    # Jaeger publishes each release twice: module v1.N.P is image 2.(N-63).P (v1.76.0 is 2.13.0).
    gomod = (repo / "tools/backends/jaeger/go.mod").read_text()
    (module,) = [
        ln.split()[1]
        for ln in gomod.splitlines()
        if ln.strip().startswith("github.com/jaegertracing/jaeger ")
    ]
    _, minor, patch = module.lstrip("v").split(".")
    assert tp["traces"]["image"]["tag"] == f"2.{int(minor) - 63}.{patch}"


def test_every_container_of_the_pod_runs_unprivileged_with_a_read_only_root(render: Render) -> None:
    for name, container in containers(operator_pod(render(ALL_ON))).items():
        sc = container["securityContext"]
        assert (sc["readOnlyRootFilesystem"], sc["allowPrivilegeEscalation"], sc["runAsNonRoot"]) == (
            True,
            False,
            True,
        ), name
        assert sc["capabilities"] == {"drop": ["ALL"]}, name
        assert container["resources"]["limits"]["memory"], name
        # Back-ends listen on localhost only: nothing outside the pod reaches them but the gateway.
        assert not container.get("ports") or name == "operator", name
        assert not [a for a in container.get("args", []) if "0.0.0.0" in a and name != "operator"], name


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        ({"alerts": {"enabled": True}}, "/toolPlane/metrics/enabled"),
        ({"resourceUsage": {"enabled": True}}, "/toolPlane/logs/enabled"),
        ({"flux": {"enabled": True}}, "'flux' not allowed"),
        ({"metrics": {"enabled": True, "vmauth": {"port": 80}}}, "/toolPlane/metrics/vmauth/port"),
        ({"traces": {"enabled": True, "image": {"tag": ""}}}, "/toolPlane/traces/image/tag"),
        ({"traces": {"binary": "jaeger"}}, "/toolPlane/traces/binary"),
        ({"metrics": {"enabled": "yes"}}, "/toolPlane/metrics/enabled"),
    ],
)
def test_the_values_schema_refuses_bad_tool_plane_values(
    tools: Tools, tmp_path: Path, values: dict[str, Any], complaint: str
) -> None:
    refused_by_schema(tools, tmp_path, {"toolPlane": values}, complaint)


@pytest.mark.parametrize(
    "values",
    [
        {"metrics": {"enabled": True, "store": {"port": 8080}}},
        {"metrics": {"enabled": True, "vmauth": {"port": 8428}}},
        {"metrics": {"enabled": True}, "alerts": {"enabled": True, "labelProxy": {"port": 8090}}},
    ],
)
def test_a_port_used_twice_in_the_pod_is_refused(
    tools: Tools, tmp_path: Path, values: dict[str, Any]
) -> None:
    done = helm_template(tools, tmp_path, {"toolPlane": values})
    assert done.returncode != 0
    assert "is already used in the operator's pod" in done.stderr


@pytest.mark.cluster
def test_kubeconform_and_the_api_server_accept_the_chart_with_its_back_ends(apply_chart: ApplyChart) -> None:
    docs, answers = apply_chart(ALL_ON)
    assert ("ConfigMap", "oasis-operator-toolplane") in answers
    (operator,) = [d for d in by_kind(docs, "Deployment") if d["metadata"]["name"] == "oasis-operator"]
    applied = answers[("Deployment", "oasis-operator")].json()["spec"]["template"]["spec"]
    assert [c["name"] for c in applied["containers"]] == [
        c["name"] for c in operator["spec"]["template"]["spec"]["containers"]
    ]
    assert [c["name"] for c in applied["initContainers"]] == ["prepare-toolplane", "jaeger-binary"]
