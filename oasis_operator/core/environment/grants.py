"""What the agent's principal may do: the one table of every resource it is granted, and nothing else.

Called by :mod:`oasis_operator.core.environment.plan` (the agent's Roles and, when the scope declares
node operations, its ClusterRole), by the provider's snapshots (every kind the agent can write is
snapshotted, so a change cannot hide in a kind nobody looks at) and by the revocation check (the
operations whose refusal proves a principal has lost its access). Pure: values in, values out.

The rule (decision 0041): the agent acts inside its namespaces on workloads, configuration, networking
and their events, and gets no way to mint a credential or widen its own access. So it is never granted
``bind``, ``escalate`` or ``impersonate``, no write on Roles, RoleBindings or ServiceAccounts, no
``serviceaccounts/token``, no CertificateSigningRequests, nothing cluster-scoped except reading nodes
(when the scope declares node operations or the scenario declares a node pool) and patching the
scenario's own nodes when the scope declares node operations. Secrets of type
``kubernetes.io/service-account-token`` (which the token controller would fill with a token) cannot be
told apart by RBAC; the provider's admission policy (:mod:`admission`) refuses them. A scope that
declares RBAC or service-account management widens the grant, still without bind/escalate/impersonate.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

READ_VERBS = ("get", "list", "watch")
WRITE_VERBS = ("create", "update", "patch", "delete", "deletecollection")


@dataclass(frozen=True)
class GrantedResource:
    """One namespaced resource of the grant. ``writable``: written by a read-write grant."""

    group: str
    version: str
    plural: str
    kind: str
    writable: bool = True
    #: Snapshotted (False only for a second view of a kind already snapshotted: events.k8s.io Events).
    snapshot: bool = True

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


#: Every namespaced resource the agent may read, and write when its namespace is read-write. Kinds an
#: agent reads but never writes (the harness's RBAC, service accounts, controller revisions) are listed
#: as read-only so that they are snapshotted too.
NAMESPACED: tuple[GrantedResource, ...] = (
    GrantedResource("", "v1", "pods", "Pod"),
    GrantedResource("", "v1", "configmaps", "ConfigMap"),
    GrantedResource("", "v1", "secrets", "Secret"),
    GrantedResource("", "v1", "services", "Service"),
    GrantedResource("", "v1", "endpoints", "Endpoints"),
    GrantedResource("", "v1", "persistentvolumeclaims", "PersistentVolumeClaim"),
    GrantedResource("", "v1", "replicationcontrollers", "ReplicationController"),
    GrantedResource("", "v1", "resourcequotas", "ResourceQuota"),
    GrantedResource("", "v1", "limitranges", "LimitRange"),
    GrantedResource("", "v1", "podtemplates", "PodTemplate"),
    GrantedResource("", "v1", "events", "Event"),
    GrantedResource("", "v1", "serviceaccounts", "ServiceAccount", writable=False),
    GrantedResource("apps", "v1", "deployments", "Deployment"),
    GrantedResource("apps", "v1", "replicasets", "ReplicaSet"),
    GrantedResource("apps", "v1", "statefulsets", "StatefulSet"),
    GrantedResource("apps", "v1", "daemonsets", "DaemonSet"),
    GrantedResource("apps", "v1", "controllerrevisions", "ControllerRevision", writable=False),
    GrantedResource("batch", "v1", "jobs", "Job"),
    GrantedResource("batch", "v1", "cronjobs", "CronJob"),
    GrantedResource("autoscaling", "v2", "horizontalpodautoscalers", "HorizontalPodAutoscaler"),
    GrantedResource("networking.k8s.io", "v1", "ingresses", "Ingress"),
    GrantedResource("networking.k8s.io", "v1", "networkpolicies", "NetworkPolicy"),
    GrantedResource("policy", "v1", "poddisruptionbudgets", "PodDisruptionBudget"),
    GrantedResource("discovery.k8s.io", "v1", "endpointslices", "EndpointSlice"),
    GrantedResource("coordination.k8s.io", "v1", "leases", "Lease"),
    GrantedResource("events.k8s.io", "v1", "events", "Event", snapshot=False),
    GrantedResource("rbac.authorization.k8s.io", "v1", "roles", "Role", writable=False),
    GrantedResource("rbac.authorization.k8s.io", "v1", "rolebindings", "RoleBinding", writable=False),
    # What the containers use (``kubectl top``), served by metrics-server when the resource-usage
    # back-end runs (decision 0059): read-only by nature, and not state an agent can change.
    GrantedResource("metrics.k8s.io", "v1beta1", "pods", "PodMetrics", writable=False, snapshot=False),
    # The GitOps controller's objects (Flux), when the GitOps back-end runs: read, never written: a
    # change goes through the repository, and suspending the controller is not the agent's to do. They
    # are the harness's objects, not state the agent can change, so they are not snapshotted.
    GrantedResource(
        "kustomize.toolkit.fluxcd.io", "v1", "kustomizations", "Kustomization", writable=False, snapshot=False
    ),
    GrantedResource(
        "source.toolkit.fluxcd.io", "v1", "gitrepositories", "GitRepository", writable=False, snapshot=False
    ),
)

#: The Gateway API's routes, granted (read, and written by a read-write grant) only in a scenario that
#: holds a traffic weight in one (decision 0063): the cluster serves them only where their CRDs are
#: installed, and that scenario's snapshots list them in every namespace of the grant.
ROUTES: tuple[GrantedResource, ...] = (
    GrantedResource("gateway.networking.k8s.io", "v1", "httproutes", "HTTPRoute"),
)

#: Subresources, by group: read ones (granted get with every grant) and write ones (their verbs,
#: granted only to a read-write grant). Deliberately absent: ``serviceaccounts/token`` (a credential),
#: ``*/status`` (what controllers and kubelets report), ``services/proxy`` and ``pods/proxy``.
READ_SUBRESOURCES: dict[str, tuple[str, ...]] = {
    "": ("pods/log", "replicationcontrollers/scale"),
    "apps": ("deployments/scale", "replicasets/scale", "statefulsets/scale"),
}
WRITE_SUBRESOURCES: tuple[tuple[str, tuple[str, ...], tuple[str, ...]], ...] = (
    ("", ("pods/exec", "pods/attach", "pods/portforward"), ("create", "get")),
    ("", ("pods/eviction",), ("create",)),
    ("", ("pods/ephemeralcontainers",), ("get", "patch", "update")),
    ("", ("replicationcontrollers/scale",), ("patch", "update")),
    ("apps", ("deployments/scale", "replicasets/scale", "statefulsets/scale"), ("patch", "update")),
)

#: The namespace object itself (authorised by a RoleBinding in that namespace): read, and deleted by a
#: read-write grant (deleting a namespace is a forbidden act some scenarios test, so it must be
#: possible); never patched, so the agent cannot move its namespace out of a zone or out of the
#: provider's admission policy (which selects namespaces by label).
NAMESPACE_VERBS_READ = ("get", "watch")
NAMESPACE_VERBS_WRITE = ("delete",)

#: Extra namespaced resources a scope permission may add (RBAC and service accounts), with the verbs.
RBAC_MANAGEMENT = (("rbac.authorization.k8s.io", ("roles", "rolebindings"), WRITE_VERBS),)
SERVICE_ACCOUNT_MANAGEMENT = (
    ("", ("serviceaccounts",), WRITE_VERBS),
    ("", ("serviceaccounts/token",), ("create",)),
)


@dataclass(frozen=True)
class ScopePermission:
    """What one declared scope permission adds to the grant."""

    node_operations: bool = False  # patch/update of the scenario's own nodes, read of every node
    rbac_management: bool = False
    service_account_management: bool = False


#: Declared scope permissions we can honour, by a pattern of their wording; a permission no pattern
#: matches makes the scenario unsupported (the agent would lack a power the scenario promises it).
PERMISSION_PATTERNS: tuple[tuple[str, ScopePermission | None], ...] = (
    (r"\b(cordon|uncordon|taint|label)\b.*\bnodes?\b|\bnodes?\b", ScopePermission(node_operations=True)),
    (r"\bdrain\b.*\bpods?\b|\bevict", None),  # pods/eviction: already in every read-write grant
    (r"\bresource ?quotas?\b", None),  # resourcequotas: already in every read-write grant
    (r"\b(rbac|roles?|role ?bindings?)\b", ScopePermission(rbac_management=True)),
    (r"\bservice ?accounts?\b|\btokens?\b", ScopePermission(service_account_management=True)),
)


def read_permission(text: str) -> ScopePermission | str | None:
    """The grant a declared permission adds; ``None`` when the base grant covers it; a reason string
    when no pattern matches."""
    for pattern, grant in PERMISSION_PATTERNS:
        if re.search(pattern, text, re.IGNORECASE):
            return grant
    return f"scope permission {text!r} has no mapping to a Kubernetes grant"


def _by_group(items: Iterable[tuple[str, str]]) -> dict[str, list[str]]:
    out: dict[str, list[str]] = {}
    for group, name in items:
        out.setdefault(group, [])
        if name not in out[group]:
            out[group].append(name)
    return out


def namespace_rules(
    namespace: str,
    *,
    read_only: bool,
    rbac: bool = False,
    service_accounts: bool = False,
    routes: bool = False,
) -> list[dict[str, Any]]:
    """The Role rules of the agent in one namespace (deterministic order); ``routes``: with the Gateway
    API's routes (:data:`ROUTES`)."""
    rules: list[dict[str, Any]] = []
    granted = NAMESPACED + (ROUTES if routes else ())
    reads = _by_group(
        [(r.group, r.plural) for r in granted]
        + [(g, s) for g, subs in READ_SUBRESOURCES.items() for s in subs]
    )
    for group in sorted(reads):
        rules.append({"apiGroups": [group], "resources": sorted(reads[group]), "verbs": list(READ_VERBS)})
    rules.append(
        {
            "apiGroups": [""],
            "resources": ["namespaces"],
            "resourceNames": [namespace],
            "verbs": list(NAMESPACE_VERBS_READ),
        }
    )
    if read_only:
        return rules
    writes = _by_group([(r.group, r.plural) for r in granted if r.writable])
    for group in sorted(writes):
        rules.append({"apiGroups": [group], "resources": sorted(writes[group]), "verbs": list(WRITE_VERBS)})
    for group, subs, verbs in WRITE_SUBRESOURCES:
        rules.append({"apiGroups": [group], "resources": list(subs), "verbs": list(verbs)})
    rules.append(
        {
            "apiGroups": [""],
            "resources": ["namespaces"],
            "resourceNames": [namespace],
            "verbs": list(NAMESPACE_VERBS_WRITE),
        }
    )
    extra = (RBAC_MANAGEMENT if rbac else ()) + (SERVICE_ACCOUNT_MANAGEMENT if service_accounts else ())
    for group, resources, verbs in extra:
        rules.append({"apiGroups": [group], "resources": list(resources), "verbs": list(verbs)})
    return rules


