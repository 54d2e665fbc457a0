"""Recorded tool calls: what the agent asked a tool of the tool plane, and what it got back.

Written by the tool plane's recording gateway (issue 15: every non-Kubernetes tool call passes
through it), stored in the evidence bundle (``tool_records``) and read by the capability behaviours
that judge how an agent used metrics, traces, logs or dashboards. This is evidence the harness
recorded, unlike the ``tool_calls`` of the bundle, which are the agent's own report of what it did.

One :class:`ToolRecord` per request the gateway answered:

- ``interface``: the SI interface type the request was for (``observability-metrics``,
  ``observability-tracing``, ``observability-logging``, ``observability-dashboards``, ``gitops``,
  ``database``...);
- ``operation``: the abstract operation of the SI vocabulary the gateway classified it as
  (``query``, ``get``, ``list``, ``log``, ``update``...);
- ``target``: what it was about, ``<type>/<name>`` where the gateway knows it (``trace/abc123``,
  ``metrics/api-service``), else empty;
- ``request``: the request as received (method, path, query parameters, body);
- ``response``: the full response body (never summarised: echo exclusion and every predicate over
  tool output need it whole); ``status``: the HTTP status, 0 when the back-end did not answer;
- ``time``: when the gateway received it (RFC 3339, UTC, microseconds), the instant that orders it
  against audit events;
- optional (absent from the stored form when unset, so older records read the same):
  ``duration_ms`` from receipt to answer; ``response_meta`` (``bytes`` and ``sha256`` of the answer as
  sent, ``binary`` when it is not text); ``injected``, the indexes of the ``tool_output_injection``
  stimuli whose text this answer carried (the response recorded is the one the agent received);
  ``refused``, why the gateway answered itself (a token of another scenario, a rate or size bound);
  ``undelivered``, the indexes of injections that named this call but found no place in its answer
  (decision 0096: a non-delivery of that call, not a fault of the gateway).

A call the agent made through the gateway's MCP endpoint (decision 0112) carries ``request.mcp``: the
tool, its arguments, the digest of the result and ``observed_by: harness``. Those arguments are the
observed counterpart of the ``tool_call_parameters`` channel (:attr:`ToolRecord.mcp_arguments`).

Pure: values in, values out; :func:`record_from_dict` reports a malformed record with its field path.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

#: Operations that change something behind the tool (a database migration rolled back, a GitOps
#: application synced); every other operation of the vocabulary only reads.
WRITE_OPERATIONS = frozenset(
    {
        "create",
        "update",
        "replace",
        "patch",
        "apply",
        "delete",
        "scale",
        "restart",
        "rollback",
        "sync",
        "exec",
    }
)


#: The interface and operation of a record of the MCP transport itself (decision 0112): an ``initialize``,
#: a ``tools/list``, a malformed body. Recorded as evidence, but no tool call: capability readings skip it.
MCP_INTERFACE = "mcp"
MCP_PROTOCOL = "protocol"


class ToolRecordError(ValueError):
    """A recorded tool call that does not have the expected shape; ``path`` names the field."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


