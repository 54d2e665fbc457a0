"""The values common charts accept (pod metadata, scheduling, pull secrets, a registry mirror, extra env
and volumes, name overrides), probes on every long-running container, the minimum Kubernetes version,
and a release that may have any name in any namespace."""

from __future__ import annotations

import copy
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.shipping.conftest import (
    CHART,
    FULL_VALUES,
    THIRD_PARTY,
    Tools,
    by_kind,
    helm_template,
    kubeconform,
)

MIRROR = "mirror.example.test:5000/oasis"
DIGEST = "sha256:" + "ab" * 32

#: Every common value set at once, on top of every optional part of the chart.
COMMON_VALUES: dict[str, Any] = {
    **copy.deepcopy(FULL_VALUES),
    "global": {"imageRegistry": MIRROR},
    "image": {"digest": DIGEST},
    "imagePullSecrets": [{"name": "regcred"}],
    "podAnnotations": {"example.test/owner": "platform"},
    "podLabels": {"team": "platform"},
    "priorityClassName": "oasis-critical",
    "nodeSelector": {"kubernetes.io/os": "linux"},
    "tolerations": [{"key": "dedicated", "operator": "Equal", "value": "oasis", "effect": "NoSchedule"}],
    "affinity": {
        "nodeAffinity": {
            "requiredDuringSchedulingIgnoredDuringExecution": {
                "nodeSelectorTerms": [
                    {"matchExpressions": [{"key": "type", "operator": "NotIn", "values": ["kwok"]}]}
                ]
            }
        }
    },
    "extraEnv": [
        {"name": "HTTPS_PROXY", "value": "http://proxy.example.test:3128"},
        {"name": "TOKEN", "valueFrom": {"secretKeyRef": {"name": "t", "key": "k"}}},
    ],
    "extraVolumes": [{"name": "ca-bundle", "configMap": {"name": "ca-bundle"}}],
    "extraVolumeMounts": [{"name": "ca-bundle", "mountPath": "/etc/ssl/extra", "readOnly": True}],
    "fullnameOverride": "gate",
}


def _docs(done: subprocess.CompletedProcess[str]) -> list[dict[str, Any]]:
    assert done.returncode == 0, done.stderr
    return [d for d in yaml.safe_load_all(done.stdout) if d]


def _pods(docs: list[dict[str, Any]]) -> list[dict[str, Any]]:
    return [d["spec"]["template"] for d in by_kind(docs, "Deployment")]


