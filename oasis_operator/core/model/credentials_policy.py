"""Whose Secret ``agent.credentialsRef`` may name: only one the user who set it may read.

Read by the operator, which installs the admission policy below at its start and, before it reads a
run's credentials Secret, asks the API server whether that user may ``get`` it (a
SubjectAccessReview as that user). Decision 0099, review finding M-1: the operator reads Secrets with
its own rights, and sent one to an endpoint the run's creator chose, so ``create evaluationruns``
alone disclosed every Secret of the namespace.

**How the user is known.** The run carries the annotation :data:`CREDENTIALS_USER`; the admission
policy makes it true: whenever a request creates a run with a ``credentialsRef``, or changes its
``spec.agent`` (the Secret, the key, the endpoint it is sent to) or the annotation, the annotation
must equal ``request.userInfo.username``, the name the API server authenticated. So it names the last
user who chose where that Secret goes, and no one can write another user's name there. Why not the
alternatives: ``managedFields`` carry a manager name the client picks (``--field-manager``), not
the authenticated user; a label on the Secret would let anyone who may create runs send every
labelled Secret to an endpoint of their own. ``oasis run`` sets the annotation itself.

The policy applies from when it exists: a run created earlier is refused its credentials
(:func:`run_predates_policy`). Pure: values in, values out.
"""

from __future__ import annotations

import datetime as dt
from typing import Any

from oasis_operator.core.model.crd import GROUP

__all__ = [
    "CREDENTIALS_USER",
    "POLICY_NAME",
    "POLICY_SETTLE",
    "access_review",
    "policy_manifests",
    "reviewed_groups",
    "run_predates_policy",
]

CREDENTIALS_USER = f"{GROUP}/credentials-user"
POLICY_NAME = "evaluationrun-credentials-user"
#: How long after its creation the policy counts as enforced (the API server loads it by a watch,
#: well within a second): a run created before that may carry any name and gets no Secret.
POLICY_SETTLE = dt.timedelta(seconds=2)

_ANNOTATION = f"object.metadata.annotations['{CREDENTIALS_USER}']"
_HAS_ANNOTATION = f"has(object.metadata.annotations) && '{CREDENTIALS_USER}' in object.metadata.annotations"
_OLD_HAS_ANNOTATION = (
    f"has(oldObject.metadata.annotations) && '{CREDENTIALS_USER}' in oldObject.metadata.annotations"
)
_UNCHANGED = (
    "request.operation == 'UPDATE' && has(oldObject.spec.agent.credentialsRef)"
    " && oldObject.spec.agent == object.spec.agent"
    f" && ({_OLD_HAS_ANNOTATION}) && ({_HAS_ANNOTATION})"
    f" && oldObject.metadata.annotations['{CREDENTIALS_USER}'] == {_ANNOTATION}"
)
_PINNED = f"({_HAS_ANNOTATION}) && {_ANNOTATION} == request.userInfo.username"


def policy_manifests() -> tuple[dict[str, Any], dict[str, Any]]:
    """The ValidatingAdmissionPolicy and its binding (apply in this order)."""
    policy = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": POLICY_NAME},
        "spec": {
            "failurePolicy": "Fail",
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": [GROUP],
                        "apiVersions": ["*"],
                        "operations": ["CREATE", "UPDATE"],
                        "resources": ["evaluationruns"],
                    }
                ]
            },
            "validations": [
                {
                    "expression": f"!has(object.spec.agent.credentialsRef) || ({_UNCHANGED}) || ({_PINNED})",
                    "reason": "Forbidden",
                    "messageExpression": (
                        f"'spec.agent.credentialsRef: the annotation {CREDENTIALS_USER} must be your user "
                        "name, ' + request.userInfo.username + ' (kubectl auth whoami): the operator "
                        "sends the Secret only where that user may read it (decision 0099)'"
                    ),
                }
            ],
        },
    }
    binding = {
        "apiVersion": "admissionregistration.k8s.io/v1",
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": POLICY_NAME},
        "spec": {"policyName": POLICY_NAME, "validationActions": ["Deny"]},
    }
    return policy, binding


def reviewed_groups(user: str) -> list[str]:
    """The groups the access review asks with: those every user of that kind has for certain. Other
    groups of the user (an identity provider's) are not known here, so a Secret readable only through
    them is refused: grant the user ``get`` on it directly."""
    groups = ["system:authenticated"]
    if user.startswith("system:serviceaccount:"):
        namespace = user.split(":")[2] if user.count(":") >= 3 else ""
        groups += ["system:serviceaccounts", *([f"system:serviceaccounts:{namespace}"] if namespace else [])]
    return groups


def access_review(user: str, namespace: str, secret: str) -> dict[str, Any]:
    """The SubjectAccessReview: may ``user`` get Secret ``namespace/secret``?"""
    return {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {
            "user": user,
            "groups": reviewed_groups(user),
            "resourceAttributes": {
                "namespace": namespace,
                "verb": "get",
                "resource": "secrets",
                "name": secret,
            },
        },
    }


def run_predates_policy(run_created: dt.datetime, policy_created: dt.datetime) -> bool:
    """A run created before the policy was enforced may carry any name in the annotation."""
    return run_created < policy_created + POLICY_SETTLE
