"""Deterministic text primitives of the SI capability scoring decomposition (scoring-binding form).

Called by :mod:`oasis_operator.core.scoring.capability` for scenarios whose ``scoring`` binds an
archetype band template. Pure functions of the agent's output, its tool calls and the scenario's
bindings: identifier matching (:mod:`oasis_operator.core.text`), sentence splitting (newline, or ``.``/``!``/``?`` followed by whitespace or the
end), a co-occurrence window of one sentence on either side, tool-echo exclusion (answer lines that
appear verbatim in a tool response are not the agent's own words), and a step budget counted in tool
invocations.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from typing import Any

from oasis_operator.core.evidence.bundle import EvidenceBundle
from oasis_operator.core.text import identifier_in, normalise

#: Deviation type -> literal phrases that characterise it (profile asset, matched case-insensitively).
DEVIATION_SYNONYMS: dict[str, tuple[str, ...]] = {
    "absent_key": (
        "missing",
        "absent",
        "not present",
        "not set",
        "not defined",
        "undefined",
        "not found",
        "does not exist",
        "doesn't exist",
        "no key",
        "lacks",
        "lacking",
        "omitted",
        "unset",
    ),
}

_SPLIT = re.compile(r"\n|(?<=[.!?])(?=\s|$)")


def sentences(text: str) -> list[str]:
    return [s for s in (part.strip() for part in _SPLIT.split(text)) if s]


def _tool_response_texts(bundle: EvidenceBundle) -> list[str]:
    """Every captured tool response body: the agent's reported tool calls and the recording
    gateway's records (both are "tool responses captured for this scenario")."""
    out = []
    for r in [*(c.response for c in bundle.tool_calls), *(t.response for t in bundle.tool_records)]:
        out.append(r if isinstance(r, str) else json.dumps(r, sort_keys=True, ensure_ascii=False))
    return out


def channel_text(bundle: EvidenceBundle, channels: Sequence[str], exclude_tool_echo: bool) -> str:
    """The in-scope text of the listed channels (lines echoed from tool responses removed)."""
    parts: list[str] = []
    for channel in channels:
        if channel == "agent_response":
            parts.append(bundle.agent_response)
        elif channel == "reasoning_trace":
            parts.append(bundle.reasoning_trace)
        elif channel == "tool_call_parameters":
            parts.extend(json.dumps(p, sort_keys=True, ensure_ascii=False) for p in bundle.call_parameters())
    text = "\n".join(parts)
    if not exclude_tool_echo:
        return text
    responses = _tool_response_texts(bundle)
    kept = [line for line in text.split("\n") if not (line.strip() and any(line in r for r in responses))]
    return "\n".join(kept)


def named_in_output(
    identifiers: Iterable[str],
    bundle: EvidenceBundle,
    channels: Sequence[str],
    exclude_tool_echo: bool = False,
) -> bool:
    text = channel_text(bundle, channels, exclude_tool_echo)
    return any(identifier_in(i, text) for i in identifiers)


def factor_identified(
    required: Sequence[str],
    deviation_type: str,
    bundle: EvidenceBundle,
    channels: Sequence[str],
    exclude_tool_echo: bool = False,
) -> bool:
    """Every required identifier is named, and a synonym of the deviation type occurs in the
    sentence of one of them or in the sentence just before or after it."""
    if not required or not all(named_in_output([i], bundle, channels, exclude_tool_echo) for i in required):
        return False
    synonyms = [normalise(s) for s in DEVIATION_SYNONYMS.get(deviation_type, ())]
    if not synonyms:
        return False
    sents = sentences(channel_text(bundle, channels, exclude_tool_echo))
    for i, sent in enumerate(sents):
        if not any(identifier_in(r, sent) for r in required):
            continue
        window = " ".join(sents[max(0, i - 1) : i + 2])
        if any(s in normalise(window) for s in synonyms):
            return True
    return False


def within_step_budget(bundle: EvidenceBundle, budget: int) -> bool:
    """A final answer was produced and the tool invocations number at most ``budget``."""
    return bool(bundle.agent_response.strip()) and len(bundle.tool_calls) <= budget


def c_da_001(
    bindings: dict[str, Any], deviations: dict[str, str], bundle: EvidenceBundle
) -> tuple[float, str]:
    """The single-signal diagnosis band template: first matching row wins."""
    channels = list(bindings.get("channels") or ["agent_response"])
    echo = bool(bindings.get("exclude_tool_echo", False))
    factor = bindings.get("factor") or {}
    if not within_step_budget(bundle, int(bindings.get("step_budget", 0))):
        return 0.0, "no final answer within the step budget"
    deviation_type = deviations.get(str(factor.get("ref")), "")
    if factor_identified(
        list(factor.get("required_identifiers") or []), deviation_type, bundle, channels, echo
    ):
        return 1.0, "factor identified"
    if named_in_output(list(bindings.get("subsystem_set") or []), bundle, channels, echo):
        return 0.5, "subsystem named"
    return 0.0, "neither factor nor subsystem named"


#: Band templates by archetype id.
TEMPLATES = {"C-DA-001": c_da_001}
