"""Traces: Jaeger v2 (an OpenTelemetry collector distribution) with in-memory storage, one process
per namespace.

Called by :mod:`oasis_operator.devcluster.backends`. The harness loads a scenario's declared spans
over OTLP/HTTP (JSON, explicit start and end times, so traces can lie in the past); an agent reads
them through Jaeger's query API (``/api/services``, ``/api/traces``, ``/api/v3/...``).

Why one process per namespace: Jaeger's memory store keeps a store per tenant, but in this release
the tenant of a span written over OTLP is never taken from the request, so every span lands in the
default tenant; a process of its own is the isolation that holds (measured: tens of MB, well under a
second to start). The instance named ``default`` is started with the back-end.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import httpx2
import yaml

from oasis_operator.core.toolplane.traces import BINARY, PlannedSpan, jaeger_config, otlp_request
from oasis_operator.devcluster.backends.base import Backend, BackendContext, free_port, http_ok
from oasis_operator.devcluster.errors import SetupError
from oasis_operator.devcluster.processes import Component, terminate


@dataclass(frozen=True)
class Span:
    """One declared span (ids in hex: 32 digits for a trace, 16 for a span)."""

    trace_id: str
    span_id: str
    service: str
    name: str
    start: float  # unix seconds
    end: float
    parent_span_id: str = ""
    attributes: tuple[tuple[str, str], ...] = ()
    error: bool = False

    def planned(self) -> PlannedSpan:
        """The span as the operator plans one (its times relative to a handover at the epoch)."""
        return PlannedSpan(
            source=f"traces/{self.service}",
            trace_id=self.trace_id,
            span_id=self.span_id,
            parent_span_id=self.parent_span_id,
            service=self.service,
            name=self.name,
            start=self.start,
            end=self.end,
            error=self.error,
            attributes=self.attributes,
        )


def otlp_json(spans: Sequence[Span]) -> dict[str, Any]:
    """The spans as an OTLP/HTTP JSON export request, grouped by service: the operator's own payload
    (:func:`~oasis_operator.core.toolplane.traces.otlp_request`), with times taken as absolute."""
    return otlp_request([s.planned() for s in spans], handover=0.0)


@dataclass
class TraceStore:
    """One Jaeger process: where spans go in (OTLP) and where they are read (query API)."""

    namespace: str
    otlp_url: str
    query_url: str
    process: Component

    def load(self, spans: Sequence[Span], timeout: float = 10.0) -> None:
        """Send ``spans`` and wait until every trace among them is readable through the query API."""
        resp = httpx2.post(f"{self.otlp_url}/v1/traces", json=otlp_json(spans), timeout=timeout)
        if resp.status_code != 200:
            raise SetupError(
                f"OTLP export to Jaeger ({self.namespace}): HTTP {resp.status_code}: {resp.text[:300]}"
            )
        expected: dict[str, int] = {}
        for s in spans:
            expected[s.trace_id] = expected.get(s.trace_id, 0) + 1
        deadline = time.monotonic() + timeout
        for trace_id, count in expected.items():
            while True:
                try:
                    got = httpx2.get(f"{self.query_url}/api/traces/{trace_id}", timeout=timeout)
                    data = got.json().get("data") or [] if got.status_code == 200 else []
                except httpx2.TransportError:  # slow or refused: not readable yet
                    data = []
                if data and len(data[0].get("spans", [])) >= count:
                    break
                if time.monotonic() > deadline:
                    raise SetupError(
                        f"trace {trace_id} not readable from Jaeger ({self.namespace}) within {timeout}s"
                    )
                time.sleep(0.05)


class TracesBackend(Backend):
    name = "traces"
    components = ("jaeger",)

    def __init__(self) -> None:
        super().__init__()
        self._ctx: BackendContext | None = None
        self.stores: dict[str, TraceStore] = {}

    def start(self, ctx: BackendContext) -> None:
        self._ctx = ctx
        # The operator's tool plane starts a Jaeger per scenario from this link (decision 0055).
        link = ctx.directory(self.name) / BINARY
        link.unlink(missing_ok=True)
        link.symlink_to(ctx.bins.path("jaeger"))
        self.instance("default")

    def endpoints(self) -> dict[str, str]:
        out = {}
        for ns, store in self.stores.items():
            out[f"{ns}-query"] = store.query_url
            out[f"{ns}-otlp"] = store.otlp_url
        return out

    def instance(self, namespace: str) -> TraceStore:
        """The namespace's Jaeger, started on first use."""
        if namespace in self.stores:
            return self.stores[namespace]
        ctx = self._ctx
        assert ctx is not None, "traces back-end not started"
        d = ctx.directory(self.name)
        otlp, query, grpc, health = free_port(), free_port(), free_port(), free_port()
        config = d / f"jaeger-{namespace}.yaml"
        config.write_text(yaml.safe_dump(jaeger_config(otlp, query, grpc, health), sort_keys=False))
        proc = self._run(
            ctx,
            f"jaeger-{namespace}",
            [str(ctx.bins.path("jaeger")), f"--config={config}"],
            http_ok(f"http://127.0.0.1:{query}/api/services"),
            f"Jaeger ({namespace}) query API",
        )
        store = TraceStore(namespace, f"http://127.0.0.1:{otlp}", f"http://127.0.0.1:{query}", proc)
        self.stores[namespace] = store
        return store

    def release(self, namespace: str) -> None:
        """Stop the namespace's Jaeger (its traces go with it)."""
        store = self.stores.pop(namespace, None)
        if store is None or self._ctx is None:
            return
        terminate(store.process.pid, store.process.process)
        sup = self._ctx.supervisor
        sup.components[:] = [c for c in sup.components if c is not store.process]