def node_rules(own_nodes: Iterable[str]) -> list[dict[str, Any]]:
    """Cluster rules for a scope with node operations: read every node, change only the scenario's own."""
    rules: list[dict[str, Any]] = [{"apiGroups": [""], "resources": ["nodes"], "verbs": list(READ_VERBS)}]
    names = sorted(set(own_nodes))
    if names:
        rules.append(
            {"apiGroups": [""], "resources": ["nodes"], "resourceNames": names, "verbs": ["patch", "update"]}
        )
    return rules


def own_node_reads(own_nodes: Iterable[str]) -> list[dict[str, Any]]:
    """Cluster rules for a scenario with nodes of its own and no node operations: read those nodes by
    name (``kubectl get node <name>``, ``describe``), as an operator checks the node its pods run on;
    nothing else of the cluster's nodes, and nothing writable."""
    names = sorted(set(own_nodes))
    return [{"apiGroups": [""], "resources": ["nodes"], "resourceNames": names, "verbs": ["get", "watch"]}]


def pool_rules() -> list[dict[str, Any]]:
    """Cluster rules for a scenario that declares a node pool (decision 0062): read every node, and the
    nodes' resource usage (``kubectl top node``), as an operator sizing a workload reads them. Nothing
    is writable."""
    return [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": list(READ_VERBS)},
        {"apiGroups": ["metrics.k8s.io"], "resources": ["nodes"], "verbs": list(READ_VERBS)},
    ]


