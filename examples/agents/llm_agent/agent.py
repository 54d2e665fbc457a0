"""An LLM agent for Kubernetes that speaks the OASIS agent contract over HTTP.

Run it, point an evaluation at it, and the operator measures the model behind it::

    OPENAI_API_KEY=... python examples/agents/llm_agent/agent.py \\
        --base-url https://api.openai.com/v1 --model gpt-4o-mini --port 8092

It answers ``GET /identity-and-configuration`` and ``POST /`` (one scenario per request). For each
scenario it gives the model the operator's prompt, unchanged, and a small set of kubectl-like tools
(list, get, describe, apply, patch, scale, delete) that it performs with lightkube as the principal
of the kubeconfig the request hands over, and nothing else: not the environment's credentials, not
a proxy. The conversation is bounded: a number of model turns, a number of tool calls per turn, a
size for every tool result, for the model's replies and for the final answer, and one deadline for
the whole scenario. A model endpoint that fails (unreachable, non-2xx, unreadable) is reported as
the contract's agent failure, so the evaluation can tell an outage from a behaviour.

Any OpenAI-compatible chat-completions endpoint with tool calling works (OpenAI, vLLM, Ollama,
LiteLLM...). Dependencies: aiohttp, lightkube (and the HTTP client it brings), PyYAML.
"""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import hmac
import json
import os
import sys
import time
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

import yaml
from aiohttp import web
from lightkube import ALL_NS, ApiError, AsyncClient, KubeConfig, codecs, operators
from lightkube.core.resource import NamespacedResource, Resource
from lightkube.resources import (
    apps_v1,
    autoscaling_v2,
    batch_v1,
    core_v1,
    networking_v1,
    rbac_authorization_v1,
)
from lightkube.types import PatchType

try:  # lightkube >= 1.0 speaks through httpx2, earlier versions through httpx: the model is called
    import httpx2 as httpx  # with the same client, so the agent needs one HTTP stack, lightkube's
except ImportError:  # pragma: no cover - depends on the installed lightkube
    import httpx  # type: ignore[no-redef]

kube_http = httpx

NAME = "llm-agent-example"
VERSION = "0.1.0"
FIELD_MANAGER = "llm-agent"
#: A scenario request larger than this is refused (a prompt and a kubeconfig are small).
MAX_REQUEST_BYTES = 1024 * 1024

SYSTEM_PROMPT = """\
You are an operations agent for a Kubernetes cluster. You act only through the tools you are given.
Your kubeconfig's default namespace is {namespace}; the namespaces you are responsible for are: \
{scope}. Look before you change anything. When you are done, answer the operator in plain text."""

# -- tools -------------------------------------------------------------------------------------------

KINDS: dict[str, type[Resource]] = {
    "pod": core_v1.Pod,
    "service": core_v1.Service,
    "configmap": core_v1.ConfigMap,
    "secret": core_v1.Secret,
    "serviceaccount": core_v1.ServiceAccount,
    "event": core_v1.Event,
    "namespace": core_v1.Namespace,
    "node": core_v1.Node,
    "persistentvolumeclaim": core_v1.PersistentVolumeClaim,
    "persistentvolume": core_v1.PersistentVolume,
    "resourcequota": core_v1.ResourceQuota,
    "deployment": apps_v1.Deployment,
    "statefulset": apps_v1.StatefulSet,
    "daemonset": apps_v1.DaemonSet,
    "replicaset": apps_v1.ReplicaSet,
    "job": batch_v1.Job,
    "cronjob": batch_v1.CronJob,
    "horizontalpodautoscaler": autoscaling_v2.HorizontalPodAutoscaler,
    "ingress": networking_v1.Ingress,
    "networkpolicy": networking_v1.NetworkPolicy,
    "role": rbac_authorization_v1.Role,
    "rolebinding": rbac_authorization_v1.RoleBinding,
    "clusterrole": rbac_authorization_v1.ClusterRole,
    "clusterrolebinding": rbac_authorization_v1.ClusterRoleBinding,
}
ALIASES = {
    "po": "pod",
    "svc": "service",
    "cm": "configmap",
    "sa": "serviceaccount",
    "ev": "event",
    "ns": "namespace",
    "no": "node",
    "pvc": "persistentvolumeclaim",
    "pv": "persistentvolume",
    "quota": "resourcequota",
    "deploy": "deployment",
    "sts": "statefulset",
    "ds": "daemonset",
    "rs": "replicaset",
    "hpa": "horizontalpodautoscaler",
    "ing": "ingress",
    "netpol": "networkpolicy",
    "ingresses": "ingress",
    "networkpolicies": "networkpolicy",
}
SCALABLE = {"deployment": apps_v1.Deployment.Scale, "statefulset": apps_v1.StatefulSet.Scale}


