"""The tracing back-end's adapter: a scenario's declared spans in a Jaeger of its own (decisions 0050,
0055: Jaeger's memory store does not separate tenants written over OTLP, so one process per scenario
is the isolation that holds; its query URL is the agent's endpoint and nothing else reaches it).

Called by :class:`~oasis_operator.adapters.toolplane.ToolPlane`; for a plan that needs traces, starts
Jaeger (the binary the dev cluster links into the back-end's directory) on free local ports, exports
``plan.toolplane.spans`` over OTLP/HTTP with times relative to the handover, and reads every trace
back through the query API the agent uses. Settling stops the process (the agent's access ends with
it); cleanup does too, and removes its configuration. Every failure is a :class:`ToolPlaneError`.
Each Jaeger is started with a parent-death signal (Linux): if the operator dies without cleaning up,
its Jaegers die with it instead of holding a scenario's spans and ports forever.
"""

from __future__ import annotations

import asyncio
import contextlib
import ctypes
import os
import signal
import socket
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import httpx2
import yaml

from oasis_operator.core.environment.plan import EnvironmentPlan
from oasis_operator.core.errors import ToolPlaneError
from oasis_operator.core.ports import AgentAccess, ToolEndpoint
from oasis_operator.core.toolplane import registry
from oasis_operator.core.toolplane.plan import TimedChange
from oasis_operator.core.toolplane.traces import BINARY, jaeger_config, otlp_request

from .factory import Factory

#: Starts tried before a Jaeger that exits at once (a port taken meanwhile) is a fault.
START_ATTEMPTS = 3


#: prctl(2) option: the signal a child gets when the thread that started it ends.
PR_SET_PDEATHSIG = 1


def die_with_parent() -> None:
    """In the child, before exec: be killed when the process that started it dies (Linux only; elsewhere
    a no-op, and cleanup stays the operator's)."""
    if sys.platform.startswith("linux"):
        ctypes.CDLL(None, use_errno=True).prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


class _Exited(ToolPlaneError):
    """Jaeger exited while it was awaited."""


def _free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@dataclass
class _Store:
    process: asyncio.subprocess.Process
    otlp_url: str
    query_url: str
    config: Path


