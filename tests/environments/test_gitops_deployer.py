"""The account a GitOps controller applies a scenario's repository as (decision 0090): planned with the
scenario's manifests, holding a copy of the agent's Role in the application's namespace and nothing
else, refused where the agent cannot write, kept by revocation as declared, and never taken for a
principal someone holds when only the harness acts as it."""

from __future__ import annotations

import copy
from typing import Any

from oasis_operator.core.environment.admission import policy_manifests
from oasis_operator.core.environment.gitops_deployer import DEPLOYER, deployer_username
from oasis_operator.core.environment.naming import owner_value
from oasis_operator.core.environment.plan import plan_environment, support
from oasis_operator.core.environment.revocation import acting_principals, routes_to_remove
from oasis_operator.core.model.scenario import parse_scenario
from tests.environments.test_support import CORPUS

DRIFT = "infra.safety.sc.drift-introduction-001"
FLUX = "system:serviceaccount:flux-system:kustomize-controller"


def plan_of(doc: dict[str, Any]) -> Any:
    scenario, _ = parse_scenario(doc)
    return plan_environment(
        scenario, suffix="x7kqz", owner=owner_value("deployer", DRIFT), backends=frozenset({"gitops"})
    )


def test_the_deployer_holds_the_agents_role_in_the_applications_namespace_and_nothing_else() -> None:
    plan = plan_of(copy.deepcopy(CORPUS[DRIFT]))
    assert plan.supported, plan.unsupported
    [app] = plan.toolplane.gitops
    mine = [m for m in plan.manifests if m["metadata"].get("name") == DEPLOYER]
    assert sorted((m["kind"], m["metadata"]["namespace"]) for m in mine) == [
        ("Role", app.namespace),
        ("RoleBinding", app.namespace),
        ("ServiceAccount", app.namespace),
    ]
    [grant] = [g for g in plan.grants if g.namespace == app.namespace]
    [role] = [m for m in mine if m["kind"] == "Role"]
    assert role["rules"] == grant.rules()
    [binding] = [m for m in mine if m["kind"] == "RoleBinding"]
    assert binding["roleRef"] == {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": DEPLOYER}
    assert binding["subjects"] == [{"kind": "ServiceAccount", "name": DEPLOYER, "namespace": app.namespace}]
    # Applied before anything it would apply, after its namespace: the registry's order.
    kinds = [m["kind"] for m in plan.manifests]
    assert kinds.index("ServiceAccount") > kinds.index("Namespace")
    assert kinds.index("RoleBinding") < kinds.index("Deployment")
    # No cluster rule and nothing cluster-scoped of its own.
    assert not any(m["kind"].startswith("Cluster") for m in mine)


def test_an_application_the_agent_cannot_write_is_refused_at_both_steps() -> None:
    doc = copy.deepcopy(CORPUS[DRIFT])
    doc["preconditions"]["agent"]["mode"] = "read-only"
    plan = plan_of(doc)
    reasons = [u.reason for u in plan.unsupported if u.resource.startswith("gitops-application/")]
    assert any("cannot write its namespace" in r for r in reasons), plan.unsupported
    assert not any(m["metadata"].get("name") == DEPLOYER for m in plan.manifests)
    scenario, _ = parse_scenario(doc)
    found = support(scenario, backends=frozenset({"gitops"}))
    assert any("cannot write its namespace" in u.reason for u in found.unsupported), found.unsupported


def test_revocation_keeps_the_deployer_as_declared_and_removes_it_when_changed() -> None:
    plan = plan_of(copy.deepcopy(CORPUS[DRIFT]))
    [app] = plan.toolplane.gitops
    declared = [m for m in plan.manifests if m["kind"] in ("Role", "RoleBinding", "ServiceAccount")]
    listed = {
        kind: [copy.deepcopy(m) for m in declared if m["kind"] == kind]
        for kind in ("Role", "RoleBinding", "ServiceAccount")
    }
    assert routes_to_remove([app.namespace], listed, declared) == []
    widened = copy.deepcopy(listed)
    widened["RoleBinding"][0]["subjects"].append({"kind": "User", "name": "someone"})
    found = routes_to_remove([app.namespace], widened, declared)
    assert [(r.kind, r.name, r.why) for r in found] == [
        ("RoleBinding", DEPLOYER, "changed since it was declared")
    ]


def test_the_harness_acting_as_the_deployer_is_not_a_principal_to_verify() -> None:
    deployer = deployer_username("shop-x7kqz")
    agent = "system:serviceaccount:shop-x7kqz:automation"
    events = [
        {"user": {"username": FLUX}, "impersonatedUser": {"username": deployer}},
    ]
    principals = acting_principals(events, agent=(agent,), harness=(FLUX,))
    assert deployer not in [p.username for p in principals]
    # Seen acting as itself (someone holds a token of it), it is verified; and impersonated by anyone
    # who is not the harness (the agent, refused or not), too.
    for event in (
        {"user": {"username": deployer, "groups": ["system:serviceaccounts"]}},
        {"user": {"username": agent}, "impersonatedUser": {"username": deployer}},
    ):
        principals = acting_principals([event], agent=(agent,), harness=(FLUX,))
        assert deployer in [p.username for p in principals], event


def test_the_admission_policy_refuses_a_token_for_the_deployer_only() -> None:
    policy, _ = policy_manifests()
    rules = policy["spec"]["matchConstraints"]["resourceRules"]
    assert {
        "apiGroups": [""],
        "apiVersions": ["v1"],
        "operations": ["CREATE"],
        "resources": ["serviceaccounts/token"],
    } in rules
    [check] = [v for v in policy["spec"]["validations"] if DEPLOYER in v["message"]]
    assert f"request.name != '{DEPLOYER}'" in check["expression"]
    assert "request.subResource != 'token'" in check["expression"]
