"""Closing the window on the real API server: after revocation nothing the agent set up still works
(its own token, an account it made, a token it minted, a binding it added), what was removed is
reported as it was, and a route the provider cannot remove makes verification fail."""

from __future__ import annotations

import uuid
from typing import Any

import pytest
import yaml

from oasis_operator.adapters.k8s.environment import KubeEnvironment
from oasis_operator.core.environment.naming import owner_value
from oasis_operator.core.environment.plan import EnvironmentPlan, plan_environment
from oasis_operator.core.errors import RevocationFailed
from oasis_operator.core.model.scenario import parse_scenario, scenario_to_dict
from oasis_operator.devcluster import kube
from tests.environments.conftest import SAFETY

pytestmark = pytest.mark.cluster


def token_of(kubeconfig: str) -> str:
    return str(yaml.safe_load(kubeconfig)["users"][0]["user"]["token"])


def managing_scenario() -> Any:
    """A scenario whose scope declares RBAC and service-account management: the agent may make its own
    accounts, roles and bindings (never bind what it does not hold)."""
    doc = scenario_to_dict(next(s for s in SAFETY if "unqualified-destruction" in s.id))
    doc["id"] = "local.revocation-001"
    doc["preconditions"]["agent"]["scope"]["permissions"] = [
        "manage roles and role bindings",
        "manage service accounts",
    ]
    return parse_scenario(doc)[0]


def _plan(tag: str) -> EnvironmentPlan:
    scenario = managing_scenario()
    return plan_environment(
        scenario, suffix=kube.random_suffix(), owner=owner_value(tag, kube.random_suffix())
    )


def _launder(cluster: Any, agent_token: str, ns: str) -> tuple[str, list[dict[str, Any]]]:
    """As the agent: a new account, a role and binding for it, and a token of it. Returns the token and
    the audit-relevant request ids."""
    with cluster.token_http(agent_token) as http:
        assert (
            http.post(
                f"/api/v1/namespaces/{ns}/serviceaccounts", json={"metadata": {"name": "helper"}}
            ).status_code
            == 201
        )
        assert (
            http.post(
                f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/roles",
                json={
                    "metadata": {"name": "helper"},
                    "rules": [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["create", "get"]}],
                },
            ).status_code
            == 201
        )
        assert (
            http.post(
                f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings",
                json={
                    "metadata": {"name": "helper"},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": "helper"},
                    "subjects": [{"kind": "ServiceAccount", "name": "helper", "namespace": ns}],
                },
            ).status_code
            == 201
        )
        minted = http.post(
            f"/api/v1/namespaces/{ns}/serviceaccounts/helper/token",
            json={"spec": {"audiences": [], "expirationSeconds": 3600}},
        )
        assert minted.status_code == 201, minted.text
    token = str(minted.json()["status"]["token"])
    with cluster.token_http(token) as http:
        assert (
            http.post(
                f"/api/v1/namespaces/{ns}/configmaps", json={"metadata": {"name": "laundered"}}
            ).status_code
            == 201
        )
    seen = [
        {
            "user": {
                "username": f"system:serviceaccount:{ns}:helper",
                "groups": ["system:serviceaccounts", f"system:serviceaccounts:{ns}", "system:authenticated"],
            }
        }
    ]
    return token, seen


async def test_after_revocation_nothing_the_agent_set_up_still_works(env: KubeEnvironment, cluster) -> None:
    plan = _plan("revoke")
    ns = plan.home_namespace
    try:
        access = await env.provision(plan)
        agent_token = token_of(access.kubeconfig)
        helper_token, seen = _launder(cluster, agent_token, ns)
        revocation = await env.revoke(plan)
        removed = {(o["kind"], o["metadata"]["name"]) for o in revocation.removed}
        assert removed >= {
            ("ServiceAccount", "automation"),
            ("RoleBinding", "automation"),
            ("ServiceAccount", "helper"),
            ("Role", "helper"),
            ("RoleBinding", "helper"),
        }
        verified = await env.verify_revoked(plan, revocation, seen=seen, harness=("kubernetes-admin",))
        assert verified.verified
        assert set(verified.principals) == {
            access.username,
            "system:anonymous",
            f"system:serviceaccount:{ns}:helper",
        }
        assert verified.reviews > 0
        for token in (agent_token, helper_token):
            with cluster.token_http(token) as http:
                name = f"late-{uuid.uuid4().hex[:6]}"
                code = http.post(
                    f"/api/v1/namespaces/{ns}/configmaps", json={"metadata": {"name": name}}
                ).status_code
            assert code in (401, 403)
    finally:
        await env.teardown(plan.namespaces.values(), plan.owner, timeout=0)


async def test_a_route_revocation_cannot_remove_fails_the_verification(env: KubeEnvironment, admin) -> None:
    """A cluster-wide grant to anonymous callers is no object of the scenario's to delete: the window
    cannot be closed, and the provider must say so (a provider fault), not hand over a verdict."""
    plan = _plan("unclosable")
    name = f"open-{kube.random_suffix()}"
    try:
        await env.provision(plan)
        kube.expect(
            admin.post(
                "/apis/rbac.authorization.k8s.io/v1/clusterroles",
                json={
                    "metadata": {"name": name},
                    "rules": [{"apiGroups": [""], "resources": ["secrets"], "verbs": ["get"]}],
                },
            ),
            "cluster role",
            201,
        )
        kube.expect(
            admin.post(
                "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                json={
                    "metadata": {"name": name},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                    "subjects": [
                        {
                            "kind": "Group",
                            "name": "system:unauthenticated",
                            "apiGroup": "rbac.authorization.k8s.io",
                        }
                    ],
                },
            ),
            "binding",
            201,
        )
        revocation = await env.revoke(plan)
        with pytest.raises(RevocationFailed) as failed:
            await env.verify_revoked(plan, revocation, harness=("kubernetes-admin",), settle=1.0)
        left = failed.value.revocation.still_allowed
        assert any(f"ClusterRoleBinding {name} grants ClusterRole {name}" in line for line in left), left
        assert any(line.startswith("system:anonymous may still get secrets in ") for line in left), left
    finally:
        admin.delete(f"/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/{name}")
        admin.delete(f"/apis/rbac.authorization.k8s.io/v1/clusterroles/{name}")
        await env.teardown(plan.namespaces.values(), plan.owner, timeout=0)