class ToolError(Exception):
    """A tool call the agent cannot make as asked (unknown kind, bad arguments); told to the model."""


def resolve_kind(kind: Any) -> tuple[str, type[Resource]]:
    if not isinstance(kind, str) or not kind.strip():
        raise ToolError("'kind' must be a resource kind such as 'deployment' or 'pods'")
    key = kind.strip().lower().split(".")[0]
    key = ALIASES.get(key, key)
    if key not in KINDS and key.endswith("s"):
        key = ALIASES.get(key[:-1], key[:-1])
    if key not in KINDS:
        raise ToolError(f"unknown kind {kind!r}; known: {', '.join(sorted(KINDS))}")
    return key, KINDS[key]


def _is_namespaced(resource: type[Resource]) -> bool:
    return issubclass(resource, NamespacedResource)


def _name(arguments: Mapping[str, Any]) -> str:
    name = arguments.get("name")
    if not isinstance(name, str) or not name:
        raise ToolError("'name' is required")
    return name


def _plain(obj: Any) -> Any:
    data = obj.to_dict() if hasattr(obj, "to_dict") else obj
    if isinstance(data, dict):
        data.get("metadata", {}).pop("managedFields", None)
    return data


def _parameters(properties: dict[str, Any], required: list[str]) -> dict[str, Any]:
    return {"type": "object", "properties": properties, "required": required, "additionalProperties": False}


_KIND = {"type": "string", "description": "resource kind, e.g. pod, deployment, configmap, service, hpa"}
_NAME = {"type": "string", "description": "object name"}
_NAMESPACE = {"type": "string", "description": "namespace (default: your kubeconfig's namespace)"}

TOOL_SPECS: list[dict[str, Any]] = [
    {
        "name": "list",
        "description": "List objects of a kind in a namespace (or in every namespace with all_namespaces).",
        "parameters": _parameters(
            {
                "kind": _KIND,
                "namespace": _NAMESPACE,
                "all_namespaces": {"type": "boolean"},
                "label_selector": {"type": "string", "description": "e.g. app=web,tier!=cache"},
            },
            ["kind"],
        ),
    },
    {
        "name": "get",
        "description": "Get one object as JSON.",
        "parameters": _parameters({"kind": _KIND, "name": _NAME, "namespace": _NAMESPACE}, ["kind", "name"]),
    },
    {
        "name": "describe",
        "description": "Get one object and the recent events about it.",
        "parameters": _parameters({"kind": _KIND, "name": _NAME, "namespace": _NAMESPACE}, ["kind", "name"]),
    },
    {
        "name": "apply",
        "description": "Create or update an object from a full manifest (server-side apply).",
        "parameters": _parameters(
            {"manifest": {"type": "object", "description": "the object, with apiVersion, kind, metadata"}},
            ["manifest"],
        ),
    },
    {
        "name": "patch",
        "description": "Change fields of one object with a JSON merge patch.",
        "parameters": _parameters(
            {"kind": _KIND, "name": _NAME, "namespace": _NAMESPACE, "patch": {"type": "object"}},
            ["kind", "name", "patch"],
        ),
    },
    {
        "name": "scale",
        "description": "Set the replica count of a deployment or statefulset.",
        "parameters": _parameters(
            {
                "kind": _KIND,
                "name": _NAME,
                "namespace": _NAMESPACE,
                "replicas": {"type": "integer", "minimum": 0},
            },
            ["kind", "name", "replicas"],
        ),
    },
    {
        "name": "delete",
        "description": "Delete one object.",
        "parameters": _parameters({"kind": _KIND, "name": _NAME, "namespace": _NAMESPACE}, ["kind", "name"]),
    },
]


