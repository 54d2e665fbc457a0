"""The tool plane as one port over one adapter per back-end (decision 0052).

Called by the operator's start-up (``handlers/operator.py``, with ``OperatorSettings.toolplane``) and
by tests; turns the back-ends' settings into a :class:`~oasis_operator.core.ports.ToolPlanePort` over
one cluster: a scenario's part is injected into every back-end it needs, a timed change goes to its
back-end, the agent's endpoints are collected per interface type. A back-end is its row in
:mod:`oasis_operator.core.toolplane.registry` and its adapter module here, which defines its settings
and its :class:`~oasis_operator.adapters.toolplane.factory.Factory` (one entry of :data:`FACTORIES`).
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from typing import Any

import httpx2

from oasis_operator.core.environment.plan import EnvironmentPlan
from oasis_operator.core.errors import ToolPlaneError
from oasis_operator.core.ports import AgentAccess, ToolBackendPort, ToolEndpoint, ToolStateReader
from oasis_operator.core.preflight import BackendProbe
from oasis_operator.core.toolplane import registry
from oasis_operator.core.toolplane.plan import TimedChange

# The database back-end's factory, not its adapter: psycopg (the `database` extra) is imported only when
# a tool plane has the back-end (decision 0108).
from . import dashboards, database_settings, gitops, logs, metrics, nodes, routes, runbooks, traces, usage
from .factory import Assembly, Cluster, Factory, FileEntry
from .routes import serves_routes

__all__ = ["FACTORIES", "Cluster", "FileEntry", "ToolPlane", "discovered", "serves_routes", "tool_plane"]

#: Back-end name -> how its adapter is made (its registry row says how the operator gets it).
FACTORIES: dict[str, Factory[Any]] = {
    f.name: f
    for f in (
        logs.FACTORY,
        usage.FACTORY,
        metrics.METRICS_FACTORY,
        metrics.ALERTS_FACTORY,
        traces.FACTORY,
        gitops.FACTORY,
        routes.FACTORY,
        database_settings.FACTORY,
        dashboards.FACTORY,
        runbooks.FACTORY,
        nodes.FACTORY,
    )
}
if _missing := sorted(set(registry.BY_NAME) - set(FACTORIES)):  # pragma: no cover
    raise RuntimeError(f"tool-plane back-ends without a factory: {_missing}")


class ToolPlane:
    def __init__(
        self, adapters: Mapping[str, ToolBackendPort], owned: tuple[httpx2.AsyncClient, ...] = ()
    ) -> None:
        self.adapters = dict(adapters)
        self._owned = owned

    async def aclose(self) -> None:
        """Close the clients the tool plane opened for the back-ends' own endpoints."""
        for client in self._owned:
            await client.aclose()
        for adapter in self.adapters.values():
            closing = getattr(adapter, "aclose", None)
            if closing is not None:
                await closing()

    @property
    def backends(self) -> frozenset[str]:
        return frozenset(self.adapters)

    def _needed(self, plan: EnvironmentPlan) -> list[ToolBackendPort]:
        missing = sorted(plan.toolplane.backends - self.backends)
        if missing:
            # The plan was made with this set, so this is a harness bug; never a turn without the data.
            raise ToolPlaneError(
                f"the scenario needs back-ends this operator does not have: {', '.join(missing)}"
            )
        return [self.adapters[b] for b in sorted(plan.toolplane.backends)]

    async def inject(self, plan: EnvironmentPlan) -> None:
        for adapter in self._needed(plan):
            await adapter.inject(plan)

    async def apply(self, plan: EnvironmentPlan, change: TimedChange) -> None:
        adapter = self.adapters.get(change.backend)
        if adapter is None:
            raise ToolPlaneError(
                f"a timed change for back-end {change.backend}, which this operator does not have"
            )
        await adapter.apply(plan, change)

    async def endpoints(self, plan: EnvironmentPlan, access: AgentAccess) -> dict[str, ToolEndpoint]:
        out: dict[str, ToolEndpoint] = {}
        for adapter in self._needed(plan):
            ep = await adapter.endpoint(plan, access)
            if ep is not None:
                out[ep.interface] = ep
        return out

    async def settle(self, plan: EnvironmentPlan) -> None:
        for adapter in self._needed(plan):
            await adapter.settle(plan)

    async def state(self, plan: EnvironmentPlan) -> tuple[dict[str, Any], ...]:
        """The state of the back-ends that keep one of their own (:class:`ToolStateReader`), as snapshot
        objects."""
        out: list[dict[str, Any]] = []
        for adapter in self._needed(plan):
            if isinstance(adapter, ToolStateReader):
                out.extend(await adapter.state(plan))
        return tuple(out)

    @property
    def principals(self) -> tuple[str, ...]:
        """Identities the back-ends act under in the cluster (the harness's deputies)."""
        return tuple(p for a in self.adapters.values() for p in getattr(a, "principals", ()))

    async def probe(self, timeout: float = 10.0) -> tuple[BackendProbe, ...]:
        """Every back-end's self-test, at once, each bounded by ``timeout`` (the run's preflight): a
        back-end whose adapter has none is reported as not self-tested."""

        async def one(name: str, adapter: ToolBackendPort) -> BackendProbe:
            probe = getattr(adapter, "probe", None)
            if probe is None:
                return BackendProbe(name, None, "this back-end's adapter has no self-test")
            try:
                async with asyncio.timeout(timeout):
                    return BackendProbe(name, True, str(await probe()))
            except TimeoutError:
                return BackendProbe(name, False, f"no answer within {timeout:.0f}s")
            except Exception as exc:  # any failure of a self-test is an unreachable back-end
                return BackendProbe(name, False, f"{type(exc).__name__}: {exc}")

        return tuple(await asyncio.gather(*(one(n, a) for n, a in sorted(self.adapters.items()))))

    async def cleanup(self, plan: EnvironmentPlan) -> None:
        errors = []
        for name in sorted(plan.toolplane.backends & self.backends):
            try:
                await self.adapters[name].cleanup(plan)
            except Exception as exc:  # every back-end gets its cleanup
                errors.append(f"{name}: {exc}")
        if errors:
            raise ToolPlaneError("; ".join(errors))


