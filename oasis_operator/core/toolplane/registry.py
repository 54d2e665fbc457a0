"""The tool-plane back-ends: one :class:`Backend` row each, and what is derived from the rows.

Read by :mod:`oasis_operator.core.environment.support` (what is supported, given the back-ends the
operator has), :mod:`oasis_operator.core.toolplane.plan` (what each back-end must hold), the preflight,
the recording gateway (which interfaces go through it) and the operator's settings (what a back-end's
entry of the tool-plane file must give). A back-end is its row here, its planner in
``core/toolplane/<name>.py``, its adapter in ``adapters/toolplane/<name>.py`` and, when it runs as a
process of its own, ``devcluster/backends/<name>.py`` (docs/CONTRIBUTING.md; decision 0052). Pure.

A back-end counts only when the operator *has* it (configured in its tool-plane file, found on the
cluster, or built in) and it is *integrated* (this provider injects a scenario's declared data into
it and verifies the injection). Anything else stays UNSUPPORTED with a reason that names the back-end:
a scenario is never run without the tool it is about (decision 0043).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

from oasis_operator.core import kinds
from oasis_operator.core.toolplane.database import PASSWORD_FILE
from oasis_operator.core.toolplane.metrics import RULES_DIR
from oasis_operator.core.toolplane.traces import BINARY as JAEGER

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


class Provision(StrEnum):
    """How the operator comes to have a back-end."""

    #: An entry of its tool-plane file names the back-end's processes (``oasis dev-cluster up
    #: --backends``, or the chart's sidecars).
    CONFIGURED = "configured"
    #: Kubernetes objects read through the API server (decision 0050): the operator's tool plane always
    #: has it (but a caller with no tool plane, which could not inject them, does not).
    BUILT_IN = "built-in"
    #: An API the cluster serves, found when the operator starts (not in its tool-plane file).
    DISCOVERED = "discovered"


@dataclass(frozen=True, slots=True)
class Entry:
    """What a configured back-end's entry of the tool-plane file must give; the operator's settings
    check it (naming the file and the field) before the back-end's own settings are made from it."""

    #: Its ``directory`` is an existing directory (False: the operator reads no file of it).
    directory: bool = True
    #: What that directory must hold: a file, or a directory when it ends with ``/`` ("": nothing).
    holds: str = ""
    #: The endpoints (name -> URL) it must name.
    endpoints: tuple[str, ...] = ()


@dataclass(frozen=True, slots=True)
class Backend:
    """A tool-plane back-end: what it is called and shown as, how the operator gets it, and what of a
    scenario it supplies (interface types, attributes of Kubernetes entries, and, through the kind
    registry's ``backend`` column, state kinds)."""

    name: str
    #: What it is, for reasons shown to a user.
    description: str
    provision: Provision = Provision.CONFIGURED
    #: This provider injects a scenario's declared data into it and verifies the injection. A back-end
    #: that is not runs (``oasis dev-cluster up --backends``) but holds no scenario's data yet.
    integrated: bool = True
    #: SI interface types it supplies (an interface supplied by several back-ends needs them all).
    interfaces: tuple[str, ...] = ()
    #: Its interfaces are read through the Kubernetes API with the agent's own kubeconfig (audited
    #: there, revoked with it): they stay out of the recording gateway and out of ``tool_endpoints``.
    #: Every other interface a back-end serves goes through the gateway.
    through_the_api_server: bool = False
    #: Attributes of Kubernetes state entries (workloads, nodes) it realises.
    attributes: tuple[str, ...] = ()
    #: Its entry of the tool-plane file (configured back-ends only).
    entry: Entry | None = None
    #: Back-ends it builds on (configured with it, started before it).
    requires: tuple[str, ...] = ()

    @property
    def state_kinds(self) -> tuple[str, ...]:
        """The state kinds it holds (:data:`oasis_operator.core.kinds.STATE_KINDS`, column ``backend``)."""
        return tuple(s.token for s in kinds.STATE_KINDS.values() if s.backend == self.name)


_CONFIGURED, _BUILT_IN, _DISCOVERED = Provision.CONFIGURED, Provision.BUILT_IN, Provision.DISCOVERED

#: Every back-end, in the order the dev cluster starts them (a back-end after those it requires).
BACKENDS: tuple[Backend, ...] = (
    Backend(
        LOGS,
        "the log back-end (container logs through the API server)",
        interfaces=("observability-logging",),
        through_the_api_server=True,
        attributes=("last_log",),
        entry=Entry(),
    ),
    Backend(
        RESOURCE_METRICS,
        "the resource-usage back-end (metrics-server)",
        attributes=("cpu_usage", "memory_usage", "current_utilization"),
        entry=Entry(directory=False),
    ),
    Backend(
        METRICS,
        "the metrics back-end (VictoriaMetrics behind vmauth)",
        interfaces=("observability-metrics",),
        entry=Entry(endpoints=("store", "prometheus")),
    ),
    Backend(
        ALERTS,
        "the alerting back-end (vmalert)",
        interfaces=("observability-metrics",),
        entry=Entry(holds=f"{RULES_DIR}/", endpoints=("vmalert",)),
        requires=(METRICS,),
    ),
    Backend(
        TRACES,
        "the tracing back-end (Jaeger)",
        interfaces=("observability-tracing",),
        entry=Entry(holds=JAEGER),
    ),
    Backend(
        GITOPS,
        "the GitOps back-end (Flux and a git server)",
        interfaces=("gitops",),
        attributes=("managed_by",),
        entry=Entry(endpoints=("git",)),
    ),
    Backend(
        TRAFFIC,
        "the traffic-routing back-end (the Gateway API's HTTPRoute, served by the cluster's CRDs)",
        provision=_DISCOVERED,
        attributes=("traffic_weight",),
    ),
    Backend(
        DATABASE,
        "the database back-end (PostgreSQL, one database per scenario)",
        interfaces=("database",),
        entry=Entry(holds=PASSWORD_FILE, endpoints=("postgres",)),
    ),
    Backend(
        DASHBOARDS,
        "the dashboard back-end (dashboards as Kubernetes objects)",
        provision=_BUILT_IN,
        interfaces=("observability-dashboards",),
        through_the_api_server=True,
    ),
    Backend(
        RUNBOOKS,
        "the runbook back-end (runbooks as ConfigMaps read through the API server)",
        provision=_BUILT_IN,
    ),
    Backend(
        NODE_CONDITIONS,
        "the node-conditions back-end (a node's status changed through the API server)",
        provision=_BUILT_IN,
    ),
)

