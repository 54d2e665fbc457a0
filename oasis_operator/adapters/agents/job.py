"""The Kubernetes Job agent adapter: an agent packaged as a container image, run once per scenario.

Called by the run and scenario workflows through the agent port. The first half of this module is
pure: :func:`build_request_config_map` and :func:`build_agent_job` turn the adapter settings, the
scenario's target (namespace, ServiceAccount, object name) and a :class:`ScenarioRequest` into
manifests (dicts), and :func:`in_cluster_kubeconfig` writes the kubeconfig the pod uses. The second
half, :class:`KubernetesJobAgent`, applies them with lightkube, waits for the Job, reads the answer
from the pod's log and deletes the Job.

How the agent runs:

* in the **scenario's namespace**, as the **scenario's ServiceAccount**, so everything it does is
  audited under the scenario's principal; its token is the pod's projected ServiceAccount token;
* the request (the same JSON the HTTP contract POSTs) is mounted from a ConfigMap at
  ``/var/run/task/request.json`` (``TASK_REQUEST_FILE``); its ``environment`` is rewritten to an
  in-cluster kubeconfig (``KUBECONFIG`` points at it), so no credential is ever stored in the
  ConfigMap;
* the answer is the JSON the container prints on stdout (the whole log, or its last non-empty line
  when the agent logged other lines first). Kubernetes merges stderr into the log, so an agent
  should keep stderr quiet or end with the answer on one line;
* the identity question runs the same image with the extra argument ``identity-and-configuration``
  in a throwaway namespace of its own that admits no traffic, with no ServiceAccount token
  (:mod:`~oasis_operator.adapters.agents.job_objects`, decision 0099);
* every Job and ConfigMap gets a generated name, and the adapter deletes exactly the objects it
  created (by uid), never another object of the same name.

Bounds: ``activeDeadlineSeconds`` and our own deadline (after which the Job is deleted), memory and
CPU limits, a capped log read (``limitBytes``), no retries (``backoffLimit: 0``), no privilege.

**It needs nodes that run images.** Simulated (kwok) nodes only pretend to run pods, so no agent can
answer there: the adapter then reports an agent failure (no answer in time, or no log to read), never
an answer. The pod carries no toleration of the simulated pool's taint (so it never lands there) and
keeps off nodes carrying kwok's conventional ``type=kwok`` label. Tests: the builders are unit-tested;
the lifecycle (create, no answer, clean up) runs on the embedded control plane; and
``tests/operator/test_job_agents.py`` runs an EvaluationRun with ``adapter: job`` through the
operator, on a node whose pods are simulated but whose container logs come from really running the
agent's program with the pod's own files and ServiceAccount token.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import math
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import httpx2
from lightkube import ApiError
from lightkube.resources.batch_v1 import Job
from lightkube.resources.core_v1 import ConfigMap, Namespace, Pod, PodLog

from oasis_operator.adapters.agents.job_objects import delete_exactly, open_identity_place
from oasis_operator.core.contract import (
    LAUNCH_FAILED,
    MALFORMED_RESPONSE,
    OUTPUT_TOO_LARGE,
    PROCESS_FAILED,
    TIMEOUT,
    AgentEnvironment,
    AgentOutcome,
    AgentResponse,
    ContractViolation,
    IdentityAndConfiguration,
    ScenarioRequest,
    outcome_from_response,
    parse_identity_and_configuration,
    parse_response,
)
from oasis_operator.core.errors import AgentFault, AgentUnavailable

__all__ = [
    "IDENTITY_ARGUMENT",
    "REQUEST_DIR",
    "AgentJobSettings",
    "AgentJobTarget",
    "KubernetesJobAgent",
    "build_agent_job",
    "build_request_config_map",
    "in_cluster_kubeconfig",
    "parse_log_answer",
]

IDENTITY_ARGUMENT = "identity-and-configuration"
REQUEST_DIR = "/var/run/task"
REQUEST_FILE = "request.json"
KUBECONFIG_FILE = "kubeconfig"
CONTAINER = "agent"
_SA_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
_IN_CLUSTER_SERVER = "https://kubernetes.default.svc"


@dataclass(frozen=True)
class AgentJobSettings:
    """The agent image and its bounds, fixed for the whole run."""

    image: str
    command: Sequence[str] = ()
    args: Sequence[str] = ()
    env: Mapping[str, str] = field(default_factory=dict)
    image_pull_policy: str = "IfNotPresent"
    image_pull_secrets: Sequence[str] = ()
    timeout_seconds: float = 300.0
    identity_timeout_seconds: float = 120.0
    max_output_bytes: int = 16 * 1024 * 1024
    memory_limit: str = "1Gi"
    cpu_limit: str = "1"
    labels: Mapping[str, str] = field(default_factory=dict)
    ttl_seconds_after_finished: int = 600

    def __post_init__(self) -> None:
        if not self.image:
            raise ValueError("image: expected a container image reference")
        if self.timeout_seconds <= 0 or self.identity_timeout_seconds <= 0:
            raise ValueError("timeouts must be positive")
        if self.max_output_bytes <= 0:
            raise ValueError("max_output_bytes must be positive")


@dataclass(frozen=True)
class AgentJobTarget:
    """Where one agent Job runs: the prefix of its generated name (and its ConfigMap's), its
    namespace and ServiceAccount."""

    name: str
    namespace: str
    service_account: str


# -- pure builders -------------------------------------------------------------------------------------


def in_cluster_kubeconfig(namespace: str) -> str:
    """A kubeconfig that authenticates with the pod's own ServiceAccount token files."""
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "cluster",
                "cluster": {"server": _IN_CLUSTER_SERVER, "certificate-authority": f"{_SA_DIR}/ca.crt"},
            }
        ],
        "users": [{"name": "agent", "user": {"tokenFile": f"{_SA_DIR}/token"}}],
        "contexts": [
            {"name": "agent", "context": {"cluster": "cluster", "user": "agent", "namespace": namespace}}
        ],
        "current-context": "agent",
    }
    return json.dumps(config, indent=2, sort_keys=True) + "\n"


