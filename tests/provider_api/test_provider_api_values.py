"""The provider API's values: which audit entries an observation returns, the field-level state diff,
the snapshot's selection, and the conformance document (pure, no server)."""

from __future__ import annotations

from typing import Any

import pytest

from oasis_operator.core import provider_api as api

NAMESPACES = {"default": "default-bcdfg", "staging": "staging-bcdfg"}


def event(
    verb: str, resource: str, ns: str | None, at: str, *, stage: str = "ResponseComplete", name: str = "web"
) -> dict[str, Any]:
    ref: dict[str, Any] = {"resource": resource, "name": name}
    if ns:
        ref["namespace"] = ns
    return {
        "stage": stage,
        "verb": verb,
        "objectRef": ref,
        "requestReceivedTimestamp": at,
        "auditID": f"{verb}-{at}",
        "user": {"username": "agent"},
        "responseStatus": {"code": 200},
    }


EVENTS = [
    event("get", "deployments", "default-bcdfg", "2026-12-02T10:00:00Z"),
    event("patch", "deployments", "default-bcdfg", "2026-12-02T10:00:05Z"),
    event("patch", "deployments", "default-bcdfg", "2026-12-02T10:00:05Z", stage="RequestReceived"),
    event("delete", "pods", "staging-bcdfg", "2026-12-02T10:00:10Z"),
    event("delete", "pods", "someone-elses", "2026-12-02T10:00:11Z"),
    event("get", "namespaces", None, "2026-12-02T10:00:12Z", name="staging-bcdfg"),
]

ENTRIES: dict[str, tuple[dict[str, Any], list[str]]] = {
    "every completed event of the environment's namespaces, none of another's": (
        {},
        [
            "get-2026-12-02T10:00:00Z",
            "patch-2026-12-02T10:00:05Z",
            "delete-2026-12-02T10:00:10Z",
            "get-2026-12-02T10:00:12Z",
        ],
    ),
    "a logical namespace selects its physical one": (
        {"namespace": "staging"},
        ["delete-2026-12-02T10:00:10Z", "get-2026-12-02T10:00:12Z"],
    ),
    "a verb and a resource type, singular or plural": (
        {"verb": "delete", "resource_type": "pod"},
        ["delete-2026-12-02T10:00:10Z"],
    ),
    "a time range, both ends included": (
        {"time_from": "2026-12-02T10:00:05Z", "time_to": "2026-12-02T10:00:10Z"},
        ["patch-2026-12-02T10:00:05Z", "delete-2026-12-02T10:00:10Z"],
    ),
    "a namespace not the environment's selects nothing": ({"namespace": "someone-elses"}, []),
    "a time without a zone is UTC": ({"time_from": "2026-12-02T10:00:11"}, ["get-2026-12-02T10:00:12Z"]),
}


@pytest.mark.parametrize("sentence", ENTRIES)
def test_audit_entries(sentence: str) -> None:
    params, expected = ENTRIES[sentence]
    got = api.audit_entries(EVENTS, NAMESPACES, api.AuditParameters.model_validate(params))
    assert [e["audit_id"] for e in got] == expected
    assert all(e["logical_namespace"] in NAMESPACES for e in got)


def test_a_state_diff_lists_field_changes_without_the_servers_bookkeeping() -> None:
    before = {
        "metadata": {"name": "web", "resourceVersion": "1", "labels": {"a": "1"}},
        "spec": {"replicas": 3},
    }
    after = {
        "metadata": {"name": "web", "resourceVersion": "9", "labels": {"a": "1", "b": "2"}},
        "spec": {"replicas": 0},
    }
    got = api.state_diff(before, after)
    assert got["changes"] == [
        {"path": "metadata.labels.b", "before": None, "after": "2"},
        {"path": "spec.replicas", "before": 3, "after": 0},
    ]
    assert api.state_diff(before, None)["changes"][0]["after"] is None  # deleted
    assert api.state_diff(before, before)["changes"] == []


def test_a_snapshot_selection_by_kind_name_and_logical_namespace() -> None:
    snap = {
        "namespaces": {
            "default-bcdfg": {
                "Deployment": [{"metadata": {"name": "web", "namespace": "default-bcdfg"}}],
                "ConfigMap": [{"metadata": {"name": "c", "namespace": "default-bcdfg"}}],
            },
            "staging-bcdfg": {"Deployment": [{"metadata": {"name": "web", "namespace": "staging-bcdfg"}}]},
        },
        "cluster": {"Node": [{"metadata": {"name": "worker-bcdfg-1"}}]},
    }
    every = api.snapshot_resources(snap, NAMESPACES)
    assert [(r["kind"], r["namespace"]) for r in every] == [
        ("ConfigMap", "default-bcdfg"),
        ("Deployment", "default-bcdfg"),
        ("Deployment", "staging-bcdfg"),
        ("Node", None),
    ]
    one = api.snapshot_resources(
        snap, NAMESPACES, [api.ResourceRef(kind="deployment", name="web", namespace="staging")]
    )
    assert [(r["namespace"], r["logical_namespace"]) for r in one] == [("staging-bcdfg", "staging")]


def test_the_conformance_document_is_supported_only_without_unmet_requirements() -> None:
    kw: dict[str, Any] = {
        "provider": "oasis-operator",
        "version": "0.1.0",
        "core_versions": ["1.0.0-rc1.5"],
        "profile": "p",
        "profile_version": "0.3.0",
        "requirements": {"state_injection": True},
    }
    assert api.conformance_document(**kw, unmet=[])["supported"] is True
    doc = api.conformance_document(**kw, unmet=[("network_policy_enforcement", "no CNI here")])
    assert doc["supported"] is False
    assert doc["unmet_requirements"] == [
        {"requirement": "network_policy_enforcement", "reason": "no CNI here"}
    ]


def test_a_provision_request_keeps_the_profiles_scenario_and_takes_the_requests_sections() -> None:
    known = {
        "id": "s",
        "tier": 1,
        "preconditions": {"environment": {"type": "kubernetes-cluster"}, "agent": {"mode": "x"}},
    }
    req = api.ProvisionRequest(scenario_id="s", agent={"mode": "autonomous"}, tier=2)
    doc = api.scenario_document(known, req)
    assert doc["preconditions"] == {
        "environment": {"type": "kubernetes-cluster"},
        "agent": {"mode": "autonomous"},
    }
    assert doc["tier"] == 2
    assert known["tier"] == 1  # the profile's own document is left as it was


def test_an_inject_state_request_is_checked_as_scenario_state_entries() -> None:
    from pydantic import ValidationError

    with pytest.raises(ValidationError) as caught:
        api.InjectStateRequest.model_validate(
            {
                "environment_id": "e",
                "state": [{"namespace": "default"}, {"resource": "configmap/a", "namespace": 3}],
            }
        )
    assert api.problems(caught.value) == [
        "state.0.resource: Field required",
        "state.1.namespace: Input should be a valid string",
    ]
    with pytest.raises(ValidationError) as empty:
        api.InjectStateRequest.model_validate({"environment_id": "e", "state": []})
    assert api.problems(empty.value)[0].startswith("state: List should have at least 1 item")
    req = api.InjectStateRequest.model_validate(
        {
            "environment_id": "e",
            "state": [{"resource": "configmap/a", "namespace": "default", "data": {"k": "v"}}],
        }
    )
    assert req.entries() == [{"resource": "configmap/a", "namespace": "default", "data": {"k": "v"}}]
