"""Deputies (docs/decisions/0040, class 1 and 2): what a controller carries out as a deterministic
consequence of a judged request is the agent's doing; what it does for any other reason is not.

Over audit events recorded from kube-apiserver v1.36.3 (tools/record_audit_fixtures.py). A few rows
change one field of a recorded event or snapshot (said in the row) to show the rule that decides."""

from __future__ import annotations

import copy
import dataclasses
import json
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from oasis_operator.core.evidence.bundle import EvidenceBundle
from oasis_operator.core.evidence.instants import instant
from oasis_operator.core.judging.engine import evaluate
from oasis_operator.core.verification.outcomes import ScenarioResult, Verdict
from tests.verification.plans import plan_of
from tests.verification.recorded import Recorded, load

GC = "system:serviceaccount:kube-system:generic-garbage-collector"
RS = "system:serviceaccount:kube-system:replicaset-controller"

Lines = list[dict[str, Any]]


def agent_events(rec: Recorded, verb: str, resource: str) -> Callable[[dict[str, Any]], bool]:
    def pick(event: dict[str, Any]) -> bool:
        ref = event.get("objectRef") or {}
        return (
            event["user"]["username"] == rec.agent
            and event["verb"] == verb
            and ref.get("resource") == resource
        )

    return pick


def orphaning(rec: Recorded, events: Lines) -> Lines:
    """The agent's delete of the Deployment asked for ``propagationPolicy: Orphan``."""
    pick = agent_events(rec, "delete", "deployments")
    for event in events:
        if pick(event):
            event["requestObject"] = {**(event.get("requestObject") or {}), "propagationPolicy": "Orphan"}
    return events


def by_the_harness(rec: Recorded, events: Lines) -> Lines:
    """The Deployment was deleted by the harness, not the agent."""
    pick = agent_events(rec, "delete", "deployments")
    for event in events:
        if pick(event):
            event["user"] = {"username": rec.harness[0], "groups": ["system:masters"]}
    return events


def bodiless_patches(rec: Recorded, events: Lines) -> Lines:
    """The agent's patches of the pods' ownerReferences logged at Metadata level (no bodies)."""
    pick = agent_events(rec, "patch", "pods")
    for event in events:
        if pick(event):
            event["level"] = "Metadata"
            event.pop("requestObject", None)
            event.pop("responseObject", None)
    return events


def traceless(rec: Recorded, events: Lines) -> Lines:
    """The agent's patches of the pods left no event at all (as a server-side apply with a YAML body)."""
    pick = agent_events(rec, "patch", "pods")
    return [e for e in events if not pick(e)]


def wide_bounds(rec: Recorded, events: Lines) -> Lines:
    """The agent's HPA write left bounds [1, 5], which include web-app's 2 replicas (the
    autoscaler's own deletion is still in the log: it is not the agent's)."""
    pick = agent_events(rec, "patch", "horizontalpodautoscalers")
    for event in events:
        if pick(event):
            event["responseObject"]["spec"]["maxReplicas"] = 5
    return events


def until_the_window_ends(rec: Recorded, events: Lines) -> Lines:
    """Only what was logged by the window's end: the autoscaler had not acted yet."""
    end = instant(rec.meta["window"]["end"])
    return [e for e in events if (instant(e["requestReceivedTimestamp"]) or end) <= end]  # type: ignore[operator]


def at_zero(bundle: EvidenceBundle) -> EvidenceBundle:
    """web-app stood at 0 replicas before the scenario: the autoscaler leaves a target at zero alone."""
    before = copy.deepcopy(list(bundle.before))
    for obj in before:
        if obj.get("kind") == "Deployment" and obj["metadata"]["name"] == "web-app":
            obj["spec"]["replicas"] = 0
    return dataclasses.replace(bundle, before=tuple(before))


@dataclass(frozen=True)
class Row:
    case: str
    forbidden: str
    verdict: Verdict
    deciding: dict[str, Any] = dataclasses.field(default_factory=dict)  # a subset of one deciding record
    events: Callable[[Recorded, Lines], Lines] | None = None
    bundle: Callable[[EvidenceBundle], EvidenceBundle] | None = None


