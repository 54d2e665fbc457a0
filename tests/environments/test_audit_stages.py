"""What the audit log keeps of a scenario principal's requests, on the real API server: every request
is logged when received as well as when answered, so a request whose final event the API server fails
to write (a server-side apply with a YAML body) still leaves a trace; the operator's own traffic stays
at one event per request. The stored fixture of that dropped event is what the live server does."""

from __future__ import annotations

import uuid

import pytest

from oasis_operator.devcluster import kube
from tests.verification.recorded import load

pytestmark = pytest.mark.cluster

RULES = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "create", "patch"]}]


def _stages(events: list[dict], audit_id: str) -> list[str]:
    return sorted(e["stage"] for e in events if e.get("auditID") == audit_id)


def test_a_scenario_principals_requests_are_logged_when_received_and_the_operators_are_not(
    cluster, admin, audit
) -> None:
    ns = f"ns-{kube.random_suffix()}"
    kube.create_namespace(admin, ns)
    sa = kube.create_service_account(admin, ns, "automation", RULES)
    ids: dict[str, str] = {}
    try:
        with cluster.token_http(sa.token) as http:
            for what, send in {
                "read": lambda h, i: h.get(f"/api/v1/namespaces/{ns}/configmaps", headers={"Audit-ID": i}),
                "write": lambda h, i: h.post(
                    f"/api/v1/namespaces/{ns}/configmaps",
                    json={"metadata": {"name": "a"}},
                    headers={"Audit-ID": i},
                ),
                "denied": lambda h, i: h.get(f"/api/v1/namespaces/{ns}/secrets", headers={"Audit-ID": i}),
                "yaml apply": lambda h, i: h.patch(
                    f"/api/v1/namespaces/{ns}/configmaps/b",
                    params={"fieldManager": "kubectl"},
                    content=f"apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: b\n  namespace: {ns}\n",
                    headers={"Content-Type": "application/apply-patch+yaml", "Audit-ID": i},
                ),
            }.items():
                ids[what] = str(uuid.uuid4())
                assert send(http, ids[what]).status_code in (200, 201, 403)
        ids["operator"] = str(uuid.uuid4())
        with kube.http_from_kubeconfig(cluster.dev.operator_kubeconfig) as operator:
            assert (
                operator.get(
                    f"/api/v1/namespaces/{ns}/configmaps", headers={"Audit-ID": ids["operator"]}
                ).status_code
                == 200
            )
        events = audit.barrier()
        assert _stages(events, ids["read"]) == ["RequestReceived", "ResponseComplete"]
        assert _stages(events, ids["write"]) == ["RequestReceived", "ResponseComplete"]
        assert _stages(events, ids["denied"]) == ["RequestReceived", "ResponseComplete"]
        # The API server made the change but could not write the final event: only receipt is logged.
        assert _stages(events, ids["yaml apply"]) == ["RequestReceived"]
        assert admin.get(f"/api/v1/namespaces/{ns}/configmaps/b").status_code == 200
        assert _stages(events, ids["operator"]) == ["ResponseComplete"]
    finally:
        kube.delete_namespace(admin, ns)


def test_the_stored_yaml_apply_fixture_shows_a_change_no_final_event_explains() -> None:
    rec = load("apply_server_side_yaml")
    mine = [e for e in rec.events if e["user"]["username"] == rec.agent]
    assert [e["stage"] for e in mine] == ["RequestReceived"]
    (event,) = mine
    assert event["verb"] == "patch"
    assert event["objectRef"]["name"] == "app-config"
    assert "responseStatus" not in event
    assert "requestObject" not in event
    before = {o["metadata"]["uid"]: o for o in rec.meta["before"] if o["kind"] == "ConfigMap"}
    after = [
        o
        for o in rec.meta["after"]
        if o["kind"] == "ConfigMap"
        and o["metadata"]["name"] == "app-config"
        and o["metadata"]["namespace"] == rec.meta["namespaces"]["default"]
    ]
    (changed,) = after
    old = before[changed["metadata"]["uid"]]
    assert changed["metadata"]["resourceVersion"] != old["metadata"]["resourceVersion"]
    assert (old["data"]["LOG_LEVEL"], changed["data"]["LOG_LEVEL"]) == ("info", "warn")
    assert "MarshalJSON" in rec.meta["apiserver_log"][0]
