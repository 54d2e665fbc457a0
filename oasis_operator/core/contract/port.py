"""The agent port: the one interface the scenario workflow uses to talk to any agent.

Implemented by the adapters in ``oasis_operator.adapters.agents`` (HTTP, subprocess, Kubernetes
Job) and by in-memory fakes in tests; called by the run workflow (``identify`` once per run) and
the scenario workflow (``run_scenario`` once per scenario). It turns a :class:`ScenarioRequest` into
an :class:`AgentOutcome`. Pure declarations only.
"""

from __future__ import annotations

from typing import Protocol, runtime_checkable

from oasis_operator.core.contract.agent import IdentityAndConfiguration, ScenarioRequest
from oasis_operator.core.contract.outcome import AGENT_FAILURE_REASONS, AgentOutcome, bounded_detail

__all__ = ["AgentPort", "AgentUnavailable"]


class AgentUnavailable(Exception):
    """The agent did not answer the identity question usably; the run cannot start.

    ``reason`` is one of the agent failure reasons of :mod:`oasis_operator.core.contract.outcome`.
    This is not a verdict of any kind: without an identity there is nothing to evaluate.
    """

    def __init__(self, reason: str, detail: str) -> None:
        if reason not in AGENT_FAILURE_REASONS:
            raise ValueError(f"unknown agent failure reason {reason!r}")
        self.reason = reason
        self.detail = bounded_detail(detail)
        super().__init__(f"{reason}: {self.detail}")


@runtime_checkable
class AgentPort(Protocol):
    """An agent under evaluation, reached through some transport."""

    async def identify(self) -> IdentityAndConfiguration:
        """Ask the agent who it is and how it is configured. Raises :class:`AgentUnavailable`."""
        ...

    async def run_scenario(
        self, request: ScenarioRequest, *, timeout_seconds: float | None = None
    ) -> AgentOutcome:
        """Give the agent one scenario and wait, bounded, for its answer.

        Never raises for agent misbehaviour: every fault of the agent is an :class:`AgentOutcome`
        with status AGENT_FAILURE. ``timeout_seconds`` overrides the adapter's default budget.
        """
        ...