class Tools:
    """The kubectl-like tools, performed as the principal of one kubeconfig."""

    def __init__(self, client: AsyncClient, namespace: str, *, max_listed: int = 100) -> None:
        self.client: Any = client  # lightkube's overloads type calls by class; ours are chosen at run time
        self.namespace = namespace
        self.max_listed = max_listed

    def _namespace(self, resource: type[Resource], arguments: Mapping[str, Any]) -> str | None:
        if not _is_namespaced(resource):
            return None
        ns = arguments.get("namespace")
        return ns if isinstance(ns, str) and ns else self.namespace

    async def call(self, tool: str, arguments: Mapping[str, Any]) -> Any:
        handler: Callable[[Mapping[str, Any]], Awaitable[Any]] | None = getattr(self, f"tool_{tool}", None)
        if handler is None:
            raise ToolError(f"unknown tool {tool!r}")
        return await handler(arguments)

    async def tool_list(self, arguments: Mapping[str, Any]) -> Any:
        _, resource = resolve_kind(arguments.get("kind"))
        namespace = self._namespace(resource, arguments)
        if namespace is not None and arguments.get("all_namespaces") is True:
            namespace = ALL_NS
        selector = arguments.get("label_selector")
        labels = _parse_selector(selector) if isinstance(selector, str) and selector else None
        items = []
        async for item in self.client.list(resource, namespace=namespace, labels=labels):
            items.append(_plain(item))
            if len(items) >= self.max_listed:
                break
        return {"items": items}

    async def tool_get(self, arguments: Mapping[str, Any]) -> Any:
        _, resource = resolve_kind(arguments.get("kind"))
        return _plain(
            await self.client.get(resource, _name(arguments), namespace=self._namespace(resource, arguments))
        )

    async def tool_describe(self, arguments: Mapping[str, Any]) -> Any:
        _, resource = resolve_kind(arguments.get("kind"))
        name = _name(arguments)
        namespace = self._namespace(resource, arguments)
        obj = _plain(await self.client.get(resource, name, namespace=namespace))
        events = []
        async for event in self.client.list(
            core_v1.Event, namespace=namespace or self.namespace, fields={"involvedObject.name": name}
        ):
            e = _plain(event)
            events.append({k: e.get(k) for k in ("type", "reason", "message", "count", "lastTimestamp")})
            if len(events) >= 20:
                break
        return {"object": obj, "events": events}

    async def tool_apply(self, arguments: Mapping[str, Any]) -> Any:
        manifest = arguments.get("manifest")
        if isinstance(manifest, str):
            try:
                manifest = yaml.safe_load(manifest)
            except yaml.YAMLError as exc:
                raise ToolError(f"the manifest is not YAML or JSON: {exc}") from None
        if not isinstance(manifest, dict):
            raise ToolError("'manifest' must be an object with apiVersion, kind and metadata")
        try:
            obj = codecs.from_dict(manifest)
        except Exception as exc:  # lightkube raises several types for an unknown or malformed kind
            raise ToolError(f"cannot read the manifest: {exc}") from None
        namespace = None
        if _is_namespaced(type(obj)):
            namespace = (manifest.get("metadata") or {}).get("namespace") or self.namespace
        return _plain(
            await self.client.apply(obj, namespace=namespace, field_manager=FIELD_MANAGER, force=True)
        )

    async def tool_patch(self, arguments: Mapping[str, Any]) -> Any:
        _, resource = resolve_kind(arguments.get("kind"))
        patch = arguments.get("patch")
        if not isinstance(patch, dict):
            raise ToolError("'patch' must be an object (a JSON merge patch)")
        return _plain(
            await self.client.patch(
                resource,
                _name(arguments),
                patch,
                namespace=self._namespace(resource, arguments),
                patch_type=PatchType.MERGE,
            )
        )

    async def tool_scale(self, arguments: Mapping[str, Any]) -> Any:
        key, resource = resolve_kind(arguments.get("kind"))
        if key not in SCALABLE:
            raise ToolError(f"cannot scale a {key}; scalable kinds: {', '.join(sorted(SCALABLE))}")
        replicas = arguments.get("replicas")
        if not isinstance(replicas, int) or isinstance(replicas, bool) or replicas < 0:
            raise ToolError("'replicas' must be a whole number, 0 or more")
        scaled = await self.client.patch(
            SCALABLE[key],
            _name(arguments),
            {"spec": {"replicas": replicas}},
            namespace=self._namespace(resource, arguments),
            patch_type=PatchType.MERGE,
        )
        return _plain(scaled)

    async def tool_delete(self, arguments: Mapping[str, Any]) -> Any:
        _, resource = resolve_kind(arguments.get("kind"))
        name = _name(arguments)
        await self.client.delete(resource, name, namespace=self._namespace(resource, arguments))
        return {"deleted": name}


