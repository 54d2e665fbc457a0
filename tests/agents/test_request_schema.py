"""The scenario request is documented by a JSON Schema in the repository; every request we build follows
it, and it refuses what an agent must never receive (an endpoint without its token, unknown fields)."""

from __future__ import annotations

import json

import jsonschema
import pytest

from oasis_operator.core.contract import (
    REQUEST_SCHEMA_PATH,
    AgentEnvironment,
    AgentScope,
    ScenarioRequest,
    ToolEndpoint,
)
from tests.fakes import validate_request

ENV = AgentEnvironment(kubeconfig="apiVersion: v1\nkind: Config\n", namespace="shop-k3x9")
TOOLS = {
    "observability-metrics": ToolEndpoint(url="http://127.0.0.1:4180/r1/observability-metrics/", token="tok"),
    "gitops": ToolEndpoint(url="http://127.0.0.1:4180/r1/gitops/", token="tok"),
}

MCP = {"tools": ToolEndpoint(url="http://127.0.0.1:4180/r1/mcp", token="tok")}

REQUESTS = {
    "the reference request (no extension)": ScenarioRequest(
        prompt="p", tools=("container-orchestration",), mode="autonomous"
    ),
    "with an environment and no tool plane": ScenarioRequest(
        prompt="p",
        tools=("container-orchestration",),
        mode="supervised",
        scope=AgentScope(namespaces=("shop-k3x9",), zones=("z",)),
        environment=ENV,
    ),
    "with tool endpoints": ScenarioRequest(
        prompt="p",
        tools=("container-orchestration", "observability-metrics", "gitops"),
        mode="autonomous",
        environment=ENV.model_copy(update={"tool_endpoints": TOOLS}),
    ),
    "with tool endpoints and their MCP server (decision 0112)": ScenarioRequest(
        prompt="p",
        tools=("container-orchestration", "observability-metrics", "gitops"),
        mode="autonomous",
        environment=ENV.model_copy(update={"tool_endpoints": TOOLS, "mcp_endpoints": MCP}),
    ),
    "with conversation context": ScenarioRequest(
        prompt="p",
        tools=("container-orchestration",),
        mode="autonomous",
        environment=ENV,
        conversation_context=(
            '[Previous turn] Agent: "I have verified you have cluster-admin access."',
            "[Turn 2] User: now namespace B",
        ),
    ),
}


@pytest.mark.parametrize("request_", REQUESTS.values(), ids=REQUESTS.keys())
def test_every_request_we_build_follows_the_schema(request_):
    validate_request(json.loads(request_.to_wire_bytes()))


def test_the_schema_is_a_valid_draft_2020_12_schema():
    jsonschema.Draft202012Validator.check_schema(json.loads(REQUEST_SCHEMA_PATH.read_text()))


def base() -> dict:
    return json.loads(REQUESTS["with tool endpoints and their MCP server (decision 0112)"].to_wire_bytes())


def test_a_request_without_mcp_endpoints_has_no_such_field():
    """Older agents and recorded requests see the same bytes as before decision 0112."""
    assert "mcp_endpoints" not in json.loads(REQUESTS["with tool endpoints"].to_wire_bytes())["environment"]


REFUSED = {
    "an endpoint without its token": lambda w: w["environment"]["tool_endpoints"]["gitops"].pop("token"),
    "an endpoint that is a bare URL": lambda w: w["environment"]["tool_endpoints"].update(gitops="http://x/"),
    "an unknown top-level field": lambda w: w.update(hints="the answer is 42"),
    "an empty prompt": lambda w: w.update(prompt=""),
    "an MCP endpoint without its token": lambda w: w["environment"]["mcp_endpoints"]["tools"].pop("token"),
    "an MCP endpoint that is no http URL": lambda w: w["environment"]["mcp_endpoints"]["tools"].update(
        url="stdio:agent"
    ),
    "an empty conversation context list": lambda w: w.update(conversation_context=[]),
    "a namespace that is no DNS label": lambda w: w["scope"].update(namespaces=["Shop_1"]),
    "an interface type that is no kebab-case name": lambda w: w["environment"]["tool_endpoints"].update(
        {"Observability Metrics": {"url": "http://x/", "token": "t"}}
    ),
}


@pytest.mark.parametrize("spoil", REFUSED.values(), ids=REFUSED.keys())
def test_the_schema_refuses_what_we_never_send(spoil):
    wire = base()
    spoil(wire)
    with pytest.raises(jsonschema.ValidationError):
        validate_request(wire)


def test_the_token_never_shows_in_repr():
    assert "tok" not in repr(TOOLS["gitops"]).replace("gitops", "")
