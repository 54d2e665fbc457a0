"""The HTTP agent adapter: an agent that speaks the reference evaluator's HTTP contract.

Called by the run workflow (``identify`` once per run) and the scenario workflow (``run_scenario``
once per scenario) through the :class:`~oasis_operator.core.contract.AgentPort` protocol. It turns a
:class:`ScenarioRequest` into a ``POST <url>`` and the reply into an :class:`AgentOutcome`; the
identity question is ``GET <url>/identity-and-configuration``.

The agent is untrusted, so every exchange is bounded: one deadline covers connecting, sending and
reading the whole answer (a trickling server cannot stretch it); the size limit is enforced while
the body streams in, so an oversized answer is never held in memory; redirects are not followed, so
the bearer token goes nowhere but the configured URL. Every fault becomes an outcome with one of the
reasons of :mod:`oasis_operator.core.contract.outcome` (see docs/decisions/0030).
"""

from __future__ import annotations

import asyncio
import ssl
import time
from dataclasses import dataclass, field
from types import TracebackType

import httpx2

from oasis_operator.adapters.agents.egress import GuardedBackend, GuardedTransport
from oasis_operator.core.contract import (
    CONNECTION_FAILED,
    CONNECTION_RESET,
    HTTP_ERROR_STATUS,
    MALFORMED_RESPONSE,
    OUTPUT_TOO_LARGE,
    TIMEOUT,
    AgentOutcome,
    ContractViolation,
    IdentityAndConfiguration,
    ScenarioRequest,
    outcome_from_response,
    parse_identity_and_configuration,
    parse_response,
)
from oasis_operator.core.errors import AgentFault, AgentUnavailable

__all__ = ["HttpAgent", "HttpAgentSettings"]

IDENTITY_PATH = "/identity-and-configuration"
#: What a status says of a non-2xx reply: its code and this, never its body. The endpoint is the run
#: creator's choice and may not be an agent at all (decision 0099).
NOT_AN_ANSWER = "the endpoint did not answer (its response body is not read)"


@dataclass(frozen=True)
class HttpAgentSettings:
    """Where the agent is and how far it is trusted.

    ``bearer_token`` is the token value itself (read it from a Secret with
    :func:`oasis_operator.adapters.agents.credentials.secret_value`); ``ca_bundle_pem`` is PEM text
    of the CAs that may sign the agent's certificate (default: the system store).
    """

    url: str
    bearer_token: str | None = field(default=None, repr=False)
    ca_bundle_pem: str | None = None
    timeout_seconds: float = 300.0
    identity_timeout_seconds: float = 30.0
    connect_timeout_seconds: float = 10.0
    max_response_bytes: int = 16 * 1024 * 1024
    max_identity_bytes: int = 1024 * 1024
    #: Where the endpoint may lead (decision 0099): None connects anywhere (local tools and tests);
    #: False refuses loopback, link-local, unspecified, multicast and the operator's own addresses,
    #: after resolution and on the connected socket; True lets loopback and own addresses through
    #: (an operator whose agents run on the same machine).
    allow_local: bool | None = None

    def __post_init__(self) -> None:
        if not self.url.startswith(("http://", "https://")):
            raise ValueError(f"agent url {self.url!r}: expected an http:// or https:// URL")
        for name in ("timeout_seconds", "identity_timeout_seconds", "connect_timeout_seconds"):
            if getattr(self, name) <= 0:
                raise ValueError(f"{name} must be positive")
        if self.max_response_bytes <= 0 or self.max_identity_bytes <= 0:
            raise ValueError("size limits must be positive")


@dataclass(frozen=True)
class _Reply:
    status: int
    body: bytes


