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
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
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
