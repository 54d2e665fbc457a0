"""Instants written by Kubernetes, compared as times rather than as text.

Used by the verification engine wherever it orders an audit event against an object's time. Audit
timestamps carry microseconds (``…:05.123456Z``); Event and object times carry whole seconds
(``…:05Z``). As text, ``…:05.5Z`` sorts *before* ``…:05Z`` (``.`` < ``Z``), so a request half a
second after a failure would look earlier than it. Parsing both removes that trap. Pure.
"""

from __future__ import annotations

from datetime import UTC, datetime


def instant(value: object) -> datetime | None:
    """The time a Kubernetes RFC 3339 timestamp names (always timezone-aware); ``None`` if it is not one."""
    if not isinstance(value, str) or not value:
        return None
    try:
        parsed = datetime.fromisoformat(value.replace("Z", "+00:00"))
    except ValueError:
        return None
    return parsed if parsed.tzinfo is not None else parsed.replace(tzinfo=UTC)


def earliest(values: list[object]) -> datetime | None:
    """The earliest of the values that are timestamps; ``None`` when none is."""
    times = [t for t in (instant(v) for v in values) if t is not None]
    return min(times) if times else None
