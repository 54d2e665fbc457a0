"""The reference agent's reading of a database endpoint (interface type ``database``): which migration
was applied last, when, and what has been written since, so that a rollback's cost is known before
anyone proposes one.

Read only: every statement goes to the endpoint's read-only call (``POST query``), each an action of
the answer. Nothing here knows a scenario: the migrations table is whichever table's name says
migration, its version and time columns are found by their types, and the tables written since are
those with a creation-time column. Imports nothing of the operator.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from oasis_operator.agents.reference.tools import ToolReader

__all__ = ["DATABASE", "Migration", "read_migration"]

DATABASE = "database"
QUERY = "query"
MAX_TABLES = 12
_CREATED = re.compile(r"(?i)^(created|inserted|added)(_at|_on|_time)?$|^creation_(time|date)$")
_ADDS = re.compile(r"(?i)(?:^|_)add_(?P<what>[a-z0-9_]+)$")


@dataclass(frozen=True)
class Migration:
    """The last migration and what was written since it."""

    table: str  # the migrations table
    version: str
    applied_at: str
    #: (table, rows created since the migration), tables with a creation-time column only.
    written_since: tuple[tuple[str, int], ...]

    @property
    def added(self) -> str:
        """What the migration's name says it added (a column), or empty."""
        m = _ADDS.search(self.version)
        return m.group("what") if m else ""

    @property
    def rows_since(self) -> int:
        return sum(n for _, n in self.written_since)


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _literal(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


async def _rows(tools: ToolReader, sql: str) -> list[list[Any]] | None:
    answer = await tools.post(DATABASE, QUERY, {"sql": sql})
    rows = answer.get("rows") if isinstance(answer, Mapping) else None
    return rows if isinstance(rows, list) else None


def _pick(columns: Sequence[tuple[str, str]], types: tuple[str, ...], names: re.Pattern[str]) -> str:
    typed = [c for c, t in columns if t.startswith(types)]
    return next((c for c in typed if names.search(c)), typed[0] if typed else "")


async def read_migration(tools: ToolReader) -> Migration | None:
    """What the database says of its last migration (None: no database offered, or no migrations
    table in it)."""
    if not tools.offers(DATABASE):
        return None
    columns = await _rows(
        tools,
        "SELECT table_name, column_name, data_type FROM information_schema.columns "
        "WHERE table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY table_name, ordinal_position",
    )
    if not columns:
        return None
    tables: dict[str, list[tuple[str, str]]] = {}
    for table, column, kind in columns:
        tables.setdefault(str(table), []).append((str(column), str(kind)))
    migrations = next((t for t in sorted(tables) if "migration" in t.lower()), None)
    if migrations is None:
        return None
    version = _pick(tables[migrations], ("text", "character"), re.compile(r"(?i)version|name|id"))
    when = _pick(tables[migrations], ("timestamp", "date"), re.compile(r"(?i)applied|run|executed|at$"))
    if not version or not when:
        return None
    last = await _rows(
        tools,
        f"SELECT {_quoted(version)}, {_quoted(when)}::text FROM {_quoted(migrations)} "
        f"ORDER BY {_quoted(when)} DESC LIMIT 1",
    )
    if not last:
        return None
    name, applied = str(last[0][0]), str(last[0][1])
    written: list[tuple[str, int]] = []
    for table in sorted(tables)[:MAX_TABLES]:
        created = next(
            (c for c, t in tables[table] if _CREATED.match(c) and t.startswith(("timestamp", "date"))), ""
        )
        if table == migrations or not created:
            continue
        count = await _rows(
            tools,
            f"SELECT count(*) FROM {_quoted(table)} WHERE {_quoted(created)} >= {_literal(applied)}::timestamptz",
        )
        if count and isinstance(count[0][0], int):
            written.append((table, count[0][0]))
    return Migration(migrations, name, applied, tuple(written))
