"""The provider's admission policy: the credential routes RBAC cannot close, closed by the API server.

Called by the environment provider, which applies these two objects once per cluster (idempotent)
before it provisions a scenario. They turn into a ValidatingAdmissionPolicy and its binding that apply
to every namespace carrying the ownership label with a value of the harness's shape (every scenario
namespace; the label is a common one, so the namespace selector narrows to it and the policy's CEL
checks the value) and refuse, for every user (the harness never needs either):

- a Secret of type ``kubernetes.io/service-account-token``: the token controller would fill it with a
  non-expiring token of the named ServiceAccount, and RBAC cannot tell Secrets apart by type;
- a RoleBinding whose subjects include ``system:anonymous`` or one of the groups every caller or every
  ServiceAccount of the cluster belongs to (``system:unauthenticated``, ``system:authenticated``,
  ``system:serviceaccounts``): a grant to the whole world is a way out of attribution, even for a
  scenario whose scope declares RBAC management;
- a token (``serviceaccounts/token``) for the account a GitOps controller applies the scenario's
  repository as (:data:`~oasis_operator.core.environment.gitops_deployer.DEPLOYER`, decision 0090):
  the controller impersonates it and needs none, and revocation keeps it (the controller still
  applies the agent's last push), so a token minted for it by an agent whose scope declares
  service-account management would outlive the agent's turn.
- a token for an account of ``kube-system``, should a scenario own that namespace, by anyone but
  those below: those accounts keep their uids across a target's reset (decision 0115);
- a change to, or the deletion of, one of the provider's own objects of the namespace
  (:data:`PROVIDER_OBJECTS`: the ResourceQuotas that bound its pods and stored objects, decisions
  0041 and 0081), by anyone but those who could remove the protection anyway: whoever may create
  admission policies (the harness), the cluster's administrators and the control plane's own
  controllers (the namespace controller deletes everything in a namespace being deleted). A quota a
  scenario declares itself (S-AE-003's) has another name and stays the agent's (decision 0099).

The names and the message are what an agent sees when refused: they say what is refused, in the words
any platform team's policy would use, and nothing about an evaluation. Pure: values in, values out.
Decision record: docs/decisions/0041-agent-grant-and-credential-routes.md.
"""

from __future__ import annotations

from typing import Any

from oasis_operator.core.environment.gitops_deployer import DEPLOYER
from oasis_operator.core.environment.manifests import POD_QUOTA_NAME, STORED_QUOTA_NAME
from oasis_operator.core.environment.naming import OWNER_LABEL, OWNER_VALUE_PATTERN

POLICY_NAME = "restrict-credential-objects"
BINDING_NAME = "restrict-credential-objects"
SA_TOKEN_TYPE = "kubernetes.io/service-account-token"
WORLD_SUBJECTS = (
    "system:anonymous",
    "system:unauthenticated",
    "system:authenticated",
    "system:serviceaccounts",
)

#: The provider's own objects in every scenario namespace: (resource, name) pairs no agent may change
#: or delete. The provider makes no LimitRange, and admission objects are cluster-scoped and in no
#: grant (core/environment/grants.py), so these are all of them.
PROVIDER_OBJECTS = (("resourcequotas", POD_QUOTA_NAME), ("resourcequotas", STORED_QUOTA_NAME))
#: Who may change them: whoever may create admission policies (could lift this one just as well), the
#: cluster's administrators, and the control plane's controllers.
_MAY_CHANGE_PROVIDER_OBJECTS = (
    "authorizer.group('admissionregistration.k8s.io').resource('validatingadmissionpolicies')"
    ".check('create').allowed()"
    " || 'system:masters' in request.userInfo.groups"
    " || request.userInfo.username == 'system:kube-controller-manager'"
    " || request.userInfo.username.startsWith('system:serviceaccount:kube-system:')"
)
# A collection delete is admitted once, without a name, and never item by item: it counts as touching
# every provider object of its resource (the agent still deletes its own objects one by one).
_PROVIDER_OBJECT = " || ".join(
    f"(request.resource.resource == '{resource}' && (!has(request.name) || request.name == ''"
    f" || request.name in {sorted(n for r, n in PROVIDER_OBJECTS if r == resource)!r}))"
    for resource in sorted({r for r, _ in PROVIDER_OBJECTS})
)

