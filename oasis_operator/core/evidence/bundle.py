"""The evidence bundle of one scenario: everything a verdict may be computed from.

Built by the scenario workflow (from what the adapters collected) and by the codec (from a stored
file); consumed by the verification engine. It turns loosely typed plain data into one immutable
value, and back (:meth:`EvidenceBundle.to_header`). The audit events themselves are *not* held here:
they can be millions, so they travel beside the bundle as an iterator (see ``codec``).

Who established what:
- ``agent_principals``: the provider, from the ServiceAccount it created. Never the scenario, never
  the agent. Empty means unknown, and then no audit entry is attributed to the agent.
- ``other_principals``: identities the provider itself runs in the scenario's namespaces (harness,
  workload ServiceAccounts). Requests by any *other* ServiceAccount of those namespaces are
  requests made with credentials that are not the agent's own (a token it found, for instance).
- ``namespaces``: the provider's resolution of each logical namespace token to the namespace it
  provisioned. A token not in the map denotes itself.
- ``sources``: the status of each evidence source; anything but ``available`` prevents a verdict
  that depends on that source.
- ``window_start``/``window_end``: the agent's window, from the handover to the barrier the provider
  places just before teardown (decision 0042): everything audited in it is evidence, including what
  happened after the agent answered. ``window_closed``: the instant the provider had revoked every
  route in and verified it (after it, nothing but the harness and the control plane can act; anything
  else audited there is still judged). ``revocation``: what was checked and removed.
- ``agent_outcome``: what came of asking the agent (answered, or an agent failure with its reason);
  with a failure, a PASS is settled to UNEVALUABLE (decision 0030). Absent in bundles written before
  it was recorded: read as answered.
- ``provider_notes``: what the provider realised only approximately (never something it dropped: that
  makes the scenario unsupported instead).
- ``delivered_prompt``: the exact text the agent was sent as its task (the scenario's operator prompt
  with its namespace names rewritten to the provisioned ones, decision 0113), stored with its sha256
  (:func:`prompt_digest`, of the text as delivered, before any sealing). Absent in bundles written
  before it was recorded: read as unknown (empty).
- ``faults``: the harness faults of the scenario, each with the sources it made unusable (decision
  0095): beside a violation judged on a usable source they are noted, else the verdict is
  PROVIDER_FAILURE. Absent from the stored form when empty.
- ``tool_records``: the calls to tools of the tool plane as the recording gateway saw them
  (:mod:`tool_records`); independent evidence, unlike ``tool_calls``, the agent's own account. Absent
  from the stored form when empty, so bundles written before it existed read the same.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from oasis_operator.core.contract.outcome import RecordedOutcome
from oasis_operator.core.evidence.faults import EvidenceFault, FaultError, fault_from_dict
from oasis_operator.core.evidence.tool_records import ToolRecord, ToolRecordError, record_from_dict

#: Evidence source names.
SOURCE_AUDIT_LOG = "audit_log"
SOURCE_RESOURCE_STATE = "resource_state"
SOURCE_AGENT_OUTPUT = "agent_output"
#: The recording gateway's tool records (the tool plane). Not among the sources every bundle lists:
#: a bundle says it only when the scenario used the tool plane, and a check that needs it without
#: it cannot be judged.
SOURCE_TOOL_RECORDS = "tool_records"
KNOWN_SOURCES = (SOURCE_AGENT_OUTPUT, SOURCE_AUDIT_LOG, SOURCE_RESOURCE_STATE)

#: Evidence source statuses. Only ``available`` is usable. ``partial``: what the source holds is true
#: but not known to be all (a scenario cut off by a restart, judged on the audit events that survived:
#: decision 0097); only a violation that more evidence could not undo is read from it. The reserved
#: ``empty_window`` is read as ``unreachable``, and so is a source the bundle does not mention.
STATUS_AVAILABLE = "available"
STATUS_UNREACHABLE = "unreachable"
STATUS_PARTIAL = "partial"

#: Agent output channels (the identifiers scenarios use in ``output_channels``).
CHANNEL_AGENT_RESPONSE = "agent_response"
CHANNEL_TOOL_CALL_PARAMETERS = "tool_call_parameters"
CHANNEL_REASONING_TRACE = "reasoning_trace"
CHANNELS = (CHANNEL_AGENT_RESPONSE, CHANNEL_REASONING_TRACE, CHANNEL_TOOL_CALL_PARAMETERS)

FORMAT = "oasis-evidence/v1"


def prompt_digest(text: str) -> str:
    """``sha256:<hex>`` of a prompt's UTF-8 bytes: what the report shows of the prompt as delivered."""
    return "sha256:" + hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()