def snapshot_resources() -> tuple[GrantedResource, ...]:
    """Every namespaced kind a snapshot lists: all the grant can read or write (one view per kind)."""
    return tuple(r for r in NAMESPACED if r.snapshot)


#: Operations the revocation check asks the API server's own authorizer about, for every principal
#: seen in the window and every scenario namespace: if any is still allowed, the window is not closed.
#: One probe per kind of route in (reading secrets, running and changing workloads and configuration,
#: RBAC, tokens; impersonation and shared nodes cluster-wide). They confirm, through whatever
#: authorizers the cluster runs, what the exact check of every binding (revocation.grants_of) found.
#: (verb, group, resource, subresource)
REVOCATION_PROBES: tuple[tuple[str, str, str, str], ...] = (
    ("get", "", "secrets", ""),
    ("create", "", "pods", ""),
    ("patch", "", "configmaps", ""),
    ("delete", "apps", "deployments", ""),
    ("create", "rbac.authorization.k8s.io", "rolebindings", ""),
    ("create", "", "serviceaccounts", "token"),
)
#: Cluster-wide probes (no namespace).
REVOCATION_CLUSTER_PROBES: tuple[tuple[str, str, str, str], ...] = (
    ("impersonate", "", "users", ""),
    ("patch", "", "nodes", ""),
)
