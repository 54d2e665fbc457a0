"""The errors the operator raises on purpose, as one tree, so a caller can tell whose fault it was.

Raised by the core (bad input), the adapters (the provider or the agent could not do their part) and
caught by the workflows, which turn each branch into what it means for a verdict. The reason travels
with the error (from :mod:`oasis_operator.core.reasons`), so the workflow takes it from the raiser,
not from the ``try`` block around it.

The tree::

    OasisError
    ├── InvalidInput                 bad input: a document, a spec, a setting (also a ValueError)
    │   ├── UnsupportedEntry         a declared entry with no realisation or no deterministic meaning
    │   └── AdapterNotAllowed        the operator refuses the run's agent adapter
    ├── ProviderFault                the harness could not do its part: PROVIDER_FAILURE, never a verdict
    │   ├── ToolPlaneError           ToolPlaneInjectionFailed
    │   ├── ProvisioningError        ProvisioningFailed
    │   │   └── StateRefused         ... refused before any of it was applied (inject-state)
    │   ├── InjectedFailureNotSettled  InjectedFailureNotSettled
    │   ├── AuditBarrierTimeout      AuditBarrierTimeout
    │   ├── TargetUnavailable        TargetUnavailable
    │   └── RevocationFailed         RevocationNotVerified
    └── AgentFault                   the agent misbehaved: an AGENT_FAILURE outcome, never a provider fault
        └── AgentUnavailable         ... at its identity question: the run cannot start (and waits)

Anything else a workflow catches (a bug, a client error nobody translated) is still a provider fault
with the reason of the step that was running: the harness failing is never the agent's PASS.
Pure declarations only.
"""

from __future__ import annotations

from typing import Protocol

from oasis_operator.core import reasons

__all__ = [
    "AdapterNotAllowed",
    "AgentFault",
    "AgentUnavailable",
    "AuditBarrierTimeout",
    "InjectedFailureNotSettled",
    "InvalidInput",
    "OasisError",
    "ProviderFault",
    "ProvisioningError",
    "RevocationFailed",
    "StateRefused",
    "TargetUnavailable",
    "ToolPlaneError",
    "UnsupportedEntry",
]


class OasisError(Exception):
    """The root of every error the operator raises on purpose."""


class InvalidInput(OasisError, ValueError):
    """Bad input; the message names where (file, field path) and what was expected."""


class UnsupportedEntry(InvalidInput):
    """A declared entry this provider cannot realise, or the engine cannot give a deterministic meaning.

    ``reason`` is a short constant of the module that raises it; ``detail`` says what and why."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{detail} ({reason})")
        self.reason = reason
        self.detail = detail


class AdapterNotAllowed(InvalidInput):
    """The operator does not accept this adapter (a setting of the operator, not of the run)."""


class ProviderFault(OasisError):
    """The harness could not do its part: the scenario is a PROVIDER_FAILURE with :attr:`reason`.

    Subclasses fix the reason; ``reason=`` overrides it for one raise."""

    reason: str = reasons.FAULT_PROVIDER

    def __init__(self, detail: str, *, reason: str | None = None) -> None:
        super().__init__(detail)
        self.detail = detail
        if reason is not None:
            self.reason = reason


class ToolPlaneError(ProviderFault):
    """A tool-plane back-end is unreachable, or a scenario's declared data in it could not be verified."""

    reason = reasons.FAULT_TOOLPLANE


class ProvisioningError(ProviderFault):
    """The environment could not be established as declared."""

    reason = reasons.FAULT_PROVISIONING


class StateRefused(ProvisioningError):
    """The API server refused state before any of it was applied (a server-side dry run): nothing
    changed."""


class InjectedFailureNotSettled(ProviderFault):
    """The injected failures could not be brought to a stable state in time."""

    reason = reasons.FAULT_INJECTION


class AuditBarrierTimeout(ProviderFault):
    """The sentinel request never appeared in the audit stream: the evidence may be incomplete."""

    reason = reasons.FAULT_AUDIT_BARRIER


class TargetUnavailable(ProviderFault):
    """No target control plane could be had for a scenario (decision 0100)."""

    reason = reasons.FAULT_TARGET


class Unclosed(Protocol):
    """What :class:`RevocationFailed` needs of a revocation result: what is still allowed."""

    @property
    def still_allowed(self) -> tuple[str, ...]: ...


class RevocationFailed(ProviderFault):
    """The agent's window could not be closed (a route in remains). ``revocation`` is the result that
    says what is still allowed; the evidence keeps it."""

    reason = reasons.FAULT_REVOCATION

    def __init__(self, revocation: Unclosed) -> None:
        super().__init__("revocation not verified: " + "; ".join(revocation.still_allowed[:5]))
        self.revocation = revocation


class AgentFault(OasisError):
    """The agent did not give a usable answer: ``reason`` is one of
    :data:`~oasis_operator.core.reasons.AGENT_FAILURE_REASONS`. The adapters turn it into an
    AGENT_FAILURE outcome; what the agent did is still judged from the cluster's evidence."""

    def __init__(
        self, reason: str, detail: str, *, http_status: int | None = None, exit_code: int | None = None
    ) -> None:
        if reason not in reasons.AGENT_FAILURE_REASONS:
            raise ValueError(f"unknown agent failure reason {reason!r}")
        super().__init__(detail)
        self.reason = reason
        self.detail = detail
        self.http_status = http_status
        self.exit_code = exit_code


class AgentUnavailable(AgentFault):
    """The agent did not answer the identity question usably; the run cannot start.

    This is not a verdict of any kind: without an identity there is nothing to evaluate (the run
    waits for the agent). The detail is cut to the agent detail limit, saying so."""

    def __init__(self, reason: str, detail: str) -> None:
        cut = reasons.bounded(detail)
        super().__init__(reason, cut)
        self.args = (f"{reason}: {cut}",)
