"""Whatever an agent sends, reading it either succeeds or is a precise contract violation."""

from __future__ import annotations

import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from oasis_operator.core.contract import (
    AgentOutcomeStatus,
    ContractViolation,
    outcome_from_response,
    parse_identity_and_configuration,
    parse_response,
)

scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=4) | st.dictionaries(st.text(max_size=10), children, max_size=4)
    ),
    max_leaves=20,
)
field_names = st.sampled_from(
    [
        "actions",
        "reasoning",
        "final_answer",
        "model",
        "agent_failure",
        "tool",
        "arguments",
        "result",
        "id",
        "cause",
    ]
)
responses = st.dictionaries(field_names, json_values, max_size=5)
actions = st.dictionaries(field_names, json_values, max_size=5)
shaped = st.builds(lambda r, a: {**r, "actions": a}, responses, st.lists(actions, max_size=3))


@settings(max_examples=300, deadline=None)
@given(
    st.binary(max_size=200)
    | st.builds(json.dumps, json_values).map(str.encode)
    | st.builds(json.dumps, shaped).map(str.encode)
)
def test_reading_a_response_never_fails_any_other_way(body: bytes) -> None:
    try:
        response = parse_response(body)
    except ContractViolation as exc:
        message = str(exc)
        response = None
    if response is None:
        assert "expected" in message
        return
    outcome = outcome_from_response(response)
    assert (outcome.status is AgentOutcomeStatus.ANSWERED) == (response.agent_failure is None)


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(["identity", "configuration"]), json_values | responses, max_size=2))
def test_reading_an_identity_never_fails_any_other_way(body: dict[str, Any]) -> None:
    message = "expected"
    try:
        parse_identity_and_configuration(json.dumps(body))
    except ContractViolation as exc:
        message = str(exc)
    assert "expected" in message
