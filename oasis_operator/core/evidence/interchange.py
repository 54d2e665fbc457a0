"""Evidence in the spec's shape, as other OASIS tools write it: read into our bundle.

Called by ``oasis evaluate`` when an evidence file is a JSON object with an ``observations`` list
rather than our own stored form (:mod:`codec`). Reporting §1.2 names what an evidence artifact holds
(the final answer, the reasoning trace, the tool calls with their parameters and full responses, the
observations in the §1.1 shape, the observed model) without naming its keys; §1.1 names each
observation's: ``environment_id``, ``observation_type`` (``audit_log``, ``resource_state``,
``state_diff``, ``response_content``), ``timestamp``, ``data`` and ``evidence_source{type, status}``.
What each observation type's ``data`` holds, as read here:

- ``audit_log``: the Kubernetes audit events (``audit.k8s.io/v1`` Event objects), as a list or as
  ``{"events": [...], "agent_principal": [...]}`` (the agent's principal, Reporting §1.1.1);
- ``resource_state``: ``{"before": [objects], "after": [objects]}``, the snapshots around the
  agent's window;
- ``state_diff``: accepted and not used (the diff is recomputed from the snapshots);
- ``response_content``: ``{"final_answer", "reasoning", "tool_calls"}`` when the top level does not
  carry them.

Top-level keys read besides ``observations``: ``scenario_id`` (required), ``final_answer`` (or
``answer``), ``reasoning`` (or ``reasoning_trace``), ``tool_calls`` (each ``tool``/``name``,
``arguments``/``parameters``, ``result``/``response``), ``observed_model``, ``resolved_namespaces``
(the SI provider guide's map of scenario namespace to provisioned namespace), ``agent_principal``,
``window{start, end}``, ``registered_values`` or ``sealed_values`` (value containment). An
observation type seen several times merges; its source is usable only if every one of them is.
Errors name the field (``evidence.observations[2].evidence_source.status``). The spec's evidence
does not name the provider's own principals: requests by other ServiceAccounts of the scenario's
namespaces are then read as requests made with credentials that are not the agent's (the strict
reading of decision 0021).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from oasis_operator.core.evidence.bundle import (
    SOURCE_AGENT_OUTPUT,
    SOURCE_AUDIT_LOG,
    SOURCE_RESOURCE_STATE,
    STATUS_AVAILABLE,
    BundleError,
    EvidenceBundle,
    EvidenceSource,
    ToolCall,
)

OBSERVATION_TYPES = ("audit_log", "resource_state", "state_diff", "response_content")
_REQUIRED = ("environment_id", "observation_type", "timestamp", "data", "evidence_source")


def is_spec_shaped(doc: Any) -> bool:
    return isinstance(doc, Mapping) and "observations" in doc and "bundle" not in doc


def _text(value: Any, path: str) -> str:
    if value is None:
        return ""
    if not isinstance(value, str):
        raise BundleError(path, f"expected a string, found {type(value).__name__}")
    return value


def _objects(value: Any, path: str) -> list[Mapping[str, Any]]:
    if not isinstance(value, list) or not all(isinstance(o, Mapping) for o in value):
        raise BundleError(path, "expected a list of objects")
    return list(value)


def _names(value: Any, path: str) -> list[str]:
    if value is None:
        return []
    names = [value] if isinstance(value, str) else value
    if not isinstance(names, list) or not all(isinstance(n, str) and n for n in names):
        raise BundleError(path, "expected a principal name or a list of them")
    return list(names)


def _tool_calls(value: Any, path: str) -> tuple[ToolCall, ...]:
    calls = []
    for i, call in enumerate(_objects(value or [], path)):
        name = call.get("tool", call.get("name"))
        calls.append(
            ToolCall(
                name=_text(name, f"{path}[{i}].tool"),
                parameters=call.get("arguments", call.get("parameters")),
                response=call.get("result", call.get("response")),
            )
        )
    return tuple(calls)


class _Collected:
    def __init__(self) -> None:
        self.events: list[Mapping[str, Any]] = []
        self.before: list[Mapping[str, Any]] = []
        self.after: list[Mapping[str, Any]] = []
        self.principals: list[str] = []
        self.sources: dict[str, EvidenceSource] = {}
        self.response: Mapping[str, Any] = {}

    def source(self, name: str, src: EvidenceSource) -> None:
        known = self.sources.get(name)
        if known is None or known.usable:
            self.sources[name] = src  # an unusable one is never replaced by a usable one


def _observation(ob: Any, path: str, out: _Collected) -> None:
    if not isinstance(ob, Mapping):
        raise BundleError(path, "expected an observation object")
    for key in _REQUIRED:
        if key not in ob:
            raise BundleError(f"{path}.{key}", "missing (Reporting §1.1 requires it on every observation)")
    kind = ob["observation_type"]
    if kind not in OBSERVATION_TYPES:
        raise BundleError(
            f"{path}.observation_type", f"expected one of {', '.join(OBSERVATION_TYPES)}, found {kind!r}"
        )
    src = ob["evidence_source"]
    if (
        not isinstance(src, Mapping)
        or not isinstance(src.get("type"), str)
        or not isinstance(src.get("status"), str)
    ):
        raise BundleError(f"{path}.evidence_source", "expected {type: string, status: string}")
    source = EvidenceSource(type=src["type"], status=src["status"])
    data = ob["data"]
    if kind == "audit_log":
        events = data.get("events") if isinstance(data, Mapping) else data
        out.events += _objects(events if events is not None else [], f"{path}.data")
        if isinstance(data, Mapping):
            out.principals += _names(data.get("agent_principal"), f"{path}.data.agent_principal")
        out.source(SOURCE_AUDIT_LOG, source)
    elif kind == "resource_state":
        if not isinstance(data, Mapping):
            raise BundleError(f"{path}.data", "expected {before: [objects], after: [objects]}")
        out.before += _objects(data.get("before", []), f"{path}.data.before")
        out.after += _objects(data.get("after", []), f"{path}.data.after")
        out.source(SOURCE_RESOURCE_STATE, source)
    elif kind == "response_content":
        if not isinstance(data, Mapping):
            raise BundleError(f"{path}.data", "expected {final_answer, reasoning, tool_calls}")
        out.response = data
        out.source(SOURCE_AGENT_OUTPUT, source)


def bundle_from_spec_evidence(doc: Mapping[str, Any]) -> tuple[EvidenceBundle, list[Mapping[str, Any]]]:
    """The bundle and the audit events of a spec-shaped evidence document (module docstring)."""
    sid = doc.get("scenario_id")
    if not isinstance(sid, str) or not sid:
        raise BundleError("evidence.scenario_id", "expected the scenario's id")
    observations = doc.get("observations")
    if not isinstance(observations, Sequence) or isinstance(observations, str):
        raise BundleError("evidence.observations", "expected a list of observations")
    out = _Collected()
    for i, ob in enumerate(observations):
        _observation(ob, f"evidence.observations[{i}]", out)
    answer = doc.get("final_answer", doc.get("answer", out.response.get("final_answer")))
    reasoning = doc.get("reasoning", doc.get("reasoning_trace", out.response.get("reasoning")))
    calls = doc.get("tool_calls", out.response.get("tool_calls"))
    # The answer was captured at the evaluator's boundary (Provider Conformance §3.2): available
    # unless a response_content observation said otherwise.
    out.sources.setdefault(
        SOURCE_AGENT_OUTPUT, EvidenceSource(type="agent_contract", status=STATUS_AVAILABLE)
    )
    namespaces, window, registered, sealed = _maps(doc)
    bundle = EvidenceBundle(
        scenario_id=sid,
        window_start=_text(window.get("start"), "evidence.window.start"),
        window_end=_text(window.get("end"), "evidence.window.end"),
        agent_principals=tuple(
            dict.fromkeys(out.principals + _names(doc.get("agent_principal"), "evidence.agent_principal"))
        ),
        namespaces={str(k): v for k, v in namespaces.items()},
        sources=out.sources,
        before=tuple(out.before),
        after=tuple(out.after),
        agent_response=_text(answer, "evidence.final_answer"),
        reasoning_trace=_text(reasoning, "evidence.reasoning"),
        tool_calls=_tool_calls(calls, "evidence.tool_calls"),
        registered_values={str(k): tuple(v) for k, v in registered.items()},
        sealed_values={str(k): dict(v) for k, v in sealed.items() if isinstance(v, Mapping)},
        observed_model=_text(doc.get("observed_model"), "evidence.observed_model"),
    )
    return bundle, out.events


def _maps(
    doc: Mapping[str, Any],
) -> tuple[Mapping[str, str], Mapping[str, Any], Mapping[str, list[str]], Mapping[str, Any]]:
    """The document's maps, each checked: the resolved namespaces, the window, the registered and the
    sealed values."""
    namespaces = doc.get("resolved_namespaces") or {}
    if not isinstance(namespaces, Mapping) or not all(isinstance(v, str) for v in namespaces.values()):
        raise BundleError("evidence.resolved_namespaces", "expected a map of scenario namespace to namespace")
    window = doc.get("window") or {}
    if not isinstance(window, Mapping):
        raise BundleError("evidence.window", "expected {start, end}")
    registered = doc.get("registered_values") or {}
    if not isinstance(registered, Mapping) or not all(
        isinstance(v, list) and all(isinstance(s, str) for s in v) for v in registered.values()
    ):
        raise BundleError("evidence.registered_values", "expected a map of value_ref to a list of strings")
    sealed = doc.get("sealed_values") or {}
    if not isinstance(sealed, Mapping):
        raise BundleError("evidence.sealed_values", "expected a map of value_ref to a sealed spelling")
    return namespaces, window, registered, sealed


def spec_evidence_from_bundle(
    bundle: EvidenceBundle, events: Sequence[Mapping[str, Any]], environment_id: str
) -> dict[str, Any]:
    """Our evidence in the spec's shape (the inverse of :func:`bundle_from_spec_evidence`), for other
    OASIS tools. What the spec's shape has no place for (the provider's own principals, the closing
    of the window and the revocation checks, the tool plane's records) is left out: a tool reading
    it judges with less than we did."""

    def observation(kind: str, data: Any, source: str) -> dict[str, Any]:
        src = bundle.source(source)
        return {
            "environment_id": environment_id,
            "observation_type": kind,
            "timestamp": bundle.window_end,
            "data": data,
            "evidence_source": {"type": src.type, "status": src.status},
        }

    doc: dict[str, Any] = {
        "scenario_id": bundle.scenario_id,
        "final_answer": bundle.agent_response,
        "reasoning": bundle.reasoning_trace,
        "tool_calls": [
            {"tool": c.name, "arguments": c.parameters, "result": c.response} for c in bundle.tool_calls
        ],
        "observed_model": bundle.observed_model,
        "resolved_namespaces": dict(bundle.namespaces),
        "agent_principal": list(bundle.agent_principals),
        "window": {"start": bundle.window_start, "end": bundle.window_end},
        "observations": [
            observation(
                "audit_log",
                {"events": [dict(e) for e in events], "agent_principal": list(bundle.agent_principals)},
                SOURCE_AUDIT_LOG,
            ),
            observation(
                "resource_state",
                {"before": [dict(o) for o in bundle.before], "after": [dict(o) for o in bundle.after]},
                SOURCE_RESOURCE_STATE,
            ),
        ],
    }
    if bundle.sealed_values:
        doc["sealed_values"] = {k: dict(v) for k, v in bundle.sealed_values.items()}
    elif bundle.registered_values:
        doc["registered_values"] = {k: list(v) for k, v in bundle.registered_values.items()}
    return doc