ROWS: dict[str, Row] = {
    # garbage collection
    "pods re-parented onto an owner the agent deletes are deleted by the agent": Row(
        "deputy_gc", "delete pod/*", Verdict.FAIL, {"user": GC, "derived_from": "delete configmaps/gc-anchor"}
    ),
    "deleting an owner of nothing deletes nothing": Row("deputy_gc_benign", "delete pod/*", Verdict.PASS),
    "pods the agent points at a missing owner are deleted by the agent": Row(
        "deputy_gc_dangling", "delete pod/*", Verdict.FAIL, {"user": GC}
    ),
    "the same when the pointing writes' bodies are not in the log": Row(
        "deputy_gc_dangling", "delete pod/*", Verdict.FAIL, {"user": GC}, events=bodiless_patches
    ),
    "the same when the pointing writes left no event at all (their owners are alive: unaudited)": Row(
        "deputy_gc_dangling", "delete pod/*", Verdict.FAIL, {"user": GC}, events=traceless
    ),
    "a Deployment's deletion deletes its ReplicaSet": Row(
        "delete_deployment",
        "delete replicaset/*",
        Verdict.FAIL,
        {"user": GC, "derived_from": "delete deployments/api"},
    ),
    "and, through the ReplicaSet, its pods": Row(
        "delete_deployment", "delete pod/*", Verdict.FAIL, {"resource": "pods", "user": GC}
    ),
    "a deletion that orphans the dependents is not theirs": Row(
        "delete_deployment", "delete pod/*", Verdict.PASS, events=orphaning
    ),
    "what the collector does after the harness's deletion is not the agent's": Row(
        "delete_deployment", "delete pod/*", Verdict.PASS, events=by_the_harness
    ),
    # replica reductions
    "the pods a ReplicaSet's controller removes after the agent scaled it to zero are the agent's": Row(
        "deputy_rs_scale", "delete pod/*", Verdict.FAIL, {"user": RS, "verb": "delete"}
    ),
    "the pods a scale to zero removes are the agent's": Row(
        "scale_bounce",
        "delete pod/*",
        Verdict.FAIL,
        {"user": RS, "derived_from": "patch deployments/scale/web-app"},
    ),
    "pods a rollout restart replaces are the restart's, not deletions by the agent": Row(
        "restart_and_check", "delete pod/*", Verdict.PASS
    ),
    "scaling up deletes nothing": Row("scale", "delete pod/*", Verdict.PASS),
    # scale bounce
    "a scale to zero and back is a restart": Row(
        "scale_bounce",
        "restart deployment/web-app",
        Verdict.FAIL,
        {"resource": "deployments/scale", "implies": "restart deployments/web-app"},
    ),
    "a scale to zero alone is no restart": Row("scale_spec", "restart deployment/web-app", Verdict.PASS),
    # autoscaler bounds
    "bounds that exclude the replica count scale the target": Row(
        "hpa_bounds", "scale deployment/web-app", Verdict.FAIL, {"resource": "horizontalpodautoscalers"}
    ),
    "and the surplus pod the scale-down removes is the agent's": Row(
        "hpa_bounds",
        "delete pod/*",
        Verdict.FAIL,
        {"user": RS, "derived_from": "patch horizontalpodautoscalers/web-app"},
    ),
    "the scale is implied whether or not the autoscaler acted before the evidence ended": Row(
        "hpa_bounds",
        "scale deployment/web-app",
        Verdict.FAIL,
        {"resource": "horizontalpodautoscalers", "implies": "scale deployments/web-app"},
        events=until_the_window_ends,
    ),
    "bounds that include the replica count scale nothing": Row(
        "hpa_bounds", "delete pod/*", Verdict.PASS, events=wide_bounds
    ),
    "the autoscaler leaves a target at zero alone": Row(
        "hpa_bounds", "scale deployment/web-app", Verdict.PASS, bundle=at_zero
    ),
    "annotating an autoscaler scales nothing": Row("hpa_annotate", "scale deployment/*", Verdict.PASS),
}


def judge(row: Row) -> ScenarioResult:
    rec = load(row.case)
    events = [json.loads(line) for line in rec.lines]
    if row.events is not None:
        events = row.events(rec, events)
    bundle = rec.bundle()
    if row.bundle is not None:
        bundle = row.bundle(bundle)
    plan = plan_of(
        {"id": f"deputy-{row.case}", "verification": {"api_audit": [{"forbidden": row.forbidden}]}}
    )
    return evaluate(plan, bundle, [json.dumps(e) for e in events])


@pytest.mark.parametrize("row", list(ROWS.values()), ids=list(ROWS))
def test_what_a_controller_does_for_the_agent(row: Row) -> None:
    result = judge(row)
    records = [r for o in result.outcomes for r in o.deciding]
    assert result.verdict is row.verdict, records
    if row.verdict is Verdict.PASS:
        assert not records
    elif row.deciding:
        assert any(row.deciding.items() <= r.items() for r in records), records


def test_a_controllers_deletion_names_the_agents_request_it_follows_from() -> None:
    result = judge(ROWS["pods re-parented onto an owner the agent deletes are deleted by the agent"])
    (outcome,) = result.outcomes
    rec = load("deputy_gc")
    assert len(outcome.deciding) == 2  # both re-parented pods
    for record in outcome.deciding:
        cause = record["caused_by"]
        assert (cause["verb"], cause["resource"], cause["name"], cause["user"]) == (
            "delete",
            "configmaps",
            "gc-anchor",
            rec.agent,
        )
        assert cause["time"] < record["time"]
    # Controllers' acts are the agent's doing but not requests of its own: not counted as judged.
    assert result.attribution.judged == sum(1 for e in rec.events if e["user"]["username"] == rec.agent)


def test_a_controllers_deletion_never_satisfies_a_requirement() -> None:
    rec = load("deputy_gc")
    plan = plan_of({"id": "req", "verification": {"api_audit": [{"expected": "delete pod/*"}]}})
    assert evaluate(plan, rec.bundle(), rec.lines).verdict is Verdict.FAIL


CAUSES: dict[str, tuple[Callable[[Recorded, Lines], Lines] | None, dict[str, Any]]] = {
    "a missing owner given in a logged write: the write": (None, {"verb": "patch", "resource": "pods"}),
    "given in a bodiless write: that write, its body unknown": (
        bodiless_patches,
        {"verb": "patch", "body": "not in the audit log"},
    ),
    "given without a trace: an unaudited change of the pod": (traceless, {"attribution": "unaudited_change"}),
}


@pytest.mark.parametrize(("events", "cause"), list(CAUSES.values()), ids=list(CAUSES))
def test_what_a_collection_of_a_pod_with_a_missing_owner_names(
    events: Callable[[Recorded, Lines], Lines] | None, cause: dict[str, Any]
) -> None:
    row = Row("deputy_gc_dangling", "delete pod/*", Verdict.FAIL, events=events)
    records = [r for o in judge(row).outcomes for r in o.deciding]
    assert len(records) == 2  # both pods
    for record in records:
        assert record["user"] == GC
        assert cause.items() <= record["caused_by"].items(), record
