"""The database back-end's adapter: a scenario's declared database state in a PostgreSQL of the harness,
and the agent's HTTP endpoint to it (decisions 0066, 0088, 0089).

Called by :class:`~oasis_operator.adapters.toolplane.ToolPlane`; turns ``plan.toolplane.databases``
into one database per scenario with two login roles of its own (:mod:`.database_roles`): a *writer* that
owns the schema of the tables and a *reader* that may only select, both named at random. Neither role may
connect to any other database, nor create anything in ``public``. What was injected is read back as the
reader, as the agent would.

The agent reaches its database through the :class:`~.database_sql.SqlEndpoint` of this process, which the
recording gateway fronts: ``POST /query`` as the reader, read-only; ``POST /execute`` as the writer, its
stored data bounded.

:meth:`Database.state` reads the database's own state (:mod:`.database_state`) as the harness's reading
role, never a superuser: nothing the agent's roles can make or change is run with rights they do not
hold (decision 0088). The administrator, a superuser, makes databases and roles and injects before the
agent exists; after that it acts only on the maintenance database ``postgres``, where no scenario role
may connect, on the harness's roles and databases by name (the lock-out, the drop). Settling revokes
both roles' logins and ends their sessions; cleanup drops the database and roles. Every failure is a
:class:`ToolPlaneError` (a PROVIDER_FAILURE, never a PASS).
"""

from __future__ import annotations

import asyncio
import secrets
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

from oasis_operator.adapters.plumbing.postgres import psycopg
from oasis_operator.adapters.toolplane import database_roles as roles
from oasis_operator.adapters.toolplane.database_sql import (
    REQUEST_SCHEMA,
    RESPONSE_SCHEMA,
    USAGE,
    SqlEndpoint,
    SqlLimits,
    Target,
    run_one,
)
from oasis_operator.adapters.toolplane.database_state import (
    CATALOG_QUERIES,
    DIGEST_BATCH,
    DIGEST_TIMEOUT_MS,
    MAX_DIGESTED_TABLES,
    catalog_digests,
    read_state,
    row_hashes,
    streamed_digest,
    unreadable,
)
from oasis_operator.core.environment.plan import EnvironmentPlan
from oasis_operator.core.errors import ToolPlaneError
from oasis_operator.core.ports import AgentAccess, ToolEndpoint
from oasis_operator.core.toolplane import registry
from oasis_operator.core.toolplane.database import (
    MIGRATIONS_TABLE,
    PASSWORD_FILE,
    PlannedDatabase,
    state_object,
)
from oasis_operator.core.toolplane.plan import TimedChange

__all__ = [
    "CATALOG_QUERIES",
    "DIGEST_BATCH",
    "DIGEST_TIMEOUT_MS",
    "MAX_DIGESTED_TABLES",
    "PASSWORD_FILE",
    "REQUEST_SCHEMA",
    "RESPONSE_SCHEMA",
    "USAGE",
    "Database",
    "SqlEndpoint",
    "SqlLimits",
    "catalog_digests",
    "row_hashes",
    "run_one",
    "streamed_digest",
    "unreadable",
]

_T = TypeVar("_T")

DEFAULT_LIMITS = SqlLimits()


@dataclass
class _Scenario:
    database: str
    writer: tuple[str, str]  # role, password
    reader: tuple[str, str]
    planned: PlannedDatabase
    applied_at: float  # the injected migration's time (unix seconds)
    tokens: set[str] = field(default_factory=set)
    full: str = ""  # why the database takes no more writes (decision 0089)

    def fill(self, why: str) -> None:
        self.full = self.full or why


#: What PostgreSQL says while it restarts after a backend crashed: the sessions it ends (57P02), the
#: connections it refuses until its log is replayed (57P03).
RECOVERY_STATES = ("57P02", "57P03")


def _recovering_server(exc: BaseException) -> bool:
    """Whether ``exc`` (or the connection error behind a :class:`ToolPlaneError`) is a server restarting
    after a crash: one of :data:`RECOVERY_STATES`, or a session the server ended without saying why."""
    cause = exc.__cause__ if isinstance(exc, ToolPlaneError) else exc
    if not isinstance(cause, psycopg.OperationalError):
        return False
    state = getattr(cause, "sqlstate", None)
    if state is not None:
        return state in RECOVERY_STATES
    text = str(cause).lower()
    return "recovery mode" in text or "closed the connection unexpectedly" in text or "starting up" in text


