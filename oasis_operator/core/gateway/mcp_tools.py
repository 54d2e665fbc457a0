"""The MCP tools of a scenario (decision 0112): one per tool interface the recording gateway fronts
for it, each an HTTP request to that interface's route, and the checks an MCP tool call passes before
it is forwarded.

Pure: values in, values out. The adapter (:mod:`oasis_operator.adapters.gateway.mcp_endpoint`) serves
them with the official ``mcp`` SDK and forwards an admitted call through the gateway's own route, so
an MCP call is bounded, injected, withheld and recorded exactly as the same HTTP call would be.

- :func:`tool_name`: the tool serving an interface (``resource-metrics`` -> ``resource_metrics``);
- :func:`tool_definitions`: name, description and input schema of each tool;
- :func:`admitted_call`: an :class:`McpCall` (the HTTP request the call stands for) or a
  :class:`McpRefusal` (unknown tool, argument over :data:`MAX_ARGUMENT_BYTES`, wrong shape), which
  the gateway records and answers as a tool error; it never faults the scenario.
- :func:`mcp_block`: what a gateway record carries of the MCP call (``request.mcp``): tool, arguments,
  the digest of the result, and ``observed_by: harness``.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from oasis_operator.core.evidence.tool_records import MCP_INTERFACE, ToolRecord

__all__ = [
    "MAX_ARGUMENT_BYTES",
    "MCP_INTERFACE",
    "METHODS",
    "McpCall",
    "McpRefusal",
    "admitted_call",
    "mcp_block",
    "refusal_record",
    "tool_definitions",
    "tool_name",
]

#: The largest MCP tool call arguments, JSON-encoded (bytes); a larger call is refused and recorded.
MAX_ARGUMENT_BYTES = 64 << 10
#: The HTTP methods a tool may send to its interface's route.
METHODS = ("GET", "POST", "PUT", "PATCH", "DELETE", "HEAD")
_ARGUMENTS = frozenset({"method", "path", "query", "body"})


def tool_name(interface: str) -> str:
    return interface.replace("-", "_")


def tool_definitions(interfaces: Iterable[str]) -> list[dict[str, Any]]:
    """The tools of a scenario that fronts ``interfaces`` (sorted, one each)."""
    out = []
    for interface in sorted(set(interfaces)):
        out.append(
            {
                "name": tool_name(interface),
                "description": (
                    f"An HTTP request to this scenario's {interface} tool (the same route as its "
                    "gateway URL in the contract's environment); answers the response body."
                ),
                "inputSchema": {
                    "type": "object",
                    "properties": {
                        "method": {"type": "string", "enum": list(METHODS), "default": "GET"},
                        "path": {"type": "string", "description": "the path below the tool's URL"},
                        "query": {
                            "type": "object",
                            "additionalProperties": {"type": "string"},
                            "description": "query parameters",
                        },
                        "body": {"type": "string", "description": "the request body (text)"},
                    },
                    "required": ["path"],
                    "additionalProperties": False,
                },
            }
        )
    return out


@dataclass(frozen=True, slots=True)
class McpCall:
    """The HTTP request an admitted MCP tool call stands for."""

    tool: str
    interface: str
    method: str
    path: str
    query: Mapping[str, str] = field(default_factory=dict)
    body: str = ""


@dataclass(frozen=True, slots=True)
class McpRefusal:
    """Why an MCP tool call was not forwarded (recorded, answered as a tool error)."""

    tool: str
    reason: str


def _shape_problem(arguments: Mapping[str, Any]) -> str:
    unknown = sorted(set(arguments) - _ARGUMENTS)
    if unknown:
        return f"unknown argument {unknown[0]!r} (expected {', '.join(sorted(_ARGUMENTS))})"
    if not isinstance(arguments.get("path"), str):
        return "argument 'path': expected a string"
    if arguments.get("method", "GET") not in METHODS:
        return f"argument 'method': expected one of {', '.join(METHODS)}"
    query = arguments.get("query", {})
    if not isinstance(query, Mapping) or not all(isinstance(v, str) for v in query.values()):
        return "argument 'query': expected an object of strings"
    if not isinstance(arguments.get("body", ""), str):
        return "argument 'body': expected a string"
    return ""


def admitted_call(
    tool: str, arguments: Mapping[str, Any] | None, interfaces: Iterable[str]
) -> McpCall | McpRefusal:
    """The call to forward, or why it is refused (see the module docstring)."""
    served = {tool_name(i): i for i in interfaces}
    if tool not in served:
        return McpRefusal(tool, f"unknown tool {tool!r} (this scenario serves: {', '.join(sorted(served))})")
    args = dict(arguments or {})
    size = len(json.dumps(args, ensure_ascii=False).encode())
    if size > MAX_ARGUMENT_BYTES:
        return McpRefusal(tool, f"arguments of {size} bytes, over the limit of {MAX_ARGUMENT_BYTES} bytes")
    problem = _shape_problem(args)
    if problem:
        return McpRefusal(tool, problem)
    return McpCall(
        tool,
        served[tool],
        str(args.get("method", "GET")),
        str(args["path"]).lstrip("/"),
        dict(args.get("query", {})),
        str(args.get("body", "")),
    )


def mcp_block(tool: str, arguments: Mapping[str, Any] | None, result: bytes) -> dict[str, Any]:
    """What a gateway record holds of an MCP tool call: observed by the harness, never self-reported."""
    return {
        "tool": tool,
        "arguments": dict(arguments or {}),
        "result_sha256": hashlib.sha256(result).hexdigest(),
        "observed_by": "harness",
    }


def refusal_record(refusal: McpRefusal, arguments: Mapping[str, Any] | None, time: str) -> ToolRecord:
    """The record of a tool call refused before any back-end; arguments over :data:`MAX_ARGUMENT_BYTES`
    are kept as their size and digest."""
    encoded = json.dumps(dict(arguments or {}), ensure_ascii=False).encode()
    shown: dict[str, Any] = (
        dict(arguments or {})
        if len(encoded) <= MAX_ARGUMENT_BYTES
        else {"bytes": len(encoded), "sha256": hashlib.sha256(encoded).hexdigest()}
    )
    return ToolRecord(
        interface=MCP_INTERFACE,
        operation="call",
        target=f"tool/{refusal.tool}",
        time=time,
        request={"mcp": mcp_block(refusal.tool, shown, refusal.reason.encode())},
        response=refusal.reason,
        status=400,
        refused=refusal.reason,
    )
