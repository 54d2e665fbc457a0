"""Resource types of the action grammar, and where each lives in the Kubernetes API.

Read by the action parser (is this type known? does it have audit evidence?) and by the matcher
(does this audit event's ``objectRef`` address this type?). One row per type, taken from the kind
registry (:mod:`oasis_operator.core.kinds`, its ``token`` column); the SI profile's interface-types
document names the types, the API groups are Kubernetes facts.
"""

from __future__ import annotations

from dataclasses import dataclass

from oasis_operator.core import kinds
from oasis_operator.core.kinds import KINDS


@dataclass(frozen=True, slots=True)
class ResourceType:
    name: str  # the grammar's token, e.g. ``deployment``
    group: str  # API group, "" for the core group
    resource: str  # plural resource as audit events spell it
    kind: str  # the object's ``kind``
    namespaced: bool = True


#: The grammar's types: the rows of the kind registry that have a token, in the registry's order.
_ROWS = tuple(
    ResourceType(k.token, k.group, k.plural, k.kind, namespaced=not k.cluster_scoped)
    for k in KINDS
    if k.token is not None
)

#: Grammar token -> resource type.
RESOURCE_TYPES: dict[str, ResourceType] = {row.name: row for row in _ROWS}

#: Kubernetes kind -> resource type (to index snapshots, which carry ``kind``).
BY_KIND: dict[str, ResourceType] = {row.kind: row for row in _ROWS}

#: Types the profile names that have no Kubernetes API, hence no audit evidence: an action on them
#: cannot be judged from the audit log and is rejected when a scenario is validated (from the registry).
NON_KUBERNETES_TYPES = kinds.NON_KUBERNETES_TYPES

#: Alternative spellings accepted for a type token.
ALIASES: dict[str, str] = {
    "deploy": "deployment",
    "deployments": "deployment",
    "pods": "pod",
    "po": "pod",
    "svc": "service",
    "services": "service",
    "cm": "configmap",
    "configmaps": "configmap",
    "secrets": "secret",
    "ns": "namespace",
    "namespaces": "namespace",
    "nodes": "node",
    "horizontalpodautoscaler": "hpa",
    "persistentvolumeclaim": "pvc",
    "poddisruptionbudget": "pdb",
}

#: API groups whose writes count as RBAC modifications.
RBAC_GROUP = "rbac.authorization.k8s.io"

#: Workload resources whose ``spec.replicas`` a scale changes.
SCALABLE = frozenset({"deployments", "replicasets", "statefulsets", "replicationcontrollers"})

#: Workload resources that carry a pod template (a template change rolls the pods).
TEMPLATED = frozenset({"deployments", "statefulsets", "daemonsets", "replicasets"})


def lookup(token: str) -> ResourceType | None:
    return RESOURCE_TYPES.get(ALIASES.get(token, token))


def type_of_object(obj: dict[str, object] | object) -> tuple[str, str]:
    """``(group, resource)`` of a snapshot object from its apiVersion and kind."""
    if not isinstance(obj, dict):
        return ("", "")
    kind = obj.get("kind")
    api_version = obj.get("apiVersion")
    group = api_version.split("/")[0] if isinstance(api_version, str) and "/" in api_version else ""
    if not isinstance(kind, str):
        return (group, "")
    row = kinds.BY_KIND.get(kind)
    if row is not None:
        return (row.group, row.plural)
    return (group, plural_of(kind))


#: Kinds whose resource is not their name's regular English plural.
_IRREGULAR_PLURALS = {"Endpoints": "endpoints"}


def plural_of(kind: str) -> str:
    """The resource a kind outside the registry is served as (``EndpointSlice`` -> ``endpointslices``,
    ``Endpoints`` -> ``endpoints``): the key audit events and snapshots must share, or no write of the
    object would ever be found for it."""
    if kind in _IRREGULAR_PLURALS:
        return _IRREGULAR_PLURALS[kind]
    lower = kind.lower()
    if lower.endswith(("s", "x", "ch", "sh")):
        return lower + "es"
    if lower.endswith("y") and lower[-2:-1] not in ("a", "e", "i", "o", "u"):
        return lower[:-1] + "ies"
    return lower + "s"
