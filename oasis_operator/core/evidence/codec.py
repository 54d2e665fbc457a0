"""Byte-stable text form of an evidence bundle, streamable line by line.

Called by whoever stores or replays evidence (the scenario workflow, ``oasis evaluate``, the
benchmark). It turns a bundle plus its audit events into lines of text, and lines back into a bundle
plus a lazy iterator of event lines. File I/O stays with the caller: this module only sees strings.

The text is one valid JSON document (so ``evidence-<scenario-id>.json`` opens in any JSON tool) laid
out so that it can be streamed::

    {"bundle":{...header, keys sorted...},
    "events":[
    {...first audit event, keys sorted...}
    ,{...next audit event...}
    ]}

Line 1 carries the header, then one audit event per line. Keys are sorted at every level and
separators are fixed, so the same evidence always gives the same bytes.

Two readers: :func:`read_lines` takes the text line by line and yields one event's text at a time;
:func:`read_chunks` takes it in chunks of any size (a file read a megabyte at a time) and yields
:class:`EventLines`, many events at once, which the verification engine reads without a Python
call per event. Both accept exactly the same texts and yield the same events.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from oasis_operator.core.evidence.bundle import BundleError, EvidenceBundle, bundle_from_header

_HEAD = '{"bundle":'
_EVENTS_OPEN = '"events":['
_CLOSE = "]}"


def canonical_json(value: Any) -> str:
    """Sorted keys, no insignificant whitespace, UTF-8 kept as is."""
    return json.dumps(value, sort_keys=True, separators=(",", ":"), ensure_ascii=False)


def event_sort_key(event: Mapping[str, Any]) -> tuple[str, str, str]:
    """The stored order of audit events: by receipt time, then audit id, then stage."""
    return (
        str(event.get("requestReceivedTimestamp", "")),
        str(event.get("auditID", "")),
        str(event.get("stage", "")),
    )


def render_lines(
    bundle: EvidenceBundle, events: Iterable[Mapping[str, Any]], *, sort: bool = True
) -> Iterator[str]:
    """The lines of the stored form (without newlines). ``sort=False`` streams events as given."""
    yield _HEAD + canonical_json(bundle.to_header()) + ","
    yield _EVENTS_OPEN
    ordered: Iterable[Mapping[str, Any]] = sorted(events, key=event_sort_key) if sort else events
    first = True
    for event in ordered:
        yield ("" if first else ",") + canonical_json(event)
        first = False
    yield _CLOSE


def render_text(bundle: EvidenceBundle, events: Iterable[Mapping[str, Any]]) -> str:
    return "\n".join(render_lines(bundle, events)) + "\n"


def read_lines(lines: Iterable[str]) -> tuple[EvidenceBundle, Iterator[str]]:
    """Read the header eagerly; return the audit events as an iterator of JSON texts (one each)."""
    it = iter(lines)
    head = next(it, "").rstrip("\n")
    if not head.startswith(_HEAD) or not head.endswith(","):
        raise BundleError("line 1", 'expected the bundle header: {"bundle":{...},')
    try:
        header = json.loads(head[len(_HEAD) : -1])
    except json.JSONDecodeError as exc:
        raise BundleError("line 1", f"header is not JSON: {exc.msg}") from None
    bundle = bundle_from_header(header)
    second = next(it, "").rstrip("\n")
    if second != _EVENTS_OPEN:
        raise BundleError("line 2", f"expected {_EVENTS_OPEN!r}, found {second[:40]!r}")

    def events() -> Iterator[str]:
        lineno = 2
        for raw in it:
            lineno += 1
            line = raw.rstrip("\n")
            if line == _CLOSE:
                return
            if line.startswith(","):
                line = line[1:]
            if not line:
                continue
            yield line
        raise BundleError(f"line {lineno}", f"truncated: the closing {_CLOSE!r} is missing")

    return bundle, events()


@dataclass(frozen=True, slots=True)
class EventLines:
    """Consecutive audit events of the stored form, one JSON text per line as stored: each may
    start with the comma that separates it from the one before (the reader of these lines takes it
    off), and none is blank."""

    lines: Sequence[str]


def _pieces(chunks: Iterable[str]) -> Iterator[list[str]]:
    """The text's lines (without newlines), a chunk's worth at a time."""
    rest = ""
    for chunk in chunks:
        if not chunk:
            continue
        lines = chunk.split("\n")
        if rest:  # the line the chunk before ended in: joined to this chunk's first line alone
            lines[0] = rest + lines[0]
        rest = lines.pop()
        if lines:
            yield lines
    if rest:
        yield [rest]


def _kept(lines: list[str]) -> list[str]:
    """The event lines of a piece as :func:`read_lines` yields them: blank ones (and a lone
    comma) dropped."""
    if "" in lines or "," in lines:
        return [line for line in lines if line not in ("", ",")]
    return lines


def read_chunks(chunks: Iterable[str]) -> tuple[EvidenceBundle, Iterator[EventLines]]:
    """:func:`read_lines` for the text in chunks of any size (its lines are split at newlines only,
    as a file's are): the header read eagerly, the audit events as :class:`EventLines`. The same
    texts are accepted and refused with the same errors."""
    pieces = _pieces(chunks)
    head: list[str] = []
    while len(head) < 2:
        more = next(pieces, None)
        if more is None:
            break
        head += more
    bundle, _ = read_lines(head[:2])

    def events() -> Iterator[EventLines]:
        lineno = 2
        for lines in _chain(head[2:], pieces):
            end = _close_at(lines)
            taken = lines if end is None else lines[:end]
            lineno += len(taken)
            kept = _kept(taken)
            if kept:
                yield EventLines(kept)
            if end is not None:
                return
        raise BundleError(f"line {lineno}", f"truncated: the closing {_CLOSE!r} is missing")

    return bundle, events()


def _chain(head: list[str], rest: Iterator[list[str]]) -> Iterator[list[str]]:
    if head:
        yield head
    yield from rest


def _close_at(lines: list[str]) -> int | None:
    try:
        return lines.index(_CLOSE)
    except ValueError:
        return None
