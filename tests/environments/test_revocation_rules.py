"""The rules of closing the window, on values: which objects are routes in, who must be checked, and
what still grants access after removal."""

from __future__ import annotations

from typing import Any

import pytest

from oasis_operator.core.environment.revocation import (
    ANONYMOUS,
    Principal,
    access_reviews,
    acting_principals,
    principal,
    remaining_routes,
    routes_to_remove,
)

NS = "default-bbbbb"
OTHER = "payments-bbbbb"
AGENT = f"system:serviceaccount:{NS}:automation"


def _obj(kind: str, name: str, ns: str = NS, **rest: Any) -> dict[str, Any]:
    meta = {"name": name, **({"namespace": ns} if ns else {})}
    return {"kind": kind, "metadata": meta, **rest}


def _rb(
    name: str, subjects: list[dict[str, str]], role: str = "edit", kind: str = "ClusterRole", ns: str = NS
) -> dict[str, Any]:
    return _obj(
        "RoleBinding" if ns else "ClusterRoleBinding",
        name,
        ns,
        roleRef={"apiGroup": "rbac.authorization.k8s.io", "kind": kind, "name": role},
        subjects=subjects,
    )


SA = {"kind": "ServiceAccount", "name": "helper", "namespace": NS}

ROUTES: dict[
    str, tuple[dict[str, list[dict[str, Any]]], list[dict[str, Any]], list[tuple[str, str, str]]]
] = {
    "the harness's own binding and account are routes (they go first)": (
        {
            "RoleBinding": [
                _rb("automation", [{"kind": "ServiceAccount", "name": "automation", "namespace": NS}])
            ],
            "ServiceAccount": [_obj("ServiceAccount", "automation"), _obj("ServiceAccount", "default")],
        },
        [],
        [("RoleBinding", NS, "automation"), ("ServiceAccount", NS, "automation")],
    ),
    "a binding, role and account the agent made are routes; the default account is not": (
        {
            "RoleBinding": [_rb("helper", [SA], role="helper", kind="Role")],
            "Role": [_obj("Role", "helper")],
            "ServiceAccount": [_obj("ServiceAccount", "helper"), _obj("ServiceAccount", "default")],
        },
        [],
        [("Role", NS, "helper"), ("RoleBinding", NS, "helper"), ("ServiceAccount", NS, "helper")],
    ),
    "a declared binding left as declared stays": (
        {"RoleBinding": [_rb("readers", [SA], role="view")]},
        [_rb("readers", [SA], role="view")],
        [],
    ),
    "a declared binding the agent changed is a route": (
        {
            "RoleBinding": [
                _rb("readers", [SA, {"kind": "Group", "name": "system:authenticated"}], role="view")
            ]
        },
        [_rb("readers", [SA], role="view")],
        [("RoleBinding", NS, "readers")],
    ),
    "a token secret is a route; an ordinary secret is not listed at all": (
        {"Secret": [_obj("Secret", "legacy", type="kubernetes.io/service-account-token")]},
        [],
        [("Secret", NS, "legacy")],
    ),
    "a cluster binding naming one of the scenario's accounts or its namespace group is a route": (
        {
            "ClusterRoleBinding": [
                _rb("mine", [SA], ns=""),
                _rb("group", [{"kind": "Group", "name": f"system:serviceaccounts:{NS}"}], ns=""),
                _rb(
                    "someone-else",
                    [{"kind": "ServiceAccount", "name": "x", "namespace": "kube-system"}],
                    ns="",
                ),
            ]
        },
        [],
        [("ClusterRoleBinding", "", "group"), ("ClusterRoleBinding", "", "mine")],
    ),
    "objects of other namespaces are not ours to remove": (
        {"RoleBinding": [_rb("theirs", [SA], ns="elsewhere")]},
        [],
        [],
    ),
}


@pytest.mark.parametrize("sentence", sorted(ROUTES))
def test_routes_to_remove(sentence: str) -> None:
    listed, declared, expected = ROUTES[sentence]
    found = routes_to_remove([NS, OTHER], listed, declared)
    assert [(r.kind, r.namespace, r.name) for r in found] == sorted(expected)


