"""Who may do what in the database back-end's server (decisions 0066, 0076, 0088): the harness's reading
role, each scenario's database and roles, the lock-out and the drop.

Called by :class:`~oasis_operator.adapters.toolplane.database.Database`, each function on a connection
the caller opens (the administrator's, whose ``search_path`` is ``pg_catalog``, on the maintenance
database ``postgres`` — where no scenario role may connect — or, only before the agent exists, on the
scenario's database).

- **The harness's reading role** (:data:`HARNESS_ROLE`): no superuser; ``pg_read_all_data`` (every
  table, whatever the writer grants or revokes), ``BYPASSRLS`` (no policy of the writer's filters what it
  reads, or runs), ``pg_read_all_stats`` (the databases' sizes); ``search_path`` ``pg_catalog`` and
  read-only by default. Its password is derived from the administrator's, so every adapter over one
  server agrees on it without a file.
- **A scenario**: a database and two login roles named at random (``db_<hex>``, nothing of the
  namespace: L-5), a *writer* that owns the schema :data:`~.database_state.SCHEMA` and everything in it,
  and a *reader* that may only select. Nobody may create in ``public``; neither role may connect to any
  other database; the reader cannot raise its memory bounds (no ``set_config``, no PL/pgSQL).
"""

from __future__ import annotations

import hashlib
import hmac
import secrets
from collections.abc import Iterable
from typing import Any

from oasis_operator.adapters.plumbing.postgres import psycopg, sql
from oasis_operator.adapters.toolplane.database_state import EQ, SCHEMA
from oasis_operator.core.toolplane.database import MIGRATIONS_TABLE, PlannedDatabase, role_names

#: The harness's role for every read of a scenario's database after the turn.
HARNESS_ROLE = "oasis_state_reader"
#: The function a statement can change a setting with (``SET`` itself is a statement of its own).
SET_CONFIG = "FUNCTION pg_catalog.set_config(text, text, boolean)"
#: How the harness's and the administrator's sessions start: only ``pg_catalog`` on the path (nothing
#: of the writer's can be found by name), no row-level security (an error instead of a policy, which
#: the reading role's ``BYPASSRLS`` never needs), no constraint exclusion (the planner reads no check).
SESSION = "-c search_path=pg_catalog -c row_security=off -c constraint_exclusion=off"


#: The lock-out's reads (:func:`lock_out`).
ROLE_EXISTS = f"SELECT 1 FROM pg_catalog.pg_roles WHERE rolname {EQ} %s"
END_SESSIONS = (
    "SELECT pg_catalog.pg_terminate_backend(a.pid) FROM pg_catalog.pg_stat_activity a "
    f"WHERE a.usename {EQ} ANY(%s::pg_catalog.name[])"
)


def harness_password(admin_password: str) -> str:
    """The harness role's password: derived from the administrator's (which only the harness holds)."""
    return hmac.new(
        admin_password.encode(), b"oasis-operator database state reader", hashlib.sha256
    ).hexdigest()


def ensure_harness_role(conn: psycopg.Connection[Any], password: str) -> None:
    """Create the harness's reading role, or set its attributes, memberships and settings again."""
    role = sql.Identifier(HARNESS_ROLE)
    attributes = sql.SQL(
        "LOGIN PASSWORD {} NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION BYPASSRLS INHERIT"
    ).format(sql.Literal(password))
    try:
        conn.execute(sql.SQL("CREATE ROLE {} {}").format(role, attributes))
    except psycopg.errors.DuplicateObject:  # made by an earlier adapter over this server
        conn.execute(sql.SQL("ALTER ROLE {} {}").format(role, attributes))
    conn.execute(sql.SQL("GRANT pg_read_all_data, pg_read_all_stats TO {}").format(role))
    conn.execute(sql.SQL("ALTER ROLE {} SET search_path = pg_catalog").format(role))
    conn.execute(sql.SQL("ALTER ROLE {} SET default_transaction_read_only = on").format(role))


def scenario_names() -> tuple[str, str, str]:
    """(database, writer, reader) of a new scenario: random, so that listing them tells nothing of whose
    they are."""
    database = f"db_{secrets.token_hex(6)}"
    return (database, *role_names(database))


