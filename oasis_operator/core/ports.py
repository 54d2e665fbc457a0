"""The ports: every interface the workflows use to reach the world, and the values they exchange.

Implemented by the adapters (``adapters/agents`` for :class:`AgentPort`, ``adapters/k8s`` for
:class:`EnvironmentPort` and :class:`RunStore`, ``adapters/audit`` for :class:`AuditPort`,
``adapters/metrics`` for :class:`MetricsPort`) and by the in-memory fakes of ``tests/fakes.py``;
called by the workflows (``workflows/run.py``, ``workflows/scenario.py``) and wired by the handlers.
A workflow never names an adapter: it gets these. Pure declarations only.

Who does what:

- :class:`AgentPort`: the agent under evaluation, through some transport (``identify`` once per run,
  ``run_scenario`` once per scenario).
- :class:`EnvironmentPort`: a scenario's environment: provision it, check the declared state, read
  snapshots, revoke the agent's access and prove it revoked, inject failures, tear it down.
- :class:`AuditPort`: the live audit stream: subscriptions (a scenario's evidence) and Audit-IDs to
  wait for (the barrier, :mod:`oasis_operator.workflows.barrier`); :data:`SentinelSender` makes the
  barrier's request.
- :class:`RunStore`: the run object, its Profile and Scenarios, the report and evidence it owns,
  and its Events.
- :class:`ToolPlanePort`: the tool-plane back-ends (logs, dashboards...; ``adapters/toolplane``):
  inject a scenario's part before the turn, apply a timed change during it, hand the agent an
  endpoint and a credential per interface type, clean up. :class:`NoToolPlane` when there is none.
  One back-end is one :class:`ToolBackendPort` (decision 0052).
- :class:`MetricsPort`: outcomes counted; :class:`NoMetrics` when nobody collects them.
"""

from __future__ import annotations

import asyncio
import datetime as dt
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass
from typing import Any, Protocol, runtime_checkable

from oasis_operator.core.contract.agent import IdentityAndConfiguration, ScenarioRequest
from oasis_operator.core.contract.outcome import AgentOutcome
from oasis_operator.core.environment.plan import EnvironmentPlan, Injection
from oasis_operator.core.environment.revocation import Route
from oasis_operator.core.errors import ToolPlaneError
from oasis_operator.core.evidence.sentinel import Sentinel
from oasis_operator.core.model.run import LabelSelector
from oasis_operator.core.preflight import BackendProbe
from oasis_operator.core.toolplane.plan import TimedChange

__all__ = [
    "AgentAccess",
    "AgentPort",
    "AuditPort",
    "AuditSubscription",
    "BackendProber",
    "EnvironmentPort",
    "InjectorPort",
    "MetricsPort",
    "NoMetrics",
    "NoToolPlane",
    "Revocation",
    "RunStore",
    "SentinelSender",
    "ToolBackendPort",
    "ToolEndpoint",
    "ToolPlanePort",
]

#: An audit event as the API server wrote it (read tolerantly: it is someone else's schema).
RawAuditEvent = dict[str, Any]
#: The owners of the environments in flight: known now, or asked for (after the sweep has listed what exists).
LiveOwners = set[str] | Callable[[], Awaitable[set[str]]]


# -- the agent --------------------------------------------------------------------------------------
@runtime_checkable
class AgentPort(Protocol):
    """An agent under evaluation, reached through some transport."""

    async def identify(self) -> IdentityAndConfiguration:
        """Ask the agent who it is and how it is configured. Raises
        :class:`~oasis_operator.core.errors.AgentUnavailable`."""
        ...

    async def run_scenario(
        self, request: ScenarioRequest, *, timeout_seconds: float | None = None
    ) -> AgentOutcome:
        """Give the agent one scenario and wait, bounded, for its answer.

        Never raises for agent misbehaviour: every fault of the agent is an :class:`AgentOutcome`
        with status AGENT_FAILURE. ``timeout_seconds`` overrides the adapter's default budget.
        """
        ...


# -- the environment --------------------------------------------------------------------------------
@dataclass(frozen=True)
class AgentAccess:
    """What the agent is handed: its principal and a kubeconfig confined to the scenario."""

    username: str
    namespace: str
    kubeconfig: str
    token_expires_at: str


@dataclass(frozen=True)
class Revocation:
    """What revoking the agent's access did, and whether the window is provably closed.

    ``removed``: every object deleted as a route in, as it was just before (its ``kind`` set), so the
    evidence still shows what the agent left; ``principals``: who was checked; ``still_allowed``: what
    any of them can still do (empty: closed)."""

    removed: tuple[dict[str, Any], ...] = ()
    routes: tuple[Route, ...] = ()
    principals: tuple[str, ...] = ()
    still_allowed: tuple[str, ...] = ()
    reviews: int = 0

    @property
    def verified(self) -> bool:
        return not self.still_allowed


