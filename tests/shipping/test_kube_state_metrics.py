"""The chart's kube-state-metrics CustomResourceState config (files/kube-state-metrics.yaml): valid
YAML of the documented shape, producing ``oasis_evaluationrun_info{verdict,phase,agent,...}``, and every
path it reads exists in the EvaluationRun CRD's schema with a type the metric can use."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from oasis_operator.core.model.crd import all_crds
from tests.shipping.conftest import CHART, Render, by_kind

CONFIG = CHART / "files" / "kube-state-metrics.yaml"
CRD = all_crds()["evaluationruns.oasis.dev.yaml"]
SCHEMA: dict[str, Any] = CRD["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
#: kube-state-metrics reads these from every object; the CRD schema leaves metadata to the API server.
METADATA = {("metadata", "name"), ("metadata", "namespace")}
SCALARS = {"string", "integer", "number", "boolean"}


class PathError(Exception):
    pass


def schema_at(schema: dict[str, Any], path: list[str], where: str) -> dict[str, Any]:
    """The schema node ``path`` leads to from ``schema``, or :class:`PathError` naming the first part
    that is not a field."""
    node = schema
    for i, part in enumerate(path):
        props = node.get("properties", {})
        if part not in props:
            raise PathError(f"{where}: {'.'.join(path[: i + 1])}: no such field (have: {sorted(props)})")
        node = props[part]
    return node


def _resource() -> dict[str, Any]:
    doc = yaml.safe_load(CONFIG.read_text())
    assert doc["kind"] == "CustomResourceStateMetrics"
    (resource,) = doc["spec"]["resources"]
    return dict(resource)


def _check_labels(node: dict[str, Any], labels: dict[str, list[str]], where: str) -> None:
    for label, path in labels.items():
        if tuple(path) in METADATA and node is SCHEMA:
            continue
        leaf = schema_at(node, path, f"{where} label {label}")
        assert leaf.get("type") in SCALARS, f"{where} label {label}: {path} is not a scalar: {leaf}"


def _check_gauge(gauge: dict[str, Any], where: str) -> None:
    node = schema_at(SCHEMA, gauge["path"], where)
    if "labelFromKey" in gauge:
        # A map: one series per key, its value the metric's.
        assert node["type"] == "object", where
        assert node["additionalProperties"]["type"] in {"integer", "number"}, where
        return
    if node.get("type") == "array":
        item = node["items"]
        _check_labels(item, gauge.get("labelsFromPath", {}), where)
        value = schema_at(item, gauge["valueFrom"], f"{where} valueFrom")
        assert value.get("type") in {"boolean", "integer", "number"} or set(value.get("enum", [])) <= {
            "True",
            "False",
            "Unknown",
        }, where
        return
    # A scalar: a number, a boolean or an RFC 3339 time (kube-state-metrics reads it as Unix time).
    assert (
        node.get("type") in {"integer", "number", "boolean"}
        or node.get("format") == "date-time"
        or ("Time" in gauge["path"][-1] and node.get("type") == "string")
    ), f"{where}: {node}"


def test_the_config_reads_evaluation_runs_of_the_crds_group_version_and_plural() -> None:
    resource = _resource()
    names = CRD["spec"]["names"]
    assert resource["groupVersionKind"] == {
        "group": CRD["spec"]["group"],
        "version": CRD["spec"]["versions"][0]["name"],
        "kind": names["kind"],
    }
    assert resource["resourcePlural"] == names["plural"]


def test_the_info_metric_is_named_and_labelled_as_documented() -> None:
    resource = _resource()
    families = {f"{resource['metricNamePrefix']}_{m['name']}": m for m in resource["metrics"]}
    info = families["oasis_evaluationrun_info"]
    assert info["each"]["type"] == "Info"
    labels = info["each"]["info"]["labelsFromPath"]
    assert {"verdict", "phase", "agent", "agent_version", "profile", "incomplete"} <= set(labels)
    assert labels["agent"] == ["status", "agent", "name"]
    assert labels["incomplete"] == ["status", "report", "incomplete"]
    assert set(resource["labelsFromPath"]) == {"name", "namespace"}


def test_every_path_exists_in_the_crd_schema_with_a_usable_type() -> None:
    resource = _resource()
    _check_labels(SCHEMA, resource["labelsFromPath"], "resource")
    assert resource["metrics"]
    for metric in resource["metrics"]:
        where = metric["name"]
        assert metric["help"], where
        each = metric["each"]
        if each["type"] == "Info":
            _check_labels(SCHEMA, each["info"]["labelsFromPath"], where)
        else:
            assert each["type"] == "Gauge", where
            _check_gauge(each["gauge"], where)


def test_a_path_the_crd_does_not_have_is_found() -> None:
    with pytest.raises(PathError, match=r"status\.agent\.nmae: no such field"):
        schema_at(SCHEMA, ["status", "agent", "nmae"], "x")
    with pytest.raises(PathError, match=r"status\.incomplete"):
        _check_labels(SCHEMA, {"incomplete": ["status", "incomplete"]}, "x")


def test_the_chart_ships_the_config_and_the_right_to_read_runs(render: Render) -> None:
    docs = render()
    (config,) = [
        c for c in by_kind(docs, "ConfigMap") if c["metadata"]["name"].endswith("-kube-state-metrics")
    ]
    assert yaml.safe_load(config["data"]["config.yaml"]) == yaml.safe_load(CONFIG.read_text())
    (role,) = [
        r for r in by_kind(docs, "ClusterRole") if r["metadata"]["name"].endswith("-kube-state-metrics")
    ]
    assert role["rules"] == [
        {"apiGroups": ["oasis.dev"], "resources": ["evaluationruns"], "verbs": ["list", "watch"]}
    ]
    assert not [
        b for b in by_kind(docs, "ClusterRoleBinding") if "kube-state-metrics" in b["metadata"]["name"]
    ]
    bound = render({"kubeStateMetrics": {"serviceAccount": {"name": "ksm", "namespace": "monitoring"}}})
    (binding,) = [
        b for b in by_kind(bound, "ClusterRoleBinding") if "kube-state-metrics" in b["metadata"]["name"]
    ]
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": "ksm", "namespace": "monitoring"}]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]


def test_the_config_file_is_not_a_template() -> None:
    # The ConfigMap embeds it with .Files.Get: Helm would not expand template syntax, so none may be there.
    text = Path(CONFIG).read_text()
    assert "{{" not in text