class Traces:
    """``directory``: the tracing back-end's directory (the ``jaeger`` binary link; configurations)."""

    name = registry.TRACES

    def __init__(
        self,
        http: httpx2.AsyncClient,
        directory: Path,
        timeout: float = 30.0,
        now: Callable[[], float] = time.time,
    ) -> None:
        self.http = http
        self.directory = directory
        self.timeout = timeout
        self.now = now
        self._stores: dict[str, _Store] = {}

    async def probe(self) -> str:
        """The preflight's self-test: the Jaeger binary each scenario's own store starts from is there."""
        binary = self.directory / BINARY
        if not (binary.exists() and os.access(binary, os.X_OK)):
            raise ToolPlaneError(f"the tracing back-end's binary {binary} is missing or not executable")
        return f"the jaeger binary is at {binary}"

    async def inject(self, plan: EnvironmentPlan) -> None:
        store = await self._start(plan.home_namespace)
        spans = plan.toolplane.spans
        if not spans:
            return
        handover = self.now()
        resp = await self.http.post(f"{store.otlp_url}/v1/traces", json=otlp_request(spans, handover))
        if resp.status_code != 200:
            raise ToolPlaneError(
                f"exporting the spans of {plan.scenario_id}: HTTP {resp.status_code}: {resp.text[:200]}"
            )
        want: dict[str, set[tuple[str, str]]] = {}
        for s in spans:
            want.setdefault(s.trace_id, set()).add((s.span_id, s.name))
        for trace_id, expected in sorted(want.items()):
            await self._until(
                f"{store.query_url}/api/traces/{trace_id}",
                _holds(expected),
                f"trace {trace_id} to read back as declared",
            )

    async def _start(self, namespace: str) -> _Store:
        if namespace in self._stores:
            return self._stores[namespace]
        binary = self.directory / BINARY
        if not binary.exists():
            raise ToolPlaneError(f"the tracing back-end's binary {binary} is missing")
        for attempt in range(1, START_ATTEMPTS + 1):
            ports = [_free_port() for _ in range(4)]
            config = self.directory / f"scenario-{namespace}.yaml"
            config.write_text(yaml.safe_dump(jaeger_config(*ports), sort_keys=False))
            log = (self.directory / f"scenario-{namespace}.log").open("ab")
            try:
                process = await asyncio.create_subprocess_exec(
                    str(binary),
                    f"--config={config}",
                    stdin=asyncio.subprocess.DEVNULL,
                    stdout=log,
                    stderr=log,
                    preexec_fn=die_with_parent,
                )
            finally:
                log.close()
            store = _Store(process, f"http://127.0.0.1:{ports[0]}", f"http://127.0.0.1:{ports[1]}", config)
            try:
                await self._until(
                    f"{store.query_url}/api/services",
                    lambda r: r.status_code == 200,
                    f"Jaeger for {namespace} to answer",
                    process,
                )
            except _Exited:
                # A free port taken by someone else between choosing and binding: choose again.
                if attempt == START_ATTEMPTS:
                    raise ToolPlaneError(
                        f"Jaeger for {namespace} exited at start {START_ATTEMPTS} times (see "
                        f"{self.directory / f'scenario-{namespace}.log'})"
                    ) from None
                continue
            except BaseException:
                with contextlib.suppress(ProcessLookupError):
                    process.kill()
                await process.wait()
                raise
            self._stores[namespace] = store
            return store
        raise AssertionError("unreachable")

    async def _until(
        self,
        url: str,
        done: Callable[[httpx2.Response], bool],
        what: str,
        process: asyncio.subprocess.Process | None = None,
    ) -> None:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        last = "no answer"
        while True:
            if process is not None and process.returncode is not None:
                raise _Exited(f"waiting for {what}: Jaeger exited with {process.returncode}")
            try:
                resp = await self.http.get(url)
                if done(resp):
                    return
                last = f"HTTP {resp.status_code}: {resp.text[:200]}"
            except httpx2.TransportError as exc:  # starting, or slow under load: not yet
                last = f"{type(exc).__name__}: {exc}"
            if loop.time() > deadline:
                raise ToolPlaneError(f"waited {self.timeout:g}s for {what} (last: {last})")
            await asyncio.sleep(0.1)

    async def apply(self, plan: EnvironmentPlan, change: TimedChange) -> None:
        raise ToolPlaneError(f"the tracing back-end has no timed changes (asked for one at {change.at:g}s)")

    async def endpoint(self, plan: EnvironmentPlan, access: AgentAccess) -> ToolEndpoint | None:
        store = await self._start(plan.home_namespace)
        return ToolEndpoint(
            "observability-tracing",
            store.query_url,
            "",
            "the Jaeger query API: /api/services, /api/services/<service>/operations, "
            "/api/traces?service=<service>&lookback=6h, /api/traces/<trace id>",
        )

    async def settle(self, plan: EnvironmentPlan) -> None:
        await self._stop(plan.home_namespace)  # the agent's access ends with the process

    async def cleanup(self, plan: EnvironmentPlan) -> None:
        await self._stop(plan.home_namespace)

    async def _stop(self, namespace: str) -> None:
        store = self._stores.pop(namespace, None)
        if store is None:
            return
        if store.process.returncode is None:
            # Memory storage: nothing to keep, so no graceful shutdown (which takes seconds).
            with contextlib.suppress(ProcessLookupError):
                store.process.kill()
            await store.process.wait()
        with contextlib.suppress(OSError):
            store.config.unlink()
            (self.directory / f"scenario-{namespace}.log").unlink()


def _spans_of(resp: httpx2.Response) -> set[tuple[str, str]] | None:
    if resp.status_code != 200:
        return None
    data = resp.json().get("data") or []
    if len(data) != 1:
        return None
    return {(str(s.get("spanID")), str(s.get("operationName"))) for s in data[0].get("spans") or []}


def _holds(expected: set[tuple[str, str]]) -> Callable[[httpx2.Response], bool]:
    def done(resp: httpx2.Response) -> bool:
        return _spans_of(resp) == expected

    return done


@dataclass(frozen=True)
class TracesSettings:
    """``directory``: the tracing back-end's, holding the Jaeger binary each scenario's store starts
    from (decision 0055)."""

    directory: Path


FACTORY = Factory(
    registry.TRACES,
    TracesSettings,
    build=lambda plane, s: Traces(plane.client("traces"), s.directory),
    parse=lambda e: TracesSettings(e.root),
)
