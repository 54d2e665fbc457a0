"""The kind registry: every kind of object this provider knows, and every kind of declared state, one row each.

Read by the manifest builders (apply order, the kinds Events refer to), the environment planner (which
state kinds are built, held by a tool-plane back-end, or refused), the action grammar
(:mod:`oasis_operator.core.verification.resource_types` is this table's ``token`` column), the matcher
(which resources are cluster-scoped), preparation (which scenarios write cluster-scoped objects), the
tool-plane registry (which back-end holds which state kind) and the Kubernetes adapter (what teardown
and the orphan sweep delete outside the namespaces). Pure data, importing nothing of ours, so that
every package of the core can read it.

Adding a state kind is one row of :data:`STATE_KINDS` (plus, for a Kubernetes kind that is new here, a
row of :data:`KINDS`) and its builder in ``manifests.BUILDERS``; the chart's ClusterRole must grant its
resource (``tests/shipping/test_rbac_kinds.py`` fails until it does).
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True, slots=True)
class Kind:
    """A Kubernetes kind: where it lives in the API and how a scenario's objects of it are handled."""

    kind: str
    group: str  # "" for the core group
    version: str
    plural: str  # the resource, as URLs, RBAC rules and audit events spell it
    cluster_scoped: bool = False
    #: The action grammar's word for it (also how scenarios name an object of it: ``deployment/web``);
    #: None: not a type of the grammar.
    token: str | None = None
    #: Apply order of a scenario's objects, lowest first: what others refer to goes first. None: after
    #: every ranked kind.
    rank: int | None = None
    #: Served by a CRD of a tool-plane back-end, not by every API server.
    crd: bool = False

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version


_RBAC = "rbac.authorization.k8s.io"
_NET = "networking.k8s.io"

KINDS: tuple[Kind, ...] = (
    Kind("Namespace", "", "v1", "namespaces", cluster_scoped=True, token="namespace", rank=10),
    Kind("ResourceQuota", "", "v1", "resourcequotas", token="resourcequota", rank=20),
    Kind("LimitRange", "", "v1", "limitranges", rank=30),
    Kind("ServiceAccount", "", "v1", "serviceaccounts", token="serviceaccount", rank=40),
    Kind("Role", _RBAC, "v1", "roles", token="role", rank=50),
    Kind("RoleBinding", _RBAC, "v1", "rolebindings", token="rolebinding", rank=60),
    Kind("ClusterRole", _RBAC, "v1", "clusterroles", cluster_scoped=True, token="clusterrole", rank=70),
    Kind(
        "ClusterRoleBinding",
        _RBAC,
        "v1",
        "clusterrolebindings",
        cluster_scoped=True,
        token="clusterrolebinding",
        rank=80,
    ),
    Kind("ConfigMap", "", "v1", "configmaps", token="configmap", rank=90),
    Kind("Secret", "", "v1", "secrets", token="secret", rank=100),
    Kind("PersistentVolume", "", "v1", "persistentvolumes", cluster_scoped=True, rank=110),
    Kind("PersistentVolumeClaim", "", "v1", "persistentvolumeclaims", token="pvc", rank=120),
    Kind("Service", "", "v1", "services", token="service", rank=130),
    # A weighted route between a workload and its canary (decision 0063): the Gateway API's, served by
    # its standard CRDs where the cluster has them (the traffic-routing back-end); it names Services.
    Kind(
        "HTTPRoute",
        "gateway.networking.k8s.io",
        "v1",
        "httproutes",
        token="httproute",
        rank=135,
        crd=True,
    ),
    Kind("Deployment", "apps", "v1", "deployments", token="deployment", rank=140),
    Kind("Pod", "", "v1", "pods", token="pod", rank=150),
    Kind("Ingress", _NET, "v1", "ingresses", token="ingress", rank=160),
    Kind("HorizontalPodAutoscaler", "autoscaling", "v2", "horizontalpodautoscalers", token="hpa", rank=170),
    Kind("NetworkPolicy", _NET, "v1", "networkpolicies", token="networkpolicy", rank=180),
    Kind("Event", "", "v1", "events", token="event", rank=190),
    # A scenario's own nodes come before what runs on them: a pending pod's scheduler message counts them
    # all (``0/6 nodes are available: 3 Insufficient cpu``), and pinned pods do not wait for a node.
    Kind("Node", "", "v1", "nodes", cluster_scoped=True, token="node", rank=125),
    Kind("ReplicaSet", "apps", "v1", "replicasets", token="replicaset"),
    Kind("StatefulSet", "apps", "v1", "statefulsets", token="statefulset"),
    Kind("DaemonSet", "apps", "v1", "daemonsets", token="daemonset"),
    Kind("Job", "batch", "v1", "jobs", token="job"),
    Kind("CronJob", "batch", "v1", "cronjobs", token="cronjob"),
    Kind("PodDisruptionBudget", "policy", "v1", "poddisruptionbudgets", token="pdb"),
    # The GitOps application: Flux's Kustomization (decision 0052; the tool plane runs Flux).
    Kind(
        "Kustomization",
        "kustomize.toolkit.fluxcd.io",
        "v1",
        "kustomizations",
        token="gitops-application",
        crd=True,
    ),
)

#: Kubernetes kind -> its row.
BY_KIND: dict[str, Kind] = {k.kind: k for k in KINDS}
#: The grammar's token -> its row.
BY_TOKEN: dict[str, Kind] = {k.token: k for k in KINDS if k.token}

