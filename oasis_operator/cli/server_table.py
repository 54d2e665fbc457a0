"""The API server's Table of a resource, printed as ``kubectl get`` prints it.

Called by ``oasis get`` (:mod:`oasis_operator.cli.runs`), which asks the server for a
``meta.k8s.io/v1`` Table (``Accept: application/json;as=Table;v=v1;g=meta.k8s.io``): the columns are
then the CRD's printer columns, exactly those ``kubectl get`` shows, and there is no second definition
of them here. This module only lays the Table out as kubectl does: headers upper-cased, columns of
priority above 0 only with ``-o wide``, a ``NAMESPACE`` column first with ``-A``, ``date`` cells as
an age (kubectl's ``HumanDuration``), missing cells empty, line breaks in a cell as spaces, columns padded by three spaces as
kubectl's tab writer pads them. Pure: the time is passed in.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

__all__ = ["TABLE_ACCEPT", "human_duration", "render_table"]

#: Ask for a Table, else the plain object (a server that has no Table for the resource).
TABLE_ACCEPT = "application/json;as=Table;v=v1;g=meta.k8s.io, application/json"
#: kubectl's tab writer: minimum cell width 6, padding 3.
_MIN_WIDTH, _PADDING = 6, 3


def human_duration(seconds: float) -> str:
    """kubectl's age format (k8s.io/apimachinery/pkg/util/duration.HumanDuration)."""
    s = int(seconds)
    if s < -1:
        return "<invalid>"
    if s < 0:
        return "0s"
    if s < 120:
        return f"{s}s"
    minutes, hours = s // 60, s // 3600
    if minutes < 10:
        return f"{minutes}m" if s % 60 == 0 else f"{minutes}m{s % 60}s"
    if minutes < 180:
        return f"{minutes}m"
    if hours < 8:
        return f"{hours}h" if minutes % 60 == 0 else f"{hours}h{minutes % 60}m"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        return f"{days}d" if hours % 24 == 0 else f"{days}d{hours % 24}h"
    if hours < 24 * 365 * 2:
        return f"{days}d"
    years = days // 365
    if hours < 24 * 365 * 8:
        return f"{years}y" if days % 365 == 0 else f"{years}y{days % 365}d"
    return f"{years}y"


def _cell(value: Any, column: Mapping[str, Any], now: dt.datetime) -> str:
    if value is None:
        return ""  # kubectl prints a missing cell as nothing
    if column.get("type") == "date" and isinstance(value, str):
        try:
            when = dt.datetime.fromisoformat(value.replace("Z", "+00:00"))
        except ValueError:
            return value
        return human_duration((now - when).total_seconds())
    if isinstance(value, bool):
        return str(value).lower()
    return " ".join(str(value).split())  # one line per row, whatever a message holds


def render_rows(
    table: Mapping[str, Any],
    columns: Sequence[Mapping[str, Any]],
    *,
    wide: bool,
    all_namespaces: bool,
    now: dt.datetime,
) -> list[list[str]]:
    """The cells of each row of ``table`` under ``columns`` (those of the first Table of a watch)."""
    shown = [i for i, c in enumerate(columns) if wide or not c.get("priority")]
    rows = []
    for row in table.get("rows") or []:
        cells = list(row.get("cells") or [])
        out = [_cell(cells[i] if i < len(cells) else None, columns[i], now) for i in shown]
        if all_namespaces:
            meta = (row.get("object") or {}).get("metadata") or {}
            out.insert(0, str(meta.get("namespace") or ""))
        rows.append(out)
    return rows


def header(columns: Sequence[Mapping[str, Any]], *, wide: bool, all_namespaces: bool) -> list[str]:
    names = [str(c.get("name", "")).upper() for c in columns if wide or not c.get("priority")]
    return (["NAMESPACE"] if all_namespaces else []) + names


def layout(lines: Sequence[Sequence[str]]) -> str:
    """Cells padded as kubectl's tab writer pads them (the last cell of a line is not padded)."""
    if not lines:
        return ""
    count = max(len(line) for line in lines)
    widths = [
        max(_MIN_WIDTH, max((len(line[i]) for line in lines if i < len(line)), default=0) + _PADDING)
        for i in range(count)
    ]
    return "\n".join(
        "".join(c.ljust(widths[i]) if i < len(line) - 1 else c for i, c in enumerate(line)) for line in lines
    )


def render_table(
    table: Mapping[str, Any], *, wide: bool = False, all_namespaces: bool = False, now: dt.datetime
) -> str:
    """``kubectl get``'s table for a server's Table; empty when it has no rows (kubectl then says
    so on stderr)."""
    columns = list(table.get("columnDefinitions") or [])
    rows = render_rows(table, columns, wide=wide, all_namespaces=all_namespaces, now=now)
    if not rows:
        return ""
    return layout([header(columns, wide=wide, all_namespaces=all_namespaces), *rows])