def tool_plane(cluster: Cluster, backends: Mapping[str, object] | None = None) -> ToolPlane:
    """The tool plane of ``cluster``: every built-in back-end, and each other back-end whose settings
    ``backends`` holds (name -> its settings, as ``ToolPlaneSettings`` reads them from the tool-plane
    file or :func:`discovered` finds them). A back-end without the back-ends it builds on is an
    error."""
    given = dict(backends or {})
    _check(given)
    plane = Assembly(cluster, given)
    adapters = {
        row.name: FACTORIES[row.name].make(plane, given.get(row.name))
        for row in registry.BACKENDS
        if row.provision is registry.Provision.BUILT_IN or row.name in given
    }
    return ToolPlane(adapters, plane.owned)


def _check(given: Mapping[str, object]) -> None:
    """Before anything is made: every back-end named is one, with the settings its factory takes and
    the back-ends it builds on."""
    if unknown := sorted(set(given) - set(FACTORIES)):
        raise ToolPlaneError(f"no tool-plane back-end {', '.join(unknown)}")
    for name, settings in given.items():
        factory = FACTORIES[name]
        if not isinstance(settings, factory.settings):
            raise ToolPlaneError(
                f"the {name} back-end takes {factory.settings.__name__} settings, not {type(settings).__name__}"
            )
        if missing := [r for r in registry.BY_NAME[name].requires if r not in given]:
            raise ToolPlaneError(f"the {name} back-end needs {', '.join(missing)}")


async def discovered(cluster: Cluster) -> dict[str, object]:
    """The back-ends ``cluster`` serves of those found rather than configured (asked once per cluster,
    when the operator starts): name -> settings."""
    out: dict[str, object] = {}
    for row in registry.BACKENDS:
        find = FACTORIES[row.name].discover
        if row.provision is registry.Provision.DISCOVERED and find is not None:
            found = await find(cluster)
            if found is not None:
                out[row.name] = found
    return out
