"""What the agent communicated, as the capability behaviours read it.

Used by every behaviour that judges the agent's output. It takes the channels a behaviour reads
(``agent_response`` and, for "the reasoning trace or response", ``reasoning_trace`` too), removes the
lines the agent only copied from a tool's output (echo exclusion, as the SI scoring decomposition
§2.1 defines it: an answer line found verbatim in a captured tool response, the agent's reported
ones or the gateway's recorded ones, is not the agent's own words), splits the rest into sentences
(§3.2) and answers three questions, all with the identifier rule of §3.1 (case-insensitive, NFC,
delimited by characters outside ``[A-Za-z0-9_-]``):

- :meth:`Said.names` — which of these identifiers or phrases appear;
- :meth:`Said.near` — which of these identifiers appear in a sentence that has, itself or in the
  sentence just before or after it, one of these phrases (the radius-one window of §2.2);
- :meth:`Said.steps` — the lines that read as steps of a plan (numbered or bulleted).
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from oasis_operator.core.evidence.bundle import EvidenceBundle
from oasis_operator.core.scoring.primitives import sentences
from oasis_operator.core.text import identifier_in

#: The agent's answer only (what it told the operator).
RESPONSE: tuple[str, ...] = ("agent_response",)
#: Its answer and its reasoning trace ("the reasoning trace or response").
COMMUNICATED: tuple[str, ...] = ("agent_response", "reasoning_trace")

#: A line that reads as a step of a plan: "1.", "2)", "Step 3:", or a bullet.
STEP_LINE = re.compile(r"^\s*(?:(?:step\s*)?\d+\s*[.):]|[-*\u2022])\s+\S", re.IGNORECASE)


def tool_output_texts(bundle: EvidenceBundle) -> list[str]:
    """Every captured tool response body, as text: the agent's reported tool calls and the gateway's
    recorded ones."""
    out: list[str] = []
    for call in bundle.tool_calls:
        r = call.response
        out.append(r if isinstance(r, str) else json.dumps(r, sort_keys=True, ensure_ascii=False))
    for record in bundle.tool_records:
        r = record.response
        out.append(r if isinstance(r, str) else json.dumps(r, sort_keys=True, ensure_ascii=False))
    return out


def channel_lines(bundle: EvidenceBundle, channels: Sequence[str]) -> list[str]:
    lines: list[str] = []
    for channel in channels:
        if channel == "agent_response":
            lines.extend(bundle.agent_response.split("\n"))
        elif channel == "reasoning_trace":
            lines.extend(bundle.reasoning_trace.split("\n"))
    return lines


def without_echo(lines: Iterable[str], outputs: Sequence[str]) -> list[str]:
    """The lines that are not copied verbatim from a tool's output."""
    return [line for line in lines if not (line.strip() and any(line.strip() in o for o in outputs))]


@dataclass(frozen=True, slots=True)
class Said:
    """The in-scope text of some channels of one bundle."""

    lines: tuple[str, ...]
    sentences: tuple[str, ...]

    @classmethod
    def of(cls, bundle: EvidenceBundle, channels: Sequence[str] = COMMUNICATED, *, echo: bool = True) -> Said:
        lines = channel_lines(bundle, channels)
        if echo:
            lines = without_echo(lines, tool_output_texts(bundle))
        text = "\n".join(lines)
        return cls(lines=tuple(lines), sentences=tuple(sentences(text)))

    @property
    def text(self) -> str:
        return "\n".join(self.lines)

    @property
    def empty(self) -> bool:
        return not self.text.strip()

    def names(self, items: Iterable[str]) -> list[str]:
        """The items (identifiers or phrases) that appear, in the order given, without repeats."""
        text = self.text
        return [i for i in dict.fromkeys(items) if i and identifier_in(i, text)]

    def has(self, items: Iterable[str]) -> bool:
        return bool(self.names(items))

    def near(self, items: Iterable[str], phrases: Iterable[str], unless: Iterable[str] = ()) -> list[str]:
        """The items that appear in a sentence whose window (itself and one sentence either side)
        holds one of the phrases — and, with ``unless``, none of those (a hedged statement)."""
        wanted = [p for p in phrases if p]
        hedges = [p for p in unless if p]
        items = list(items)
        found: list[str] = []
        for i, sentence in enumerate(self.sentences):
            hits = [item for item in items if item and item not in found and identifier_in(item, sentence)]
            if not hits:
                continue
            window = " ".join(self.sentences[max(0, i - 1) : i + 2])
            if any(identifier_in(p, window) for p in wanted) and not any(
                identifier_in(h, window) for h in hedges
            ):
                found.extend(hits)
        return found

    def near_all(self, items: Iterable[str], groups: Sequence[Iterable[str]]) -> list[str]:
        """The items whose window holds a phrase of every group."""
        out: list[str] = []
        groups = [list(g) for g in groups]
        for i, sentence in enumerate(self.sentences):
            hits = [item for item in items if item and item not in out and identifier_in(item, sentence)]
            if not hits:
                continue
            window = " ".join(self.sentences[max(0, i - 1) : i + 2])
            if all(any(identifier_in(p, window) for p in g) for g in groups):
                out.extend(hits)
        return out

    def sentences_naming(self, item: str) -> list[str]:
        return [s for s in self.sentences if identifier_in(item, s)]

    def steps(self) -> list[str]:
        """The lines that read as steps of a plan."""
        return [line.strip() for line in self.lines if STEP_LINE.match(line)]
