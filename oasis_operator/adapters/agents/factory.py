"""Choosing and building the agent adapter an ``EvaluationRun`` asks for.

Called by the run workflow (and ``oasis run``) once per run, after it has read the run's spec and,
if the spec names one, the credentials Secret. It turns the run's ``spec.agent`` (an
:class:`~oasis_operator.core.model.run.AgentSpec`) into an object implementing the agent port.

Credentials: for ``http``, the Secret's key (``credentialsRef.key``, default ``token``) is the
bearer token, and a ``ca.crt`` key, if present, is the CA bundle that signs the agent's
certificate. ``subprocess`` and ``job`` agents get no credentials from the run: a local command is
trusted with its own environment, and a Job agent authenticates as the scenario's ServiceAccount.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import replace
from typing import Any

from oasis_operator.adapters.agents.command import SubprocessAgent, SubprocessAgentSettings
from oasis_operator.adapters.agents.credentials import secret_value
from oasis_operator.adapters.agents.http import HttpAgent, HttpAgentSettings
from oasis_operator.adapters.agents.job import AgentJobSettings, AgentJobTarget, KubernetesJobAgent
from oasis_operator.core.contract import AgentPort, ScenarioRequest
from oasis_operator.core.model.run import AgentSpec

__all__ = ["CA_BUNDLE_KEY", "DEFAULT_TOKEN_KEY", "build_agent"]

DEFAULT_TOKEN_KEY = "token"
CA_BUNDLE_KEY = "ca.crt"


def build_agent(
    spec: AgentSpec,
    *,
    credentials: Mapping[str, Any] | None = None,
    timeout_seconds: float | None = None,
    kube_client: Any = None,
    job_target_for: Callable[[ScenarioRequest], AgentJobTarget] | None = None,
) -> AgentPort:
    """The adapter for ``spec``. ``credentials`` is the Secret ``spec.credentialsRef`` names, as the
    API returned it; ``timeout_seconds`` the run's per-scenario agent budget, if it sets one.

    Raises ``ValueError`` (with the reason) when something the adapter needs is missing.
    """
    if spec.adapter == "http":
        if spec.endpoint is None:
            raise ValueError("agent.endpoint: the http adapter needs an endpoint")
        token = ca_bundle = None
        if spec.credentials_ref is not None:
            if credentials is None:
                raise ValueError(f"agent.credentialsRef: Secret {spec.credentials_ref.name} was not provided")
            token = secret_value(credentials, spec.credentials_ref.key or DEFAULT_TOKEN_KEY)
            if CA_BUNDLE_KEY in (credentials.get("data") or {}) or CA_BUNDLE_KEY in (
                credentials.get("stringData") or {}
            ):
                ca_bundle = secret_value(credentials, CA_BUNDLE_KEY)
        http = HttpAgentSettings(url=spec.endpoint, bearer_token=token, ca_bundle_pem=ca_bundle)
        return HttpAgent(http if timeout_seconds is None else replace(http, timeout_seconds=timeout_seconds))
    if spec.adapter == "subprocess":
        if not spec.command:
            raise ValueError("agent.command: the subprocess adapter needs a command")
        local = SubprocessAgentSettings(command=list(spec.command))
        return SubprocessAgent(
            local if timeout_seconds is None else replace(local, timeout_seconds=timeout_seconds)
        )
    if spec.image is None:
        raise ValueError("agent.image: the job adapter needs an image")
    if kube_client is None or job_target_for is None:
        raise ValueError("the job adapter needs a Kubernetes client and the scenario's Job target")
    job = AgentJobSettings(image=spec.image)
    job = job if timeout_seconds is None else replace(job, timeout_seconds=timeout_seconds)
    return KubernetesJobAgent(job, kube_client, job_target_for)
