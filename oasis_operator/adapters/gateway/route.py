"""One scenario's route through the recording gateway: its endpoints and token, its upstreams and
injections, and what it holds (records, call instants, its fault, what was refused or kept as digests).

Used by :class:`~oasis_operator.adapters.gateway.server.ToolGateway`, which opens one per scenario
and records each call into it; read by the workflow through the gateway port.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Mapping
from dataclasses import dataclass, field

from oasis_operator.core.evidence.tool_records import ToolRecord
from oasis_operator.core.gateway.calls import Bucket
from oasis_operator.core.gateway.port import GatewayLimits, ToolEndpointGrant, Upstream
from oasis_operator.core.stimuli.injection import OutputInjection

__all__ = ["Route"]


@dataclass(eq=False)
class Route:
    """One scenario's route (see the module docstring). ``records`` grows until the gateway stops."""

    route_id: str
    token: str = field(repr=False)
    base_url: str
    upstreams: Mapping[str, Upstream]
    injections: tuple[OutputInjection, ...]
    limits: GatewayLimits
    opened: float
    closed: bool = False
    _records: list[ToolRecord] = field(default_factory=list)
    _calls: list[float] = field(default_factory=list)
    _fault: str | None = None
    #: Calls admitted to be forwarded (each is recorded: the record store never overflows).
    admitted: int = 0
    refused_recorded: int = 0
    _refused_unrecorded: int = 0
    #: Body bytes this route keeps, and calls whose bodies were kept as digests only.
    body_bytes: int = 0
    _digested: int = 0
    bucket: Bucket = field(default_factory=lambda: Bucket(0.0, 0.0))
    activity: asyncio.Event = field(default_factory=asyncio.Event)
    _call_arrived: asyncio.Event = field(default_factory=asyncio.Event)

    @property
    def endpoints(self) -> Mapping[str, ToolEndpointGrant]:
        return {
            i: ToolEndpointGrant(f"{self.base_url}/{self.route_id}/{i}/", self.token) for i in self.upstreams
        }

    @property
    def mcp_endpoint(self) -> ToolEndpointGrant:
        """The route's MCP endpoint (Streamable HTTP, decision 0112): one tool per interface above."""
        return ToolEndpointGrant(f"{self.base_url}/{self.route_id}/mcp", self.token)

    @property
    def records(self) -> tuple[ToolRecord, ...]:
        return tuple(self._records)

    @property
    def call_instants(self) -> tuple[float, ...]:
        return tuple(self._calls)

    @property
    def fault(self) -> str | None:
        return self._fault

    @property
    def refused_unrecorded(self) -> int:
        return self._refused_unrecorded

    @property
    def bodies_digested(self) -> int:
        return self._digested

    def note_call(self, instant: float) -> None:
        """An authenticated call arrived (before it is forwarded): whoever waits for it wakes now."""
        self._calls.append(instant)
        self._call_arrived.set()

    async def wait_for_call(self, seen: int, timeout: float) -> None:
        if len(self._calls) > seen:
            return
        # Single-threaded: no call can arrive between the check above and the clear below.
        self._call_arrived.clear()
        with contextlib.suppress(TimeoutError):
            await asyncio.wait_for(self._call_arrived.wait(), timeout)

    def set_fault(self, reason: str) -> None:
        if self._fault is None:
            self._fault = reason

    def add(self, record: ToolRecord) -> None:
        self._records.append(record)
        self.activity.set()

    def refused_kept(self) -> bool:
        """Whether one more refused call is recorded (else only counted): never a fault."""
        if self.refused_recorded < self.limits.max_refused_records:
            self.refused_recorded += 1
            return True
        self._refused_unrecorded += 1
        return False

    def digested(self) -> None:
        self._digested += 1