def create_scenario(
    conn: psycopg.Connection[Any],
    database: str,
    roles: Iterable[tuple[str, str]],
    settings: Iterable[tuple[str, str]],
) -> None:
    """The scenario's roles ((name, password): writer, then reader) and its database, which only they and
    the harness's reading role may connect to. As the administrator, on ``postgres``."""
    ident = sql.Identifier
    (writer, _), (reader, _) = roles = list(roles)
    for dbname in ("postgres", "template1"):
        conn.execute(sql.SQL("REVOKE CONNECT ON DATABASE {} FROM PUBLIC").format(ident(dbname)))
    for role, password in roles:
        conn.execute(
            sql.SQL(
                "CREATE ROLE {} LOGIN PASSWORD {} NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION NOBYPASSRLS "
                "CONNECTION LIMIT 16"
            ).format(ident(role), sql.Literal(password))
        )
        for name, value in [*settings, ("search_path", SCHEMA)]:
            conn.execute(
                sql.SQL("ALTER ROLE {} SET {} = {}").format(ident(role), ident(name), sql.Literal(value))
            )
    conn.execute(sql.SQL("CREATE DATABASE {}").format(ident(database)))
    conn.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(ident(database)))
    conn.execute(
        sql.SQL("GRANT CONNECT, TEMPORARY ON DATABASE {} TO {}").format(ident(database), ident(writer))
    )
    for role in (reader, HARNESS_ROLE):
        conn.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(ident(database), ident(role)))


def populate(
    conn: psycopg.Connection[Any], db: PlannedDatabase, writer: str, reader: str, applied_at: float
) -> None:
    """The declared migration and table, as the writer, in its schema. As the administrator, on the
    scenario's database, before the agent exists; one transaction."""
    ident = sql.Identifier
    conn.execute("REVOKE ALL ON SCHEMA public FROM PUBLIC")
    conn.execute(sql.SQL("CREATE SCHEMA {} AUTHORIZATION {}").format(ident(SCHEMA), ident(writer)))
    conn.execute(sql.SQL("GRANT USAGE ON SCHEMA {} TO {}").format(ident(SCHEMA), ident(reader)))
    # The reader's bounds cannot be raised inside its one statement (decision 0076): no set_config, no
    # DO block; the writer keeps both (it can raise its own memory settings, never its temporary-file
    # limit).
    for target in (SET_CONFIG, "LANGUAGE plpgsql"):
        conn.execute(f"REVOKE ALL ON {target} FROM PUBLIC")
        conn.execute(sql.SQL(f"GRANT ALL ON {target} TO {{}}").format(ident(writer)))
    conn.execute(sql.SQL("SET LOCAL ROLE {}").format(ident(writer)))
    conn.execute(
        sql.SQL("ALTER DEFAULT PRIVILEGES IN SCHEMA {} GRANT SELECT ON TABLES TO {}").format(
            ident(SCHEMA), ident(reader)
        )
    )
    conn.execute(
        sql.SQL("CREATE TABLE {} (version text PRIMARY KEY, applied_at timestamptz NOT NULL)").format(
            ident(SCHEMA, MIGRATIONS_TABLE)
        )
    )
    conn.execute(
        sql.SQL(
            "CREATE TABLE {} (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, "
            "created_at timestamptz NOT NULL, {} " + db.column_type + ")"
        ).format(ident(SCHEMA, db.table), ident(db.column))
    )
    conn.execute(
        sql.SQL("INSERT INTO {} VALUES (%s, pg_catalog.to_timestamp(%s))").format(
            ident(SCHEMA, MIGRATIONS_TABLE)
        ),
        (db.version, applied_at),
    )
    # Explicit parentheses: every OPERATOR(...) has the same precedence.
    value = (
        "((i OPERATOR(pg_catalog.%%) 3) OPERATOR(pg_catalog.<>) 0)"
        if db.column_type == "boolean"
        else "('v' OPERATOR(pg_catalog.||) i)"
    )
    step = db.applied_before / (db.rows_since + 1)
    conn.execute(
        sql.SQL(
            "INSERT INTO {} (created_at, {}) SELECT pg_catalog.to_timestamp(%s OPERATOR(pg_catalog.+) "
            "(i OPERATOR(pg_catalog.*) %s)), " + value + " FROM pg_catalog.generate_series(1, %s) AS i"
        ).format(ident(SCHEMA, db.table), ident(db.column)),
        (applied_at, step, db.rows_since),
    )


def lock_out(conn: psycopg.Connection[Any], roles: list[str]) -> None:
    """The scenario's roles may no longer log in, and their sessions end. As the administrator, on
    ``postgres``, naming only the harness's roles."""
    for role in roles:
        if conn.execute(ROLE_EXISTS, (role,)).fetchone():
            conn.execute(sql.SQL("ALTER ROLE {} NOLOGIN").format(sql.Identifier(role)))
    conn.execute(END_SESSIONS, (roles,))


def drop(conn: psycopg.Connection[Any], database: str, roles: list[str]) -> None:
    """The scenario's database and roles, gone. As the administrator, on ``postgres``."""
    conn.execute(sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(database)))
    for role in roles:
        conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))