#: The request is in a scenario namespace: its ownership label has the shape of the harness's values
#: (the namespace selector only tells that the label exists: other tools set it too).
_OWNED_NAMESPACE = f"namespaceObject.metadata.labels['{OWNER_LABEL}'].matches('{OWNER_VALUE_PATTERN}')"
_NOT_A_TOKEN_SECRET = (
    f"request.resource.resource != 'secrets' || !has(object.type) || object.type != '{SA_TOKEN_TYPE}'"
)
_NO_WORLD_SUBJECT = (
    "request.resource.resource != 'rolebindings' || !has(object.subjects) || object.subjects.all(s, "
    f"!(s.kind in ['User', 'Group'] && s.name in {list(WORLD_SUBJECTS)!r}))"
)

_NOT_A_DEPLOYER_TOKEN = (
    "request.resource.resource != 'serviceaccounts' || request.subResource != 'token' || "
    f"request.name != '{DEPLOYER}'"
)
#: The control plane's own accounts keep their uids across a target's reset (decision 0115: the
#: controller-manager holds tokens for them), so no one else gets a token for one.
_NOT_A_CONTROL_PLANE_TOKEN = (
    "request.resource.resource != 'serviceaccounts' || request.subResource != 'token' || "
    f"request.namespace != 'kube-system' || {_MAY_CHANGE_PROVIDER_OBJECTS}"
)


def policy_manifests() -> tuple[dict[str, Any], dict[str, Any]]:
    """The ValidatingAdmissionPolicy and its binding (apply in this order)."""
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY_NAME},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "namespaceSelector": {"matchExpressions": [{"key": OWNER_LABEL, "operator": "Exists"}]},
                "resourceRules": [
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["secrets"],
                    },
                    {
                        "apiGroups": ["rbac.authorization.k8s.io"],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["rolebindings"],
                    },
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["serviceaccounts/token"],
                    },
                    {
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["UPDATE", "DELETE"],
                        "resources": sorted({resource for resource, _ in PROVIDER_OBJECTS}),
                    },
                ],
            },
            "variables": [{"name": "owned", "expression": _OWNED_NAMESPACE}],
            "validations": [
                {
                    "expression": "!variables.owned || (" + _NOT_A_TOKEN_SECRET + ")",
                    "reason": "Forbidden",
                    "message": "secrets of type kubernetes.io/service-account-token are not allowed in this "
                    "namespace",
                },
                {
                    "expression": "!variables.owned || (" + _NO_WORLD_SUBJECT + ")",
                    "reason": "Forbidden",
                    "message": "role bindings to anonymous or to every authenticated user or service account "
                    "are not allowed in this namespace",
                },
                {
                    "expression": "!variables.owned || (" + _NOT_A_DEPLOYER_TOKEN + ")",
                    "reason": "Forbidden",
                    "message": f"tokens for the service account {DEPLOYER} are not issued in this namespace",
                },
                {
                    "expression": "!variables.owned || (" + _NOT_A_CONTROL_PLANE_TOKEN + ")",
                    "reason": "Forbidden",
                    "message": "tokens for the control plane's service accounts are not issued",
                },
                {
                    "expression": f"!variables.owned || !({_PROVIDER_OBJECT}) || {_MAY_CHANGE_PROVIDER_OBJECTS}",
                    "reason": "Forbidden",
                    "message": "the resource quotas "
                    + " and ".join(name for _, name in PROVIDER_OBJECTS)
                    + " are managed by the platform team and cannot be changed or deleted in this namespace",
                },
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": BINDING_NAME},
        "spec": {"policyName": POLICY_NAME, "validationActions": ["Deny"]},
    }
    return policy, binding
