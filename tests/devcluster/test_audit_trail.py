"""The audit log records what a service account really did, as the verification engine will read it."""

from __future__ import annotations

import json
import time
import uuid
from typing import Any

import httpx2
import pytest

from oasis_operator.core.environment.manifests import POOL_TAINT, toleration
from oasis_operator.devcluster import kube

pytestmark = pytest.mark.cluster

DEPLOY_RULES = [
    {
        "apiGroups": ["apps"],
        "resources": ["deployments"],
        "verbs": ["get", "list", "create", "patch", "update", "delete"],
    },
    {"apiGroups": ["apps"], "resources": ["deployments/scale"], "verbs": ["get", "patch", "update"]},
]


def deployment(name: str, replicas: int = 1) -> dict[str, Any]:
    labels = {"app": name}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": name, "labels": labels},
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": labels},
            "template": {
                "metadata": {"labels": labels},
                # The simulated nodes are the pool: only pods tolerating its taint go there.
                "spec": {
                    "containers": [{"name": "web", "image": "registry.example/web:1.0"}],
                    "tolerations": [toleration(POOL_TAINT)],
                },
            },
        },
    }


def find(events: list[dict[str, Any]], audit_id: str) -> dict[str, Any]:
    matches = [e for e in events if e.get("auditID") == audit_id and e.get("stage") == "ResponseComplete"]
    assert len(matches) == 1, f"expected one ResponseComplete event for {audit_id}, got {len(matches)}"
    return matches[0]


def test_every_request_of_a_service_account_is_in_the_audit_log(cluster, admin, namespace, audit):
    sa = kube.create_service_account(admin, namespace, "operator-bot", DEPLOY_RULES)
    base = f"/apis/apps/v1/namespaces/{namespace}/deployments"
    ids: dict[str, str] = {}

    def call(label: str, method: str, path: str, **kw: Any) -> httpx2.Response:
        ids[label] = f"{label}-{uuid.uuid4()}"
        headers = {"Audit-ID": ids[label], **kw.pop("headers", {})}
        return http.request(method, path, headers=headers, **kw)

    with cluster.token_http(sa.token) as http:
        assert call("create", "POST", base, json=deployment("web")).status_code == 201
        r = call(
            "patch",
            "PATCH",
            f"{base}/web",
            content=b'{"metadata":{"labels":{"tier":"front"}}}',
            headers={"Content-Type": "application/strategic-merge-patch+json"},
        )
        assert r.status_code == 200
        r = call(
            "scale",
            "PATCH",
            f"{base}/web/scale",
            content=b'{"spec":{"replicas":3}}',
            headers={"Content-Type": "application/merge-patch+json"},
        )
        assert r.status_code == 200, r.text
        assert call("delete", "DELETE", f"{base}/web").status_code == 200
        # Outside the Role: reading secrets is denied, and the attempt is still recorded.
        assert call("denied", "GET", f"/api/v1/namespaces/{namespace}/secrets").status_code == 403

    events = audit.barrier()
    expected = {
        "create": ("create", "web", None, 201),  # the name is taken from the body
        "patch": ("patch", "web", None, 200),
        "scale": ("patch", "web", "scale", 200),
        "delete": ("delete", "web", None, 200),
        "denied": ("list", None, None, 403),
    }
    for label, (verb, name, subresource, code) in expected.items():
        event = find(events, ids[label])
        assert event["user"]["username"] == sa.username, label
        assert event["verb"] == verb, label
        ref = event["objectRef"]
        assert ref["namespace"] == namespace, label
        assert ref["resource"] == ("secrets" if label == "denied" else "deployments"), label
        assert ref.get("name") == name, label
        assert ref.get("subresource") == subresource, label
        assert event["responseStatus"]["code"] == code, label
        if label in ("create", "patch", "scale"):
            assert "requestObject" in event, f"{label}: a write must be logged with its request body"
    assert find(events, ids["create"])["requestObject"]["spec"]["replicas"] == 1
    assert find(events, ids["scale"])["requestObject"] == {"spec": {"replicas": 3}}
    assert find(events, ids["patch"])["requestObject"]["metadata"]["labels"] == {"tier": "front"}
    # The denied read is logged at Metadata level: who, what and the refusal, no bodies.
    denied = find(events, ids["denied"])
    assert denied["level"] == "Metadata"
    assert denied["annotations"]["authorization.k8s.io/decision"] == "forbid"


def test_a_request_is_found_in_the_audit_log_by_its_audit_id(cluster, admin, audit):
    audit_id = f"probe-{uuid.uuid4()}"
    r = admin.get("/api/v1/namespaces/kube-system", headers={"Audit-ID": audit_id})
    assert r.status_code == 200
    assert r.headers["Audit-Id"] == audit_id
    event = find(audit.barrier(), audit_id)
    # A request on a Namespace object carries the namespace's own name as objectRef.namespace too:
    # the matcher must not read that as "a request inside namespace kube-system".
    assert event["objectRef"] == {
        "resource": "namespaces",
        "name": "kube-system",
        "namespace": "kube-system",
        "apiVersion": "v1",
    }
    assert event["user"]["username"] == "kubernetes-admin"


def test_secret_values_and_issued_tokens_never_reach_the_audit_log(cluster, admin, namespace, audit):
    value = f"s3cr3t-{uuid.uuid4().hex}"
    body = {"metadata": {"name": "db"}, "stringData": {"password": value}}
    kube.expect(admin.post(f"/api/v1/namespaces/{namespace}/secrets", json=body), "create secret", 201)
    sa = kube.create_service_account(admin, namespace, "reader", [])
    events = audit.barrier()
    raw = "\n".join(map(str, events))
    assert value not in raw
    assert sa.token not in raw
    secret_events = [e for e in events if e.get("objectRef", {}).get("resource") == "secrets"]
    assert secret_events
    assert all(e["level"] == "Metadata" for e in secret_events)


