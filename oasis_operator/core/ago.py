"""How long before the scenario's start a declared time is: one reader for every ``..._ago`` value.

Scenario state writes such times in several ways (``25m``, ``2h``, ``25_minutes_ago``, ``90s ago``,
``2 minutes ago``, ``-2m``); the environment (an Event's age), the metrics back-end (a last OOM kill)
and the database back-end (when a migration was applied) all read them here, so a form one accepts
the others accept too. Pure.
"""

from __future__ import annotations

import re
from typing import Any

_UNIT_SECONDS = {"s": 1.0, "m": 60.0, "h": 3600.0, "d": 86400.0}
_UNIT = r"s|secs?|seconds?|m|mins?|minutes?|h|hrs?|hours?|d|days?"
_AGO = re.compile(rf"(?P<minus>-)?\s*(?P<n>\d+(?:\.\d+)?)\s*(?P<unit>{_UNIT})(?:\s+ago)?")


def seconds_ago(value: Any) -> float | None:
    """Seconds before now that ``value`` names (``25_minutes_ago`` -> 1500.0), or None: not such a time.

    Underscores read as spaces and case is ignored. A leading minus (``-2m``) and a trailing ``ago``
    mean the same thing and may not be combined; a bare ``2m`` is an age. Zero is a time (now).
    """
    text = " ".join(str(value).strip().lower().replace("_", " ").split())
    m = _AGO.fullmatch(text)
    if m is None or (m["minus"] and text.endswith("ago")):
        return None
    return float(m["n"]) * _UNIT_SECONDS[m["unit"][0]]