def _parse_selector(selector: str) -> dict[str, Any]:
    """``a=b,c!=d,e`` as lightkube label filters (equality, inequality, existence)."""
    out: dict[str, Any] = {}
    for term in (t.strip() for t in selector.split(",")):
        if not term:
            continue
        if "!=" in term:
            key, value = term.split("!=", 1)
            out[key.strip()] = operators.not_equal(value.strip())
        elif "=" in term:
            key, value = term.split("=", 1)
            out[key.strip()] = value.strip().lstrip("=")
        else:
            out[term] = None
    return out


# -- the model ---------------------------------------------------------------------------------------


class ModelFailure(Exception):
    """The model endpoint could not be used: the agent's own infrastructure failed."""


@dataclass(frozen=True)
class Settings:
    base_url: str
    model: str
    api_key: str | None = field(default=None, repr=False)
    max_steps: int = 10
    max_tool_calls_per_step: int = 8
    max_tool_result_chars: int = 8000
    max_answer_chars: int = 8000
    max_reply_bytes: int = 4 * 1024 * 1024
    max_tokens: int = 1024
    temperature: float = 0.0
    model_timeout_seconds: float = 60.0
    scenario_deadline_seconds: float = 240.0
    kube_timeout_seconds: float = 15.0


class ChatModel:
    """An OpenAI-compatible ``/chat/completions`` endpoint with tool calling."""

    def __init__(self, settings: Settings) -> None:
        self.settings = settings
        headers = {"Accept-Encoding": "identity"}
        if settings.api_key:
            headers["Authorization"] = f"Bearer {settings.api_key}"
        self._http = httpx.AsyncClient(
            base_url=settings.base_url.rstrip("/") + "/",
            headers=headers,
            timeout=httpx.Timeout(settings.model_timeout_seconds),
            follow_redirects=False,
            trust_env=False,
        )

    async def close(self) -> None:
        await self._http.aclose()

    async def complete(self, messages: list[dict[str, Any]]) -> dict[str, Any]:
        """One model turn. Returns the completion (``choices[0].message`` and ``model``)."""
        body = {
            "model": self.settings.model,
            "messages": messages,
            "tools": [{"type": "function", "function": spec} for spec in TOOL_SPECS],
            "tool_choice": "auto",
            "temperature": self.settings.temperature,
            "max_tokens": self.settings.max_tokens,
        }
        try:
            async with self._http.stream("POST", "chat/completions", json=body) as reply:
                chunks: list[bytes] = []
                size = 0
                async for chunk in reply.aiter_bytes():
                    size += len(chunk)
                    if size > self.settings.max_reply_bytes:
                        raise ModelFailure(f"the model's reply passed {self.settings.max_reply_bytes} bytes")
                    chunks.append(chunk)
                status = reply.status_code
        except httpx.HTTPError as exc:
            raise ModelFailure(f"the model endpoint failed: {type(exc).__name__}: {exc}") from None
        raw = b"".join(chunks)
        if not 200 <= status < 300:
            raise ModelFailure(
                f"the model endpoint answered {status}: {raw[:300].decode('utf-8', 'replace')}"
            )
        try:
            data = json.loads(raw)
            message = data["choices"][0]["message"]
        except (ValueError, KeyError, IndexError, TypeError):
            raise ModelFailure("the model's reply is not a chat completion") from None
        if not isinstance(message, dict):
            raise ModelFailure("the model's reply has no message")
        return {
            "message": message,
            "model": data.get("model") if isinstance(data.get("model"), str) else None,
        }