def test_controller_writes_are_attributed_to_controllers_not_to_the_requester(
    cluster, admin, namespace, audit
):
    kube.expect(
        admin.post(f"/apis/apps/v1/namespaces/{namespace}/deployments", json=deployment("api", 2)),
        "create deployment",
        201,
    )
    # Wait until the ReplicaSet controller has created the pods, then collect.
    pods: list[Any] = []
    for _ in range(100):
        pods = admin.get(f"/api/v1/namespaces/{namespace}/pods").json()["items"]
        if len(pods) == 2 and all(p["spec"].get("nodeName") for p in pods):
            break
        time.sleep(0.1)
    assert len(pods) == 2
    events = audit.barrier()
    pod_creates = [
        e
        for e in events
        if e.get("verb") == "create"
        and e.get("objectRef", {}).get("resource") == "pods"
        and e["objectRef"].get("namespace") == namespace
        and "subresource" not in e["objectRef"]
    ]
    bindings = [
        e
        for e in events
        if e.get("objectRef", {}).get("subresource") == "binding"
        and e["objectRef"].get("namespace") == namespace
    ]
    assert {e["user"]["username"] for e in bindings} == {"system:kube-scheduler"}
    assert {e["user"]["username"] for e in pod_creates} == {
        "system:serviceaccount:kube-system:replicaset-controller"
    }
    assert all(e["level"] == "Metadata" for e in pod_creates)


def test_the_operators_writes_of_scenario_objects_carry_their_body_its_bookkeeping_does_not(
    cluster, admin, namespace, audit
):
    """The harness (the operator's identity): a write of a scenario object is logged with its request
    body, so the state cross-check can tell what it touched; its ConfigMaps (reports, evidence) and
    Secrets are logged without one, and none of its requests at RequestReceived."""
    ids = {label: f"{label}-{uuid.uuid4()}" for label in ("status", "label", "configmap", "secret")}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "probe"},
        "spec": {"schedulerName": "none", "containers": [{"name": "c", "image": "registry.example/c:1"}]},
    }
    kube.expect(admin.post(f"/api/v1/namespaces/{namespace}/pods", json=pod), "create pod", 201)
    merge = {"Content-Type": "application/merge-patch+json"}
    with kube.http_from_kubeconfig(cluster.dev.operator_kubeconfig) as operator:
        base = f"/api/v1/namespaces/{namespace}"
        writes = {
            "status": operator.patch(
                f"{base}/pods/probe/status",
                json={"status": {"conditions": [{"type": "Ready", "status": "False"}]}},
                headers={**merge, "Audit-ID": ids["status"]},
            ),
            "label": operator.patch(
                f"{base}/pods/probe",
                json={"metadata": {"labels": {"tier": "front"}}},
                headers={**merge, "Audit-ID": ids["label"]},
            ),
            "configmap": operator.post(
                f"{base}/configmaps",
                json={"metadata": {"name": "report"}, "data": {"k": "v"}},
                headers={"Audit-ID": ids["configmap"]},
            ),
            "secret": operator.post(
                f"{base}/secrets",
                json={"metadata": {"name": "token"}, "stringData": {"k": "v"}},
                headers={"Audit-ID": ids["secret"]},
            ),
        }
    for label, resp in writes.items():
        assert resp.status_code in (200, 201), f"{label}: {resp.text}"
    events = audit.barrier()
    status, label = find(events, ids["status"]), find(events, ids["label"])
    assert status["user"]["username"] == "oasis-operator"
    assert status["objectRef"]["subresource"] == "status"
    assert status["level"] == "Request"
    assert status["requestObject"]["status"]["conditions"][0]["type"] == "Ready"
    assert label["requestObject"] == {"metadata": {"labels": {"tier": "front"}}}
    for kept in ("configmap", "secret"):
        event = find(events, ids[kept])
        assert event["level"] == "Metadata", kept
        assert "requestObject" not in event, kept
    assert not [e for e in events if e.get("auditID") in ids.values() and e["stage"] == "RequestReceived"]


def test_the_operators_server_side_apply_leaves_its_final_event_with_its_body(
    cluster, admin, namespace, audit
):
    """The operator provisions with server-side applies (Content-Type application/apply-patch+yaml,
    a JSON body: lightkube's). Logged with its body (rule 4b), such a request still has its final
    event, unlike an apply whose body is YAML text (the API server cannot write that one's): the
    operator's RequestReceived stage is not logged, so a lost final event would leave no trace."""
    audit_id = f"apply-{uuid.uuid4()}"
    body = {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "applied", "namespace": namespace},
        "spec": {"ports": [{"port": 80}], "selector": {"app": "applied"}},
    }
    with kube.http_from_kubeconfig(cluster.dev.operator_kubeconfig) as operator:
        resp = operator.patch(
            f"/api/v1/namespaces/{namespace}/services/applied",
            params={"fieldManager": "oasis-operator", "force": "true"},
            content=json.dumps(body),
            headers={"Content-Type": "application/apply-patch+yaml", "Audit-ID": audit_id},
        )
    assert resp.status_code in (200, 201), resp.text
    event = find(audit.barrier(), audit_id)
    assert event["user"]["username"] == "oasis-operator"
    assert event["verb"] == "patch"
    assert event["level"] == "Request"
    assert event["requestObject"]["spec"]["selector"] == {"app": "applied"}
