"""The MCP tools of a scenario and the record of an MCP call (decision 0112), pure: one tool per fronted
interface; unknown tools, oversized or ill-shaped arguments refused with a reason naming the limit or
the argument; the record's ``request.mcp`` block; its arguments in the ``tool_call_parameters`` channel
as observed (never self-reported) evidence."""

from __future__ import annotations

import hashlib
import json

from oasis_operator.core.capability import audit_trail
from oasis_operator.core.capability import observe as O
from oasis_operator.core.evidence.bundle import EvidenceBundle, ToolCall
from oasis_operator.core.evidence.tool_records import ToolRecord, record_from_dict
from oasis_operator.core.gateway.mcp_tools import (
    MAX_ARGUMENT_BYTES,
    McpCall,
    McpRefusal,
    admitted_call,
    mcp_block,
    tool_definitions,
    tool_name,
)
from oasis_operator.core.judging.engine import context_of
from oasis_operator.core.scoring.primitives import channel_text, named_in_output

INTERFACES = ("metrics", "resource-metrics", "database")


def test_one_tool_per_interface_with_a_closed_input_schema() -> None:
    tools = tool_definitions([*INTERFACES, "metrics"])
    assert [t["name"] for t in tools] == ["database", "metrics", "resource_metrics"]
    assert all(t["inputSchema"]["additionalProperties"] is False for t in tools)
    assert all(t["inputSchema"]["required"] == ["path"] for t in tools)
    assert tool_name("resource-metrics") == "resource_metrics"


def test_an_admitted_call_is_the_http_request_of_its_interface() -> None:
    call = admitted_call("resource_metrics", {"path": "/api/v1/query", "query": {"q": "up"}}, INTERFACES)
    assert call == McpCall("resource_metrics", "resource-metrics", "GET", "api/v1/query", {"q": "up"}, "")


def test_unknown_tools_oversized_and_ill_shaped_arguments_are_refused_with_their_reason() -> None:
    unknown = admitted_call("kubectl", {"path": "x"}, INTERFACES)
    assert isinstance(unknown, McpRefusal)
    assert unknown.reason.startswith("unknown tool 'kubectl'")
    big = admitted_call("metrics", {"path": "x", "body": "y" * MAX_ARGUMENT_BYTES}, INTERFACES)
    assert isinstance(big, McpRefusal)
    assert f"over the limit of {MAX_ARGUMENT_BYTES} bytes" in big.reason
    at_limit = {"path": "x", "body": ""}
    at_limit["body"] = "y" * (MAX_ARGUMENT_BYTES - len(json.dumps(at_limit).encode()))
    assert isinstance(admitted_call("metrics", at_limit, INTERFACES), McpCall), "the limit is inclusive"
    reasons = {
        "no path": admitted_call("metrics", {}, INTERFACES),
        "method": admitted_call("metrics", {"path": "x", "method": "TRACE"}, INTERFACES),
        "query": admitted_call("metrics", {"path": "x", "query": {"a": 1}}, INTERFACES),
        "extra": admitted_call("metrics", {"path": "x", "shell": "rm"}, INTERFACES),
        "body": admitted_call("metrics", {"path": "x", "body": {"a": 1}}, INTERFACES),
    }
    assert all(isinstance(r, McpRefusal) for r in reasons.values())
    assert "argument 'path'" in reasons["no path"].reason  # type: ignore[union-attr]
    assert "argument 'method'" in reasons["method"].reason  # type: ignore[union-attr]
    assert "argument 'query'" in reasons["query"].reason  # type: ignore[union-attr]
    assert "unknown argument 'shell'" in reasons["extra"].reason  # type: ignore[union-attr]
    assert "argument 'body'" in reasons["body"].reason  # type: ignore[union-attr]


def _mcp_record(arguments: dict[str, object]) -> ToolRecord:
    block = mcp_block("metrics", arguments, b'{"status":"success"}')
    return ToolRecord(
        "metrics",
        "query",
        "2026-01-01T00:00:00.000000Z",
        request={"method": "GET", "path": "/api/v1/query", "mcp": block},
    )


def test_the_record_of_an_mcp_call_names_the_tool_arguments_and_result_digest_observed_by_the_harness() -> (
    None
):
    record = _mcp_record({"path": "api/v1/query", "query": {"query": "up"}})
    block = record.request["mcp"]
    assert block == {
        "tool": "metrics",
        "arguments": {"path": "api/v1/query", "query": {"query": "up"}},
        "result_sha256": hashlib.sha256(b'{"status":"success"}').hexdigest(),
        "observed_by": "harness",
    }
    assert record_from_dict(record.to_dict()) == record, "it survives the evidence bundle's round trip"
    assert record.mcp_tool == "metrics"
    assert record.describe()["via"] == {"mcp_tool": "metrics", "observed": True}
    plain = ToolRecord("metrics", "query", "2026-01-01T00:00:00.000000Z", request={"path": "/x"})
    assert plain.mcp_tool == ""
    assert plain.mcp_arguments is None
    assert "via" not in plain.describe()


def test_mcp_arguments_are_in_the_tool_call_parameters_channel_beside_the_agents_own_reports() -> None:
    secret = "s3cr3t-token-value"
    observed = EvidenceBundle("s", tool_records=(_mcp_record({"path": "q", "query": {"query": secret}}),))
    reported = EvidenceBundle("s", tool_calls=(ToolCall("q", {"query": "self-reported"}),))
    assert named_in_output([secret], observed, ["tool_call_parameters"])
    assert not named_in_output([secret], observed, ["agent_response"])
    both = EvidenceBundle("s", tool_calls=reported.tool_calls, tool_records=observed.tool_records)
    assert both.call_parameters() == ({"query": "self-reported"}, {"path": "q", "query": {"query": secret}})
    assert secret in channel_text(both, ["tool_call_parameters"], exclude_tool_echo=False)


def test_the_transports_own_messages_are_evidence_but_no_tool_call_a_capability_reading_counts() -> None:
    handshake = ToolRecord(
        "mcp", "protocol", "2026-01-01T00:00:00.000000Z", target="method/initialize", request={"path": "/mcp"}
    )
    unknown = ToolRecord(
        "mcp",
        "call",
        "2026-01-01T00:00:01.000000Z",
        target="tool/kubectl",
        status=400,
        refused="unknown tool",
    )
    call = _mcp_record({"path": "api/v1/query"})
    assert handshake.is_protocol
    assert not unknown.is_protocol
    assert not call.is_protocol
    ctx = context_of(EvidenceBundle("s", tool_records=(handshake, unknown, call)), [])
    assert O.records(ctx) == [call, unknown], "a refused tool call is still the agent's call"
    assert all(not s.record.is_protocol for s in O.timeline(ctx) if s.record is not None)
    assert all("protocol" not in item.label for item in audit_trail.oracle(ctx))
