"""The tool plane's back-ends as local processes of the dev cluster: one entry per back-end.

Called by :class:`~oasis_operator.devcluster.cluster.DevCluster` (``ClusterConfig.backends``) and by
``oasis dev-cluster up --backends``; turns a selection of names into started, ready back-ends. Adding
a back-end is one module with a :class:`Backend` subclass and one entry in :data:`BACKENDS`, named as
its row of :mod:`oasis_operator.core.toolplane.registry`.
Which upstream component serves which interface, and why: docs/decisions/0050-tool-plane-back-ends.md.
"""

from __future__ import annotations

from collections.abc import Iterable

from oasis_operator.core.toolplane import registry
from oasis_operator.devcluster.backends.base import Backend, BackendContext
from oasis_operator.devcluster.backends.binaries import BackendBinaries, resolve
from oasis_operator.devcluster.backends.database import DatabaseBackend
from oasis_operator.devcluster.backends.gitops import GitOpsBackend
from oasis_operator.devcluster.backends.logs import PodLogsBackend
from oasis_operator.devcluster.backends.metrics import AlertsBackend, MetricsBackend
from oasis_operator.devcluster.backends.resource_metrics import ResourceMetricsBackend
from oasis_operator.devcluster.backends.traces import TracesBackend
from oasis_operator.devcluster.backends.traffic import TrafficRoutingBackend
from oasis_operator.devcluster.errors import SetupError

# In start order (a back-end's requirements come before it); each is a row of the tool-plane registry.
BACKENDS: dict[str, type[Backend]] = {
    b.name: b
    for b in (
        PodLogsBackend,
        ResourceMetricsBackend,
        MetricsBackend,
        AlertsBackend,
        TracesBackend,
        GitOpsBackend,
        TrafficRoutingBackend,
        DatabaseBackend,
    )
}
if _unknown := sorted(set(BACKENDS) - set(registry.BY_NAME)):  # pragma: no cover - a programming error
    raise RuntimeError(f"dev-cluster back-ends that are no tool-plane back-end: {_unknown}")

__all__ = [
    "BACKENDS",
    "Backend",
    "BackendBinaries",
    "BackendContext",
    "parse_selection",
    "resolve_binaries",
    "start",
    "with_requirements",
]


def parse_selection(text: str) -> tuple[str, ...]:
    """``all`` or a comma-separated list of back-end names (``logs,metrics``); empty: none."""
    text = text.strip()
    if text == "all":
        return tuple(BACKENDS)
    names = [n.strip() for n in text.split(",") if n.strip()]
    if unknown := [n for n in names if n not in BACKENDS]:
        raise SetupError(f"unknown back-end {', '.join(unknown)}; known: all, {', '.join(BACKENDS)}")
    return with_requirements(names)


def with_requirements(names: Iterable[str]) -> tuple[str, ...]:
    """``names`` plus what they build on, in start order."""
    wanted = set(names)
    if unknown := sorted(wanted - set(BACKENDS)):
        raise SetupError(f"unknown back-end {', '.join(unknown)}; known: {', '.join(BACKENDS)}")
    for name in list(wanted):
        wanted.update(BACKENDS[name].requires)
    return tuple(n for n in BACKENDS if n in wanted)


def resolve_binaries(names: Iterable[str]) -> BackendBinaries:
    """The cache directory with every binary the back-ends ``names`` run (built where missing)."""
    components = [c for n in with_requirements(names) for c in BACKENDS[n].components]
    return resolve(components)


def start(ctx: BackendContext, names: Iterable[str]) -> dict[str, Backend]:
    """Start the back-ends ``names`` (and their requirements) that are not running yet, in order;
    each is ready on return."""
    for name in with_requirements(names):
        if name in ctx.running:
            continue
        backend = BACKENDS[name]()
        backend.start(ctx)
        ctx.running[name] = backend
    return dict(ctx.running)
