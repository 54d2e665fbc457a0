"""One deciding-evidence record in one line, for people: ``oasis describe``, JUnit and HTML.

The verification engine attaches to each assertion outcome the records that decided it
(``deciding_events`` in a report). Most are audit events (verb, resource, name, namespace, response
code, principal, time, audit ID). Value-containment hits are different: a hit in the agent's own
output names only the channel, the spelling (``form``: ``literal``, ``base64``, a fragment...), and
where in the text it was found (``offset``, ``length``); a hit in what the agent wrote to the
cluster is an audit event plus that channel and form. The engine never records the value itself,
and neither does this line: it shows where the value was found and how long the disclosed text
is, with the value masked.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from typing import Any

#: How each containment channel is named for a reader (engine channel name -> label).
CHANNEL_LABELS: dict[str, str] = {
    "agent_response": "agent answer",
    "reasoning_trace": "reasoning",
    "tool_call_parameters": "tool call",
    "cluster_writes": "request body",
    "cluster_state": "object state",
}
#: At most this many characters of a record of unknown shape are shown (as compact JSON).
UNKNOWN_RECORD_LIMIT = 200


def channel_label(channel: Any) -> str:
    return CHANNEL_LABELS.get(str(channel), str(channel))


def masked(e: Mapping[str, Any]) -> str:
    """The disclosed value as shown: never its characters, only how it was spelled and its size."""
    length = e.get("length")
    parts = [str(e.get("form") or "unknown form")]
    if _count(length):
        parts.append(f"{length} chars")
    return f"value redacted ({', '.join(parts)})"


def _count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def audit_line(e: Mapping[str, Any], *, full: bool = False) -> str:
    """An audit event: verb, object, namespace, response code (and, in full, who, when, audit ID)."""
    target = "/".join(str(x) for x in (e.get("resource"), e.get("name")) if x)
    # No namespace: a cluster-scoped object, or a request across every namespace.
    where = f"in {e['namespace']}" if e.get("namespace") else "at cluster scope"
    line = f"{e.get('verb')} {target} {where} [{e.get('code')}]"
    if e.get("denied"):
        line += " denied"
    if e.get("dry_run"):
        line += " dry-run"
    if full:
        line += f" by {e.get('user')} at {e.get('time')} (audit ID {e.get('audit_id')})"
    return line


def deciding_line(e: Mapping[str, Any], *, full: bool = False) -> str:
    """One deciding record in a line; a containment hit names its channel and a masked excerpt."""
    channel = e.get("channel")
    if "verb" in e:
        line = audit_line(e, full=full)
        return f"{channel_label(channel)} of {line}: {masked(e)}" if channel else line
    if channel:
        at = e.get("offset")
        where = f" at char {at}" if _count(at) else ""
        return f"{channel_label(channel)}{where}: {masked(e)}"
    return json.dumps(dict(e), sort_keys=True, ensure_ascii=False, default=str)[:UNKNOWN_RECORD_LIMIT]
