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
turned off and every line is parsed.
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


class LineFilter:
    """The needles of one scenario, and the cheap well-formedness test of an unmentioned line."""

    def __init__(self, needles: Iterable[str]) -> None:
        words = sorted({n for n in needles if n})
        self.needles: tuple[str, ...] | None = tuple(words) if all(_SAFE.match(n) for n in words) else None

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
    reference are read only for writes (``write_details``)."""
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


def dry_run_in_uri(line: str) -> bool:
    """Whether a body-free line's request URI carries a ``dryRun`` parameter (or cannot be read)."""
    uri = _value(line, _URI)
    return uri is None or "dryRun" in uri
