"""Which tool-plane back-end supplies what a scenario declares: one table per kind of declaration.

Read by :mod:`oasis_operator.core.environment.support` (what is supported, given the back-ends the
operator has) and :mod:`oasis_operator.core.toolplane.plan` (what each back-end must hold). Adding a
back-end is one adapter in ``adapters/toolplane/`` and its rows here (decision 0052). Pure.

A back-end counts only when it is both *configured* (the operator found it, see
``OperatorSettings.toolplane_file``) and *integrated* (this provider injects a scenario's declared
data into it and verifies the injection: :data:`INTEGRATED`). Anything else stays UNSUPPORTED with a
reason that names the back-end: a scenario is never run without the tool it is about (decision 0043).
"""

from __future__ import annotations

from collections.abc import Iterable

from oasis_operator.core import kinds

LOGS = "logs"
DASHBOARDS = "dashboards"
METRICS = "metrics"
ALERTS = "alerts"
RESOURCE_METRICS = "resource-metrics"
TRACES = "traces"
GITOPS = "gitops"
#: Runbooks as Kubernetes objects read through the API server (decision 0059).
RUNBOOKS = "runbooks"
#: Node conditions changed during the turn (a temporal condition's change; Kubernetes objects).
NODE_CONDITIONS = "node-conditions"
#: Weighted routes between a workload and its canary: the Gateway API's HTTPRoute, served by the
#: cluster's own CRDs and found there when the operator starts (decision 0063).
TRAFFIC = "traffic-routing"
#: A PostgreSQL of the harness: one database and two login roles per scenario, reached by the agent
#: through an HTTP endpoint of the operator behind the recording gateway (decision 0066).
DATABASE = "database"

#: Back-ends whose per-scenario injection (and its verification) this provider implements. The
#: others run (``oasis dev-cluster up --backends``) but hold no scenario's data yet.
INTEGRATED: frozenset[str] = frozenset(
    {
        LOGS,
        DASHBOARDS,
        GITOPS,
        NODE_CONDITIONS,
        METRICS,
        ALERTS,
        TRACES,
        RESOURCE_METRICS,
        RUNBOOKS,
        TRAFFIC,
        DATABASE,
    }
)

#: Back-ends that need no process of their own: they are Kubernetes objects read through the API
#: server (decision 0050), so the operator's tool plane always has them (but a caller with no tool
#: plane, which could not inject them, does not).
BUILT_IN: frozenset[str] = frozenset({DASHBOARDS, NODE_CONDITIONS, RUNBOOKS})

#: Back-ends the operator finds on the cluster when it starts (an API the cluster serves), rather than
#: in its tool-plane file.
DISCOVERED: frozenset[str] = frozenset({TRAFFIC})

#: SI interface type -> the back-ends that supply it (all of them are needed).
INTERFACE_BACKENDS: dict[str, tuple[str, ...]] = {
    "observability-logging": (LOGS,),
    "observability-metrics": (METRICS, ALERTS),
    "observability-tracing": (TRACES,),
    "observability-dashboards": (DASHBOARDS,),
    "gitops": (GITOPS,),
    "database": (DATABASE,),
}

#: Interface types the agent reads through the Kubernetes API with its own kubeconfig (audited there,
#: revoked with it): they stay out of the recording gateway and out of ``tool_endpoints``. Every other
#: interface a back-end serves goes through the gateway, with or without a credential of its own.
THROUGH_THE_API_SERVER: frozenset[str] = frozenset({"observability-logging", "observability-dashboards"})

#: State kinds that are not Kubernetes objects -> the back-end that holds them (the kind registry's
#: ``backend`` column, :data:`oasis_operator.core.kinds.STATE_KINDS`).
STATE_KIND_BACKENDS: dict[str, str] = kinds.STATE_KIND_BACKENDS

#: Attributes of Kubernetes state entries (workloads, nodes) that a back-end realises.
ATTRIBUTE_BACKENDS: dict[str, str] = {
    "last_log": LOGS,
    "cpu_usage": RESOURCE_METRICS,
    "memory_usage": RESOURCE_METRICS,
    "current_utilization": RESOURCE_METRICS,
    "managed_by": GITOPS,
    "traffic_weight": TRAFFIC,
}

#: (state kind, attribute) pairs that no back-end holds although a back-end realises the attribute on
#: other kinds: a node pool's utilisation is the pods' sum, not a figure to declare (decision 0062).
NOT_HELD_BY_BACKEND: frozenset[tuple[str, str]] = frozenset({("nodes", "current_utilization")})


def attribute_backend(kind: str, attribute: str) -> str | None:
    """The back-end that realises ``attribute`` of a ``kind`` state entry (None: none does)."""
    if (kind, attribute) in NOT_HELD_BY_BACKEND:
        return None
    return ATTRIBUTE_BACKENDS.get(attribute)


#: What each back-end is, for reasons shown to a user.
DESCRIPTIONS: dict[str, str] = {
    LOGS: "the log back-end (container logs through the API server)",
    DASHBOARDS: "the dashboard back-end (dashboards as Kubernetes objects)",
    METRICS: "the metrics back-end (VictoriaMetrics behind vmauth)",
    ALERTS: "the alerting back-end (vmalert)",
    RESOURCE_METRICS: "the resource-usage back-end (metrics-server)",
    TRACES: "the tracing back-end (Jaeger)",
    GITOPS: "the GitOps back-end (Flux and a git server)",
    RUNBOOKS: "the runbook back-end (runbooks as ConfigMaps read through the API server)",
    NODE_CONDITIONS: "the node-conditions back-end (a node's status changed through the API server)",
    DATABASE: "the database back-end (PostgreSQL, one database per scenario)",
    TRAFFIC: "the traffic-routing back-end (the Gateway API's HTTPRoute, served by the cluster's CRDs)",
}


def usable(configured: Iterable[str]) -> frozenset[str]:
    """The back-ends a scenario can rely on: configured and integrated."""
    return frozenset(configured) & INTEGRATED


def missing_reason(backend: str, configured: Iterable[str]) -> str | None:
    """Why ``backend`` cannot be relied on (None: it can)."""
    what = DESCRIPTIONS.get(backend, f"the {backend} back-end")
    if backend not in INTEGRATED:
        return f"{what} is not integrated: this provider does not inject a scenario's data into it yet"
    if backend in BUILT_IN and backend not in frozenset(configured):
        return f"{what} needs the operator's tool plane, which this caller does not have"
    if backend in DISCOVERED and backend not in frozenset(configured):
        return (
            f"{what} is not served by this cluster (the operator looks for httproutes in "
            "gateway.networking.k8s.io/v1 when it starts: install the Gateway API's standard CRDs, "
            "or start the dev cluster with `--backends traffic-routing`, and restart the operator)"
        )
    if backend not in frozenset(configured):
        return (
            f"{what} is not configured for this operator (start it with `oasis dev-cluster up --backends "
            f"{backend}` and give the operator its tool-plane file)"
        )
    return None
