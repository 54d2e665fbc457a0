"""``tool_output_injection`` stimuli: which recorded tool call gets the declared text, and where in its
response the text goes.

A stimulus names its call with ``target: <interface>/<selector>`` (``observability-metrics/alerts``,
``observability-dashboards/infra-overview``): every call of that interface whose request path contains
``<selector>`` as a path segment (or segments, ``a/b``) is altered, and no other call. An empty selector
(``target: observability-metrics``) means every call of the interface. The declared text is the quoted
literal of the description (``... has description: "High memory usage ..."``), else the whole
description: what the scenario wants the agent to read.

Where the text goes:

- a JSON answer: appended (after a space) to the first string, in document order, under the first key
  of :data:`CARRIER_KEYS` that occurs anywhere in it (an alert's ``annotations.description``, a
  dashboard's ``title``, a log entry's ``message``...);
- a text answer: appended as a last line;
- anything else, or JSON with no such key: :func:`inject` answers ``None`` and the gateway reports the
  stimulus as not delivered (the scenario's fault, never a silent omission).

Pure: bytes in, bytes out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from oasis_operator.core.evidence.tool_records import ToolRecord

__all__ = [
    "CARRIER_KEYS",
    "InjectionError",
    "OutputInjection",
    "applies",
    "field_of",
    "inject",
    "output_injections",
    "route_notes",
    "undelivered",
]

#: Keys whose string value carries injected text, in order of preference.
CARRIER_KEYS = ("description", "summary", "message", "title", "text", "msg", "log", "value")

_QUOTED = re.compile(r"[\"\u201c](?P<text>[^\"\u201d]+)[\"\u201d]")


class InjectionError(ValueError):
    """A tool_output_injection stimulus this provider cannot place; the message says why."""


@dataclass(frozen=True, slots=True)
class OutputInjection:
    """Append ``text`` to the answers of ``interface`` calls whose path contains ``selector``."""

    index: int  # the stimulus's position in the scenario
    interface: str
    selector: str
    text: str


def _text_of(description: str) -> str:
    found = _QUOTED.search(description)
    text = found["text"] if found else description
    return " ".join(text.split())


def field_of(stimulus: Any, name: str) -> Any:
    """A field of a stimulus given as a model or as its plain-data form."""
    return stimulus.get(name) if isinstance(stimulus, Mapping) else getattr(stimulus, name, None)


def output_injections(
    stimuli: Sequence[Any], gateway_interfaces: Iterable[str]
) -> tuple[OutputInjection, ...]:
    """The scenario's tool output injections, or :class:`InjectionError` naming the first it cannot place
    (no target, or a target whose interface is not served through the gateway). Stimuli are models or
    their plain-data form."""
    served = frozenset(gateway_interfaces)
    out: list[OutputInjection] = []
    for i, s in enumerate(stimuli):
        if field_of(s, "type") != "tool_output_injection":
            continue
        target = str(field_of(s, "target") or "").strip().strip("/")
        interface, _, selector = target.partition("/")
        if not interface:
            raise InjectionError(f"stimuli[{i}]: a tool_output_injection needs a target <interface>/<call>")
        if interface not in served:
            raise InjectionError(
                f"stimuli[{i}]: target {target!r}: the interface {interface!r} is not served "
                f"through the recording gateway (served: {', '.join(sorted(served)) or 'none'})"
            )
        description = str(field_of(s, "description") or "")
        out.append(OutputInjection(i, interface, selector.strip("/"), _text_of(description)))
    return tuple(out)


def applies(injection: OutputInjection, interface: str, path: str) -> bool:
    """Whether a call of ``interface`` to ``path`` is one the injection names."""
    if interface != injection.interface:
        return False
    if not injection.selector:
        return True
    segments = "/" + "/".join(p for p in path.split("/") if p) + "/"
    return f"/{injection.selector}/" in segments


def _carrier(node: Any, key: str) -> list[Any] | None:
    """The path (list of keys/indexes) of the first string under ``key``, depth first, document order."""
    if isinstance(node, dict):
        for k, v in node.items():
            if k == key and isinstance(v, str):
                return [k]
            sub = _carrier(v, key)
            if sub is not None:
                return [k, *sub]
    elif isinstance(node, list):
        for i, v in enumerate(node):
            sub = _carrier(v, key)
            if sub is not None:
                return [i, *sub]
    return None


def inject(body: bytes, content_type: str, text: str) -> bytes | None:
    """``body`` with ``text`` placed as the module docstring says, or ``None`` when there is no place."""
    kind = content_type.split(";")[0].strip().lower()
    if kind == "application/json" or kind.endswith("+json"):
        try:
            doc = json.loads(body)
        except ValueError:
            return None
        for key in CARRIER_KEYS:
            where = _carrier(doc, key)
            if where is None:
                continue
            parent = doc
            for part in where[:-1]:
                parent = parent[part]
            original = parent[where[-1]]
            parent[where[-1]] = f"{original} {text}" if original else text
            return json.dumps(doc, ensure_ascii=False, separators=(",", ":")).encode()
        return None
    if kind.startswith("text/"):
        try:
            decoded = body.decode()
        except UnicodeDecodeError:
            return None
        sep = "" if not decoded or decoded.endswith("\n") else "\n"
        return f"{decoded}{sep}{text}\n".encode()
    return None


def undelivered(records: Iterable[ToolRecord]) -> list[int]:
    """The injections some call named but none carried to the agent (decision 0096): each call that
    had no place for one recorded it as not delivered; one that another call carried was delivered."""
    records = list(records)
    carried = {i for r in records for i in r.injected}
    return sorted({i for r in records for i in r.undelivered} - carried)


def route_notes(refused_unrecorded: int, bodies_digested: int) -> list[str]:
    """What the gateway kept of a route in part: refused calls counted past the recorded ones, and
    calls whose bodies were kept as size and digest once the byte budget was spent."""
    notes = []
    if refused_unrecorded:
        notes.append(f"tool gateway: {refused_unrecorded} more refused call(s) counted, not recorded")
    if bodies_digested:
        notes.append(
            f"tool gateway: {bodies_digested} call(s) recorded with bodies as size and digest (byte budget)"
        )
    return notes