#: Kinds whose objects have no namespace: a scenario that writes one runs alone, and the harness labels
#: it with the scenario's ownership value itself (nothing inside a namespace goes away with it).
CLUSTER_SCOPED_KINDS: frozenset[str] = frozenset(k.kind for k in KINDS if k.cluster_scoped)
#: The same, by resource (as audit events and RBAC rules name them).
CLUSTER_SCOPED_RESOURCES: frozenset[str] = frozenset(k.plural for k in KINDS if k.cluster_scoped)
#: Cluster-scoped kinds a scenario owns besides its namespaces: found by the ownership label, deleted
#: at teardown and by the orphan sweep, snapshotted by name. Dependents first (reverse apply order).
OWNED_CLUSTER_KINDS: tuple[Kind, ...] = tuple(
    sorted(
        (k for k in KINDS if k.cluster_scoped and k.kind != "Namespace"),
        key=lambda k: -(k.rank if k.rank is not None else len(KINDS) * 10),
    )
)


def apply_rank(kind: str) -> int:
    """Where objects of ``kind`` go in apply order (unknown and unranked kinds last)."""
    row = BY_KIND.get(kind)
    return row.rank if row is not None and row.rank is not None else 10_000


def object_reference(token: str) -> tuple[str, str]:
    """``(apiVersion, kind)`` of the object a scenario names as ``<token>/<name>`` (an Event's
    ``involvedObject``); a word the registry does not know is taken as a core-group kind."""
    row = BY_TOKEN.get(token.lower())
    if row is not None:
        return row.api_version, row.kind
    return "v1", token.capitalize() or "Pod"


@dataclass(frozen=True, slots=True)
class StateKind:
    """A kind of the SI state vocabulary (``resource: <token>/<name>``) and how this provider delivers it.

    Exactly one of: built (``kind`` set, ``refused`` None: ``manifests.BUILDERS[token]`` makes it;
    ``events`` is built by ``manifests.events``), held by a tool-plane ``backend`` (not a Kubernetes
    object: ``refused`` says what it needs when that back-end is missing), or refused (``refused``)."""

    token: str
    #: The Kubernetes kind its builder makes (None: it is not a Kubernetes object).
    kind: str | None = None
    #: The tool-plane back-end that holds it (a name of ``core.toolplane.registry``).
    backend: str | None = None
    #: Why it cannot be built: what it needs (a tool back-end), or why it is not realised yet.
    refused: str | None = None
    #: The action grammar's word for it, when it is not a Kubernetes object (interface types §4.2).
    action_type: str | None = None

    @property
    def kubernetes(self) -> bool:
        return self.kind is not None

    @property
    def built(self) -> bool:
        return self.kind is not None and self.refused is None


STATE_KINDS: dict[str, StateKind] = {
    s.token: s
    for s in (
        StateKind("namespace", "Namespace"),
        StateKind("deployment", "Deployment"),
        StateKind("pod", "Pod"),
        StateKind("configmap", "ConfigMap"),
        StateKind("secret", "Secret"),
        StateKind("service", "Service"),
        StateKind("ingress", "Ingress"),
        StateKind("hpa", "HorizontalPodAutoscaler"),
        StateKind("pvc", "PersistentVolumeClaim"),
        StateKind("networkpolicy", "NetworkPolicy"),
        StateKind("node", "Node"),
        StateKind("events", "Event"),
        # A node pool declaration: that many nodes of the scenario's own (decision 0062).
        StateKind("nodes", "Node"),
        # Not Kubernetes objects: a tool-plane back-end holds them; without it the scenario is not run
        # (never run without its state).
        StateKind(
            "logs",
            backend="logs",
            refused="container log content needs a log back-end (no kubelet serves logs on simulated nodes)",
            action_type="logs",
        ),
        StateKind(
            "metrics", backend="metrics", refused="metrics need a metrics back-end", action_type="metrics"
        ),
        StateKind("traces", backend="traces", refused="traces need a tracing back-end", action_type="trace"),
        StateKind("alert", backend="alerts", refused="alerts need an alerting back-end", action_type="alert"),
        StateKind(
            "dashboard",
            backend="dashboards",
            refused="dashboards need a dashboard back-end",
            action_type="dashboard",
        ),
        StateKind(
            "gitops-application",
            backend="gitops",
            refused="GitOps applications need an emulated GitOps controller",
        ),
        StateKind(
            "runbook",
            backend="runbooks",
            refused="runbooks need a documentation back-end",
            action_type="runbook",
        ),
        StateKind(
            "database-migration",
            backend="database",
            refused="database migrations need a database back-end",
            action_type="database",
        ),
    )
}

#: State kinds that are not Kubernetes objects -> what they need (a tool-plane back-end).
NON_KUBERNETES_KINDS: dict[str, str] = {
    s.token: str(s.refused) for s in STATE_KINDS.values() if not s.kubernetes
}
#: Kubernetes state kinds this provider does not realise yet -> why.
NOT_YET_KINDS: dict[str, str] = {
    s.token: s.refused for s in STATE_KINDS.values() if s.kubernetes and s.refused is not None
}
#: State kinds that are not Kubernetes objects -> the tool-plane back-end that holds them.
STATE_KIND_BACKENDS: dict[str, str] = {
    s.token: s.backend for s in STATE_KINDS.values() if s.backend is not None
}

#: Action-grammar types that have no Kubernetes API, hence no audit evidence: an action on them cannot
#: be judged from the audit log. Those of the state kinds above, and IaC state, a grammar type no
#: scenario declares as state (a GitOps application is a Kubernetes object, a CRD, to the grammar).
NON_KUBERNETES_TYPES: frozenset[str] = frozenset(
    {s.action_type for s in STATE_KINDS.values() if s.action_type is not None} | {"iac-state"}
)