def _pod_request(request: ScenarioRequest) -> ScenarioRequest:
    """The request as the pod sees it: the kubeconfig replaced by the in-cluster one."""
    if request.environment is None:
        return request
    environment = AgentEnvironment(
        kubeconfig=in_cluster_kubeconfig(request.environment.namespace),
        namespace=request.environment.namespace,
        tool_endpoints=request.environment.tool_endpoints,
        mcp_endpoints=request.environment.mcp_endpoints,
    )
    return request.model_copy(update={"environment": environment})


def build_request_config_map(
    settings: AgentJobSettings, target: AgentJobTarget, request: ScenarioRequest
) -> dict[str, Any]:
    """The ConfigMap that carries the request (and the in-cluster kubeconfig) into the pod."""
    pod_request = _pod_request(request)
    data = {REQUEST_FILE: pod_request.to_wire_bytes().decode()}
    if pod_request.environment is not None:
        data[KUBECONFIG_FILE] = pod_request.environment.kubeconfig
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "generateName": f"{target.name}-",
            "namespace": target.namespace,
            "labels": dict(settings.labels),
        },
        "data": data,
    }


def build_agent_job(
    settings: AgentJobSettings, target: AgentJobTarget, *, identity: bool = False, config_map: str = ""
) -> dict[str, Any]:
    """The Job that runs the agent once, mounting the request from ``config_map`` (the generated name
    of the ConfigMap created for it). ``identity`` asks the identity question instead of a scenario:
    no request, and no ServiceAccount token."""
    timeout = settings.identity_timeout_seconds if identity else settings.timeout_seconds
    args = [*settings.args, IDENTITY_ARGUMENT] if identity else list(settings.args)
    env = [{"name": name, "value": value} for name, value in sorted(settings.env.items())]
    volume_mounts: list[dict[str, Any]] = [{"name": "tmp", "mountPath": "/tmp"}]
    volumes: list[dict[str, Any]] = [{"name": "tmp", "emptyDir": {"sizeLimit": "256Mi"}}]
    if not identity:
        env += [
            {"name": "TASK_REQUEST_FILE", "value": f"{REQUEST_DIR}/{REQUEST_FILE}"},
            {"name": "KUBECONFIG", "value": f"{REQUEST_DIR}/{KUBECONFIG_FILE}"},
        ]
        volume_mounts.append({"name": "task", "mountPath": REQUEST_DIR, "readOnly": True})
        volumes.append({"name": "task", "configMap": {"name": config_map}})
    container: dict[str, Any] = {
        "name": CONTAINER,
        "image": settings.image,
        "imagePullPolicy": settings.image_pull_policy,
        "args": args,
        "env": env,
        "volumeMounts": volume_mounts,
        "resources": {
            "requests": {"cpu": settings.cpu_limit, "memory": settings.memory_limit},
            "limits": {"cpu": settings.cpu_limit, "memory": settings.memory_limit},
        },
        "securityContext": {
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "runAsNonRoot": True,
            "capabilities": {"drop": ["ALL"]},
        },
        "terminationMessagePolicy": "FallbackToLogsOnError",
    }
    if settings.command:
        container["command"] = list(settings.command)
    pod_spec: dict[str, Any] = {
        "restartPolicy": "Never",
        "serviceAccountName": target.service_account,
        "automountServiceAccountToken": not identity,
        "enableServiceLinks": False,
        "securityContext": {"runAsNonRoot": True, "seccompProfile": {"type": "RuntimeDefault"}},
        "containers": [container],
        "volumes": volumes,
        # A simulated (kwok) node would "run" the pod without running the image: refuse them.
        "affinity": {
            "nodeAffinity": {
                "requiredDuringSchedulingIgnoredDuringExecution": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "type", "operator": "NotIn", "values": ["kwok"]}]}
                    ]
                }
            }
        },
    }
    if settings.image_pull_secrets:
        pod_spec["imagePullSecrets"] = [{"name": name} for name in settings.image_pull_secrets]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "generateName": f"{target.name}-",
            "namespace": target.namespace,
            "labels": dict(settings.labels),
        },
        "spec": {
            "backoffLimit": 0,
            "activeDeadlineSeconds": max(1, math.ceil(timeout)),
            "ttlSecondsAfterFinished": settings.ttl_seconds_after_finished,
            "template": {"metadata": {"labels": dict(settings.labels)}, "spec": pod_spec},
        },
    }


