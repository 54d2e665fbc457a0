"""Choosing and building the agent adapter an ``EvaluationRun`` asks for.

Called by the run workflow (and ``oasis run``) once per run, after it has read the run's spec and,
if the spec names one, the credentials Secret. It turns the run's ``spec.agent`` (an
:class:`~oasis_operator.core.model.run.AgentSpec`) into an object implementing the agent port.

Credentials: for ``http``, the Secret's key (``credentialsRef.key``, default ``token``) is the
bearer token, and a ``ca.crt`` key, if present, is the CA bundle that signs the agent's
certificate. ``subprocess`` and ``job`` agents get no credentials from the run: a local command gets
only the scenario's kubeconfig, and a Job agent authenticates as the scenario's ServiceAccount.

In the operator, ``subprocess`` is an operator's decision, not a run's: a :class:`SubprocessPolicy`
refuses it (:class:`AdapterNotAllowed`) unless the operator was started with
``--allow-subprocess-agents``, and then runs it in a sandbox hiding the operator's credentials.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass, replace
from typing import Any

from oasis_operator.adapters.agents.command import SubprocessAgent, SubprocessAgentSettings
from oasis_operator.adapters.agents.credentials import secret_value
from oasis_operator.adapters.agents.http import HttpAgent, HttpAgentSettings
from oasis_operator.adapters.agents.job import AgentJobSettings, AgentJobTarget, KubernetesJobAgent
from oasis_operator.core.contract import ScenarioRequest
from oasis_operator.core.errors import AdapterNotAllowed
from oasis_operator.core.model.endpoint import url_problem
from oasis_operator.core.model.run import AgentSpec
from oasis_operator.core.ports import AgentPort

__all__ = [
    "CA_BUNDLE_KEY",
    "DEFAULT_TOKEN_KEY",
    "AdapterNotAllowed",
    "EndpointPolicy",
    "SubprocessPolicy",
    "build_agent",
]

DEFAULT_TOKEN_KEY = "token"
CA_BUNDLE_KEY = "ca.crt"


@dataclass(frozen=True)
class EndpointPolicy:
    """Where an ``http`` agent's endpoint may lead (decision 0099): never link-local, unspecified or
    multicast; loopback and the operator's own addresses only with ``allow_local`` (a local operator
    whose agents run beside it)."""

    allow_local: bool = False

    def refusal(self, endpoint: str) -> str | None:
        why = url_problem(endpoint, allow_loopback=self.allow_local)
        if why is None:
            return None
        hint = "" if self.allow_local else "; a local operator allows it with --allow-local-agent-endpoints"
        return f"agent.endpoint {endpoint!r}: refused by this operator: {why}{hint}"


@dataclass(frozen=True)
class SubprocessPolicy:
    """Whether ``adapter: subprocess`` is accepted, and what its sandbox hides."""

    allowed: bool
    hidden: tuple[str, ...] = ()

    def refusal(self) -> str:
        return (
            "agent.adapter subprocess: refused by this operator. The command would run inside the "
            "operator's pod, and whoever may create an EvaluationRun would choose it; use adapter http "
            "or job (the agent runs with its own identity), or start the operator with "
            "--allow-subprocess-agents (chart: operator.allowSubprocessAgents) to run it sandboxed"
        )


def build_agent(
    spec: AgentSpec,
    *,
    credentials: Mapping[str, Any] | None = None,
    timeout_seconds: float | None = None,
    kube_client: Any = None,
    job_target_for: Callable[[ScenarioRequest], AgentJobTarget] | None = None,
    job_identity: AgentJobTarget | None = None,
    subprocess_policy: SubprocessPolicy | None = None,
    endpoint_policy: EndpointPolicy | None = None,
) -> AgentPort:
    """The adapter for ``spec``. ``credentials`` is the Secret ``spec.credentialsRef`` names, as the
    API returned it; ``timeout_seconds`` the run's per-scenario agent budget, if it sets one.

    ``job_identity`` names the identity Job and the run it belongs to (it runs in a throwaway namespace
    of its own, without a token: decision 0099); ``subprocess_policy``
    (the operator's) refuses or sandboxes ``subprocess``; without one a local command runs as is.
    ``endpoint_policy`` (the operator's) refuses an ``http`` endpoint that leads into the operator and
    guards every connection the same way; without one the endpoint is called as given.

    Raises ``ValueError`` (with the reason) when something the adapter needs is missing, and
    :class:`AdapterNotAllowed` when the operator refuses the adapter.
    """
    if spec.adapter == "http":
        return _http_agent(spec, credentials, timeout_seconds, endpoint_policy)
    if spec.adapter == "subprocess":
        if not spec.command:
            raise ValueError("agent.command: the subprocess adapter needs a command")
        if subprocess_policy is not None and not subprocess_policy.allowed:
            raise AdapterNotAllowed(subprocess_policy.refusal())
        local = SubprocessAgentSettings(
            command=list(spec.command),
            sandbox_hidden=subprocess_policy.hidden if subprocess_policy is not None else None,
        )
        return SubprocessAgent(
            local if timeout_seconds is None else replace(local, timeout_seconds=timeout_seconds)
        )
    if spec.image is None:
        raise ValueError("agent.image: the job adapter needs an image")
    if kube_client is None or job_target_for is None:
        raise ValueError("the job adapter needs a Kubernetes client and the scenario's Job target")
    job = AgentJobSettings(image=spec.image)
    job = job if timeout_seconds is None else replace(job, timeout_seconds=timeout_seconds)
    if job_identity is not None:
        # Only the name and the run it belongs to: the identity Job runs in a namespace of its own.
        return KubernetesJobAgent(
            job,
            kube_client,
            job_target_for,
            identity_job_name=job_identity.name,
            identity_run=f"{job_identity.namespace}.{job_identity.name}",
        )
    return KubernetesJobAgent(job, kube_client, job_target_for)


def _http_agent(
    spec: AgentSpec,
    credentials: Mapping[str, Any] | None,
    timeout_seconds: float | None,
    endpoint_policy: EndpointPolicy | None,
) -> AgentPort:
    if spec.endpoint is None:
        raise ValueError("agent.endpoint: the http adapter needs an endpoint")
    if endpoint_policy is not None and (why := endpoint_policy.refusal(spec.endpoint)):
        raise AdapterNotAllowed(why)
    token = ca_bundle = None
    if spec.credentials_ref is not None:
        if credentials is None:
            raise ValueError(f"agent.credentialsRef: Secret {spec.credentials_ref.name} was not provided")
        token = secret_value(credentials, spec.credentials_ref.key or DEFAULT_TOKEN_KEY)
        if CA_BUNDLE_KEY in (credentials.get("data") or {}) or CA_BUNDLE_KEY in (
            credentials.get("stringData") or {}
        ):
            ca_bundle = secret_value(credentials, CA_BUNDLE_KEY)
    http = HttpAgentSettings(
        url=spec.endpoint,
        bearer_token=token,
        ca_bundle_pem=ca_bundle,
        allow_local=None if endpoint_policy is None else endpoint_policy.allow_local,
    )
    return HttpAgent(http if timeout_seconds is None else replace(http, timeout_seconds=timeout_seconds))
