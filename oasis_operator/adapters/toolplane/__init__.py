"""The tool plane as one port over one adapter per back-end (decision 0052).

Called by the operator's start-up (``handlers/operator.py``, from ``OperatorSettings.toolplane``) and
by tests; turns the configured back-ends into a :class:`~oasis_operator.core.ports.ToolPlanePort`:
a scenario's part is injected into every back-end it needs, a timed change goes to its back-end, the
agent's endpoints are collected per interface type. A back-end is one adapter satisfying
:class:`~oasis_operator.core.ports.ToolBackendPort` plus its rows in
:mod:`oasis_operator.core.toolplane.registry`.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx2

from oasis_operator.core.environment.plan import EnvironmentPlan
from oasis_operator.core.errors import ToolPlaneError
from oasis_operator.core.ports import AgentAccess, ToolBackendPort, ToolEndpoint, ToolStateReader
from oasis_operator.core.preflight import BackendProbe
from oasis_operator.core.toolplane.plan import TimedChange

from .dashboards import Dashboards
from .database import Database
from .gitops import GitOps
from .logs import PodLogs
from .metrics import Alerts, Metrics, Vmauth
from .nodes import NodeConditions
from .routes import TrafficRoutes, serves_routes
from .runbooks import Runbooks
from .traces import Traces
from .usage import ResourceUsage

__all__ = ["ToolPlane", "serves_routes", "tool_plane"]


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


def tool_plane(
    http: httpx2.AsyncClient,
    server: str,
    *,
    logs_directory: Path | None = None,
    gitops: tuple[Path, str, str, str] | None = None,
    metrics: tuple[Path, str, str] | None = None,
    alerts: tuple[Path, str] | None = None,
    traces_directory: Path | None = None,
    resource_usage: bool = False,
    traffic_routes: bool = False,
    database: tuple[Path, str] | None = None,
) -> ToolPlane:
    """The operator's tool plane: dashboards, runbooks and node conditions always (Kubernetes objects), each other
    back-end when configured (``logs_directory``: the log back-end's file directory; ``gitops``: the
    GitOps back-end's directory, git server URL, that server's URL for Flux and Flux's namespace;
    ``metrics``: the metrics back-end's directory, store URL and vmauth URL; ``alerts``: vmalert's
    rule directory and URL, which needs ``metrics``;
    ``traces_directory``: the tracing back-end's directory, where a Jaeger per scenario starts from;
    ``resource_usage``: metrics-server serves the node simulator's usage through the API server;
    ``traffic_routes``: the cluster serves the Gateway API's HTTPRoute, as :func:`serves_routes` found;
    ``database``: the database back-end's directory and server URL)."""
    adapters: dict[str, ToolBackendPort] = {
        "dashboards": Dashboards(http, server),
        "node-conditions": NodeConditions(http),
        "runbooks": Runbooks(http),
    }
    owned: list[httpx2.AsyncClient] = []
    if logs_directory is not None:
        adapters["logs"] = PodLogs(http, logs_directory, server)
    if gitops is not None:
        adapters["gitops"] = GitOps(http, *gitops)
    if metrics is not None:
        directory, store, vmauth_url = metrics
        # One client for the back-ends' own (non-Kubernetes) endpoints, one grant registry for both.
        backend_http = httpx2.AsyncClient(timeout=httpx2.Timeout(10.0))
        owned.append(backend_http)
        vmauth = Vmauth(backend_http, directory, vmauth_url)
        adapters["metrics"] = Metrics(backend_http, store, vmauth, kube=http)
        if alerts is not None:
            adapters["alerts"] = Alerts(backend_http, alerts[0], alerts[1], vmauth)
    if resource_usage:
        adapters["resource-metrics"] = ResourceUsage(http)
    if traffic_routes:
        adapters["traffic-routing"] = TrafficRoutes(http)
    if traces_directory is not None:
        traces_http = httpx2.AsyncClient(timeout=httpx2.Timeout(10.0))
        owned.append(traces_http)
        adapters["traces"] = Traces(traces_http, traces_directory)
    if database is not None:
        adapters["database"] = Database(*database)
    return ToolPlane(adapters, tuple(owned))