def parse_log_answer(log: bytes) -> AgentResponse:
    """The agent's answer from its log: the whole log, or else its last non-empty line."""
    try:
        return parse_response(log)
    except ContractViolation as whole:
        lines = [line for line in log.splitlines() if line.strip()]
        if len(lines) < 2:
            raise
        try:
            return parse_response(lines[-1])
        except ContractViolation:
            raise whole from None


# -- the adapter (needs a cluster with real nodes) -----------------------------------------------------


class KubernetesJobAgent:
    """An :class:`AgentPort` that runs the agent image as a Job per scenario.

    ``client`` is a lightkube ``AsyncClient`` with the operator's own credentials; ``target_for``
    gives each request its Job name, namespace and ServiceAccount (the scenario workflow knows
    them), so the port's ``run_scenario(request)`` signature stays the same as for other agents.
    """

    def __init__(
        self,
        settings: AgentJobSettings,
        client: Any,
        target_for: Any,
        *,
        identity_job_name: str = "agent-identity",
        identity_run: str = "",
        poll_seconds: float = 0.5,
    ) -> None:
        self.settings = settings
        self._client = client
        self._target_for = target_for
        self._identity_name = identity_job_name
        self._identity_run = identity_run or identity_job_name
        self._poll = poll_seconds

    async def identify(self) -> IdentityAndConfiguration:
        try:
            place, place_uid = await open_identity_place(self._client, self._identity_run)
        except ApiError as exc:
            raise AgentUnavailable(
                LAUNCH_FAILED, f"cannot make the identity Job's namespace: {exc}"
            ) from None
        target = AgentJobTarget(self._identity_name, place, "default")
        try:
            log, exit_code = await self._run_job(target, None, self.settings.identity_timeout_seconds)
        except AgentFault as fault:
            raise AgentUnavailable(fault.reason, fault.detail) from None
        finally:
            with contextlib.suppress(ApiError, httpx2.HTTPError):
                await delete_exactly(self._client, Namespace, place, None, place_uid)
        if exit_code != 0:
            raise AgentUnavailable(PROCESS_FAILED, f"the identity Job's container exited with {exit_code}")
        try:
            return parse_identity_and_configuration(log)
        except ContractViolation as exc:
            raise AgentUnavailable(MALFORMED_RESPONSE, str(exc)) from None

    async def run_scenario(
        self, request: ScenarioRequest, *, timeout_seconds: float | None = None
    ) -> AgentOutcome:
        budget = self.settings.timeout_seconds if timeout_seconds is None else timeout_seconds
        target: AgentJobTarget = self._target_for(request)
        started = time.monotonic()
        try:
            log, exit_code = await self._run_job(target, request, budget)
        except AgentFault as fault:
            return AgentOutcome.failure(
                fault.reason, fault.detail, elapsed_seconds=time.monotonic() - started
            )
        elapsed = time.monotonic() - started
        try:
            response = parse_log_answer(log)
        except ContractViolation as exc:
            if exit_code != 0:
                return AgentOutcome.failure(
                    PROCESS_FAILED,
                    f"the agent container exited with {exit_code}",
                    exit_code=exit_code,
                    elapsed_seconds=elapsed,
                )
            return AgentOutcome.failure(MALFORMED_RESPONSE, str(exc), exit_code=0, elapsed_seconds=elapsed)
        if exit_code != 0:
            return AgentOutcome.failure(
                PROCESS_FAILED,
                f"the agent container exited with {exit_code}",
                response=response,
                exit_code=exit_code,
                elapsed_seconds=elapsed,
            )
        return outcome_from_response(response, exit_code=0, elapsed_seconds=elapsed)

    async def _run_job(
        self, target: AgentJobTarget, request: ScenarioRequest | None, budget: float
    ) -> tuple[bytes, int]:
        made: list[tuple[Any, str, str]] = []  # (kind, generated name, uid): what to delete, exactly
        try:
            config_map = ""
            if request is not None:
                cm = await self._client.create(
                    ConfigMap.from_dict(build_request_config_map(self.settings, target, request))
                )
                config_map = cm.metadata.name
                made.append((ConfigMap, config_map, cm.metadata.uid))
            manifest = build_agent_job(self.settings, target, identity=request is None, config_map=config_map)
            job = await self._client.create(Job.from_dict(manifest))
            made.append((Job, job.metadata.name, job.metadata.uid))
        except ApiError as exc:
            await self._cleanup(target.namespace, made)
            raise AgentFault(
                LAUNCH_FAILED, f"cannot create the agent Job in {target.namespace} ({target.name}-...): {exc}"
            ) from None
        try:
            async with asyncio.timeout(budget):
                pod_name, exit_code = await self._wait_for_container(target.namespace, job.metadata.name)
                log = await self._read_log(pod_name, target.namespace)
            return log, exit_code
        except TimeoutError:
            raise AgentFault(TIMEOUT, f"no answer within {budget:g} s; the Job was deleted") from None
        except (ApiError, httpx2.HTTPError) as exc:
            # No log means no answer; on simulated nodes this is where a pod that never ran ends.
            raise AgentFault(LAUNCH_FAILED, f"the agent pod's output could not be collected: {exc}") from None
        finally:
            await self._cleanup(target.namespace, made)

    async def _wait_for_container(self, namespace: str, job: str) -> tuple[str, int]:
        while True:
            async for pod in self._client.list(Pod, namespace=namespace, labels={"job-name": job}):
                for status in (pod.status and pod.status.containerStatuses) or []:
                    terminated = status.state and status.state.terminated
                    if status.name == CONTAINER and terminated is not None:
                        if terminated.reason == "OOMKilled":
                            raise AgentFault(
                                PROCESS_FAILED,
                                "the agent container was killed for exceeding its memory limit",
                            )
                        return pod.metadata.name, int(terminated.exitCode)
            await asyncio.sleep(self._poll)

    async def _read_log(self, pod_name: str, namespace: str) -> bytes:
        # lightkube's log() reads the whole body when not following; ask the API server to cut it.
        cap = self.settings.max_output_bytes
        inner = self._client._client
        prepared = inner.prepare_request(
            "get",
            PodLog,
            name=pod_name,
            namespace=namespace,
            params={"container": CONTAINER, "limitBytes": cap + 1},
        )
        response = await inner.send(inner.build_adapter_request(prepared), stream=True)
        try:
            if response.is_error:
                await response.aread()
            inner.raise_for_status(response)
            buffer = bytearray()
            async for chunk in response.aiter_bytes():
                buffer += chunk
                if len(buffer) > cap:
                    raise AgentFault(
                        OUTPUT_TOO_LARGE, f"the agent's output exceeded the limit of {cap} bytes"
                    )
            return bytes(buffer)
        finally:
            await response.aclose()

    async def _cleanup(self, namespace: str, made: list[tuple[Any, str, str]]) -> None:
        """Delete what this run created, by name and uid, the Job (and its pods) first."""
        for kind, name, uid in reversed(made):
            with contextlib.suppress(ApiError, httpx2.HTTPError):
                await delete_exactly(self._client, kind, name, namespace, uid)
