"""The tool plane as the scenario workflow sees it: the per-scenario upstreams the provider supplies, and
the gateway that puts a recording, bounded, credential-scoped route in front of them.

Values and protocols only. :mod:`oasis_operator.adapters.gateway.plane` implements
:class:`ToolUpstreamsPort` and :class:`StimulusApplier` over the provider's back-ends
(:class:`~oasis_operator.core.ports.ToolPlanePort`, decision 0056);
:mod:`oasis_operator.adapters.gateway` implements :class:`ToolGatewayPort`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol

from oasis_operator.core.evidence.tool_records import ToolRecord
from oasis_operator.core.stimuli.injection import OutputInjection

__all__ = [
    "GatewayLimits",
    "GatewayPorts",
    "GatewayRoute",
    "StimulusApplier",
    "ToolEndpointGrant",
    "ToolGatewayPort",
    "ToolUpstreamsPort",
    "Upstream",
]


@dataclass(frozen=True)
class Upstream:
    """One back-end endpoint for one scenario's interface: the base URL the gateway forwards to, and the
    headers it adds (the back-end credential scoped to the scenario; never shown to the agent)."""

    interface: str
    url: str
    headers: tuple[tuple[str, str], ...] = field(default=(), repr=False)


@dataclass(frozen=True)
class GatewayLimits:
    """The agent's bounds per scenario route."""

    max_request_bytes: int = 1 << 20
    max_response_bytes: int = 8 << 20
    upstream_timeout: float = 30.0
    rate_per_second: float = 20.0
    burst: int = 40
    #: Calls forwarded and recorded per route; past it a call is refused (429), never forwarded
    #: unrecorded, and the route never faults for it (decision 0096).
    max_records: int = 10_000
    #: Refused calls (no token, closed route, rate, size) recorded per route; past it they are counted.
    max_refused_records: int = 200
    #: Bytes of request and response bodies a route keeps; past it a body is kept as its size and digest.
    max_body_bytes: int = 32 << 20


@dataclass(frozen=True)
class ToolEndpointGrant:
    """What the agent is told for one interface: the URL and the scenario-scoped token."""

    url: str
    token: str = field(repr=False)


class GatewayRoute(Protocol):
    """One scenario's route through the gateway, open from before the handover until revocation."""

    @property
    def endpoints(self) -> Mapping[str, ToolEndpointGrant]: ...
    @property
    def mcp_endpoint(self) -> ToolEndpointGrant:
        """The route's MCP endpoint: one MCP tool per interface of :attr:`endpoints` (decision 0112)."""

    @property
    def records(self) -> tuple[ToolRecord, ...]: ...
    @property
    def call_instants(self) -> tuple[float, ...]:
        """Monotonic-clock instants at which the agent's authenticated calls arrived (the caller knows the
        same clock's instant of the handover)."""

    @property
    def fault(self) -> str | None:
        """Why the gateway cannot vouch for the records (a record lost, a back-end that did not answer
        or timed out)."""

    @property
    def refused_unrecorded(self) -> int:
        """Refused calls counted past :attr:`GatewayLimits.max_refused_records`, not recorded."""

    @property
    def bodies_digested(self) -> int:
        """Calls whose bodies were kept as size and digest only (the byte budget was spent)."""

    async def wait_for_call(self, seen: int, timeout: float) -> None:
        """Return as soon as more than ``seen`` calls have arrived (at once if they already have), or
        after ``timeout`` seconds: what a trigger waiting for the agent's n-th call wakes on, so that it
        fires before the agent can read the call's answer (a timer could miss a fast agent)."""


class ToolGatewayPort(Protocol):
    async def open(
        self,
        upstreams: Mapping[str, Upstream],
        injections: Sequence[OutputInjection] = (),
        limits: GatewayLimits | None = None,
    ) -> GatewayRoute: ...
    async def close(self, route: GatewayRoute) -> None:
        """Revoke the route's token: every later call is refused (and still recorded)."""

    async def release(self, route: GatewayRoute) -> None:
        """Forget a closed route once its records are read."""


class ToolUpstreamsPort(Protocol):
    async def upstreams(self, plan: Any, access: Any, interfaces: Sequence[str]) -> Mapping[str, Upstream]:
        """The scenario's upstream per interface served over HTTP, each confined to the scenario's data
        (interfaces the agent reaches through the API server, such as pod logs, are left out); raises
        when one cannot be supplied (a provisioning fault)."""


class StimulusApplier(Protocol):
    async def apply(self, plan: Any, index: int, stimulus: Any) -> None:
        """Make the change a timed stimulus describes (a temporal condition firing)."""


@dataclass(frozen=True)
class GatewayPorts:
    """What the scenario workflow needs of the recording gateway: the gateway, the back-ends'
    upstreams, and the applier of temporal conditions (``None``: none can be delivered)."""

    gateway: ToolGatewayPort
    upstreams: ToolUpstreamsPort
    applier: StimulusApplier | None = None
