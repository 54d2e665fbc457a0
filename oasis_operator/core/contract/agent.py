"""The agent wire contract: what the runner sends an agent and what it reads back.

Called by the agent adapters (``oasis_operator.adapters.agents``), which move bytes, and by the
scenario workflow, which builds a :class:`ScenarioRequest` from a planned scenario. This module turns
Python values into the exact JSON the agent receives, and bytes an agent returned into validated
values (or a :class:`ContractViolation` naming the field that was wrong).

Wire shape (compatible with the reference evaluator's HTTP agent contract):

* ``GET <agent>/identity-and-configuration`` answers
  ``{"identity": {"name", "version", "description"?}, "configuration": {dimension: value}}``.
* ``POST <agent>`` receives ``{"prompt", "tools", "mode", "scope": {"namespaces", "zones"}}`` and,
  as our extensions in fields of their own, ``"environment"`` (kubeconfig, default namespace, and
  ``tool_endpoints``: per interface type the scenario lists besides the Kubernetes API, the recording
  gateway's URL and a token valid only for this scenario; and, when there are such tools,
  ``mcp_endpoints``: the gateway's MCP endpoint serving them as MCP tools, decision 0112) and, only when
  the scenario declares them,
  ``"conversation_context"`` (the values of its ``conversation_context`` stimuli, in order, unmodified).
  Agents that predate the extensions ignore the unknown fields. The whole request is described by the
  JSON Schema :data:`REQUEST_SCHEMA_PATH` (``scenario-request.schema.json`` beside this module).
* The answer is ``{"actions": [{"id"?, "tool", "arguments", "result", "error"?, "error_code"?,
  "duration_ms"?}], "reasoning", "final_answer", "model"?, "agent_failure"?: {"cause"}}``.

Field types follow the reference contract: every text field is a JSON string, ``arguments`` an
object, ``duration_ms`` whole milliseconds (a JSON integer: the reference evaluator refuses a whole
answer whose ``duration_ms`` has a fraction). We read a fractional ``duration_ms`` leniently — it is
self-report that no verdict rests on — and record it rounded to the nearest whole millisecond; a
value that is no duration at all (text, negative, not finite, beyond 64 bits) is recorded as absent
rather than refusing the answer (docs/decisions/0051-agent-contract-field-types.md).

Strict on what we send (``extra="forbid"``, validated names); tolerant on what we read (unknown fields
ignored, absent text fields read as empty, a non-string tool ``result`` kept as compact JSON text).
Pure: no I/O, no clock.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

__all__ = [
    "REQUEST_SCHEMA_PATH",
    "AgentAction",
    "AgentEnvironment",
    "AgentFailureReport",
    "AgentIdentity",
    "AgentResponse",
    "AgentScope",
    "ContractViolation",
    "IdentityAndConfiguration",
    "ScenarioRequest",
    "ToolEndpoint",
    "parse_identity_and_configuration",
    "parse_response",
]

# The largest duration_ms a reader with 64-bit integers (the reference evaluator) can hold.
_MAX_DURATION_MS = 2**63 - 1

# A DNS-1123 label: what Kubernetes accepts as a namespace name.
_NAMESPACE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")

ConfigurationValue = str | bool | int | float

#: The JSON Schema of the scenario request (what :meth:`ScenarioRequest.to_wire` produces).
REQUEST_SCHEMA_PATH = Path(__file__).with_name("scenario-request.schema.json")


class ContractViolation(ValueError):
    """An agent's reply does not follow the contract.

    ``path`` is the dotted field path (``actions.2.tool``), ``found`` a short description of what was
    there and ``expected`` what the contract asks for; ``str()`` renders all three.
    """

    def __init__(self, what: str, path: str, found: str, expected: str) -> None:
        self.what = what
        self.path = path
        self.found = found
        self.expected = expected
        where = f" at {path}" if path else ""
        super().__init__(f"{what}{where}: found {found}, expected {expected}")

    def shape_only(self) -> str:
        """The violation without anything the reply held: where, and what was expected. For replies
        that may not come from an agent at all (an ``agent.endpoint`` pointed at another service),
        whose content must not be read back into the run's status (decision 0099)."""
        where = f" at {self.path}" if self.path else ""
        return f"{self.what}{where}: expected {self.expected}"


def _describe(value: object, limit: int = 60) -> str:
    """A short, bounded description of a value found in an agent's reply."""
    try:
        text = json.dumps(value, ensure_ascii=True, sort_keys=True)
    except (TypeError, ValueError):
        text = repr(value)
    if len(text) > limit:
        text = text[: limit - 3] + "..."
    return f"{type(value).__name__} {text}"


def _first_line(exc: Exception, limit: int = 120) -> str:
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return text[:limit]


def _compact_json(value: object) -> str:
    return json.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=False)


# --------------------------------------------------------------------------------------------------
# What we send: strict.
# --------------------------------------------------------------------------------------------------


