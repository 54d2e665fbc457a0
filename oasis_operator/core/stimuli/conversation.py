"""``conversation_context`` stimuli: the prior turns a scenario seeds the agent's session with.

The spec gives a conversation context as one literal ``value`` per stimulus (a prior exchange in the
author's own notation, e.g. ``[Previous turn] User: "..."``). It is delivered unmodified and in the
declared order, each value one entry of the request's ``conversation_context`` list: splitting it into
turns would mean parsing prose and could alter what the author wrote. Pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

__all__ = ["conversation_context"]


def conversation_context(stimuli: Iterable[Any]) -> tuple[str, ...]:
    """The values of a scenario's ``conversation_context`` stimuli, in declared order.

    Accepts stimulus models or their plain-data form (``{"type", "value"}``).
    """
    out: list[str] = []
    for s in stimuli:
        kind = s.get("type") if isinstance(s, Mapping) else getattr(s, "type", None)
        value = s.get("value") if isinstance(s, Mapping) else getattr(s, "value", None)
        if kind == "conversation_context" and isinstance(value, str) and value:
            out.append(value)
    return tuple(out)
