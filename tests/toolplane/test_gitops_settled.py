"""When a GitOps application is proven settled in a snapshot (decision 0069): the scenario workflow reads
the "before" snapshot again until it is, or the agent does not run; and reads the "after" snapshot again
while the controller is caught mid-reconcile. Over the plan of ``sc.drift-introduction-001`` and
snapshot objects shaped as the API server and Flux write them."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from oasis_operator.core.toolplane.gitops import differs, reconciling, unsettled
from tests.toolplane.test_plan import DRIFT, _plan

PLAN = _plan(DRIFT, frozenset({"gitops"}))
[APP] = PLAN.toolplane.gitops
REV = "main@sha1:" + "c" * 40


def ready(status: str = "True", reason: str = "ReconciliationSucceeded") -> dict[str, Any]:
    return {"type": "Ready", "status": status, "reason": reason, "message": "m"}


def snapshot(**change: Any) -> list[dict[str, Any]]:
    kustomization = {
        "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
        "kind": "Kustomization",
        "metadata": {"name": APP.name, "namespace": APP.namespace},
        "spec": {
            "sourceRef": {"kind": "GitRepository", "name": APP.name},
            "suspend": change.get("suspend", False),
        },
        "status": {
            "conditions": [change.get("ready", ready())],
            "lastAppliedRevision": change.get("applied", REV),
            "lastAttemptedRevision": change.get("applied", REV),
        },
    }
    source = {
        "apiVersion": "source.toolkit.fluxcd.io/v1",
        "kind": "GitRepository",
        "metadata": {"name": APP.name, "namespace": APP.namespace},
        "status": {
            "conditions": [change.get("source_ready", ready("True", "Succeeded"))],
            "artifact": {"revision": change.get("artifact", REV)},
        },
    }
    managed = []
    for declared in APP.objects:
        live = copy.deepcopy(dict(declared))
        live["metadata"] = {
            **live["metadata"],
            "uid": "u",
            "labels": {
                **(live["metadata"].get("labels") or {}),
                "kustomize.toolkit.fluxcd.io/name": APP.name,
            },
        }
        live["spec"]["progressDeadlineSeconds"] = 600  # a default the API server adds
        live["status"] = {"replicas": 1}
        managed.append(live)
    objects = [kustomization, source, *managed]
    if "edit" in change:
        change["edit"](objects)
    return objects


def test_a_settled_application_has_no_problem() -> None:
    assert unsettled(APP, snapshot()) == []
    assert not reconciling(APP, snapshot())


def set_image(objects: list[dict[str, Any]]) -> None:
    objects[2]["spec"]["template"]["spec"]["containers"][0]["image"] = "api-service:v9"


def drop_label(objects: list[dict[str, Any]]) -> None:
    del objects[2]["metadata"]["labels"]["kustomize.toolkit.fluxcd.io/name"]


@pytest.mark.parametrize(
    ("change", "problem"),
    [
        ({"ready": ready("Unknown", "Progressing")}, "is not synced (Ready=Unknown Progressing"),
        (
            {"ready": ready("False", "ReconciliationFailed")},
            "is not synced (Ready=False ReconciliationFailed",
        ),
        ({"suspend": True}, "is not synced"),
        ({"artifact": "main@sha1:" + "d" * 40}, "its source's artifact is 'main@sha1:dddd"),
        ({"source_ready": ready("Unknown", "Progressing")}, "GitRepository"),
        ({"edit": set_image}, "differs from the repository at spec.template.spec.containers[0].image"),
        ({"edit": drop_label}, "does not carry the label kustomize.toolkit.fluxcd.io/name"),
        ({"edit": lambda objects: objects.pop(2)}, "of the repository is not in the snapshot"),
        ({"edit": lambda objects: objects.pop(1)}, "the source GitRepository"),
        ({"edit": lambda objects: objects.pop(0)}, "Kustomization"),
    ],
    ids=[
        "reconciling",
        "apply-failed",
        "suspended",
        "source-fetched-a-revision-not-applied",
        "source-fetching",
        "managed-object-drifted",
        "managed-object-not-the-controllers",
        "managed-object-missing",
        "source-missing",
        "kustomization-missing",
    ],
)
def test_what_is_not_settled_is_named(change: dict[str, Any], problem: str) -> None:
    problems = unsettled(APP, snapshot(**change))
    assert any(problem in p for p in problems), problems


def test_only_a_reconcile_in_progress_is_read_again() -> None:
    assert reconciling(APP, snapshot(ready=ready("Unknown", "Progressing")))
    assert not reconciling(APP, snapshot(ready=ready("False", "ReconciliationFailed")))


def test_declared_fields_are_compared_and_defaults_beside_them_are_not() -> None:
    assert differs({"a": 1, "b": {"c": [1, {"d": 2, "e": 3}]}}, {"b": {"c": [1, {"d": 2}]}}) is None
    assert differs({"b": {"c": [1]}}, {"b": {"c": [1, 2]}}) == "b.c"
    assert differs({"replicas": 2}, {"replicas": "2"}) is None
    assert differs({"x": {}}, {"x": {"y": 1}}) == "x.y"
