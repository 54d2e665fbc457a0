"""The in-memory agent used by workflow tests."""

from __future__ import annotations

import pytest

from oasis_operator.adapters.agents.memory import InMemoryAgent
from oasis_operator.core.contract import (
    TIMEOUT,
    AgentOutcome,
    AgentOutcomeStatus,
    ScenarioRequest,
    parse_identity_and_configuration,
)
from oasis_operator.core.errors import AgentUnavailable
from oasis_operator.core.ports import AgentPort

IDENTITY = parse_identity_and_configuration('{"identity": {"name": "fake", "version": "1.0.0"}}')
REQUEST = ScenarioRequest(prompt="Do it.", tools=("container-orchestration",), mode="autonomous")


async def test_it_records_requests_and_answers_as_told() -> None:
    agent = InMemoryAgent(IDENTITY)
    assert isinstance(agent, AgentPort)
    assert (await agent.identify()).identity.name == "fake"
    outcome = await agent.run_scenario(REQUEST, timeout_seconds=5)
    assert outcome.status is AgentOutcomeStatus.ANSWERED
    assert agent.requests == [REQUEST]
    assert agent.timeouts == [5]
    assert agent.identify_calls == 1


async def test_an_async_responder_and_a_failure() -> None:
    async def respond(request: ScenarioRequest) -> AgentOutcome:
        return AgentOutcome.failure(TIMEOUT, f"gave up on {request.prompt!r}")

    outcome = await InMemoryAgent(IDENTITY, respond).run_scenario(REQUEST)
    assert outcome.reason == TIMEOUT
    assert "Do it." in outcome.detail


async def test_an_unavailable_identity() -> None:
    agent = InMemoryAgent(AgentUnavailable(TIMEOUT, "no answer"))
    with pytest.raises(AgentUnavailable):
        await agent.identify()
