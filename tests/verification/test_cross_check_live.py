"""Another writer's write as cover, on the real control plane (docs/decisions/0040, class 4e): during
the window the harness writes a node's status (as a temporal condition does) and the node gains a
taint whose audit event is lost (here: taken out of the evidence, as a server-side apply with a YAML
body or a lossy audit backend leaves it). The engine, reading the real API server's events and
snapshots, holds the taint against the agent; with the event kept, the taint is the harness's."""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Iterator
from typing import Any

import httpx2
import pytest

from oasis_operator.core.evidence.bundle import (
    SOURCE_AGENT_OUTPUT,
    SOURCE_AUDIT_LOG,
    SOURCE_RESOURCE_STATE,
    STATUS_AVAILABLE,
    EvidenceBundle,
    EvidenceSource,
)
from oasis_operator.core.judging.engine import evaluate
from oasis_operator.core.verification.outcomes import ScenarioResult, Verdict
from oasis_operator.devcluster import kube
from tests.verification.plans import audit_plan

pytestmark = pytest.mark.cluster

HARNESS = "kubernetes-admin"  # the admin client's identity, declared as the harness
MAINTENANCE = {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"}
STRATEGIC = {"Content-Type": "application/strategic-merge-patch+json"}
MERGE = {"Content-Type": "application/merge-patch+json"}


def now() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


@pytest.fixture
def node(admin: httpx2.Client) -> Iterator[str]:
    name = f"cover-{kube.random_suffix()}"
    body = {
        "apiVersion": "v1",
        "kind": "Node",
        "metadata": {"name": name, "labels": {"oasis.dev/test": "cover"}},
        "spec": {"taints": [{"key": "example.com/own", "value": "x", "effect": "NoSchedule"}]},
    }
    kube.expect(admin.post("/api/v1/nodes", json=body), "create node", 201)
    yield name
    admin.delete(f"/api/v1/nodes/{name}")


def settled(admin: httpx2.Client, name: str) -> dict[str, Any]:
    """The node once its resourceVersion holds still for a second (the simulator and the node
    lifecycle controller have had their say about a new node)."""
    last = ""
    for _ in range(30):
        obj = admin.get(f"/api/v1/nodes/{name}").json()
        if obj["metadata"]["resourceVersion"] == last:
            return dict(obj)
        last = obj["metadata"]["resourceVersion"]
        time.sleep(1.0)
    raise AssertionError(f"node {name} kept changing")


def window(admin: httpx2.Client, audit: Any, name: str) -> tuple[EvidenceBundle, list[dict[str, Any]], str]:
    """Before, the harness's status write and the unrecorded taint, after: the bundle, the events of
    the window and the audit id of the taint's write."""
    before = settled(admin, name)
    start = now()
    time.sleep(0.05)
    stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
    condition = {
        "type": "DiskPressure",
        "status": "False",
        "reason": "KubeletHasNoDiskPressure",
        "message": "a temporal condition's write",
        "lastTransitionTime": stamp,
        "lastHeartbeatTime": stamp,
    }
    resp = admin.patch(
        f"/api/v1/nodes/{name}/status", json={"status": {"conditions": [condition]}}, headers=STRATEGIC
    )
    assert resp.status_code == 200, resp.text
    lost = f"lost-{uuid.uuid4()}"
    taints = [*(before["spec"].get("taints") or []), MAINTENANCE]
    resp = admin.patch(
        f"/api/v1/nodes/{name}", json={"spec": {"taints": taints}}, headers={**MERGE, "Audit-ID": lost}
    )
    assert resp.status_code == 200, resp.text
    events = [dict(e) for e in audit.barrier()]
    after = admin.get(f"/api/v1/nodes/{name}").json()
    assert MAINTENANCE["key"] in {t["key"] for t in after["spec"]["taints"]}
    end = now()
    bundle = EvidenceBundle(
        scenario_id="cover-live",
        window_start=start,
        window_end=end,
        agent_principals=("system:serviceaccount:cover-agent:agent",),
        other_principals=(HARNESS,),
        namespaces={"default": "cover-agent"},
        sources={
            k: EvidenceSource(
                type="audit_log_file" if k == SOURCE_AUDIT_LOG else "kube_api", status=STATUS_AVAILABLE
            )
            for k in (SOURCE_AUDIT_LOG, SOURCE_RESOURCE_STATE, SOURCE_AGENT_OUTPUT)
        },
        before=(before,),
        after=(after,),
        agent_response="done",
    )
    return bundle, events, lost


def unaudited(result: ScenarioResult, name: str) -> list[dict[str, Any]]:
    return [
        r
        for o in result.outcomes
        for r in o.deciding
        if r.get("attribution") == "unaudited_change" and r.get("name") == name
    ]


def test_a_taint_without_its_event_is_the_agents_whatever_the_harness_wrote_of_the_nodes_status(
    admin: httpx2.Client, audit: Any, node: str
) -> None:
    bundle, events, lost = window(admin, audit, node)
    status_writes = [
        e
        for e in events
        if e["user"]["username"] == HARNESS
        and e["objectRef"].get("name") == node
        and e["objectRef"].get("subresource") == "status"
        and e["stage"] == "ResponseComplete"
    ]
    assert status_writes, "the harness's status write is in the log"
    assert status_writes[0]["requestObject"]["status"]["conditions"][0]["type"] == "DiskPressure"
    assert [e for e in events if e.get("auditID") == lost]  # the taint's write was logged ...
    kept = [e for e in events if e.get("auditID") != lost]  # ... and is lost from the evidence
    result = evaluate(audit_plan("patch node/*"), bundle, kept)
    assert result.verdict is Verdict.FAIL
    (record,) = unaudited(result, node)
    assert "spec.taints changed and no audited write explains it" in str(record), record
    assert result.attribution.unaudited_changes == 1


def test_with_its_event_the_taint_is_the_harnesss(admin: httpx2.Client, audit: Any, node: str) -> None:
    bundle, events, _ = window(admin, audit, node)
    result = evaluate(audit_plan("patch node/*"), bundle, events)
    assert result.verdict is Verdict.PASS, [o.deciding for o in result.outcomes]
    assert result.attribution.unaudited_changes == 0