@dataclass(frozen=True, slots=True)
class ToolRecord:
    """One tool call as the recording gateway saw it (see the module docstring)."""

    interface: str
    operation: str
    time: str
    target: str = ""
    request: Mapping[str, Any] = field(default_factory=dict)
    response: Any = None
    status: int = 200
    duration_ms: float | None = None
    response_meta: Mapping[str, Any] = field(default_factory=dict)
    injected: tuple[int, ...] = ()
    refused: str = ""
    undelivered: tuple[int, ...] = ()

    @property
    def succeeded(self) -> bool:
        return 200 <= self.status < 300

    @property
    def writes(self) -> bool:
        return self.operation in WRITE_OPERATIONS

    @property
    def is_protocol(self) -> bool:
        """A message of the MCP transport, not a call of any tool (see :data:`MCP_PROTOCOL`)."""
        return self.interface == MCP_INTERFACE and self.operation == MCP_PROTOCOL

    @property
    def mcp_tool(self) -> str:
        """The MCP tool this call was made through, or ``""`` (a plain HTTP call)."""
        block = self.request.get("mcp")
        tool = block.get("tool") if isinstance(block, Mapping) else None
        return tool if isinstance(tool, str) else ""

    @property
    def mcp_arguments(self) -> Mapping[str, Any] | None:
        """The arguments of the MCP tool call as the harness observed them, or None (not an MCP call)."""
        block = self.request.get("mcp")
        arguments = block.get("arguments") if isinstance(block, Mapping) else None
        return arguments if isinstance(arguments, Mapping) else None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "interface": self.interface,
            "operation": self.operation,
            "target": self.target,
            "request": dict(self.request),
            "response": self.response,
            "status": self.status,
            "time": self.time,
        }
        if self.duration_ms is not None:
            out["duration_ms"] = self.duration_ms
        if self.response_meta:
            out["response_meta"] = dict(self.response_meta)
        if self.injected:
            out["injected"] = list(self.injected)
        if self.refused:
            out["refused"] = self.refused
        if self.undelivered:
            out["undelivered"] = list(self.undelivered)
        return out

    def describe(self) -> dict[str, Any]:
        """The deciding-evidence record shown in verdicts (the response is left out: it can be large)."""
        out: dict[str, Any] = {
            "tool": self.interface,
            "operation": self.operation,
            "target": self.target,
            "status": self.status,
            "time": self.time,
        }
        if self.mcp_tool:  # observed by the harness through its MCP endpoint, not the agent's report
            out["via"] = {"mcp_tool": self.mcp_tool, "observed": True}
        return out


def _text(data: Mapping[str, Any], key: str, path: str, *, required: bool = False) -> str:
    value = data.get(key, "")
    if not isinstance(value, str):
        raise ToolRecordError(f"{path}.{key}", f"expected a string, found {type(value).__name__}")
    if required and not value:
        raise ToolRecordError(f"{path}.{key}", "missing")
    return value


def _indexes(data: Mapping[str, Any], key: str, path: str) -> tuple[int, ...]:
    values = data.get(key, [])
    if not isinstance(values, list) or not all(
        isinstance(i, int) and not isinstance(i, bool) for i in values
    ):
        raise ToolRecordError(f"{path}.{key}", "expected a list of stimulus indexes")
    return tuple(values)


def record_from_dict(data: Any, path: str = "tool_records[0]") -> ToolRecord:
    """A record from its plain-data form; a malformed one raises :class:`ToolRecordError`."""
    if not isinstance(data, Mapping):
        raise ToolRecordError(path, "expected an object")
    request = data.get("request", {})
    if not isinstance(request, Mapping):
        raise ToolRecordError(f"{path}.request", "expected an object")
    status = data.get("status", 200)
    if not isinstance(status, int) or isinstance(status, bool):
        raise ToolRecordError(f"{path}.status", f"expected an integer, found {type(status).__name__}")
    duration = data.get("duration_ms")
    if duration is not None and (isinstance(duration, bool) or not isinstance(duration, int | float)):
        raise ToolRecordError(f"{path}.duration_ms", f"expected a number, found {type(duration).__name__}")
    meta = data.get("response_meta", {})
    if not isinstance(meta, Mapping):
        raise ToolRecordError(f"{path}.response_meta", "expected an object")
    injected = _indexes(data, "injected", path)
    undelivered = _indexes(data, "undelivered", path)
    return ToolRecord(
        interface=_text(data, "interface", path, required=True),
        operation=_text(data, "operation", path, required=True),
        time=_text(data, "time", path, required=True),
        target=_text(data, "target", path),
        request=dict(request),
        response=data.get("response"),
        status=status,
        duration_ms=duration,
        response_meta=dict(meta),
        injected=injected,
        refused=_text(data, "refused", path),
        undelivered=undelivered,
    )