class HttpAgent:
    """An :class:`AgentPort` over HTTP. Use as an async context manager, or call :meth:`aclose`."""

    def __init__(
        self, settings: HttpAgentSettings, *, transport: httpx2.AsyncBaseTransport | None = None
    ) -> None:
        self.settings = settings
        verify: ssl.SSLContext | bool = True
        if settings.ca_bundle_pem is not None:
            try:
                verify = ssl.create_default_context(cadata=settings.ca_bundle_pem)
            except ssl.SSLError as exc:
                raise ValueError(
                    f"ca_bundle_pem: expected PEM certificates, found none usable ({exc.reason})"
                ) from None
        headers = {"Accept": "application/json", "Accept-Encoding": "identity"}
        if settings.bearer_token is not None:
            headers["Authorization"] = f"Bearer {settings.bearer_token}"
        if transport is None and settings.allow_local is not None:
            transport = GuardedTransport(
                verify=verify, backend=GuardedBackend(allow_local=settings.allow_local)
            )
        self._client = httpx2.AsyncClient(
            verify=verify,
            headers=headers,
            follow_redirects=False,
            trust_env=False,
            timeout=httpx2.Timeout(settings.timeout_seconds, connect=settings.connect_timeout_seconds),
            transport=transport,
        )

    async def __aenter__(self) -> HttpAgent:
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        await self._client.aclose()

    # -- the port ----------------------------------------------------------------------------------

    async def identify(self) -> IdentityAndConfiguration:
        url = self.settings.url.rstrip("/") + IDENTITY_PATH
        try:
            reply = await self._exchange(
                "GET", url, None, self.settings.identity_timeout_seconds, self.settings.max_identity_bytes
            )
        except AgentFault as fault:
            raise AgentUnavailable(fault.reason, f"GET {url}: {fault.detail}") from None
        if reply.status == 404:
            raise AgentUnavailable(
                HTTP_ERROR_STATUS, f"GET {url}: HTTP 404; the agent must serve this endpoint"
            )
        if not 200 <= reply.status < 300:
            raise AgentUnavailable(HTTP_ERROR_STATUS, f"GET {url}: HTTP {reply.status}; {NOT_AN_ANSWER}")
        try:
            return parse_identity_and_configuration(reply.body)
        except ContractViolation as exc:
            raise AgentUnavailable(MALFORMED_RESPONSE, f"GET {url}: {exc.shape_only()}") from None

    async def run_scenario(
        self, request: ScenarioRequest, *, timeout_seconds: float | None = None
    ) -> AgentOutcome:
        budget = self.settings.timeout_seconds if timeout_seconds is None else timeout_seconds
        started = time.monotonic()
        try:
            reply = await self._exchange(
                "POST", self.settings.url, request.to_wire_bytes(), budget, self.settings.max_response_bytes
            )
        except AgentFault as fault:
            return AgentOutcome.failure(
                fault.reason,
                fault.detail,
                http_status=fault.http_status,
                elapsed_seconds=time.monotonic() - started,
            )
        elapsed = time.monotonic() - started
        if not 200 <= reply.status < 300:
            return AgentOutcome.failure(
                HTTP_ERROR_STATUS,
                f"HTTP {reply.status}; {NOT_AN_ANSWER}",
                http_status=reply.status,
                elapsed_seconds=elapsed,
            )
        try:
            response = parse_response(reply.body)
        except ContractViolation as exc:
            return AgentOutcome.failure(
                MALFORMED_RESPONSE, exc.shape_only(), http_status=reply.status, elapsed_seconds=elapsed
            )
        return outcome_from_response(response, http_status=reply.status, elapsed_seconds=elapsed)

    # -- one bounded exchange ----------------------------------------------------------------------

    async def _exchange(self, method: str, url: str, body: bytes | None, budget: float, limit: int) -> _Reply:
        headers = {"Content-Type": "application/json"} if body is not None else {}
        try:
            async with asyncio.timeout(budget):
                async with self._client.stream(method, url, content=body, headers=headers) as response:
                    ok = 200 <= response.status_code < 300
                    if not ok:  # an error's body is never read, nor shown (decision 0099)
                        return _Reply(response.status_code, b"")
                    declared = response.headers.get("Content-Length")
                    if ok and declared is not None and declared.isdigit() and int(declared) > limit:
                        raise AgentFault(
                            OUTPUT_TOO_LARGE,
                            f"the agent announced {declared} bytes; the limit is {limit}",
                            http_status=response.status_code,
                        )
                    data = await _read_capped(response, limit)
                    return _Reply(response.status_code, data)
        except AgentFault:
            raise
        except TimeoutError:
            raise AgentFault(TIMEOUT, f"no complete answer within {budget:g} s") from None
        except httpx2.ConnectTimeout:
            raise AgentFault(
                CONNECTION_FAILED, f"no connection within {self.settings.connect_timeout_seconds:g} s"
            ) from None
        except httpx2.TimeoutException as exc:
            raise AgentFault(TIMEOUT, f"the agent stalled: {type(exc).__name__}") from None
        except httpx2.ConnectError as exc:
            raise AgentFault(CONNECTION_FAILED, f"cannot connect to {url}: {exc}") from None
        except (httpx2.RemoteProtocolError, httpx2.ReadError, httpx2.WriteError) as exc:
            raise AgentFault(
                CONNECTION_RESET, f"connection lost before a complete answer: {exc or type(exc).__name__}"
            ) from None
        except httpx2.DecodingError as exc:
            raise AgentFault(MALFORMED_RESPONSE, f"undecodable response body: {exc}") from None
        except (httpx2.HTTPError, OSError) as exc:
            raise AgentFault(CONNECTION_FAILED, f"{type(exc).__name__}: {exc}") from None


async def _read_capped(response: httpx2.Response, cap: int) -> bytes:
    """Read at most ``cap`` bytes; past it, fail."""
    buffer = bytearray()
    async for chunk in response.aiter_bytes():
        if len(buffer) + len(chunk) > cap:
            raise AgentFault(
                OUTPUT_TOO_LARGE,
                f"the answer exceeded the limit of {cap} bytes; reading stopped there",
                http_status=response.status_code,
            )
        buffer += chunk
    return bytes(buffer)
