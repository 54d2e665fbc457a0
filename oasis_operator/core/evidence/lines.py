"""Reading audit log lines fast without trusting them: which lines need a full JSON parse.

Called by the verification engine's single pass over an evidence stream (up to millions of lines).
A full parse costs about 15 µs per line; most lines are control-plane bookkeeping. This module
answers two questions from the raw text, and only where the answer is exact:

- :meth:`LineFilter.mentions` — does the line contain one of the scenario's needles (its namespace
  names, the agent's principals, its cluster-scoped object names)? A line that does not cannot be
  about the scenario; it is only checked to be a whole JSON object (``{`` ... ``}``), and a line that
  is not is reported as unreadable (a truncated line could have been the scenario's).
- :func:`sketch` — for a line without request or response bodies, its users, verb and stage (and,
  for writes, :func:`write_details`: response code and object reference), read with string
  searches. Exact because every string a client controls (URI, user agent, names, messages) is
  JSON-escaped, so an unescaped ``"username":"`` can only be structure; and without bodies there is
  no client-shaped object in the line to imitate structure. Anything unexpected (escapes, a missing
  key) gives ``None``: parse fully.

Needles must be strings that no JSON encoder escapes (``[A-Za-z0-9:._@/-]``); otherwise filtering is
turned off and every line is parsed. JSON lets any of those characters be written as an escape
(``\\u0061``, ``\\/``), and lets whitespace sit around a colon: a line that does either (which no audit
log writer does, :func:`plain`) is neither skipped for want of a needle nor sketched, but parsed
(docs/decisions/0111).
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from functools import lru_cache
from typing import NamedTuple

_SAFE = re.compile(r"^[A-Za-z0-9:._@/-]+$")
_REF_FIELD = re.compile(r'"(\w+)":"([^"\\]*)"')
_LEVEL = '"level":"'
#: Audit levels at which the API server logs no request or response body.
_BODY_FREE_LEVELS = frozenset({"Metadata", "None"})
_USERNAME = '"username":"'
_VERB = '"verb":"'
_URI = '"requestURI":"'
_STAGE = '"stage":"'
_RECEIVED = '"requestReceivedTimestamp":"'
_AUDIT_ID = '"auditID":"'
_SUCCESS = '"code":2'  # a 2xx response status (the only "code" key of a body-free event)
_OBJECT_REF = '"objectRef":{'
_STAGE_TIME = '"stageTimestamp":"'
#: An escape that may spell a needle's character or a key's letter (``\/``, ``\u`` of
#: ``[A-Za-z0-9:._@/-]``): JSON allows it anywhere, so the raw text may then hide a needle or a key.
_HIDDEN = re.compile(r"\\u00(?:2[d-fD-F]|3[0-9aA]|4[0-9a-fA-F]|5[0-9aAfF]|6[1-9a-fA-F]|7[0-9aA])")
#: Whitespace between a key and its colon or a colon and its value: the key is then not found by a
#: ``"key":`` search. A quote after a backslash is not a key's (every key the sketch reads ends in
#: a letter); a false alarm, inside a string, only costs a parse.
_LOOSE = re.compile(r'"[ \t\r]+:|":[ \t\r]')
#: What every match of ``_LOOSE`` holds: whitespace before a colon, or a quote, a colon and whitespace.
_LOOSE_PAIRS = (" :", "\t:", "\r:", '": ', '":\t', '":\r')
#: The keys whose values :func:`shape_key` cuts out, for a caller that writes it out in its loop.
AUDIT_ID_KEY, RECEIVED_KEY, STAGE_TIME_KEY = _AUDIT_ID, _RECEIVED, _STAGE_TIME


def hides(line: str) -> bool:
    """Whether the line holds an escape that may spell a needle's character or a key's letter."""
    return "\\/" in line or ("\\u00" in line and _HIDDEN.search(line) is not None)


def plain(line: str) -> bool:
    """Whether every key and needle of the line is written out as the line's raw text: no escape
    that may spell one (:func:`hides`) and no whitespace at a key's colon. Every audit log writer
    (the API server's encoder, :mod:`codec`) writes such lines; a line that is not is parsed."""
    if hides(line):
        return False
    if not any(pair in line for pair in _LOOSE_PAIRS):  # the common case: two characters each
        return True
    # A match right after a backslash is a quote inside a string: not a key's.
    return all(line[loose.start() - 1] == "\\" for loose in _LOOSE.finditer(line))


class LineFilter:
    """The needles of one scenario, and the cheap well-formedness test of an unmentioned line."""

    def __init__(self, needles: Iterable[str]) -> None:
        words = sorted({n for n in needles if n})
        self.needles: tuple[str, ...] | None = tuple(words) if all(_SAFE.match(n) for n in words) else None

    def names_any(self, parts: Iterable[str]) -> bool:
        """Whether one of the texts holds a needle (always true when filtering is off)."""
        return self.needles is None or any(needle in part for part in parts for needle in self.needles)

    def mentions(self, line: str) -> bool:
        """Whether the line may concern the scenario (always true when filtering is off)."""
        needles = self.needles
        if needles is None:
            return True
        for needle in needles:  # noqa: SIM110 - a plain loop: no generator per line (millions of lines)
            if needle in line:
                return True
        return False


def looks_whole(line: str) -> bool:
    """A line that can be one JSON object: starts with ``{`` and ends with ``}`` (blanks aside)."""
    if not line.startswith("{"):
        return line.lstrip().startswith("{") and line.rstrip().endswith("}")
    return line.endswith("}") or line.rstrip().endswith("}")


class Sketch(NamedTuple):
    """What a body-free audit line says about who did what, read without a JSON parse."""

    usernames: tuple[str, ...]  # the user and the impersonated user, in the order of the line
    verb: str
    stage: str
    line: str


def _string_at(line: str, start: int) -> str | None:
    """The JSON string value starting at ``start`` (just after its opening quote), if it has no
    escapes (then its closing quote is the next quote)."""
    end = line.find('"', start)
    if end < 0:
        return None
    value = line[start:end]
    return None if "\\" in value else value


def _value(line: str, key: str) -> str | None:
    at = line.find(key)
    return None if at < 0 else _string_at(line, at + len(key))


def _usernames(line: str) -> tuple[str, ...] | None:
    last = line.rfind(_USERNAME)
    if last < 0:
        return None
    user = _string_at(line, last + len(_USERNAME))
    if user is None:
        return None
    first = line.rfind(_USERNAME, 0, last)
    if first < 0:
        return (user,)
    if line.rfind(_USERNAME, 0, first) >= 0:
        return None  # more than a user and an impersonated user: not one event
    other = _string_at(line, first + len(_USERNAME))
    return None if other is None else (other, user)


def _last_value(line: str, key: str) -> str | None:
    """The value of a key that occurs once: searched from the end, where the stored (key-sorted)
    form puts ``verb``, ``user`` and ``stage``."""
    at = line.rfind(key)
    return None if at < 0 else _string_at(line, at + len(key))


def _object_ref(line: str) -> tuple[str, str, str, str, str] | None:
    at = line.find(_OBJECT_REF)
    if at < 0:
        return ("", "", "", "", "")
    start = at + len(_OBJECT_REF) - 1
    end = line.find("}", start)
    if end < 0:
        return None
    return _ref_fields(line[start : end + 1])


@lru_cache(maxsize=4096)
def _ref_fields(fragment: str) -> tuple[str, str, str, str, str] | None:
    """``(group, resource, subresource, namespace, name)`` of an object reference's JSON text
    (controllers write the same objects over and over: the parse is cached)."""
    if "{" in fragment[1:] or "\\" in fragment:
        return None
    ref = dict(_REF_FIELD.findall(fragment))
    return (
        ref.get("apiGroup", ""),
        ref.get("resource", ""),
        ref.get("subresource", ""),
        ref.get("namespace", ""),
        ref.get("name", ""),
    )


def sketch(line: str) -> Sketch | None:
    """The sketch of a line without request/response bodies, or ``None`` (parse it fully).

    Body-free means the event's level is ``Metadata``: its first ``"level":"`` is the top-level one
    (only annotation and user-extra maps can precede it, and their keys are prefixed or their values
    lists). In a body-free event every key read here occurs at most once as structure (``username``
    twice: impersonated user and user), and never inside a string (clients' strings are escaped),
    so the first occurrence is the last and either search finds it. The response code and object
    reference are read only for writes (``write_details``). All of this holds for a line whose keys
    are written out as raw text: a caller settles a line from its sketch only if it is :func:`plain`
    (checked last, being the dearest: two scans of the line)."""
    if not looks_whole(line) or _value(line, _LEVEL) not in _BODY_FREE_LEVELS:
        return None
    users = _usernames(line)
    verb = _last_value(line, _VERB)
    stage = _last_value(line, _STAGE)
    if users is None or verb is None or stage is None:
        return None
    return Sketch(users, verb, stage, line)


def write_details(shape: Sketch) -> tuple[bool, tuple[str, str, str, str, str]] | None:
    """Whether a sketched write succeeded (a 2xx response code) and its object reference
    ``(group, resource, subresource, namespace, name)``."""
    ref = _object_ref(shape.line)
    if ref is None:
        return None
    return _SUCCESS in shape.line, ref


def received_at(shape: Sketch) -> str | None:
    """When the API server received a sketched request (``requestReceivedTimestamp``), or ``None``
    when the line does not say (read like the other keys: it occurs once, as structure)."""
    return _value(shape.line, _RECEIVED)


def response_code(shape: Sketch) -> int | None:
    """The response status code of a sketched line (the only ``code`` key of a body-free event)."""
    at = shape.line.find('"code":')
    digits = shape.line[at + 7 : at + 10] if at >= 0 else ""
    return int(digits) if len(digits) == 3 and digits.isdigit() else None


def audit_id_of(shape: Sketch) -> str | None:
    """The audit id of a sketched line (client-chosen, never an identity on its own)."""
    return _value(shape.line, _AUDIT_ID)


def uri_of(shape: Sketch) -> str | None:
    """The request URI of a sketched line."""
    return _value(shape.line, _URI)


class Shape(NamedTuple):
    """A line cut at the values that differ from one request to the next (:func:`shape_of`)."""

    key: tuple[str, str, str, str]  # the line without its audit id, receipt and stage times
    audit_id: str
    received: str

    def read_as_sketched(self, line: str) -> bool:
        """Whether a sketch of the line reads the cut values only as its audit id and receipt time:
        they are the first occurrences (what :func:`audit_id_of` and :func:`received_at` read) and
        lie outside the object reference (which :func:`write_details` reads whole). Checked once
        per key: lines of one key differ only inside the cut values, which hold no quote."""
        audit = len(self.key[0])
        received = audit + len(self.audit_id) + len(self.key[1])
        staged = received + len(self.received) + len(self.key[2])
        if (
            line.find(_AUDIT_ID) + len(_AUDIT_ID) != audit
            or line.find(_RECEIVED) + len(_RECEIVED) != received
        ):
            return False
        ref = line.find(_OBJECT_REF)
        end = line.find("}", ref)
        return ref < 0 or all(not ref <= cut <= end for cut in (audit, received, staged))


def shape_of(line: str) -> Shape | None:
    """The line without the values of ``auditID``, ``requestReceivedTimestamp`` and
    ``stageTimestamp`` (in that order: the first ``auditID``, then the next of each), and the first
    two of them. A leading comma (the separator of the stored form, :mod:`codec`) is not part of
    the key.

    Two lines with the same key are byte for byte the same but for those three values, none of which
    holds a quote or a backslash (``None`` otherwise, and when a key is missing). The sketch of a
    body-free line (:func:`sketch`) reads none of the three but the audit id and receipt time, so what
    the engine decides about one line from its sketch holds for every line of the same key, given
    that line's audit id and receipt time (:meth:`Shape.read_as_sketched`): the engine keeps those
    decisions, keyed by this, instead of sketching the same controller write a million times."""
    start = 1 if line.startswith(",") else 0
    at = line.find(_AUDIT_ID)
    if at < 0:
        return None
    at += len(_AUDIT_ID)
    audit_end = line.find('"', at)
    received_at_ = line.find(_RECEIVED, audit_end)
    if audit_end < 0 or received_at_ < 0:
        return None
    received_at_ += len(_RECEIVED)
    received_end = line.find('"', received_at_)
    staged = line.find(_STAGE_TIME, received_end)
    if received_end < 0 or staged < 0:
        return None
    staged += len(_STAGE_TIME)
    staged_end = line.find('"', staged)
    if staged_end < 0:
        return None
    audit_id = line[at:audit_end]
    received = line[received_at_:received_end]
    if "\\" in audit_id or "\\" in received or "\\" in line[staged:staged_end]:
        return None
    key = (line[start:at], line[audit_end:received_at_], line[received_end:staged], line[staged_end:])
    return Shape(key, audit_id, received)


def shape_key(line: str) -> tuple[str, str, str, str] | None:
    """:func:`shape_of`'s key alone, without looking inside the three values (a backslash in one
    gives a key all the same). For the decisions that read none of them (an index entry already
    made as recent, a nameless create's count): two lines with this key differ only inside them."""
    at = line.find(_AUDIT_ID)
    if at < 0:
        return None
    audit_end = line.find('"', at + 11)
    received = line.find(_RECEIVED, audit_end)
    if audit_end < 0 or received < 0:
        return None
    received_end = line.find('"', received + 28)
    staged = line.find(_STAGE_TIME, received_end)
    if received_end < 0 or staged < 0:
        return None
    staged_end = line.find('"', staged + 18)
    if staged_end < 0:
        return None
    head = line[1 : at + 11] if line.startswith(",") else line[: at + 11]
    return (head, line[audit_end : received + 28], line[received_end : staged + 18], line[staged_end:])


def dry_run_in_uri(line: str) -> bool:
    """Whether a body-free line's request URI carries a ``dryRun`` parameter (or cannot be read)."""
    uri = _value(line, _URI)
    return uri is None or "dryRun" in uri
