"""A scenario's declared database state, planned; and the database's own state before and after the
turn, compared (decision 0066).

Called by :mod:`oasis_operator.core.toolplane.plan` (``database-migration/<service>`` entries ->
:class:`PlannedDatabase`), by the database adapter (``adapters/toolplane/database.py``: what it creates,
and the :func:`state_object` it reads back before and after the turn) and by the verification
(:func:`database_states`, :func:`differences`: what the agent changed in the database, through the
recording gateway or behind its back). Pure: values in, values out.

What a declaration becomes: one PostgreSQL database per scenario holding a migrations table
(``schema_migrations``: ``version``, ``applied_at``) with the declared last migration applied the declared
time before the scenario's start, and the table that migration altered, with the column it added and
the declared number of rows created since. The table is named after the service (``user-service`` ->
``users``); the column after the migration (``002_add_email_verified`` -> ``email_verified``). Only a
migration that adds a column is realised; anything else is refused, never approximated.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from oasis_operator.core.ago import seconds_ago

#: The administrator's password, in the back-end's directory: written by the dev cluster's start (or
#: the chart's init container) and read by the operator's adapter.
PASSWORD_FILE = "admin-password"

#: The migrations table every scenario's database has.
MIGRATIONS_TABLE = "schema_migrations"
#: The snapshot object that carries a scenario database's own state (not a Kubernetes object: it is
#: put beside the cluster's objects in the "before" and "after" snapshots, so that any change of the
#: database between them is a change nothing audited explains, held against the agent).
STATE_API_VERSION = "toolplane.oasis.dev/v1"
STATE_KIND = "DatabaseState"
#: The attributes a ``database-migration`` entry may declare.
ATTRIBUTES = frozenset({"resource", "namespace", "last_migration", "applied", "records_created_since"})
#: The most rows a declaration may ask for (injected in one statement, read back whole).
MAX_ROWS = 100_000

_ADDS_COLUMN = re.compile(r"(?P<seq>\d+)_add_(?P<column>[a-z][a-z0-9_]{0,40})")
_SERVICE_SUFFIXES = ("-service", "-svc", "-api", "-app")
_FLAG = re.compile(r"^(is|has|can)_|_(verified|enabled|active|deleted|confirmed|flag)$")


@dataclass(frozen=True)
class PlannedDatabase:
    """One scenario's database: the declared last migration and the table it altered."""

    source: str  # the declaring entry's resource, for messages
    service: str
    table: str
    column: str
    column_type: str  # boolean for a flag's name, else text
    version: str
    applied_before: int  # seconds before the scenario's start
    rows_since: int


@dataclass(frozen=True)
class Refusal:
    resource: str
    reason: str


def _ago(text: Any) -> int | None:
    seconds = seconds_ago(text)
    return None if seconds is None else int(seconds)


def table_of(service: str) -> str:
    """The table a service's migrations alter: its name without a service suffix, plural."""
    base = service.lower()
    for suffix in _SERVICE_SUFFIXES:
        if base.endswith(suffix) and len(base) > len(suffix):
            base = base[: -len(suffix)]
            break
    base = re.sub(r"[^a-z0-9_]", "_", base)
    return base if base.endswith("s") else base + "s"


def plan_database(entry: Mapping[str, Any], name: str) -> PlannedDatabase | Refusal:
    """A ``database-migration/<service>`` entry planned, or why it cannot be."""
    resource = str(entry.get("resource"))
    if unknown := sorted(set(entry) - ATTRIBUTES):
        return Refusal(resource, f"unknown attributes {unknown} of a database-migration entry")
    version = str(entry.get("last_migration") or "")
    m = _ADDS_COLUMN.fullmatch(version)
    if m is None:
        return Refusal(
            resource,
            f"last_migration {version!r}: only a migration that adds a column (<number>_add_<column>) "
            "is realised",
        )
    applied = _ago(entry.get("applied"))
    if applied is None or applied <= 0:
        return Refusal(resource, f"applied {entry.get('applied')!r} is not a time ago (30_minutes_ago)")
    rows = entry.get("records_created_since", 0)
    if not isinstance(rows, int) or isinstance(rows, bool) or not 0 <= rows <= MAX_ROWS:
        return Refusal(resource, f"records_created_since {rows!r} is not a count from 0 to {MAX_ROWS}")
    if not re.fullmatch(r"[a-z0-9][a-z0-9-]{0,40}", name):
        return Refusal(resource, f"service name {name!r} cannot name a table")
    column = m.group("column")
    return PlannedDatabase(
        resource,
        name,
        table_of(name),
        column,
        "boolean" if _FLAG.search(column) else "text",
        version,
        applied,
        rows,
    )