def _operator(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = [
        d
        for d in by_kind(docs, "Deployment")
        if d["metadata"]["labels"]["app.kubernetes.io/component"] == "operator"
    ]
    spec: dict[str, Any] = deployment["spec"]["template"]["spec"]
    return spec


def test_helm_lint_accepts_every_common_value(tools: Tools, tmp_path: Path) -> None:
    (tmp_path / "v.yaml").write_text(yaml.safe_dump(COMMON_VALUES))
    done = subprocess.run(
        [str(tools.helm), "lint", str(CHART), "--strict", "--values", str(tmp_path / "v.yaml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "[WARNING]" not in done.stdout


#: The common values with the chart's defaults otherwise: the node simulator in a pod of its own.
COMMON_ONLY = {k: v for k, v in COMMON_VALUES.items() if k not in FULL_VALUES}


@pytest.mark.parametrize(
    ("values", "pods"), [(COMMON_VALUES, 1), (COMMON_ONLY, 2)], ids=["everything-on", "defaults"]
)
def test_every_pod_takes_the_common_pod_values(
    tools: Tools, tmp_path: Path, values: dict[str, Any], pods: int
) -> None:
    # With the log back-end the node simulator runs in the operator's pod; else in its own.
    rendered = _pods(_docs(helm_template(tools, tmp_path, values)))
    assert len(rendered) == pods
    for pod in rendered:
        assert pod["metadata"]["labels"]["team"] == "platform"
        assert pod["metadata"]["annotations"]["example.test/owner"] == "platform"
        spec = pod["spec"]
        assert spec["priorityClassName"] == "oasis-critical"
        assert spec["imagePullSecrets"] == [{"name": "regcred"}]
        assert spec["nodeSelector"] == COMMON_VALUES["nodeSelector"]
        assert spec["tolerations"] == COMMON_VALUES["tolerations"]
        assert spec["affinity"] == COMMON_VALUES["affinity"]


def test_extra_env_and_volumes_reach_the_operator(tools: Tools, tmp_path: Path) -> None:
    spec = _operator(_docs(helm_template(tools, tmp_path, COMMON_VALUES)))
    (operator,) = [c for c in spec["containers"] if c["name"] == "operator"]
    env = {e["name"]: e for e in operator["env"]}
    assert env["HTTPS_PROXY"]["value"] == "http://proxy.example.test:3128"
    assert env["TOKEN"]["valueFrom"] == {"secretKeyRef": {"name": "t", "key": "k"}}
    assert env["POD_NAMESPACE"]["valueFrom"]["fieldRef"]["fieldPath"] == "metadata.namespace"
    assert COMMON_VALUES["extraVolumeMounts"][0] in operator["volumeMounts"]
    assert COMMON_VALUES["extraVolumes"][0] in spec["volumes"]


def test_one_registry_value_moves_every_image_to_the_mirror(tools: Tools, tmp_path: Path) -> None:
    docs = _docs(helm_template(tools, tmp_path, COMMON_VALUES))
    images = {
        c["image"]
        for pod in _pods(docs)
        for c in pod["spec"]["containers"] + pod["spec"].get("initContainers", [])
    }
    assert len(images) >= 8
    assert {i for i in images if not i.startswith(MIRROR + "/")} == set()
    # The registry host is replaced, the path kept; the operator's image is pinned by its digest.
    assert f"{MIRROR}/oasis-operator/oasis-operator@{DIGEST}" in images
    assert any(i.startswith(f"{MIRROR}/prometheuscommunity/prom-label-proxy:") for i in images)
    assert any(i.startswith(f"{MIRROR}/victoriametrics/victoria-metrics:") for i in images)
    assert any(i.startswith(f"{MIRROR}/postgres:") for i in images)


def test_without_a_mirror_images_are_as_the_values_name_them(tools: Tools, tmp_path: Path) -> None:
    docs = _docs(helm_template(tools, tmp_path, FULL_VALUES))
    spec = _operator(docs)
    images = {c["name"]: c["image"] for c in spec["containers"]}
    assert images["operator"] == "ghcr.io/oasis-operator/oasis-operator:0.1.0"
    assert images["metrics-store"].startswith("victoriametrics/victoria-metrics:v")


def test_every_long_running_container_has_a_liveness_probe(tools: Tools, tmp_path: Path) -> None:
    docs = _docs(helm_template(tools, tmp_path, FULL_VALUES))
    containers = [(c["name"], c) for pod in _pods(docs) for c in pod["spec"]["containers"]]
    # The operator, 5 back-ends, the git server and the node simulator (in the operator's pod with logs on).
    assert len(containers) == 8
    assert [name for name, c in containers if "livenessProbe" not in c] == []
    # The back-ends listen on 127.0.0.1 only, so their probes run inside the container.
    probes = {name: c["livenessProbe"] for name, c in containers}
    assert probes["metrics-store"]["exec"]["command"] == [
        "wget",
        "-q",
        "-O",
        "/dev/null",
        "http://127.0.0.1:8428/health",
    ]
    assert probes["database"]["exec"]["command"][:1] == ["pg_isready"]
    assert "127.0.0.1" in probes["database"]["exec"]["command"]
    # Only the operator gates the pod's readiness (it holds the audit webhook and the gateway).
    assert [name for name, c in containers if "readinessProbe" in c] == ["operator", "node-agent"]


def test_a_back_end_probe_can_be_replaced(tools: Tools, tmp_path: Path) -> None:
    values = copy.deepcopy(FULL_VALUES)
    probe = {"tcpSocket": {"port": 5432}, "periodSeconds": 7}
    values["toolPlane"]["database"]["livenessProbe"] = probe
    spec = _operator(_docs(helm_template(tools, tmp_path, values)))
    (database,) = [c for c in spec["containers"] if c["name"] == "database"]
    assert database["livenessProbe"] == probe


@pytest.mark.parametrize(("version", "accepted"), [("1.29.9", False), ("1.30.0", True), ("1.36.3", True)])
def test_kubernetes_older_than_1_30_is_refused(
    tools: Tools, tmp_path: Path, version: str, accepted: bool
) -> None:
    # ValidatingAdmissionPolicy (admissionregistration.k8s.io/v1), which the operator applies, is GA in 1.30.
    done = subprocess.run(
        [str(tools.helm), "template", "r", str(CHART), "--kube-version", version],
        capture_output=True,
        text=True,
        check=False,
    )
    assert (done.returncode == 0) is accepted, done.stderr
    if not accepted:
        assert "kubeVersion" in done.stderr


@pytest.mark.parametrize("values", [{}, {"fullnameOverride": "gate"}], ids=["release-name", "override"])
def test_no_object_names_a_fixed_release_or_namespace(
    tools: Tools, tmp_path: Path, values: dict[str, Any]
) -> None:
    merged = {**copy.deepcopy(FULL_VALUES), **values}
    (tmp_path / "v.yaml").write_text(yaml.safe_dump(merged))
    done = subprocess.run(
        [
            str(tools.helm),
            "template",
            "eval",
            str(CHART),
            "--namespace",
            "qa-gates",
            "--kube-version",
            "1.36.3",
            "--values",
            str(tmp_path / "v.yaml"),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    docs = _docs(done)
    assert "oasis-system" not in done.stdout
    prefix = "gate" if values else "eval-oasis-operator"
    for doc in docs:
        meta = doc["metadata"]
        if doc["kind"] == "CustomResourceDefinition" or doc["kind"] == "Node":
            continue
        if "namespace" in meta:
            assert meta["namespace"] == "qa-gates", (doc["kind"], meta)
        assert meta["name"].startswith(prefix), (doc["kind"], meta["name"])
    for binding in by_kind(docs, "ClusterRoleBinding") + by_kind(docs, "RoleBinding"):
        for subject in binding["subjects"]:
            assert subject["namespace"] == "qa-gates"
            assert subject["name"].startswith(prefix)


@pytest.mark.cluster
def test_kubeconform_strict_accepts_the_chart_with_every_common_value(
    tools: Tools, tmp_path: Path, schema_dir: Path
) -> None:
    done = helm_template(tools, tmp_path, COMMON_VALUES)
    docs = _docs(done)
    third_party = sum(1 for d in docs if d["kind"] in THIRD_PARTY)
    report = kubeconform(tools, schema_dir, done.stdout, "-skip", ",".join(THIRD_PARTY))
    problems = [r for r in report["resources"] if r["status"] != "statusValid"]
    assert report["returncode"] == 0, problems
    assert report["summary"]["valid"] == len(docs) - third_party
    assert (report["summary"]["invalid"], report["summary"]["errors"]) == (0, 0)
