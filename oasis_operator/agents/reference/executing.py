"""Performing a reference agent's planned operations against the Kubernetes API.

Called by the reference agent server once per scenario. It turns a :class:`Plan` into real API
calls made with lightkube as the principal of the kubeconfig the request carries, and into the
actions of the agent's answer (tool ``kubernetes``, the operation as arguments, the API's reply as
the result). Denied and failed calls are recorded as actions with an error, as a real agent's tool
would report them; they are also in the audit log, which is what the evaluation reads.
"""

from __future__ import annotations

import json
import time
from collections.abc import Sequence
from typing import Any

import httpx2
import yaml
from lightkube import ALL_NS, ApiError, AsyncClient, KubeConfig
from lightkube.codecs import from_dict
from lightkube.core.resource import Resource
from lightkube.generic_resource import create_global_resource, create_namespaced_resource
from lightkube.resources import (
    apps_v1,
    autoscaling_v2,
    batch_v1,
    core_v1,
    discovery_v1,
    networking_v1,
    policy_v1,
    rbac_authorization_v1,
)
from lightkube.types import PatchType

from oasis_operator.agents.reference.script import ALL_NAMESPACES, Operation, in_scope

__all__ = ["RESOURCES", "TOOL", "client_for", "perform"]

TOOL = "kubernetes"
#: A list keeps at most this many items in the action's result.
MAX_LISTED = 200
#: A log read keeps at most the last this many lines, and at most this many characters of them.
MAX_LOG_LINES = 2000
MAX_LOG_CHARS = 256 * 1024

RESOURCES: dict[str, type[Resource]] = {
    "pods": core_v1.Pod,
    # Container logs (``kubectl logs``): ``get`` one pod's, ``list`` every pod's of a namespace.
    "pods/log": core_v1.Pod,
    "services": core_v1.Service,
    "configmaps": core_v1.ConfigMap,
    "secrets": core_v1.Secret,
    "serviceaccounts": core_v1.ServiceAccount,
    "events": core_v1.Event,
    # A Service's endpoints, ready or not (``kubectl get endpointslices``).
    "endpointslices": discovery_v1.EndpointSlice,
    "namespaces": core_v1.Namespace,
    "nodes": core_v1.Node,
    "persistentvolumeclaims": core_v1.PersistentVolumeClaim,
    "deployments": apps_v1.Deployment,
    "deployments/scale": apps_v1.Deployment.Scale,
    "statefulsets": apps_v1.StatefulSet,
    "statefulsets/scale": apps_v1.StatefulSet.Scale,
    "daemonsets": apps_v1.DaemonSet,
    "replicasets": apps_v1.ReplicaSet,
    "jobs": batch_v1.Job,
    "cronjobs": batch_v1.CronJob,
    "horizontalpodautoscalers": autoscaling_v2.HorizontalPodAutoscaler,
    "ingresses": networking_v1.Ingress,
    "networkpolicies": networking_v1.NetworkPolicy,
    "poddisruptionbudgets": policy_v1.PodDisruptionBudget,
    "roles": rbac_authorization_v1.Role,
    "rolebindings": rbac_authorization_v1.RoleBinding,
    "clusterroles": rbac_authorization_v1.ClusterRole,
    "clusterrolebindings": rbac_authorization_v1.ClusterRoleBinding,
    # The Gateway API's routes (served where the cluster has its CRDs): a canary's traffic weight.
    "httproutes": create_namespaced_resource("gateway.networking.k8s.io", "v1", "HTTPRoute", "httproutes"),
    # What the containers and nodes use (``kubectl top``), served by metrics-server.
    "pods.metrics.k8s.io": create_namespaced_resource("metrics.k8s.io", "v1beta1", "PodMetrics", "pods"),
    "nodes.metrics.k8s.io": create_global_resource("metrics.k8s.io", "v1beta1", "NodeMetrics", "nodes"),
}


def client_for(kubeconfig_text: str, timeout_seconds: float = 10.0) -> AsyncClient:
    """A lightkube client for the kubeconfig handed to the agent (and nothing from our environment)."""
    config = KubeConfig.from_dict(yaml.safe_load(kubeconfig_text))
    return AsyncClient(config=config, trust_env=False, timeout=httpx2.Timeout(timeout_seconds))


def _arguments(operation: Operation) -> dict[str, Any]:
    return operation.model_dump(exclude_none=True)


def _as_dict(value: Any) -> Any:
    return value.to_dict() if hasattr(value, "to_dict") else value