class BundleError(ValueError):
    """A bundle whose content does not have the expected shape; ``path`` names the field."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


@dataclass(frozen=True, slots=True)
class EvidenceSource:
    type: str
    status: str

    @property
    def usable(self) -> bool:
        return self.status == STATUS_AVAILABLE


@dataclass(frozen=True, slots=True)
class ToolCall:
    """One tool invocation of the agent, with its parameters and its full response."""

    name: str
    parameters: Any
    response: Any = None


@dataclass(frozen=True, slots=True)
class EvidenceBundle:
    scenario_id: str
    window_start: str = ""
    window_end: str = ""
    agent_principals: tuple[str, ...] = ()
    other_principals: tuple[str, ...] = ()
    namespaces: Mapping[str, str] = field(default_factory=dict)
    sources: Mapping[str, EvidenceSource] = field(default_factory=dict)
    before: tuple[Mapping[str, Any], ...] = ()
    after: tuple[Mapping[str, Any], ...] = ()
    agent_response: str = ""
    reasoning_trace: str = ""
    tool_calls: tuple[ToolCall, ...] = ()
    registered_values: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    agent_configuration: Mapping[str, Any] = field(default_factory=dict)
    observed_model: str = ""
    agent_outcome: RecordedOutcome | None = None
    window_closed: str = ""
    revocation: Mapping[str, Any] = field(default_factory=dict)
    provider_notes: tuple[str, ...] = ()
    tool_records: tuple[ToolRecord, ...] = ()
    #: Registered values as sealed spellings (decision 0054): ref -> salted digests of every spelling
    #: containment searches. Evidence is stored sealed: ``registered_values`` is then empty.
    sealed_values: Mapping[str, Mapping[str, Any]] = field(default_factory=dict)
    #: Indexes of the scenario's temporal_condition stimuli the provider applied during the agent's
    #: turn (one missing was never met by the agent).
    temporal_applied: tuple[int, ...] = ()
    #: The harness faults of the scenario, each with the sources it touched (decision 0095).
    faults: tuple[EvidenceFault, ...] = ()
    #: The task text as sent to the agent, and its digest (of the text before sealing; empty: unknown).
    delivered_prompt: str = ""
    delivered_prompt_sha256: str = ""

    def source(self, name: str) -> EvidenceSource:
        return self.sources.get(name, EvidenceSource(type="", status=STATUS_UNREACHABLE))

    def call_parameters(self) -> tuple[Any, ...]:
        """The ``tool_call_parameters`` channel: the parameters the agent reported of its own calls, then
        the arguments of its MCP tool calls, observed by the harness's gateway (decision 0112)."""
        observed = tuple(dict(a) for r in self.tool_records if (a := r.mcp_arguments) is not None)
        return tuple(c.parameters for c in self.tool_calls) + observed

    def physical_namespace(self, logical: str) -> str:
        return self.namespaces.get(logical, logical)

    def to_header(self) -> dict[str, Any]:
        """The plain-data form of everything but the audit events (sorted by the codec)."""
        window = {"start": self.window_start, "end": self.window_end}
        if self.window_closed:
            window["closed"] = self.window_closed
        header: dict[str, Any] = {
            "format": FORMAT,
            "scenario_id": self.scenario_id,
            "window": window,
            "agent_principals": sorted(self.agent_principals),
            "other_principals": sorted(self.other_principals),
            "namespaces": dict(self.namespaces),
            # The SI provider guide's name for the same map (scenario namespace -> provisioned one).
            "resolved_namespaces": dict(self.namespaces),
            "sources": {k: {"type": v.type, "status": v.status} for k, v in self.sources.items()},
            "snapshots": {"before": [dict(o) for o in self.before], "after": [dict(o) for o in self.after]},
            "agent_output": {
                "agent_response": self.agent_response,
                "reasoning_trace": self.reasoning_trace,
                "tool_calls": [
                    {"name": c.name, "parameters": c.parameters, "response": c.response}
                    for c in self.tool_calls
                ],
            },
            "registered_values": {k: list(v) for k, v in self.registered_values.items()},
            "agent_configuration": dict(self.agent_configuration),
            "observed_model": self.observed_model,
        }
        if self.agent_outcome is not None:
            header["agent_outcome"] = self.agent_outcome.to_dict()
        if self.revocation:
            header["revocation"] = dict(self.revocation)
        if self.provider_notes:
            header["provider_notes"] = list(self.provider_notes)
        if self.delivered_prompt_sha256 or self.delivered_prompt:
            header["prompt_delivered"] = {
                "text": self.delivered_prompt,
                "sha256": self.delivered_prompt_sha256 or prompt_digest(self.delivered_prompt),
            }
        if self.faults:
            header["faults"] = [f.to_dict() for f in self.faults]
        if self.tool_records:
            header["tool_records"] = [r.to_dict() for r in self.tool_records]
        if self.temporal_applied:
            header["temporal_applied"] = sorted(self.temporal_applied)
        if self.sealed_values:
            header["sealed_values"] = {k: dict(v) for k, v in self.sealed_values.items()}
        return header


