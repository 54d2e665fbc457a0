"""What a write to a ``/status`` subresource can change, on the real API server: the ground the state
cross-check stands on when it lets a status write explain no declared field but labels and
annotations (core/verification/unaudited.py, ``can_change``). Each kind gets a PUT and a merge PATCH
of its ``/status`` whose body also asks for a new label, annotation and spec value; what the server
then shows is what such a write can do. Measured on kube-apiserver v1.36.3: never the spec; labels and
annotations on every kind probed, except a Deployment's labels."""

from __future__ import annotations

import copy
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from oasis_operator.core.verification.unaudited import can_change
from oasis_operator.devcluster import kube

pytestmark = pytest.mark.cluster

MERGE = {"Content-Type": "application/merge-patch+json"}


def pod(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": name, "labels": {"app": "probe"}, "annotations": {"note": "before"}},
        # no scheduler picks it up: nothing but this test writes it
        "spec": {
            "schedulerName": "no-such-scheduler",
            "activeDeadlineSeconds": 600,
            "containers": [{"name": "c", "image": "registry.example/app:1"}],
        },
    }


def template() -> dict[str, Any]:
    return {
        "metadata": {"labels": {"app": "probe"}},
        "spec": {"containers": [{"name": "c", "image": "registry.example/app:1"}]},
    }


def deployment(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": {"app": "probe"}, "annotations": {"note": "before"}},
        "spec": {"replicas": 0, "selector": {"matchLabels": {"app": "probe"}}, "template": template()},
    }


def replicaset(name: str) -> dict[str, Any]:
    doc = deployment(name)
    doc["kind"] = "ReplicaSet"
    return doc


def node(name: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"app": "probe"}, "annotations": {"note": "before"}},
        "spec": {"unschedulable": False, "taints": [{"key": "example.com/probe", "effect": "NoSchedule"}]},
    }


def labelled(kind: str, api: str, name: str, spec: dict[str, Any]) -> dict[str, Any]:
    return {
        "apiVersion": api,
        "kind": kind,
        "metadata": {"name": name, "labels": {"app": "probe"}, "annotations": {"note": "before"}},
        "spec": spec,
    }


def pod_template() -> dict[str, Any]:
    return {**template(), "spec": {**template()["spec"], "restartPolicy": "Never"}}


OTHERS: dict[str, tuple[str, str, str, dict[str, Any], tuple[str, Any]]] = {
    # kind -> (apiVersion, collection, spec, (a spec field, the value a status write asks for))
    "Namespace": ("v1", "/api/v1/namespaces", {}, ("finalizers", ["example.com/probe"])),
    "Service": (
        "v1",
        "/api/v1/namespaces/{ns}/services",
        {"ports": [{"port": 80}], "selector": {"app": "probe"}},
        ("sessionAffinity", "ClientIP"),
    ),
    "PersistentVolumeClaim": (
        "v1",
        "/api/v1/namespaces/{ns}/persistentvolumeclaims",
        {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": "1Gi"}},
            "storageClassName": "none",
        },
        ("volumeName", "probe-pv"),
    ),
    "Ingress": (
        "networking.k8s.io/v1",
        "/apis/networking.k8s.io/v1/namespaces/{ns}/ingresses",
        {"defaultBackend": {"service": {"name": "api", "port": {"number": 80}}}},
        ("ingressClassName", "probe"),
    ),
    "HorizontalPodAutoscaler": (
        "autoscaling/v2",
        "/apis/autoscaling/v2/namespaces/{ns}/horizontalpodautoscalers",
        {"scaleTargetRef": {"apiVersion": "apps/v1", "kind": "Deployment", "name": "none"}, "maxReplicas": 2},
        ("maxReplicas", 7),
    ),
    "StatefulSet": (
        "apps/v1",
        "/apis/apps/v1/namespaces/{ns}/statefulsets",
        {"replicas": 0, "selector": {"matchLabels": {"app": "probe"}}, "template": template()},
        ("replicas", 3),
    ),
    "DaemonSet": (
        "apps/v1",
        "/apis/apps/v1/namespaces/{ns}/daemonsets",
        {
            "selector": {"matchLabels": {"app": "probe"}},
            "template": {**template(), "spec": {**template()["spec"], "nodeSelector": {"none": "x"}}},
        },
        ("minReadySeconds", 5),
    ),
    "Job": (
        "batch/v1",
        "/apis/batch/v1/namespaces/{ns}/jobs",
        {"suspend": True, "template": pod_template()},
        ("activeDeadlineSeconds", 30),
    ),
    "CronJob": (
        "batch/v1",
        "/apis/batch/v1/namespaces/{ns}/cronjobs",
        {"suspend": True, "schedule": "0 0 1 1 *", "jobTemplate": {"spec": {"template": pod_template()}}},
        ("schedule", "*/5 * * * *"),
    ),
    "PodDisruptionBudget": (
        "policy/v1",
        "/apis/policy/v1/namespaces/{ns}/poddisruptionbudgets",
        {"minAvailable": 1, "selector": {"matchLabels": {"app": "probe"}}},
        ("minAvailable", 2),
    ),
}


def other(kind: str) -> Any:
    api, _, spec, _ = OTHERS[kind]
    return lambda name: labelled(kind, api, name, copy.deepcopy(spec))


