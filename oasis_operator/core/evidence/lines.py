"""Reading audit log lines fast without trusting them: which lines need a full JSON parse.

Called by the verification engine's single pass over an evidence stream (up to millions of lines).
A full parse costs about 15 µs per line; most lines are control-plane bookkeeping. This module
answers two questions from the raw text, and only where the answer is exact:

- :meth:`LineFilter.mentions` — does the line contain one of the scenario's needles (its namespace
  names, the agent's principals, its cluster-scoped object names)? A line that does not cannot be
  about the scenario; it is only checked to be a whole JSON object (``{`` ... ``}``), and a line that
  is not is reported as unreadable (a truncated line could have been the scenario's).
- :func:`sketch` — for a line without request or response bodies, its users, verb, stage, response
  code and object reference, read with regular expressions. Exact because every string a client
  controls (URI, user agent, names, messages) is JSON-escaped, so an unescaped ``"username":"`` can
  only be structure; and without bodies there is no client-shaped object in the line to imitate
  structure. Anything unexpected (escapes, repeated keys, a missing key) gives ``None``: parse fully.

Needles must be strings that no JSON encoder escapes (``[A-Za-z0-9:._@/-]``); otherwise filtering is
turned off and every line is parsed.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable
from dataclasses import dataclass

_SAFE = re.compile(r"^[A-Za-z0-9:._@/-]+$")
_USERNAME = re.compile(r'"username":"([^"\\]*)(["\\])')
_VERB = re.compile(r'"verb":"([a-z]*)"')
_STAGE = re.compile(r'"stage":"([A-Za-z]*)"')
_CODE = re.compile(r'"code":(\d+)')
_OBJECT_REF = re.compile(r'"objectRef":(\{[^{}]*\})')
_BODY_KEYS = ('"requestObject"', '"responseObject"')


class LineFilter:
    """The needles of one scenario, and the cheap well-formedness test of an unmentioned line."""

    def __init__(self, needles: Iterable[str]) -> None:
        words = sorted({n for n in needles if n})
        self.needles: tuple[str, ...] | None = tuple(words) if all(_SAFE.match(n) for n in words) else None

    def mentions(self, line: str) -> bool:
        """Whether the line may concern the scenario (always true when filtering is off)."""
        needles = self.needles
        return needles is None or any(n in line for n in needles)


def looks_whole(line: str) -> bool:
    """A line that can be one JSON object: starts with ``{`` and ends with ``}`` (after blanks)."""
    text = line.strip()
    return text.startswith("{") and text.endswith("}")


@dataclass(frozen=True, slots=True)
class Sketch:
    """What a body-free audit line says about who did what, read without a JSON parse."""

    usernames: tuple[str, ...]  # the user and the impersonated user, in the order of the line
    verb: str
    stage: str
    code: int  # 0 when the line has no response status (RequestReceived)
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str


def sketch(line: str) -> Sketch | None:
    """The sketch of a line without request/response bodies, or ``None`` (parse it fully)."""
    if not looks_whole(line) or any(key in line for key in _BODY_KEYS):
        return None
    users = _USERNAME.findall(line)
    if not users or len(users) > 2 or any(end != '"' for _, end in users):
        return None
    verbs, stages, codes = _VERB.findall(line), _STAGE.findall(line), _CODE.findall(line)
    refs = _OBJECT_REF.findall(line)
    if len(verbs) != 1 or len(stages) != 1 or len(codes) > 1 or len(refs) != line.count('"objectRef":'):
        return None
    if len(refs) > 1:
        return None
    ref: dict[str, object] = {}
    if refs:
        if "\\" in refs[0]:
            return None
        try:
            ref = json.loads(refs[0])
        except json.JSONDecodeError:
            return None
    fields = [ref.get(k, "") for k in ("apiGroup", "resource", "subresource", "namespace", "name")]
    if not all(isinstance(f, str) for f in fields):
        return None
    group, resource, subresource, namespace, name = (str(f) for f in fields)
    return Sketch(
        usernames=tuple(u for u, _ in users),
        verb=verbs[0],
        stage=stages[0],
        code=int(codes[0]) if codes else 0,
        group=group,
        resource=resource,
        subresource=subresource,
        namespace=namespace,
        name=name,
    )