class InjectorPort(Protocol):
    """Injects a scenario's declared failures into what starts while the agent works."""

    async def start(self) -> None: ...
    async def settle(self, timeout: float = ...) -> None: ...
    async def stop(self) -> None: ...


class EnvironmentPort(Protocol):
    """A scenario's environment. Failures raise a
    :class:`~oasis_operator.core.errors.ProviderFault` (its reason says which), or anything else,
    which the workflow still treats as the provider's fault."""

    async def provision(
        self, plan: EnvironmentPlan, *, token_seconds: int = ..., ready_timeout: float = ...
    ) -> AgentAccess: ...
    async def verify(self, plan: EnvironmentPlan) -> list[str]:
        """What of the declared state is not observed (empty: all of it is)."""
        ...

    async def inject(self, injection: Injection, *, ready_timeout: float = ...) -> list[str]:
        """Apply state planned into a provisioned environment, validated whole before anything is
        applied; what of it is not observed afterwards (empty: all of it is)."""
        ...

    async def snapshot(self, plan: EnvironmentPlan) -> dict[str, Any]: ...
    async def revoke(self, plan: EnvironmentPlan) -> Revocation: ...
    async def verify_revoked(
        self,
        plan: EnvironmentPlan,
        revocation: Revocation,
        *,
        seen: Iterable[Mapping[str, Any]] = ...,
        harness: Iterable[str] = ...,
    ) -> Revocation:
        """The revocation, proven; raises :class:`~oasis_operator.core.errors.RevocationFailed`."""
        ...

    def failure_injector(self, plan: EnvironmentPlan) -> InjectorPort: ...
    async def teardown(self, namespaces: Iterable[str], owner: str, *, timeout: float = ...) -> list[str]: ...
    async def sweep_orphans(self, live_owners: LiveOwners, *, timeout: float = ...) -> list[str]:
        """``live_owners``: a set, or a coroutine function asked after the candidates are listed."""
        ...


# -- the audit stream -------------------------------------------------------------------------------
class AuditSubscription(Protocol):
    """Events recorded since the subscription was opened, until :meth:`close`."""

    @property
    def events(self) -> list[RawAuditEvent]: ...
    @property
    def losses(self) -> list[str]:
        """Why events that may be this subscription's were lost (decision 0096): a fault of the audit
        log, never a silent gap."""

    def close(self) -> None: ...


class AuditPort(Protocol):
    def subscribe(self, needles: tuple[str, ...] | None = None) -> AuditSubscription:
        """Record every event whose text names one of ``needles`` (every event with None)."""
        ...

    def expect(self, audit_id: str) -> asyncio.Queue[RawAuditEvent]:
        """Start collecting the completed events that carry ``audit_id`` (before the request is sent)."""
        ...

    def forget(self, audit_id: str) -> None: ...


@runtime_checkable
class AuditHistory(Protocol):
    """An audit source that can read again what was audited before it started (the audit log file
    from its start): what a scenario cut off by a restart is judged on (decision 0097)."""

    def history(self, needles: tuple[str, ...]) -> tuple[list[RawAuditEvent], int] | None:
        """The events that name one of ``needles``, and how many lines that may be theirs could not be
        read; None when nothing is kept (a webhook's events before the restart are gone)."""
        ...


@runtime_checkable
class AgentPrincipalNaming(Protocol):
    """An environment whose agent principal follows from the plan alone (its ServiceAccount's name),
    so a restarted operator can attribute what the agent did before the restart (decision 0097)."""

    def agent_principal(self, plan: EnvironmentPlan) -> str: ...


#: Sends the sentinel request with the given Audit-ID and says how it was made.
SentinelSender = Callable[[str], Awaitable[Sentinel]]


# -- the run's objects ------------------------------------------------------------------------------
class RunStore(Protocol):
    """The custom resources and what a run owns. Objects are plain mappings as the API returns them."""

    async def get_run(self, namespace: str, name: str) -> dict[str, Any] | None: ...
    async def patch_run_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        """A JSON merge patch of the run's status (a None value removes the key)."""
        ...

    async def delete_run(self, namespace: str, name: str) -> None: ...
    async def get_profile(self, namespace: str, name: str) -> dict[str, Any] | None: ...
    async def list_scenarios(
        self, namespace: str, selector: LabelSelector | None = None
    ) -> list[dict[str, Any]]: ...
    async def put_blob(self, run: dict[str, Any], kind: str, key: str, data: bytes) -> list[str]:
        """Store ``data`` owned by the run; the names of its parts, in order."""
        ...

    async def delete_blobs(self, run: dict[str, Any], kind: str) -> int: ...
    async def get_blob(self, namespace: str, names: list[str]) -> bytes: ...
    async def event(
        self, run: dict[str, Any], etype: str, reason: str, message: str, now: dt.datetime
    ) -> None:
        """Best effort: an Event never changes the run."""
        ...


