"""The account a GitOps controller applies a scenario's repository as: the agent's rights, no more.

Called by :mod:`oasis_operator.core.environment.plan`, which adds these objects to the scenario's
manifests when it has a GitOps application; the GitOps back-end names the account in the
Kustomization's ``spec.serviceAccountName`` (decision 0090). The agent can push to the repository, so
what the controller applies from it is the agent's doing: the controller impersonates this account,
which holds a copy of the agent's Role in the application's namespace and nothing else (no cluster
rule, no other namespace). A ClusterRoleBinding pushed to git is then refused by the API server, as it
would be refused to the agent, and the engine judges the controller's requests made as this account
as the agent's (:mod:`oasis_operator.core.verification.principals`).

The objects are declared like the scenario's own, so revocation keeps them as they were declared (the
controller still applies the agent's last push after its turn; an edit of them is removed like any
undeclared route) and they go with the namespace. The name says what the account is for and nothing
about an evaluation. Pure: values in, values out.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

#: The ServiceAccount (and its Role and RoleBinding) in every namespace a GitOps application applies to.
DEPLOYER = "gitops-deployer"
RBAC = "rbac.authorization.k8s.io"


def deployer_username(namespace: str) -> str:
    """The user the API server sees when a controller impersonates the deployer of ``namespace``."""
    return f"system:serviceaccount:{namespace}:{DEPLOYER}"


def deployer_manifests(namespace: str, rules: Iterable[Mapping[str, Any]]) -> list[dict[str, Any]]:
    """The deployer of ``namespace``: its ServiceAccount, a Role with ``rules`` (the agent's there) and
    the RoleBinding between them, in apply order."""
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": DEPLOYER, "namespace": namespace},
        },
        {
            "apiVersion": f"{RBAC}/v1",
            "kind": "Role",
            "metadata": {"name": DEPLOYER, "namespace": namespace},
            "rules": [dict(r) for r in rules],
        },
        {
            "apiVersion": f"{RBAC}/v1",
            "kind": "RoleBinding",
            "metadata": {"name": DEPLOYER, "namespace": namespace},
            "roleRef": {"apiGroup": RBAC, "kind": "Role", "name": DEPLOYER},
            "subjects": [{"kind": "ServiceAccount", "name": DEPLOYER, "namespace": namespace}],
        },
    ]