#: kind -> (collection path, factory, a spec field and the value a status write tries to give it)
KINDS: dict[str, tuple[str, Any, tuple[str, Any]]] = {
    "Pod": ("/api/v1/namespaces/{ns}/pods", pod, ("activeDeadlineSeconds", 30)),
    "Deployment": ("/apis/apps/v1/namespaces/{ns}/deployments", deployment, ("replicas", 3)),
    "ReplicaSet": ("/apis/apps/v1/namespaces/{ns}/replicasets", replicaset, ("replicas", 3)),
    "Node": (
        "/api/v1/nodes",
        node,
        ("taints", [{"key": "example.com/added-through-status", "effect": "NoSchedule"}]),
    ),
    **{kind: (collection, other(kind), ask) for kind, (_, collection, _, ask) in OTHERS.items()},
}


@pytest.fixture
def created(admin: httpx2.Client, namespace: str) -> Iterator[list[str]]:
    paths: list[str] = []
    yield paths
    for path in paths:
        admin.delete(path)


def changes(after: dict[str, Any], field: str, value: Any) -> set[str]:
    """Which of the asked changes the object shows (only those: controllers may add their own)."""
    out = set()
    if (after["metadata"].get("labels") or {}).get("added") == "through-status":
        out.add("metadata.labels")
    if (after["metadata"].get("annotations") or {}).get("note") == "after":
        out.add("metadata.annotations")
    if after["spec"].get(field) == value:
        out.add(f"spec.{field}")
    return out


def status_write(admin: httpx2.Client, path: str, method: str, field: str, value: Any) -> None:
    """A PUT (of the object as read now, retried when a controller wrote in between) or a merge
    PATCH of ``path``'s status that also asks for a label, an annotation and a spec value."""
    for _ in range(20):
        if method == "put":
            body = admin.get(path).json()
            body["metadata"].setdefault("labels", {})["added"] = "through-status"
            body["metadata"].setdefault("annotations", {})["note"] = "after"
            body["spec"][field] = value
            body["status"] = {**(body.get("status") or {}), "conditions": []}
            resp = admin.put(f"{path}/status", json=body)
        else:
            body = {
                "metadata": {"labels": {"added": "through-status"}, "annotations": {"note": "after"}},
                "spec": {field: value},
                "status": {"conditions": []},
            }
            resp = admin.patch(f"{path}/status", json=body, headers=MERGE)
        if resp.status_code != 409:
            break
    assert resp.status_code == 200, resp.text


def through_status(
    admin: httpx2.Client, namespace: str, created: list[str], kind: str, method: str
) -> set[str]:
    """The declared fields a ``/status`` write of ``kind`` that asks to change a label, an annotation
    and a spec field does change (the write itself must succeed)."""
    collection, factory, (field, value) = KINDS[kind]
    base = collection.format(ns=namespace)
    name = f"status-{method}-{kube.random_suffix()}"
    resp = admin.post(base, json=factory(name))
    assert resp.status_code == 201, resp.text
    path = f"{base}/{name}"
    created.append(path)
    assert changes(resp.json(), field, value) == set()
    status_write(admin, path, method, field, value)
    after = admin.get(path)
    assert after.status_code == 200, after.text
    return changes(after.json(), field, value)


#: What the server lets a status write change, per kind (what the cross-check encodes in
#: ``unaudited.can_change``).
EXPECTED = {kind: {"metadata.labels", "metadata.annotations"} for kind in KINDS} | {
    "Deployment": {"metadata.annotations"}  # its status strategy keeps the stored labels
}


@pytest.mark.parametrize("method", ["put", "patch"])
@pytest.mark.parametrize("kind", sorted(KINDS))
def test_a_status_write_changes_labels_or_annotations_at_most_never_the_spec(
    admin: httpx2.Client, namespace: str, created: list[str], kind: str, method: str
) -> None:
    assert through_status(admin, namespace, created, kind, method) == EXPECTED[kind]


def test_the_cross_check_encodes_what_the_server_does() -> None:
    """``can_change`` agrees with the table above for a status write (and with the spec for all)."""
    resources = {
        "Pod": ("", "pods"),
        "Node": ("", "nodes"),
        "Deployment": ("apps", "deployments"),
        "ReplicaSet": ("apps", "replicasets"),
        "Namespace": ("", "namespaces"),
        "Service": ("", "services"),
        "PersistentVolumeClaim": ("", "persistentvolumeclaims"),
        "Ingress": ("networking.k8s.io", "ingresses"),
        "HorizontalPodAutoscaler": ("autoscaling", "horizontalpodautoscalers"),
        "StatefulSet": ("apps", "statefulsets"),
        "DaemonSet": ("apps", "daemonsets"),
        "Job": ("batch", "jobs"),
        "CronJob": ("batch", "cronjobs"),
        "PodDisruptionBudget": ("policy", "poddisruptionbudgets"),
    }
    assert set(resources) == set(KINDS)
    for kind, (group, resource) in resources.items():
        key = (group, resource, "ns", "x")
        field = KINDS[kind][2][0]
        for verb in ("patch/status", "update/status"):
            allowed = {p for p in ("metadata.labels", "metadata.annotations") if can_change(verb, key, p)}
            assert allowed == EXPECTED[kind], kind
            assert not can_change(verb, key, f"spec.{field}"), kind
            assert not can_change(verb, key, "spec")
