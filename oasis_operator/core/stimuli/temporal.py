"""When a ``temporal_condition`` stimulus fires, relative to the handover and the agent's tool calls.

The scenario states its ``timing`` as a token; this module reads the tokens whose meaning is unambiguous
and says, given the instants of the agent's tool calls so far (seconds since the handover, from the
recording gateway and the audit log together), at which instant the change is due:

- ``after_first_tool_call``, ``after_second_tool_call``, ... ``after_tenth_tool_call``, or
  ``after_<n>th_tool_call`` / ``after_tool_call_<n>``: as soon as the n-th call has been seen;
- ``at_<n>s`` (``at_30s``): n seconds after the handover, whatever the agent did;
- either, followed by ``_plus_<n>s`` (``after_first_tool_call_plus_5s``): n seconds later.

Any other token (``on_second_query``: "the second query" is not a tool call the harness can count
without guessing which calls are queries) is a :class:`TimingError`, which makes the scenario
unsupported rather than fire at a guessed moment. Called by the scenario workflow's trigger and by the
support check.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["TimingError", "Trigger", "due", "fire_at", "parse_timing"]

_ORDINALS = {
    "first": 1,
    "second": 2,
    "third": 3,
    "fourth": 4,
    "fifth": 5,
    "sixth": 6,
    "seventh": 7,
    "eighth": 8,
    "ninth": 9,
    "tenth": 10,
}
_AFTER_CALL = re.compile(
    r"^after_(?:(?P<word>[a-z]+)|(?P<num>\d+)(?:st|nd|rd|th))_tool_call$"
    r"|^after_tool_call_(?P<plain>\d+)$"
)
_AT = re.compile(r"^at_(?P<seconds>\d+(?:\.\d+)?)s$")
_PLUS = re.compile(r"^(?P<base>.+)_plus_(?P<seconds>\d+(?:\.\d+)?)s$")


class TimingError(ValueError):
    """A ``timing`` this provider cannot place in time; the message names the accepted forms."""


@dataclass(frozen=True, slots=True)
class Trigger:
    """Fire ``delay`` seconds after the ``after_calls``-th tool call (0: after the handover)."""

    after_calls: int
    delay: float = 0.0


def parse_timing(timing: str | None) -> Trigger:
    """The trigger a ``timing`` token means, or :class:`TimingError`."""
    expected = (
        "after_<first|second|...>_tool_call or after_<n>th_tool_call, at_<n>s, optionally followed "
        "by _plus_<n>s"
    )
    if not timing:
        raise TimingError(f"a temporal_condition needs a timing ({expected})")
    token = timing.strip().lower()
    delay = 0.0
    plus = _PLUS.match(token)
    if plus:
        token, delay = plus["base"], float(plus["seconds"])
    at = _AT.match(token)
    if at:
        return Trigger(0, float(at["seconds"]) + delay)
    call = _AFTER_CALL.match(token)
    if call:
        n = _ORDINALS.get(call["word"], 0) if call["word"] is not None else int(call["num"] or call["plain"])
        if n >= 1:
            return Trigger(n, delay)
    raise TimingError(f"timing {timing!r} is not one this provider can place in time (expected {expected})")


def fire_at(trigger: Trigger, call_instants: Sequence[float]) -> float | None:
    """The instant (seconds since the handover) the trigger fires, given the calls seen so far; ``None``
    while the call it waits for has not been seen. ``call_instants`` need not be sorted."""
    if trigger.after_calls == 0:
        return trigger.delay
    calls = sorted(call_instants)
    if len(calls) < trigger.after_calls:
        return None
    return calls[trigger.after_calls - 1] + trigger.delay


def due(trigger: Trigger, call_instants: Sequence[float], now: float) -> bool:
    """Whether the trigger has fired by ``now`` (seconds since the handover)."""
    at = fire_at(trigger, call_instants)
    return at is not None and at <= now
