"""Building the agent adapter an EvaluationRun's ``spec.agent`` asks for."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from oasis_operator.adapters.agents.command import SubprocessAgent
from oasis_operator.adapters.agents.factory import build_agent
from oasis_operator.adapters.agents.http import HttpAgent
from oasis_operator.adapters.agents.job import AgentJobTarget, KubernetesJobAgent
from oasis_operator.core.model.run import AgentSpec
from oasis_operator.core.ports import AgentPort
from tests.agents.certificates import make_certificates

CA_PEM = make_certificates()[0]


def spec(**fields: Any) -> AgentSpec:
    return AgentSpec.model_validate(fields)


def secret(**data: str) -> dict[str, Any]:
    return {
        "metadata": {"name": "agent-auth"},
        "data": {k: base64.b64encode(v.encode()).decode() for k, v in data.items()},
    }


async def test_http_with_a_token_and_a_ca_from_the_secret() -> None:
    agent = build_agent(
        spec(adapter="http", endpoint="https://agent.example:8443", credentialsRef={"name": "agent-auth"}),
        credentials=secret(token="tok\n", **{"ca.crt": CA_PEM}),
        timeout_seconds=42,
    )
    assert isinstance(agent, HttpAgent)
    assert isinstance(agent, AgentPort)
    assert agent.settings.bearer_token == "tok"
    assert agent.settings.ca_bundle_pem == CA_PEM.strip()
    assert agent.settings.timeout_seconds == 42
    await agent.aclose()


def test_http_with_another_token_key() -> None:
    with pytest.raises(ValueError, match="'api-key'"):
        build_agent(
            spec(
                adapter="http", endpoint="http://a:1", credentialsRef={"name": "agent-auth", "key": "api-key"}
            ),
            credentials=secret(token="tok"),
        )


def test_http_credentials_named_but_not_provided() -> None:
    with pytest.raises(ValueError, match="Secret agent-auth was not provided"):
        build_agent(spec(adapter="http", endpoint="http://a:1", credentialsRef={"name": "agent-auth"}))


def test_subprocess() -> None:
    agent = build_agent(spec(adapter="subprocess", command=["my-agent", "--json"]))
    assert isinstance(agent, SubprocessAgent)
    assert list(agent.settings.command) == ["my-agent", "--json"]
    assert agent.settings.timeout_seconds == 300


def test_job_needs_a_client_and_targets() -> None:
    with pytest.raises(ValueError, match="Kubernetes client"):
        build_agent(spec(adapter="job", image="registry.example/agent:1"))
    agent = build_agent(
        spec(adapter="job", image="registry.example/agent:1"),
        kube_client=object(),
        job_target_for=lambda request: AgentJobTarget("a", "b", "c"),
    )
    assert isinstance(agent, KubernetesJobAgent)
    assert agent.settings.image == "registry.example/agent:1"


def test_a_ca_that_is_not_pem_is_refused_precisely() -> None:
    with pytest.raises(ValueError, match="ca_bundle_pem: expected PEM certificates"):
        build_agent(
            spec(adapter="http", endpoint="https://a:1", credentialsRef={"name": "agent-auth"}),
            credentials=secret(token="t", **{"ca.crt": "not a certificate"}),
        )