def test_who_is_checked_the_agent_anonymous_and_every_unknown_actor() -> None:
    events = [
        {"user": {"username": "kubernetes-admin", "groups": ["system:masters"]}},
        {"user": {"username": "system:serviceaccount:kube-system:replicaset-controller"}},
        {"user": {"username": "system:node-simulator"}},
        {"user": {"username": f"system:serviceaccount:{NS}:helper", "groups": ["system:serviceaccounts"]}},
        {"user": {"username": AGENT}, "impersonatedUser": {"username": "jane", "groups": ["devs"]}},
        {"user": {"username": "system:anonymous", "groups": ["system:unauthenticated"]}},
        {"user": "not a mapping"},
    ]
    principals = acting_principals(events, agent=(AGENT,), harness=("kubernetes-admin",))
    assert [p.username for p in principals] == sorted(
        [AGENT, ANONYMOUS, f"system:serviceaccount:{NS}:helper", "jane"]
    )
    by_name = {p.username: p for p in principals}
    assert f"system:serviceaccounts:{NS}" in by_name[f"system:serviceaccount:{NS}:helper"].groups
    assert by_name[ANONYMOUS].groups == ("system:unauthenticated",)
    assert "devs" in by_name["jane"].groups
    assert "system:authenticated" in by_name["jane"].groups


LISTED_AFTER = {
    "ClusterRole": [
        _obj(
            "ClusterRole",
            "system:basic-user",
            "",
            rules=[
                {
                    "apiGroups": ["authorization.k8s.io"],
                    "resources": ["selfsubjectrulesreviews"],
                    "verbs": ["create"],
                }
            ],
        ),
        _obj("ClusterRole", "system:discovery", "", rules=[{"nonResourceURLs": ["/api"], "verbs": ["get"]}]),
        _obj(
            "ClusterRole",
            "secret-reader",
            "",
            rules=[{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}],
        ),
    ],
    "ClusterRoleBinding": [
        _rb(
            "system:basic-user",
            [{"kind": "Group", "name": "system:authenticated"}],
            role="system:basic-user",
            ns="",
        ),
        _rb(
            "system:discovery",
            [{"kind": "Group", "name": "system:authenticated"}],
            role="system:discovery",
            ns="",
        ),
    ],
}


def test_nothing_remains_when_only_what_every_caller_has_is_bound() -> None:
    principals = [principal(AGENT), principal(ANONYMOUS)]
    assert remaining_routes(principals, [NS], LISTED_AFTER) == []


def test_a_binding_to_anonymous_that_cannot_be_removed_remains() -> None:
    listed = {
        **LISTED_AFTER,
        "ClusterRoleBinding": [
            *LISTED_AFTER["ClusterRoleBinding"],
            _rb("open-secrets", [{"kind": "User", "name": ANONYMOUS}], role="secret-reader", ns=""),
        ],
    }
    left = remaining_routes([principal(AGENT), principal(ANONYMOUS)], [NS], listed)
    assert left == [f"{ANONYMOUS}: ClusterRoleBinding open-secrets grants ClusterRole secret-reader"]


def test_a_namespace_binding_to_every_service_account_remains_for_the_agent() -> None:
    listed = {
        **LISTED_AFTER,
        "RoleBinding": [
            _rb("all-sas", [{"kind": "Group", "name": "system:serviceaccounts"}], role="secret-reader")
        ],
    }
    left = remaining_routes([principal(AGENT)], [NS], listed)
    assert left == [f"{AGENT}: RoleBinding all-sas in {NS} grants ClusterRole secret-reader"]


def test_every_principal_is_asked_about_every_probe_in_every_namespace() -> None:
    reviews = access_reviews([Principal("u", ("g",)), principal(ANONYMOUS)], [NS, OTHER])
    per = [r for r in reviews if r["user"] == "u"]
    namespaced = [r for r in per if "namespace" in r["resourceAttributes"]]
    assert {r["resourceAttributes"]["namespace"] for r in namespaced} == {NS, OTHER}
    assert any(
        r["resourceAttributes"]
        == {
            "verb": "create",
            "group": "",
            "resource": "serviceaccounts",
            "subresource": "token",
            "namespace": NS,
        }
        for r in per
    )
    assert any(r["resourceAttributes"]["verb"] == "impersonate" for r in per)
    assert len(reviews) == 2 * len(per)