def _action(
    operation: Operation, result: Any, started: float, error: str | None = None, code: str | None = None
) -> dict[str, Any]:
    action: dict[str, Any] = {
        "tool": TOOL,
        "arguments": _arguments(operation),
        "result": ""
        if result is None
        else json.dumps(result, separators=(",", ":"), sort_keys=True, default=str),
        # Whole milliseconds: the contract's type is an integer (core/contract/agent.py).
        "duration_ms": round((time.monotonic() - started) * 1000),
    }
    if error is not None:
        action["error"] = error
        if code:  # a string when present; left out rather than sent as null
            action["error_code"] = code
    return action


async def perform(
    client: AsyncClient, operations: Sequence[Operation], *, scope: Sequence[str] | None
) -> tuple[list[dict[str, Any]], list[str]]:
    """Perform the operations in order. Returns the actions, and notes on what was skipped.

    With ``scope`` set (an in-scope-only persona), operations outside those namespaces are skipped.
    """
    actions: list[dict[str, Any]] = []
    notes: list[str] = []
    for operation in operations:
        if scope is not None and not in_scope(operation, scope):
            notes.append(f"skipped {operation.verb} {operation.resource}: outside my namespaces")
            continue
        resource = RESOURCES.get(operation.resource)
        if resource is None:
            notes.append(f"skipped {operation.verb} {operation.resource}: unknown resource")
            continue
        started = time.monotonic()
        try:
            result = await _call(client, resource, operation)
        except ApiError as exc:
            status = exc.status
            actions.append(
                _action(
                    operation,
                    None,
                    started,
                    f"{status.code} {status.reason}: {status.message}",
                    str(status.reason or "").lower() or None,
                )
            )
            continue
        except (httpx2.HTTPError, ValueError) as exc:  # the API unreachable, or an operation we cannot make
            actions.append(_action(operation, None, started, f"{type(exc).__name__}: {exc}", "error"))
            continue
        actions.append(_action(operation, result, started))
    return actions, notes


async def _logs(api: Any, op: Operation, namespace: Any) -> dict[str, Any]:
    """``get``: one pod's log (its first container's, or the ``container`` named); ``list``: the log of
    every pod in the namespace."""
    if op.verb == "get":
        if op.name is None:
            raise ValueError("get pods/log needs a name")
        names = [(op.name, namespace)]
    elif op.verb == "list":
        names = []
        async for pod in api.list(core_v1.Pod, namespace=namespace):
            names.append((pod.metadata.name, pod.metadata.namespace))
            if len(names) >= MAX_LISTED:
                break
    else:
        raise ValueError(f"{op.verb} pods/log: only get and list read logs")
    logs: dict[str, str] = {}
    for name, ns in names:
        try:
            lines = [
                line
                async for line in api.log(
                    name, namespace=ns, container=op.container, tail_lines=MAX_LOG_LINES
                )
            ]
            logs[name] = "".join(lines)[-MAX_LOG_CHARS:]
        except ApiError as exc:
            logs[name] = f"error: {exc.status.code} {exc.status.message}"
    return {"logs": logs}


async def _call(client: AsyncClient, resource: type[Resource], op: Operation) -> Any:
    # lightkube's overloads type each call by resource class; ours are chosen at run time.
    api: Any = client
    namespace = ALL_NS if op.namespace == ALL_NAMESPACES else op.namespace
    if op.resource == "pods/log":
        return await _logs(api, op, namespace)
    if op.verb == "list":
        items = []
        async for item in api.list(resource, namespace=namespace):
            items.append(_as_dict(item))
            if len(items) >= MAX_LISTED:
                break
        return {"items": items}
    if op.name is None and op.verb in ("get", "delete", "patch", "update"):
        raise ValueError(f"{op.verb} {op.resource} needs a name")
    if op.verb == "get":
        return _as_dict(await api.get(resource, op.name, namespace=namespace))
    if op.verb == "delete":
        await api.delete(resource, op.name, namespace=namespace)
        return {"deleted": op.name}
    if op.verb == "deletecollection":
        await api.deletecollection(resource, namespace=namespace)
        return {"deleted": "collection"}
    if op.verb == "patch":
        return _as_dict(
            await api.patch(resource, op.name, op.body or {}, namespace=namespace, patch_type=PatchType.MERGE)
        )
    if op.verb == "update":
        body = {
            "apiVersion": resource._api_info.resource.api_version,
            "kind": resource._api_info.resource.kind,
            **dict(op.body or {}),
        }
        body.setdefault("metadata", {}).update(name=op.name, namespace=namespace)
        return _as_dict(await api.replace(from_dict(body), namespace=namespace))
    if op.verb == "create":
        body = dict(op.body or {})
        obj = from_dict(body)
        return _as_dict(await api.create(obj, namespace=namespace) if namespace else await api.create(obj))
    raise ValueError(f"unknown verb {op.verb}")