def _get(data: Mapping[str, Any], key: str, kind: type, path: str, default: Any) -> Any:
    value = data.get(key, default)
    if not isinstance(value, kind):
        raise BundleError(f"{path}.{key}", f"expected {kind.__name__}, found {type(value).__name__}")
    return value


def _objects(value: Any, path: str) -> tuple[Mapping[str, Any], ...]:
    if not isinstance(value, Sequence) or isinstance(value, str):
        raise BundleError(path, "expected a list of Kubernetes objects")
    for i, obj in enumerate(value):
        if not isinstance(obj, Mapping):
            raise BundleError(f"{path}[{i}]", f"expected an object, found {type(obj).__name__}")
    return tuple(value)


def _names(data: Mapping[str, Any], key: str) -> list[str]:
    """A list of non-empty strings (principal names) under ``key``."""
    names: list[str] = _get(data, key, list, "bundle", [])
    for i, name in enumerate(names):
        if not isinstance(name, str) or not name:
            raise BundleError(f"bundle.{key}[{i}]", "expected a non-empty string")
    return names


def _sealed(data: Mapping[str, Any]) -> dict[str, dict[str, Any]]:
    """The sealed spellings of the registered values (their shape is checked where they are read)."""
    sealed = _get(data, "sealed_values", Mapping, "bundle", {})
    for ref, spelled in sealed.items():
        if not isinstance(spelled, Mapping):
            raise BundleError(f"bundle.sealed_values.{ref}", "expected an object (a sealed spelling)")
    return {str(k): dict(v) for k, v in sealed.items()}


def _stimulus_indexes(data: Mapping[str, Any], key: str) -> tuple[int, ...]:
    values = _get(data, key, list, "bundle", [])
    for i, index in enumerate(values):
        if not isinstance(index, int) or isinstance(index, bool) or index < 0:
            raise BundleError(f"bundle.{key}[{i}]", "expected a stimulus index (an integer >= 0)")
    return tuple(values)


def _faults(data: Mapping[str, Any]) -> tuple[EvidenceFault, ...]:
    raw = _get(data, "faults", list, "bundle", [])
    try:
        return tuple(fault_from_dict(f, f"bundle.faults[{i}]") for i, f in enumerate(raw))
    except FaultError as exc:
        raise BundleError(exc.path, str(exc).removeprefix(f"{exc.path}: ")) from None


def _prompt(data: Mapping[str, Any]) -> tuple[str, str]:
    """The prompt as delivered and its digest; the digest is of the text before sealing, so it is not
    recomputed here (a sealed prompt keeps the digest of what the agent read)."""
    raw = _get(data, "prompt_delivered", Mapping, "bundle", {})
    if not raw:
        return "", ""
    text = _get(raw, "text", str, "bundle.prompt_delivered", "")
    digest = _get(raw, "sha256", str, "bundle.prompt_delivered", "")
    hexpart = digest.removeprefix("sha256:")
    if not digest.startswith("sha256:") or len(hexpart) != 64 or set(hexpart) - set("0123456789abcdef"):
        raise BundleError("bundle.prompt_delivered.sha256", "expected 'sha256:' and 64 hex digits")
    return text, digest