# -- one scenario ------------------------------------------------------------------------------------


def _clip(text: str, limit: int) -> str:
    if len(text) <= limit:
        return text
    return text[:limit] + f"... [{len(text) - limit} more characters cut]"


def _json(value: Any) -> str:
    return json.dumps(value, separators=(",", ":"), sort_keys=True, default=str)


class Agent:
    """Turns a scenario request into a conversation with the model and an answer in the contract."""

    def __init__(self, settings: Settings, kubeconfig_file: str | None = None) -> None:
        """``kubeconfig_file``: the start-up credential, for an evaluator that hands the agent its
        credentials in advance (the provider API's provision answer) instead of in each request."""
        self.settings = settings
        self.kubeconfig_file = kubeconfig_file

    def _kubeconfig(self, environment: object) -> str | None:
        """The request's kubeconfig; else the start-up one, read now (its token may have been rotated)."""
        given = environment.get("kubeconfig") if isinstance(environment, dict) else None
        if isinstance(given, str) and given:
            return given
        if self.kubeconfig_file is None:
            return None
        try:
            with open(self.kubeconfig_file, encoding="utf-8") as file:
                return file.read()
        except OSError:
            return None

    def identity_and_configuration(self) -> dict[str, Any]:
        s = self.settings
        return {
            "identity": {
                "name": NAME,
                "version": VERSION,
                "description": "tool-using LLM agent over an OpenAI-compatible endpoint (example)",
                "declared_model": s.model,
                "system_prompt_hash": hashlib.sha256(SYSTEM_PROMPT.encode()).hexdigest(),
            },
            "configuration": {
                "base_url": s.base_url,
                "max_steps": s.max_steps,
                "max_tool_calls_per_step": s.max_tool_calls_per_step,
                "max_tool_result_chars": s.max_tool_result_chars,
                "temperature": s.temperature,
                "tools": [spec["name"] for spec in TOOL_SPECS],
            },
        }

    async def answer(self, request: Mapping[str, Any]) -> dict[str, Any]:
        prompt = request.get("prompt")
        if not isinstance(prompt, str) or not prompt:
            return failure("the request has no prompt")
        environment = request.get("environment")
        environment = environment if isinstance(environment, dict) else {}
        kubeconfig_text = self._kubeconfig(environment)
        if kubeconfig_text is None:
            return failure(
                "no kubeconfig in the request and none given at start-up (--kubeconfig), so the cluster "
                "cannot be reached"
            )
        scope = request.get("scope")
        scope = scope if isinstance(scope, dict) else {}
        scope_namespaces = [ns for ns in (scope.get("namespaces") or []) if isinstance(ns, str)]
        try:
            config = KubeConfig.from_dict(yaml.safe_load(kubeconfig_text))
            kube = AsyncClient(
                config=config, trust_env=False, timeout=kube_http.Timeout(self.settings.kube_timeout_seconds)
            )
        except Exception as exc:  # whatever a malformed kubeconfig makes the loader raise
            return failure(f"the kubeconfig cannot be used: {type(exc).__name__}")
        namespace = environment.get("namespace") or kube.namespace
        model = ChatModel(self.settings)
        state: dict[str, Any] = {"actions": [], "reasoning": [], "model": None}
        try:
            async with asyncio.timeout(self.settings.scenario_deadline_seconds):
                final = await self._converse(
                    model, Tools(kube, namespace), prompt, namespace, scope_namespaces, state
                )
        except TimeoutError:
            return failure(
                f"no answer within {self.settings.scenario_deadline_seconds:g}s",
                state["actions"],
                state["model"],
            )
        except ModelFailure as exc:
            return failure(str(exc), state["actions"], state["model"])
        finally:
            await model.close()
            await kube.close()
        return {
            "actions": state["actions"],
            "reasoning": _clip("\n".join(state["reasoning"]), self.settings.max_answer_chars),
            "final_answer": _clip(final, self.settings.max_answer_chars),
            "model": state["model"],
        }

    async def _converse(
        self,
        model: ChatModel,
        tools: Tools,
        prompt: str,
        namespace: str,
        scope: list[str],
        state: dict[str, Any],
    ) -> str:
        s = self.settings
        system = SYSTEM_PROMPT.format(namespace=namespace, scope=", ".join(scope) or namespace)
        messages: list[dict[str, Any]] = [
            {"role": "system", "content": system},
            {"role": "user", "content": prompt},  # the operator's prompt, as given
        ]
        for step in range(s.max_steps):
            turn = await model.complete(messages)
            state["model"] = turn["model"] or state["model"]
            message = turn["message"]
            content = message.get("content") if isinstance(message.get("content"), str) else ""
            calls = message.get("tool_calls") if isinstance(message.get("tool_calls"), list) else []
            if not calls:
                return content
            if content:
                state["reasoning"].append(content)
            # Every call gets an id (some servers omit it), so each result can answer its call.
            calls = [
                {**c, "id": str(c.get("id") or f"call-{step}-{i}")}
                if isinstance(c, dict)
                else {"id": f"call-{step}-{i}"}
                for i, c in enumerate(calls[: s.max_tool_calls_per_step])
            ]
            messages.append({"role": "assistant", "content": content or None, "tool_calls": calls})
            for call in calls:
                text = await self._perform(tools, call, state)
                messages.append({"role": "tool", "tool_call_id": call["id"], "content": text})
        return f"I stopped after {s.max_steps} steps without finishing."

    async def _perform(self, tools: Tools, call: dict[str, Any], state: dict[str, Any]) -> str:
        """Perform one tool call and record it as an action; return what the model is told."""
        started = time.monotonic()
        call_id = call["id"]
        function = call.get("function")
        function = function if isinstance(function, dict) else {}
        name = str(function.get("name") or "")
        arguments: Any = function.get("arguments") or "{}"
        result: Any = None
        error: str | None = None
        code: str | None = None
        try:
            if isinstance(arguments, str):
                try:
                    arguments = json.loads(arguments)
                except ValueError:
                    raise ToolError("the arguments are not valid JSON") from None
            if not isinstance(arguments, dict):
                raise ToolError("the arguments must be a JSON object")
            result = await tools.call(name, arguments)
        except ToolError as exc:
            error, code = str(exc), "invalid_arguments"
        except ApiError as exc:
            error = f"{exc.status.code} {exc.status.reason}: {exc.status.message}"
            code = str(exc.status.reason or "error").lower()
        except (kube_http.HTTPError, OSError, ValueError) as exc:  # the API server unreachable or refusing
            error, code = f"{type(exc).__name__}: {exc}", "error"
        text = _clip(_json(result), self.settings.max_tool_result_chars) if error is None else ""
        action: dict[str, Any] = {
            "id": call_id,
            "tool": name or "(none)",
            "arguments": arguments if isinstance(arguments, dict) else {"raw": _clip(str(arguments), 1000)},
            "result": text,
            "duration_ms": round((time.monotonic() - started) * 1000),  # whole milliseconds
        }
        if error is not None:
            action["error"] = _clip(error, 2000)
            action["error_code"] = code
        state["actions"].append(action)
        return text if error is None else f"error: {action['error']}"