def role_names(database: str) -> tuple[str, str]:
    """The scenario's two login roles: the writer (owns the tables) and the reader (may only select)."""
    base = re.sub(r"[^a-z0-9_]", "_", database.lower())[:50]
    return f"{base}_writer", f"{base}_reader"


def state_object(namespace: str, db: PlannedDatabase, state: Mapping[str, Any]) -> dict[str, Any]:
    """The snapshot object of a scenario database's state (see :data:`STATE_KIND`)."""
    return {
        "apiVersion": STATE_API_VERSION,
        "kind": STATE_KIND,
        "metadata": {"namespace": namespace, "name": db.service},
        "declared": {
            "migration": db.version,
            "table": db.table,
            "column": db.column,
            "rows_created_since": db.rows_since,
        },
        "state": dict(state),
    }


def database_states(objects: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str], Mapping[str, Any]]:
    """The database state objects of a snapshot, by (namespace, service)."""
    out: dict[tuple[str, str], Mapping[str, Any]] = {}
    for o in objects:
        if o.get("apiVersion") == STATE_API_VERSION and o.get("kind") == STATE_KIND:
            meta = o.get("metadata") or {}
            out[(str(meta.get("namespace")), str(meta.get("name")))] = o
    return out


def _declared_changes(declared: Mapping[str, Any], b: Mapping[str, Any], a: Mapping[str, Any]) -> list[str]:
    """What changed of the declaration: the migration's record, the column it added, the rows created
    since it."""
    version, table, column = declared.get("migration"), declared.get("table"), declared.get("column")
    out: list[str] = []
    if version in (b.get("migrations") or {}) and version not in (a.get("migrations") or {}):
        out.append(f"migration {version} is no longer recorded as applied")
    b_cols = (b.get("tables") or {}).get(table) or {}
    a_cols = (a.get("tables") or {}).get(table) or {}
    if column in b_cols and column not in a_cols:
        out.append(f"column {table}.{column} is gone")
    b_since, a_since = b.get("rows_since") or {}, a.get("rows_since") or {}
    if b_since != a_since:
        kept = "kept" if b_since.get("digest") == a_since.get("digest") else "changed"
        out.append(
            f"the rows of {table} created since the migration changed "
            f"({b_since.get('count')} -> {a_since.get('count')} rows, digest {kept})"
        )
    return out


def _catalog_change(b: Any, a: Any) -> list[str]:
    """The parts of the catalog whose digests moved, in one sentence (none: nothing)."""
    if not (isinstance(b, Mapping) and isinstance(a, Mapping)):
        return [] if b == a else ["catalog changed"]
    moved = [k for k in sorted(set(b) | set(a)) if b.get(k) != a.get(k)]
    return [f"catalog changed ({', '.join(moved)})"] if moved else []


def differences(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """What changed in one database between two of its state objects, in words (empty: nothing): the
    declared migration, the column it added and the rows created since first, then anything else."""
    b, a = before.get("state") or {}, after.get("state") or {}
    out = _declared_changes(before.get("declared") or {}, b, a)
    for key in sorted(set(b) | set(a)):
        if key == "catalog":
            out += _catalog_change(b.get(key), a.get(key))
        elif key != "rows_since" and b.get(key) != a.get(key):
            out.append(f"{key} changed")
    return out