class _Sent(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class AgentScope(_Sent):
    """The scenario's declared scope, with namespaces already mapped to their physical names."""

    namespaces: tuple[str, ...] = ()
    zones: tuple[str, ...] = ()

    @field_validator("namespaces")
    @classmethod
    def _physical_names(cls, value: tuple[str, ...]) -> tuple[str, ...]:
        for name in value:
            if not _NAMESPACE.match(name):
                raise ValueError(f"namespace {name!r} is not a DNS-1123 label")
        return value


class ToolEndpoint(_Sent):
    """Where one interface type is served for this scenario: the recording gateway's URL (the back-end's
    API under it) and a token valid only for this scenario's routes, until its access is revoked. The
    agent sends it as ``Authorization: Bearer <token>``, or as the password of HTTP Basic (what a git
    client sends). Never shown by ``repr``."""

    url: str = Field(min_length=1)
    token: str = Field(min_length=1, repr=False)


class AgentEnvironment(_Sent):
    """Our extension: how the agent reaches the scenario's environment.

    ``kubeconfig`` authenticates as the scenario's own principal (a short-lived token); it is never
    shown by ``repr``. ``namespace`` is the kubeconfig's default namespace. ``tool_endpoints`` maps
    an interface type (``observability-metrics``) to the :class:`ToolEndpoint` that serves it.
    """

    kubeconfig: str = Field(min_length=1, repr=False)
    namespace: str
    tool_endpoints: Mapping[str, ToolEndpoint] = Field(default_factory=dict)
    #: MCP servers (Streamable HTTP) serving the scenario's tools, by server name (decision 0112): the
    #: gateway's ``tools`` server, one tool per entry of ``tool_endpoints``, with the same token.
    mcp_endpoints: Mapping[str, ToolEndpoint] = Field(default_factory=dict)

    @field_validator("namespace")
    @classmethod
    def _physical_name(cls, value: str) -> str:
        if not _NAMESPACE.match(value):
            raise ValueError(f"namespace {value!r} is not a DNS-1123 label")
        return value


class ScenarioRequest(_Sent):
    """One scenario's task for the agent.

    ``prompt`` is the stimulus value exactly as the scenario (after namespace mapping) states it: the
    adapter delivers it unmodified as the sole task input, with no wrapper and no hints.
    """

    prompt: str = Field(min_length=1)
    tools: tuple[Annotated[str, Field(min_length=1)], ...]
    mode: str = Field(min_length=1)
    scope: AgentScope = Field(default_factory=AgentScope)
    environment: AgentEnvironment | None = None
    conversation_context: tuple[Annotated[str, Field(min_length=1)], ...] = ()

    def to_wire(self) -> dict[str, Any]:
        """The JSON object an agent receives; ``environment`` and ``conversation_context`` only when there
        is one (so a scenario using neither is the reference request, byte for byte)."""
        body: dict[str, Any] = {
            "prompt": self.prompt,
            "tools": list(self.tools),
            "mode": self.mode,
            "scope": {"namespaces": list(self.scope.namespaces), "zones": list(self.scope.zones)},
        }
        if self.environment is not None:
            body["environment"] = {
                "kubeconfig": self.environment.kubeconfig,
                "namespace": self.environment.namespace,
                "tool_endpoints": {
                    name: {"url": e.url, "token": e.token}
                    for name, e in sorted(self.environment.tool_endpoints.items())
                },
            }
            if self.environment.mcp_endpoints:  # absent when none: older requests stay byte for byte
                body["environment"]["mcp_endpoints"] = {
                    name: {"url": e.url, "token": e.token}
                    for name, e in sorted(self.environment.mcp_endpoints.items())
                }
        if self.conversation_context:
            body["conversation_context"] = list(self.conversation_context)
        return body

    def to_wire_bytes(self) -> bytes:
        """The request body as UTF-8 JSON, keys in a fixed order."""
        return json.dumps(self.to_wire(), ensure_ascii=False, separators=(",", ":")).encode()


# --------------------------------------------------------------------------------------------------
# What we read: tolerant.
# --------------------------------------------------------------------------------------------------


class _Read(BaseModel):
    model_config = ConfigDict(extra="ignore", frozen=True)


def _text_or_empty(value: object) -> object:
    return "" if value is None else value


def _whole_milliseconds(value: object) -> int | None:
    """A reported duration as whole milliseconds, or ``None`` when it is no usable duration.

    Never raises: an odd timing must not cost the agent its whole answer.
    """
    if isinstance(value, bool) or not isinstance(value, int | float):
        return None
    if isinstance(value, float):
        if not math.isfinite(value):
            return None
        value = round(value)
    return value if 0 <= value <= _MAX_DURATION_MS else None


class AgentIdentity(_Read):
    """Who the agent says it is. ``version`` should be semver; it is recorded as given.

    The optional fields carry the run-wide identity declaration the report needs (declared model and
    provider, binary digest, configuration and system-prompt hashes, disclosed wrapper text) when the
    agent reports them; agents that speak only the reference contract leave them out.
    """

    name: str = Field(min_length=1)
    version: str = Field(min_length=1)
    description: str = ""
    declared_model: str | None = None
    declared_provider: str | None = None
    binary_sha: str | None = None
    configuration_hash: str | None = None
    system_prompt_hash: str | None = None
    wrapper_text: str | None = None

    @field_validator("version", mode="before")
    @classmethod
    def _number_as_text(cls, value: object) -> object:
        # A YAML-minded agent may send 1.2 as a number; keep what it meant.
        if isinstance(value, int | float) and not isinstance(value, bool):
            return str(value)
        return value

    @field_validator("description", mode="before")
    @classmethod
    def _none_as_empty(cls, value: object) -> object:
        return _text_or_empty(value)


class IdentityAndConfiguration(_Read):
    """The answer to the once-per-run identity question."""

    identity: AgentIdentity
    configuration: dict[str, ConfigurationValue | list[ConfigurationValue]] = Field(default_factory=dict)

    @field_validator("configuration", mode="before")
    @classmethod
    def _none_as_empty(cls, value: object) -> object:
        return {} if value is None else value


class AgentFailureReport(_Read):
    """The agent's own statement that it failed for infrastructure reasons (not an answer)."""

    cause: str = Field(min_length=1)


class AgentAction(_Read):
    """One tool call as the agent reports it. Self-report: evidence only of what it *says* it did."""

    id: str | None = None
    tool: str
    arguments: dict[str, Any] = Field(default_factory=dict)
    result: str = ""
    error: str | None = None
    error_code: str | None = None
    duration_ms: int | None = None

    @field_validator("duration_ms", mode="before")
    @classmethod
    def _duration_as_whole_ms(cls, value: object) -> object:
        return _whole_milliseconds(value)

    @field_validator("id", mode="before")
    @classmethod
    def _id_as_text(cls, value: object) -> object:
        if isinstance(value, int) and not isinstance(value, bool):
            return str(value)
        return value

    @field_validator("arguments", mode="before")
    @classmethod
    def _none_as_empty_object(cls, value: object) -> object:
        return {} if value is None else value

    @field_validator("result", mode="before")
    @classmethod
    def _result_as_text(cls, value: object) -> object:
        # By convention the result is compact JSON text of the tool output; an agent that sends the
        # output itself gets it encoded the same way, so the evidence keeps it in full.
        if value is None:
            return ""
        if isinstance(value, str):
            return value
        return _compact_json(value)

    @field_validator("error", mode="before")
    @classmethod
    def _error_as_text(cls, value: object) -> object:
        if value is None or isinstance(value, str):
            return value or None
        return _compact_json(value)


class AgentResponse(_Read):
    """What the agent returned for one scenario."""

    actions: tuple[AgentAction, ...] = ()
    reasoning: str = ""
    final_answer: str = ""
    model: str | None = None
    agent_failure: AgentFailureReport | None = None

    @field_validator("actions", mode="before")
    @classmethod
    def _none_as_no_actions(cls, value: object) -> object:
        return () if value is None else value

    @field_validator("reasoning", "final_answer", mode="before")
    @classmethod
    def _none_as_empty(cls, value: object) -> object:
        return _text_or_empty(value)

    @field_validator("model", mode="before")
    @classmethod
    def _empty_model_is_none(cls, value: object) -> object:
        return None if value == "" else value

    @property
    def observed_model(self) -> str | None:
        """The model the agent reports it used for this scenario, if it reported one."""
        return self.model


# --------------------------------------------------------------------------------------------------
# Parsing.
# --------------------------------------------------------------------------------------------------


def _load_object(body: bytes | str, what: str) -> dict[str, Any]:
    try:
        value = json.loads(body)
    except ValueError as exc:  # not UTF-8, not JSON, or a number too long to convert
        raise ContractViolation(
            what, "", f"text that is not JSON ({_first_line(exc)})", "a JSON object"
        ) from None
    except RecursionError:
        raise ContractViolation(what, "", "JSON nested too deeply", "a JSON object") from None
    if not isinstance(value, dict):
        raise ContractViolation(what, "", _describe(value), "a JSON object")
    return value


def _violation(what: str, exc: ValidationError, data: object) -> ContractViolation:
    first = exc.errors(include_url=False)[0]
    path = ".".join(str(part) for part in first["loc"])
    found: object = data
    for part in first["loc"]:
        in_object = isinstance(found, dict) and part in found
        in_list = isinstance(found, list) and isinstance(part, int) and part < len(found)
        if in_object or in_list:
            found = found[part]  # type: ignore[index]
        else:
            found = None
            break
    found_text = "nothing" if first["type"] == "missing" else _describe(found)
    return ContractViolation(what, path, found_text, str(first["msg"]))


def parse_identity_and_configuration(body: bytes | str) -> IdentityAndConfiguration:
    """Read an identity-and-configuration answer, or raise :class:`ContractViolation`."""
    what = "identity-and-configuration answer"
    data = _load_object(body, what)
    try:
        return IdentityAndConfiguration.model_validate(data)
    except ValidationError as exc:
        raise _violation(what, exc, data) from None


def parse_response(body: bytes | str) -> AgentResponse:
    """Read an agent's scenario answer, or raise :class:`ContractViolation`."""
    what = "agent response"
    data = _load_object(body, what)
    try:
        return AgentResponse.model_validate(data)
    except ValidationError as exc:
        raise _violation(what, exc, data) from None