class Database:
    """``directory``: the back-end's directory (the administrator's password file); ``url``: the
    server, ``postgresql://<admin>@<host>:<port>/<maintenance db>``."""

    name = registry.DATABASE

    def __init__(
        self,
        directory: Path,
        url: str,
        *,
        now: Callable[[], float] = time.time,
        limits: SqlLimits = DEFAULT_LIMITS,
        endpoint_host: str = "127.0.0.1",
        endpoint_port: int = 0,
    ) -> None:
        self.directory = directory
        self.url = url
        self.now = now
        self.limits = limits
        self._scenarios: dict[str, _Scenario] = {}
        # PostgreSQL refuses concurrent changes of one catalog row ("tuple concurrently updated"): the
        # server-wide statements (REVOKE on the shared databases, roles, CREATE/DROP DATABASE) of two
        # scenarios injected or dropped at once take turns.
        self._catalog = threading.Lock()
        self._harness_ready = False
        self.endpoint_server = SqlEndpoint(endpoint_host, endpoint_port, self._target_of, limits)

    # -- connections --------------------------------------------------------------------------------
    def _admin_password(self) -> str:
        try:
            return (self.directory / PASSWORD_FILE).read_text().strip()
        except OSError as exc:
            raise ToolPlaneError(f"the database back-end's password file: {exc.strerror}") from None

    def _conninfo(
        self, user: str | None = None, password: str | None = None, dbname: str | None = None
    ) -> str:
        info = psycopg.conninfo.conninfo_to_dict(self.url)
        if user is None:
            password = self._admin_password()
        else:
            info["user"] = user
        info["password"] = password or ""
        if dbname is not None:
            info["dbname"] = dbname
        return psycopg.conninfo.make_conninfo(**info)  # type: ignore[arg-type]

    def _harness_conninfo(self, dbname: str) -> str:
        """The harness's reading role on ``dbname``, its session fixed (:data:`.database_roles.SESSION`)
        and read-only."""
        password = roles.harness_password(self._admin_password())
        return psycopg.conninfo.make_conninfo(
            self._conninfo(roles.HARNESS_ROLE, password, dbname),
            options=f"{roles.SESSION} -c default_transaction_read_only=on",
        )

    def _connect(self, conninfo: str, who: str) -> psycopg.Connection[Any]:
        """A connection with a 30 s statement timeout, besides the options ``conninfo`` carries."""
        info = psycopg.conninfo.conninfo_to_dict(conninfo)
        info["options"] = f"-c statement_timeout=30000 {info.get('options') or roles.SESSION}"
        try:
            return psycopg.connect(
                psycopg.conninfo.make_conninfo(**info),  # type: ignore[arg-type]
                autocommit=True,
                connect_timeout=self.limits.connect_timeout,
            )
        except psycopg.OperationalError as exc:
            raise ToolPlaneError(
                f"the database back-end is not reachable as {who}: {str(exc).strip()[:300]}"
            ) from exc

    def _admin(self, dbname: str | None = None) -> psycopg.Connection[Any]:
        """The administrator (a superuser): only before the agent exists, or on ``postgres``; its
        session fixed as the harness's is."""
        return self._connect(self._conninfo(dbname=dbname), "its administrator")

    def _harness(self, dbname: str) -> psycopg.Connection[Any]:
        """The harness's reading role (no superuser: decision 0088) on a scenario's database."""
        return self._connect(self._harness_conninfo(dbname), "the harness's reading role")

    def _recovering(self, read: Callable[[_Scenario], _T], s: _Scenario) -> _T:
        """``read(s)``, again while the server is recovering from a crashed backend. Any backend killed
        (the kernel's OOM killer picks the largest: an agent's query can be it) makes PostgreSQL end
        every session and replay its log before it takes connections again; the harness's reads after
        the turn are idempotent, so they wait that out (at most ``limits.recovery_seconds``) instead of
        reporting a fault the agent caused at will. A server still down after that is the harness's."""
        deadline = time.monotonic() + self.limits.recovery_seconds
        while True:
            try:
                return read(s)
            except (psycopg.OperationalError, ToolPlaneError) as exc:
                if not _recovering_server(exc) or time.monotonic() >= deadline:
                    raise
            time.sleep(0.2)

    def _target_of(self, token: str, read: bool) -> Target | None:
        for s in self._scenarios.values():
            if any(secrets.compare_digest(token, t) for t in s.tokens):
                if read:
                    return Target(self._conninfo(*s.reader, s.database))
                return Target(
                    self._conninfo(*s.writer, s.database), self._harness_conninfo(s.database), s.full, s.fill
                )
        return None

    async def aclose(self) -> None:
        await self.endpoint_server.stop()

    # -- the port -----------------------------------------------------------------------------------
    async def probe(self) -> str:
        """The preflight's self-test: the server answers the administrator."""

        def check() -> str:
            with self._admin() as conn:
                row = conn.execute("SHOW server_version").fetchone()
            return f"PostgreSQL {row[0] if row else '?'} answers at {self.url}"

        return await asyncio.to_thread(check)

    async def inject(self, plan: EnvironmentPlan) -> None:
        for db in plan.toolplane.databases:
            await asyncio.to_thread(self._inject, plan.home_namespace, db)

    def _inject(self, namespace: str, db: PlannedDatabase) -> None:
        if namespace in self._scenarios:
            return
        database, writer, reader = roles.scenario_names()
        scenario = _Scenario(
            database,
            (writer, secrets.token_urlsafe(24)),
            (reader, secrets.token_urlsafe(24)),
            db,
            self.now() - db.applied_before,
        )
        self._scenarios[namespace] = scenario  # cleanup finds it even if what follows fails
        with self._catalog, self._admin() as conn:
            if not self._harness_ready:
                roles.ensure_harness_role(conn, roles.harness_password(self._admin_password()))
                self._harness_ready = True
            roles.create_scenario(
                conn, database, (scenario.writer, scenario.reader), self.limits.role_settings()
            )
        with self._admin(database) as conn, conn.transaction():
            roles.populate(conn, db, writer, reader, scenario.applied_at)
        self._read_back(scenario)

    def _read_back(self, s: _Scenario) -> None:
        """What was injected, read as the reader (as the agent reads it) and compared with the plan."""
        db = s.planned
        dsn = self._conninfo(*s.reader, s.database)
        status, migrations = run_one(
            dsn,
            f"SELECT version, extract(epoch FROM applied_at)::float8 FROM {MIGRATIONS_TABLE}",
            read_only=True,
            limits=self.limits,
        )
        status2, since = run_one(
            dsn,
            f'SELECT count(*), count("{db.column}") FROM "{db.table}" '
            f"WHERE created_at >= to_timestamp({s.applied_at!r})",
            read_only=True,
            limits=self.limits,
        )
        want_rows = [[db.version, s.applied_at]]
        got_rows = migrations.get("rows")
        ok = (
            status == 200
            and status2 == 200
            and got_rows is not None
            and len(got_rows) == 1
            and got_rows[0][0] == db.version
            and abs(float(got_rows[0][1]) - s.applied_at) < 1e-3
            and since.get("rows") == [[db.rows_since, db.rows_since]]
        )
        if not ok:
            raise ToolPlaneError(
                f"{db.source}: read back as the agent's reader {migrations} / {since}, planned "
                f"{want_rows} and {db.rows_since} rows created since"
            )

    async def apply(self, plan: EnvironmentPlan, change: TimedChange) -> None:
        raise ToolPlaneError(f"the database back-end has no timed changes (asked for one at {change.at:g}s)")

    async def endpoint(self, plan: EnvironmentPlan, access: AgentAccess) -> ToolEndpoint | None:
        scenario = self._scenarios.get(plan.home_namespace)
        if scenario is None:
            if not plan.toolplane.databases:
                return None
            raise ToolPlaneError(f"the database of {plan.scenario_id} was not injected")
        url = await self.endpoint_server.start()
        token = secrets.token_urlsafe(32)
        scenario.tokens.add(token)
        return ToolEndpoint("database", url, token, USAGE)

    async def state(self, plan: EnvironmentPlan) -> tuple[dict[str, Any], ...]:
        """The scenario database's own state, as the harness's reading role reads it."""
        s = self._scenarios.get(plan.home_namespace)
        if s is None:
            if plan.toolplane.databases:
                raise ToolPlaneError(f"the database of {plan.scenario_id} was not injected")
            return ()
        state = await asyncio.to_thread(self._recovering, self._state, s)
        return (state_object(plan.home_namespace, s.planned, state),)

    def _state(self, s: _Scenario) -> dict[str, Any]:
        with self._harness(s.database) as conn:
            return read_state(conn, s.planned.table, s.applied_at, [s.writer[0], s.reader[0]])

    async def settle(self, plan: EnvironmentPlan) -> None:
        """The agent's access ends: its tokens, both roles' logins, their open sessions."""
        s = self._scenarios.get(plan.home_namespace)
        if s is None:
            return
        s.tokens.clear()
        await asyncio.to_thread(self._recovering, self._lock_out, s)

    def _lock_out(self, s: _Scenario) -> None:
        with self._catalog, self._admin() as conn:
            roles.lock_out(conn, [s.writer[0], s.reader[0]])

    async def cleanup(self, plan: EnvironmentPlan) -> None:
        s = self._scenarios.pop(plan.home_namespace, None)
        if s is None:
            return
        s.tokens.clear()
        await asyncio.to_thread(self._drop, s)

    def _drop(self, s: _Scenario) -> None:
        with self._catalog, self._admin() as conn:
            roles.drop(conn, s.database, [s.writer[0], s.reader[0]])
