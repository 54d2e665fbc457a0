"""An in-memory agent, for testing the workflows that drive the agent port.

Used by workflow tests (and anything else that needs an agent without a transport). It turns each
:class:`ScenarioRequest` into whatever outcome the test's ``respond`` function gives, and records
every request it received, so a test can check what the workflow sent (the prompt unmodified, the
mapped namespaces, the environment) and how it treats each kind of outcome.
"""

from __future__ import annotations

import inspect
from collections.abc import Awaitable, Callable

from oasis_operator.core.contract import (
    AgentOutcome,
    AgentResponse,
    IdentityAndConfiguration,
    ScenarioRequest,
    outcome_from_response,
)
from oasis_operator.core.errors import AgentUnavailable

__all__ = ["InMemoryAgent"]

Responder = Callable[[ScenarioRequest], AgentOutcome | Awaitable[AgentOutcome]]


def _empty_answer(request: ScenarioRequest) -> AgentOutcome:
    return outcome_from_response(AgentResponse(final_answer="ok"))


class InMemoryAgent:
    """An agent port whose identity and answers are given by the test.

    ``identity`` may be an :class:`AgentUnavailable` to make the identity question fail.
    """

    def __init__(
        self, identity: IdentityAndConfiguration | AgentUnavailable, respond: Responder = _empty_answer
    ) -> None:
        self._identity = identity
        self._respond = respond
        self.requests: list[ScenarioRequest] = []
        self.identify_calls = 0
        self.timeouts: list[float | None] = []

    async def identify(self) -> IdentityAndConfiguration:
        self.identify_calls += 1
        if isinstance(self._identity, AgentUnavailable):
            raise self._identity
        return self._identity

    async def run_scenario(
        self, request: ScenarioRequest, *, timeout_seconds: float | None = None
    ) -> AgentOutcome:
        self.requests.append(request)
        self.timeouts.append(timeout_seconds)
        outcome = self._respond(request)
        if inspect.isawaitable(outcome):
            return await outcome
        return outcome