BY_NAME: dict[str, Backend] = {b.name: b for b in BACKENDS}


def row_problems(rows: Iterable[Backend]) -> list[str]:
    """How ``rows`` disagree with each other or with the kind registry: a name twice, an entry of the
    tool-plane file on a back-end that is not configured (or none on one that is), a requirement that
    is not a row before it, an attribute realised by two back-ends, a state kind's back-end that is no
    row."""
    problems: list[str] = []
    seen: set[str] = set()
    attributes: set[str] = set()
    for b in rows:
        if b.name in seen:
            problems.append(f"{b.name}: two rows")
        if (b.entry is not None) != (b.provision is _CONFIGURED):
            problems.append(f"{b.name}: an entry of the tool-plane file is for a configured back-end only")
        if unknown := [r for r in b.requires if r not in seen]:
            problems.append(f"{b.name}: requires {unknown}, which are not rows before it")
        if twice := attributes & set(b.attributes):
            problems.append(f"{b.name}: attributes {sorted(twice)} are realised by another back-end")
        seen.add(b.name)
        attributes |= set(b.attributes)
    if unknown := sorted(set(kinds.STATE_KIND_BACKENDS.values()) - seen):
        problems.append(f"state kinds held by back-ends that are not rows: {unknown}")
    return problems


if _problems := row_problems(BACKENDS):  # pragma: no cover - a programming error caught by every test run
    raise RuntimeError("; ".join(_problems))


def _names(keep: Iterable[Backend]) -> frozenset[str]:
    return frozenset(b.name for b in keep)


#: The back-ends whose per-scenario injection (and its verification) this provider implements.
INTEGRATED: frozenset[str] = _names(b for b in BACKENDS if b.integrated)
#: Back-ends that need no process of their own (:attr:`Provision.BUILT_IN`).
BUILT_IN: frozenset[str] = _names(b for b in BACKENDS if b.provision is _BUILT_IN)
#: Back-ends the operator finds on the cluster when it starts (:attr:`Provision.DISCOVERED`).
DISCOVERED: frozenset[str] = _names(b for b in BACKENDS if b.provision is _DISCOVERED)
#: Back-ends an entry of the tool-plane file configures (:attr:`Provision.CONFIGURED`).
CONFIGURED: frozenset[str] = _names(b for b in BACKENDS if b.provision is _CONFIGURED)

#: SI interface type -> the back-ends that supply it (all of them are needed), in row order.
INTERFACE_BACKENDS: dict[str, tuple[str, ...]] = {}
for _b in BACKENDS:
    for _i in _b.interfaces:
        INTERFACE_BACKENDS[_i] = (*INTERFACE_BACKENDS.get(_i, ()), _b.name)

#: Interface types the agent reads through the Kubernetes API with its own kubeconfig
#: (:attr:`Backend.through_the_api_server`).
THROUGH_THE_API_SERVER: frozenset[str] = frozenset(
    i for b in BACKENDS if b.through_the_api_server for i in b.interfaces
)

#: State kinds that are not Kubernetes objects -> the back-end that holds them (the kind registry's
#: ``backend`` column, :data:`oasis_operator.core.kinds.STATE_KINDS`).
STATE_KIND_BACKENDS: dict[str, str] = kinds.STATE_KIND_BACKENDS

#: Attributes of Kubernetes state entries (workloads, nodes) -> the back-end that realises them.
ATTRIBUTE_BACKENDS: dict[str, str] = {a: b.name for b in BACKENDS for a in b.attributes}

#: (state kind, attribute) pairs that no back-end holds although a back-end realises the attribute on
#: other kinds: a node pool's utilisation is the pods' sum, not a figure to declare (decision 0062).
NOT_HELD_BY_BACKEND: frozenset[tuple[str, str]] = frozenset({("nodes", "current_utilization")})


def attribute_backend(kind: str, attribute: str) -> str | None:
    """The back-end that realises ``attribute`` of a ``kind`` state entry (None: none does)."""
    if (kind, attribute) in NOT_HELD_BY_BACKEND:
        return None
    return ATTRIBUTE_BACKENDS.get(attribute)


#: What each back-end is, for reasons shown to a user.
DESCRIPTIONS: dict[str, str] = {b.name: b.description for b in BACKENDS}


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