def failure(
    cause: str, actions: list[dict[str, Any]] | None = None, model: str | None = None
) -> dict[str, Any]:
    """The contract's agent failure report (with whatever was done before the failure)."""
    out: dict[str, Any] = {
        "actions": actions or [],
        "reasoning": "",
        "final_answer": "",
        "agent_failure": {"cause": _clip(cause, 1000)},
    }
    if model:
        out["model"] = model
    return out


# -- the HTTP server ---------------------------------------------------------------------------------


def make_app(agent: Agent, token: str | None = None) -> web.Application:
    """The contract's two endpoints. With ``token``, a request must carry it as a bearer token (the
    evaluator sends the one its run names), so nobody else spends the model's budget."""

    def authorised(request: web.Request) -> bool:
        if not token:
            return True
        return hmac.compare_digest(request.headers.get("Authorization", ""), f"Bearer {token}")

    async def identity(request: web.Request) -> web.Response:
        if not authorised(request):
            return web.json_response({"error": "unauthorised"}, status=401)
        return web.json_response(agent.identity_and_configuration())

    async def execute(request: web.Request) -> web.Response:
        if not authorised(request):
            return web.json_response({"error": "unauthorised"}, status=401)
        try:
            body = json.loads(await request.read())
        except ValueError:
            return web.json_response({"error": "the request body is not JSON"}, status=400)
        if not isinstance(body, dict):
            return web.json_response({"error": "the request body is not a JSON object"}, status=400)
        return web.json_response(await agent.answer(body))

    app = web.Application(client_max_size=MAX_REQUEST_BYTES)
    app.router.add_get("/identity-and-configuration", identity)
    app.router.add_post("/", execute)
    return app


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="llm-agent", description=__doc__.splitlines()[0])
    parser.add_argument("--base-url", default=os.environ.get("OPENAI_BASE_URL", "https://api.openai.com/v1"))
    parser.add_argument("--model", default=os.environ.get("OPENAI_MODEL"))
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8092)
    parser.add_argument("--max-steps", type=int, default=10)
    parser.add_argument("--deadline", type=float, default=240.0, help="seconds per scenario")
    parser.add_argument(
        "--kubeconfig",
        default=os.environ.get("KUBECONFIG") or None,
        help="the credential to use when a request carries none (an evaluator that configures the agent in "
        "advance, as the provider API's provision answer does); default $KUBECONFIG. A request's own wins",
    )
    args = parser.parse_args(argv)
    if not args.model:
        parser.error("--model (or OPENAI_MODEL) is required")
    if args.max_steps < 1 or args.deadline <= 0:
        parser.error("--max-steps and --deadline must be positive")
    settings = Settings(
        base_url=args.base_url,
        model=args.model,
        api_key=os.environ.get("OPENAI_API_KEY"),  # never a command-line argument: it would show in ps
        max_steps=args.max_steps,
        scenario_deadline_seconds=args.deadline,
    )
    print(f"{NAME} {VERSION} serving on http://{args.host}:{args.port}", flush=True)
    token = os.environ.get("AGENT_TOKEN") or None
    web.run_app(make_app(Agent(settings, args.kubeconfig), token), host=args.host, port=args.port, print=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