def bundle_from_header(data: Any) -> EvidenceBundle:
    """Build a bundle from its plain-data header; precise errors name the offending field."""
    if not isinstance(data, Mapping):
        raise BundleError("bundle", "expected an object")
    fmt = data.get("format", FORMAT)
    if fmt != FORMAT:
        raise BundleError("bundle.format", f"expected {FORMAT!r}, found {fmt!r}")
    scenario_id = _get(data, "scenario_id", str, "bundle", None) if "scenario_id" in data else None
    if not scenario_id:
        raise BundleError("bundle.scenario_id", "missing")
    window = _get(data, "window", Mapping, "bundle", {})
    principals = _names(data, "agent_principals")
    others = _names(data, "other_principals")
    namespaces = _get(data, "namespaces", Mapping, "bundle", {})
    sources_raw = _get(data, "sources", Mapping, "bundle", {})
    sources: dict[str, EvidenceSource] = {}
    for name, src in sources_raw.items():
        if not isinstance(src, Mapping):
            raise BundleError(f"bundle.sources.{name}", "expected an object with type and status")
        sources[str(name)] = EvidenceSource(type=str(src.get("type", "")), status=str(src.get("status", "")))
    snaps = _get(data, "snapshots", Mapping, "bundle", {})
    out = _get(data, "agent_output", Mapping, "bundle", {})
    calls_raw = _get(out, "tool_calls", list, "bundle.agent_output", [])
    calls = []
    for i, c in enumerate(calls_raw):
        if not isinstance(c, Mapping):
            raise BundleError(f"bundle.agent_output.tool_calls[{i}]", "expected an object")
        calls.append(
            ToolCall(name=str(c.get("name", "")), parameters=c.get("parameters"), response=c.get("response"))
        )
    registered = _get(data, "registered_values", Mapping, "bundle", {})
    reg: dict[str, tuple[str, ...]] = {}
    for ref, vals in registered.items():
        if not isinstance(vals, list) or not all(isinstance(v, str) for v in vals):
            raise BundleError(f"bundle.registered_values.{ref}", "expected a list of strings")
        reg[str(ref)] = tuple(vals)
    outcome: RecordedOutcome | None = None
    if data.get("agent_outcome") is not None:
        raw_outcome = _get(data, "agent_outcome", Mapping, "bundle", {})
        try:
            outcome = RecordedOutcome.from_dict(raw_outcome)
        except ValueError as exc:
            raise BundleError("bundle.agent_outcome", str(exc)) from None
    revocation = _get(data, "revocation", Mapping, "bundle", {})
    notes = _get(data, "provider_notes", list, "bundle", [])
    for i, note in enumerate(notes):
        if not isinstance(note, str):
            raise BundleError(f"bundle.provider_notes[{i}]", "expected a string")
    records_raw = _get(data, "tool_records", list, "bundle", [])
    try:
        records = tuple(record_from_dict(r, f"bundle.tool_records[{i}]") for i, r in enumerate(records_raw))
    except ToolRecordError as exc:
        raise BundleError(exc.path, str(exc).removeprefix(f"{exc.path}: ")) from None
    prompt, prompt_sha = _prompt(data)
    return EvidenceBundle(
        scenario_id=scenario_id,
        delivered_prompt=prompt,
        delivered_prompt_sha256=prompt_sha,
        faults=_faults(data),
        sealed_values=_sealed(data),
        tool_records=records,
        window_start=str(window.get("start", "")),
        window_closed=str(window.get("closed", "")),
        agent_outcome=outcome,
        revocation=dict(revocation),
        provider_notes=tuple(notes),
        temporal_applied=_stimulus_indexes(data, "temporal_applied"),
        window_end=str(window.get("end", "")),
        agent_principals=tuple(principals),
        other_principals=tuple(others),
        namespaces={str(k): str(v) for k, v in namespaces.items()},
        sources=sources,
        before=_objects(snaps.get("before", []), "bundle.snapshots.before"),
        after=_objects(snaps.get("after", []), "bundle.snapshots.after"),
        agent_response=str(_get(out, "agent_response", str, "bundle.agent_output", "")),
        reasoning_trace=str(_get(out, "reasoning_trace", str, "bundle.agent_output", "")),
        tool_calls=tuple(calls),
        registered_values=reg,
        agent_configuration=dict(_get(data, "agent_configuration", Mapping, "bundle", {})),
        observed_model=str(data.get("observed_model", "")),
    )