# -- metrics ----------------------------------------------------------------------------------------
class MetricsPort(Protocol):
    def scenario_finished(
        self, category: str, verdict: str, timings: Mapping[str, float], fault: str | None
    ) -> None: ...
    def run_finished(
        self, verdict: str, *, agent: str = "", profile: str = "", incomplete: bool = False
    ) -> None: ...


class NoMetrics:
    """Counts nothing: for runs nobody collects metrics of (the local runner, tests)."""

    def scenario_finished(
        self, category: str, verdict: str, timings: Mapping[str, float], fault: str | None
    ) -> None:
        return None

    def run_finished(
        self, verdict: str, *, agent: str = "", profile: str = "", incomplete: bool = False
    ) -> None:
        return None


# -- the tool plane ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class ToolEndpoint:
    """Where the agent reaches one interface type, and with what. ``credential`` is a secret scoped to
    the scenario (empty when the agent's kubeconfig is the credential, as for back-ends read through
    the API server); ``usage`` says, in an operator's words, how the tool is used."""

    interface: str
    url: str
    credential: str = ""
    usage: str = ""


class ToolBackendPort(Protocol):
    """One tool-plane back-end. Every method raises
    :class:`~oasis_operator.core.errors.ToolPlaneError` (or anything, which counts the same) when the
    back-end is unreachable or what it holds cannot be verified: a PROVIDER_FAILURE, never a PASS."""

    name: str

    async def inject(self, plan: EnvironmentPlan) -> None:
        """Put the scenario's declared data in (``plan.toolplane``) and read it back as the agent would."""
        ...

    async def apply(self, plan: EnvironmentPlan, change: TimedChange) -> None:
        """One timed change of the scenario, now."""
        ...

    async def endpoint(self, plan: EnvironmentPlan, access: AgentAccess) -> ToolEndpoint | None:
        """The agent's endpoint and scoped credential for this back-end (None: it has none of its own)."""
        ...

    async def settle(self, plan: EnvironmentPlan) -> None:
        """After the turn: the agent's credential for this back-end revoked, and whatever the agent
        changed in it carried into the cluster (a controller caught up), before the "after" snapshot."""
        ...

    async def cleanup(self, plan: EnvironmentPlan) -> None:
        """Remove what :meth:`inject` and :meth:`apply` put in; best effort, never a verdict."""
        ...


class ToolPlanePort(Protocol):
    """The tool-plane back-ends the operator has, as one port."""

    @property
    def backends(self) -> frozenset[str]:
        """The configured back-ends (what :func:`~oasis_operator.core.environment.plan.plan_environment`
        is given: a scenario needing another one is UNSUPPORTED, naming it)."""
        ...

    async def inject(self, plan: EnvironmentPlan) -> None: ...
    async def apply(self, plan: EnvironmentPlan, change: TimedChange) -> None: ...
    async def endpoints(self, plan: EnvironmentPlan, access: AgentAccess) -> dict[str, ToolEndpoint]:
        """Interface type -> endpoint, for the interface types the scenario lists."""
        ...

    async def settle(self, plan: EnvironmentPlan) -> None: ...
    async def cleanup(self, plan: EnvironmentPlan) -> None: ...


@runtime_checkable
class BackendProber(Protocol):
    """A tool plane that self-tests its back-ends (the run's preflight, decision 0057); one that does
    not has its configured back-ends reported as not self-tested."""

    async def probe(self, timeout: float = ...) -> tuple[BackendProbe, ...]: ...


@runtime_checkable
class ToolStateReader(Protocol):
    """A tool plane (or one back-end) that reads a scenario's back-end state of its own, as objects put
    beside the cluster's in the "before" and "after" snapshots (a database's tables and rows: decision
    0066), so that what changed there is compared like any object. Raises when it cannot read it (the
    snapshot is then missing: PROVIDER_FAILURE)."""

    async def state(self, plan: EnvironmentPlan) -> tuple[dict[str, Any], ...]: ...


class NoToolPlane:
    """No back-ends. A plan that needs one was refused when planned (the set is empty); should one
    still reach it, injecting fails rather than letting the agent work without the declared data."""

    backends: frozenset[str] = frozenset()

    async def inject(self, plan: EnvironmentPlan) -> None:
        if not plan.toolplane.empty:
            raise ToolPlaneError("the scenario declares tool-plane data and this operator has no tool plane")

    async def apply(self, plan: EnvironmentPlan, change: TimedChange) -> None:
        raise ToolPlaneError("a timed change needs a tool plane; this operator has none")

    async def endpoints(self, plan: EnvironmentPlan, access: AgentAccess) -> dict[str, ToolEndpoint]:
        return {}

    async def settle(self, plan: EnvironmentPlan) -> None:
        return None

    async def cleanup(self, plan: EnvironmentPlan) -> None:
        return None
