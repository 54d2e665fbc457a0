"""The chart's targets mode (decisions 0100, 0109), rendered: the operator starts its targets in a
volume of their own and serves them at the pod's IP; its ClusterRole is the narrow one (what the
management cluster holds), never the shared mode's; bad target values are refused by the schema. The
narrow role itself runs live in tests/targets/test_operator_in_targets.py."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tests.shipping.conftest import Render, Tools, by_kind, refused_by_schema

TARGETS = {"scenarioClusters": {"mode": "targets", "targets": {"most": 6, "backends": ["logs", "metrics"]}}}


def _operator(docs: list[dict[str, Any]]) -> dict[str, Any]:
    (deployment,) = [
        d for d in by_kind(docs, "Deployment") if d["metadata"]["name"].endswith("oasis-operator")
    ]
    (container,) = [
        c for c in deployment["spec"]["template"]["spec"]["containers"] if c["name"] == "operator"
    ]
    return {"pod": deployment["spec"]["template"]["spec"], "container": container}


def test_in_targets_the_operator_starts_targets_in_a_volume_and_serves_them_at_its_pod_ip(
    render: Render,
) -> None:
    op = _operator(render(TARGETS))
    args = op["container"]["args"]
    assert "--scenario-clusters=targets" in args
    assert "--targets-most=6" in args
    assert "--target-backends=logs,metrics" in args
    root = next(a.split("=", 1)[1] for a in args if a.startswith("--targets-root="))
    env = {e["name"]: e for e in op["container"]["env"]}
    assert env["OASIS_TARGET_ADDRESS"]["valueFrom"]["fieldRef"]["fieldPath"] == "status.podIP"
    mounts = {m["mountPath"]: m["name"] for m in op["container"]["volumeMounts"]}
    volumes = {v["name"]: v for v in op["pod"]["volumes"]}
    assert volumes[mounts[root]]["emptyDir"]["sizeLimit"] == "8Gi"
    shared = _operator(render(None))
    assert not [a for a in shared["container"]["args"] if a.startswith("--scenario-clusters")]
    assert "OASIS_TARGET_ADDRESS" not in {e["name"] for e in shared["container"]["env"]}


def test_in_targets_the_cluster_role_grants_nothing_a_scenario_would_need_here(render: Render) -> None:
    def rules(values: dict[str, Any] | None) -> list[dict[str, Any]]:
        roles = [
            r
            for r in by_kind(render(values), "ClusterRole")
            if r["metadata"]["name"].endswith("oasis-operator")
        ]
        assert len(roles) == 1, [r["metadata"]["name"] for r in roles]
        return list(roles[0]["rules"])

    narrow = rules(TARGETS)
    granted = {
        (g, r, v)
        for rule in narrow
        for g in rule["apiGroups"]
        for r in rule["resources"]
        for v in rule["verbs"]
    }
    for group, resource in [
        ("", "pods"),
        ("", "serviceaccounts/token"),
        ("", "nodes"),
        ("rbac.authorization.k8s.io", "roles"),
        ("rbac.authorization.k8s.io", "clusterroles"),
        ("apps", "deployments"),
    ]:
        assert not [x for x in granted if x[0] == group and x[1] == resource], (group, resource)
    assert not [x for x in granted if x[1] == "namespaces" and x[2] not in ("get", "list", "watch")]
    assert not [x for x in granted if x[1] == "secrets" and x[2] != "get"], "Secrets are read by name only"
    assert ("oasis.dev", "evaluationruns/status", "patch") in granted
    # The shared mode's role is the wide one: the narrow one is really narrower.
    wide = {(g, r) for rule in rules(None) for g in rule["apiGroups"] for r in rule["resources"]}
    assert ("", "pods") in wide


def test_bad_target_values_are_refused_by_the_schema(tools: Tools, tmp_path: Path) -> None:
    refused_by_schema(tools, tmp_path, {"scenarioClusters": {"mode": "somewhere"}}, "/scenarioClusters/mode")
    refused_by_schema(
        tools, tmp_path, {"scenarioClusters": {"mode": "targets", "targets": {"most": 0}}}, "most"
    )
    refused_by_schema(
        tools,
        tmp_path,
        {"scenarioClusters": {"mode": "targets", "targets": {"backends": ["kafka"]}}},
        "backends",
    )
