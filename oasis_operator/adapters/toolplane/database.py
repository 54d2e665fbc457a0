"""The database back-end's adapter: a scenario's declared database state in a PostgreSQL of the harness,
and the agent's HTTP endpoint to it (decision 0066).

Called by :class:`~oasis_operator.adapters.toolplane.ToolPlane`; turns ``plan.toolplane.databases``
into one database per scenario (named after its home namespace) with two login roles of its own: a
*writer* that owns the tables and a *reader* that may only select. Neither role may connect to any
other database (``CONNECT`` revoked from ``PUBLIC`` on every one the adapter creates, and on
``postgres`` and ``template1``). What was injected is read back as the reader, as the agent would.

The agent reaches its database through :class:`SqlEndpoint`, an HTTP JSON server of this process that
the recording gateway fronts (every call recorded, interface ``database``): ``POST /query`` runs one
statement as the reader in a read-only transaction (the only call the gateway classifies as a read:
the database's own privileges make it one, not a parse of the SQL), ``POST /execute`` runs one
statement as the writer (a write, whatever the statement). One statement per call (libpq's
``PQexecParams`` refuses several), a statement timeout, a row limit, and memory and temporary-file
bounds set on both roles that the reader cannot raise (decision 0076).

:meth:`Database.state` reads the database's own state as the administrator (migrations, tables and
columns, every table's row count and digest, the rows created since the declared migration): the run
puts it in the "before" and "after" snapshots, so a change made behind the gateway's back is caught.
Settling revokes both roles' logins and ends their sessions; cleanup drops the database and roles.
Every failure is a :class:`ToolPlaneError` (a PROVIDER_FAILURE, never a PASS).
"""

from __future__ import annotations

import asyncio
import hashlib
import json
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import psycopg
from aiohttp import web
from psycopg import sql
from psycopg.pq import ExecStatus

from oasis_operator.core.environment.plan import EnvironmentPlan
from oasis_operator.core.errors import ToolPlaneError
from oasis_operator.core.ports import AgentAccess, ToolEndpoint
from oasis_operator.core.toolplane import registry
from oasis_operator.core.toolplane.database import (
    MIGRATIONS_TABLE,
    PASSWORD_FILE,
    PlannedDatabase,
    role_names,
    state_object,
)
from oasis_operator.core.toolplane.plan import TimedChange

from .factory import Factory, FileEntry

_T = TypeVar("_T")

#: Bounds of a state read: a table's digest, and how many tables get one.
DIGEST_TIMEOUT_MS = 5000
MAX_DIGESTED_TABLES = 64
USAGE = (
    'POST /query with JSON {"sql": "<one statement>"}: runs it read-only, answers {"columns": [...], '
    '"rows": [[...]], "row_count": n, "truncated": bool}; POST /execute with the same body runs one '
    'statement that may change the database (a write), answers the same or {"command": "UPDATE 3"}; '
    'an SQL error answers 400 {"error": "...", "sqlstate": "..."}. Bearer token as given.'
)
#: The JSON schemas of a call's body and of its answers (decision 0066 documents them).
REQUEST_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["sql"],
    "properties": {"sql": {"type": "string", "minLength": 1, "maxLength": 16384}},
    "additionalProperties": False,
}
RESPONSE_SCHEMA: dict[str, Any] = {
    "oneOf": [
        {
            "type": "object",
            "required": ["columns", "rows", "row_count", "truncated"],
            "additionalProperties": False,
            "properties": {
                "columns": {"type": "array", "items": {"type": "string"}},
                "rows": {"type": "array", "items": {"type": "array"}},
                "row_count": {"type": "integer", "minimum": 0},
                "truncated": {"type": "boolean"},
            },
        },
        {
            "type": "object",
            "required": ["command"],
            "additionalProperties": False,
            "properties": {"command": {"type": "string"}},
        },
        {
            "type": "object",
            "required": ["error"],
            "additionalProperties": False,
            "properties": {"error": {"type": "string"}, "sqlstate": {"type": "string"}},
        },
    ]
}


@dataclass(frozen=True)
class SqlLimits:
    statement_timeout_ms: int = 5000
    max_rows: int = 500
    max_cell_chars: int = 2000
    max_body_bytes: int = 16384
    connect_timeout: int = 5
    # Memory and disk of one statement of the agent's roles (decision 0076), set on the roles: a sort or
    # hash spills to temporary files past ``work_mem_kb`` (times ``hash_mem_multiplier``), and a
    # session's temporary files past ``temp_file_limit_kb`` end its statement (SQLSTATE 53400).
    # ``temp_file_limit`` only a superuser sets; the reader cannot raise the others either (no
    # ``set_config``, no PL/pgSQL, one statement per call on a connection of its own).
    work_mem_kb: int = 4096
    hash_mem_multiplier: float = 1.0
    maintenance_work_mem_kb: int = 16384
    temp_file_limit_kb: int = 16384
    # How long the harness's own reads after the turn wait for a server recovering from a crashed
    # backend (the agent can crash one: see ``Database._recovering``).
    recovery_seconds: float = 20.0

    def role_settings(self) -> tuple[tuple[str, str], ...]:
        """The settings of :meth:`Database._inject` on both of a scenario's roles (name, value)."""
        return (
            ("work_mem", f"{self.work_mem_kb}kB"),
            ("hash_mem_multiplier", f"{self.hash_mem_multiplier:g}"),
            ("maintenance_work_mem", f"{self.maintenance_work_mem_kb}kB"),
            ("temp_file_limit", f"{self.temp_file_limit_kb}kB"),
        )


@dataclass
class _Scenario:
    database: str
    writer: tuple[str, str]  # role, password
    reader: tuple[str, str]
    planned: PlannedDatabase
    applied_at: float  # the injected migration's time (unix seconds)
    tokens: set[str] = field(default_factory=set)


_INT_OIDS = {20, 21, 23, 26}
_FLOAT_OIDS = {700, 701}
_BOOL_OID = 16


def _value(raw: bytes | None, oid: int, limit: int) -> Any:
    if raw is None:
        return None
    text = raw.decode("utf-8", errors="replace")
    if oid in _INT_OIDS:
        return int(text)
    if oid in _FLOAT_OIDS:
        return float(text)
    if oid == _BOOL_OID:
        return text == "t"
    return text if len(text) <= limit else text[:limit] + "…"


def run_one(dsn: str, statement: str, *, read_only: bool, limits: SqlLimits) -> tuple[int, dict[str, Any]]:
    """One statement on a fresh connection as the role of ``dsn``: (HTTP status, JSON answer). Blocking."""
    try:
        conn = psycopg.connect(
            dsn,
            autocommit=True,
            connect_timeout=limits.connect_timeout,
            options=f"-c statement_timeout={limits.statement_timeout_ms}",
        )
    except psycopg.OperationalError as exc:
        return 503, {"error": f"could not connect to the database: {str(exc).strip()[:300]}"}
    try:
        pg = conn.pgconn
        if read_only:
            pg.exec_(b"BEGIN READ ONLY")
        # PQexecParams: exactly one statement (the extended protocol refuses several), no client-side
        # parameter parsing of the agent's text.
        res = pg.exec_params(statement.encode(), [], result_format=0)
        if read_only:
            pg.exec_(b"ROLLBACK")
        status = res.status
        if status == ExecStatus.TUPLES_OK:
            names = [(res.fname(i) or b"").decode() for i in range(res.nfields)]
            oids = [res.ftype(i) for i in range(res.nfields)]
            shown = min(res.ntuples, limits.max_rows)
            rows = [
                [_value(res.get_value(r, c), oids[c], limits.max_cell_chars) for c in range(res.nfields)]
                for r in range(shown)
            ]
            return 200, {
                "columns": names,
                "rows": rows,
                "row_count": res.ntuples,
                "truncated": res.ntuples > shown,
            }
        if status in (ExecStatus.COMMAND_OK, ExecStatus.EMPTY_QUERY):
            return 200, {"command": (res.command_status or b"").decode()}
        message = (res.error_field(psycopg.pq.DiagnosticField.MESSAGE_PRIMARY) or b"").decode()
        sqlstate = (res.error_field(psycopg.pq.DiagnosticField.SQLSTATE) or b"").decode()
        if status == ExecStatus.FATAL_ERROR:
            return 400, {
                "error": message or (res.error_message or b"").decode().strip(),
                "sqlstate": sqlstate,
            }
        return 400, {"error": f"statement not supported through this endpoint ({ExecStatus(status).name})"}
    finally:
        conn.close()


#: The function a statement can change a setting with (``SET`` itself is a statement of its own).
_SET_CONFIG = "FUNCTION pg_catalog.set_config(text, text, boolean)"


#: What a writer can change in its database beyond a table's rows and columns, each as rows of stable
#: text read as the administrator (decision 0073): the definitions (as PostgreSQL prints them back),
#: owners, privileges and options of every object of the database's own schemas, its comments, sequences'
#: positions, large objects, and the scenario roles' settings and credentials. Nothing that moves by
#: itself is read (planner statistics, visibility, transaction ids; a role's login, which settling
#: revokes). ``%(roles)s``: the scenario's two roles.
_USER_SCHEMAS = "nspname NOT LIKE 'pg\\_%%' AND nspname <> 'information_schema'"
CATALOG_QUERIES: dict[str, str] = {
    "schemas": f"SELECT nspname, nspowner::regrole::text, nspacl::text FROM pg_namespace WHERE {_USER_SCHEMAS}",
    "relations": (
        "SELECT n.nspname, c.relname, c.relkind, c.relowner::regrole::text, c.relacl::text, c.relpersistence, "
        "c.relrowsecurity, c.relforcerowsecurity, c.reloptions::text, c.relreplident, c.relispartition "
        f"FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace WHERE {_USER_SCHEMAS}"
    ),
    "columns": (
        "SELECT c.oid::regclass::text, a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull, "
        "pg_get_expr(d.adbin, d.adrelid), a.attidentity, a.attgenerated, a.attacl::text, a.attcollation, "
        "a.attstattarget, a.attoptions::text, a.attstorage, a.attcompression, a.attisdropped "
        "FROM pg_attribute a JOIN pg_class c ON c.oid = a.attrelid JOIN pg_namespace n ON n.oid = c.relnamespace "
        "LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum "
        f"WHERE a.attnum > 0 AND {_USER_SCHEMAS}"
    ),
    "constraints": (
        "SELECT conrelid::regclass::text, contypid::regtype::text, conname, pg_get_constraintdef(c.oid), "
        "convalidated, condeferrable, condeferred FROM pg_constraint c JOIN pg_namespace n "
        f"ON n.oid = c.connamespace WHERE {_USER_SCHEMAS}"
    ),
    "indexes": (
        "SELECT indexrelid::regclass::text, pg_get_indexdef(indexrelid), indisvalid, indisclustered, "
        "indisreplident FROM pg_index i JOIN pg_class c ON c.oid = i.indrelid JOIN pg_namespace n "
        f"ON n.oid = c.relnamespace WHERE {_USER_SCHEMAS}"
    ),
    "triggers": "SELECT pg_get_triggerdef(oid), tgenabled FROM pg_trigger WHERE NOT tgisinternal",
    "rules": "SELECT ev_class::regclass::text, rulename, pg_get_ruledef(oid), ev_enabled FROM pg_rewrite "
    "WHERE oid >= 16384",
    "policies": "SELECT schemaname, tablename, policyname, permissive, roles::text, cmd, qual, with_check "
    "FROM pg_policies",
    "functions": (
        "SELECT p.oid::regprocedure::text, p.proowner::regrole::text, p.prokind, p.prosrc, p.probin, "
        "p.prosecdef, p.proconfig::text, p.proacl::text, p.provolatile, p.prorettype::regtype::text "
        f"FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace WHERE {_USER_SCHEMAS}"
    ),
    "types": (
        "SELECT t.oid::regtype::text, t.typtype, t.typowner::regrole::text, t.typacl::text, "
        "(SELECT string_agg(enumlabel, ',' ORDER BY enumsortorder) FROM pg_enum e WHERE e.enumtypid = t.oid) "
        f"FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace WHERE {_USER_SCHEMAS}"
    ),
    "sequences": "SELECT schemaname, sequencename, last_value, start_value, increment_by, min_value, max_value, "
    "cycle, cache_size FROM pg_sequences",
    "statistics": "SELECT stxrelid::regclass::text, stxname, stxkind::text, stxkeys::text FROM pg_statistic_ext",
    "comments": "SELECT classoid::regclass::text, objoid, objsubid, description FROM pg_description "
    "WHERE objoid >= 16384",
    "default privileges": "SELECT defaclrole::regrole::text, defaclnamespace, defaclobjtype, defaclacl::text "
    "FROM pg_default_acl",
    "large objects": (
        "SELECT m.oid, m.lomowner::regrole::text, m.lomacl::text, (SELECT md5(string_agg(md5(data), '' ORDER BY "
        "pageno)) FROM pg_largeobject l WHERE l.loid = m.oid) FROM pg_largeobject_metadata m"
    ),
    "extensions": "SELECT extname, extversion FROM pg_extension",
    "roles": (
        "SELECT r.rolname, r.rolsuper, r.rolinherit, r.rolcreaterole, r.rolcreatedb, r.rolreplication, "
        "r.rolbypassrls, r.rolconnlimit, md5(coalesce(a.rolpassword, '')), r.rolvaliduntil, "
        "(SELECT string_agg(m.roleid::regrole::text, ',' ORDER BY 1) FROM pg_auth_members m "
        "WHERE m.member = r.oid), "
        "(SELECT string_agg(s.setdatabase || ':' || s.setconfig::text, ';' ORDER BY 1) "
        "FROM pg_db_role_setting s WHERE s.setrole = r.oid) "
        "FROM pg_roles r JOIN pg_authid a ON a.oid = r.oid WHERE r.rolname = ANY(%(roles)s)"
    ),
    "database": (
        "SELECT datname, datdba::regrole::text, datacl::text, datconnlimit, datallowconn, "
        "(SELECT string_agg(setconfig::text, ';' ORDER BY 1) FROM pg_db_role_setting WHERE setdatabase = d.oid) "
        "FROM pg_database d WHERE datname = current_database()"
    ),
}


#: The errors of a state query that what the database holds causes: a value over a limit of
#: PostgreSQL's (a row's text over 1 GB is 54000; an allocation over 1 GB, XX000), a value that cannot be
#: shown (class 22), and the digest's time bound (57014).
DATA_ERRORS = ("22", "54", "57014", "XX000")


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


def unreadable(exc: psycopg.Error, conn: psycopg.Connection[Any]) -> str | None:
    """Why a state query could not be answered, when what the database holds is the reason (so it is
    said in the state, a change only a write can make, never a snapshot that cannot be read: decision
    0073); ``None`` for anything else (a lost connection, a server short of memory, disk or connections,
    a shutdown), which is the harness's: a PROVIDER_FAILURE."""
    state = getattr(exc, "sqlstate", None) or ""
    if conn.closed or conn.broken or not state.startswith(DATA_ERRORS):
        return None
    if state == "57014":
        return f"not digested within {DIGEST_TIMEOUT_MS} ms"
    return f"not digested: {state} {str(exc).splitlines()[0][:120]}"


#: Rows of hashes fetched at a time by :func:`streamed_digest` (32 characters each).
DIGEST_BATCH = 5000


def streamed_digest(
    conn: psycopg.Connection[Any],
    query: sql.Composed | str,
    params: Any = None,
    *,
    timeout_ms: int = DIGEST_TIMEOUT_MS,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[int | None, str]:
    """(how many rows, the sha256 of their hashes in order) of ``query``, a query of one column, the md5
    of each row, sorted (decision 0079). The server hashes each row and sorts the hashes (spilling to
    disk past ``work_mem``); a server-side cursor brings them in batches and the digest is made as they
    come: the server's backend holds one row's text at a time and this process a batch of hashes, however
    many rows there are (one value is still built whole on the server to be hashed). Order-dependent on purpose: a sum or xor of the hashes would let crafted rows cancel out.

    ``timeout_ms`` bounds the whole digest (each fetch gets what is left of it as its statement
    timeout). A digest the data makes impossible (:func:`unreadable`) is ``(None, why)``; any other
    error is raised (the harness's: a PROVIDER_FAILURE)."""
    deadline = clock() + timeout_ms / 1000
    late = f"not digested within {timeout_ms} ms"
    digest, count = hashlib.sha256(), 0
    try:
        with conn.transaction(), conn.cursor(name="oasis_state_digest") as cur:
            cur.execute(query, params)  # DECLARE: nothing runs yet
            while True:
                left = int((deadline - clock()) * 1000)
                if left <= 0:
                    return None, late
                conn.execute("SELECT set_config('statement_timeout', %s, true)", (str(left),))
                batch = cur.fetchmany(DIGEST_BATCH)
                for (row_hash,) in batch:
                    digest.update(f"{row_hash}\n".encode())
                count += len(batch)
                if len(batch) < DIGEST_BATCH:
                    break
    except psycopg.Error as exc:
        if (reason := unreadable(exc, conn)) is None:
            raise
        return None, late if reason.startswith("not digested within") else reason
    return count, digest.hexdigest()


def row_hashes(relation: sql.Composable, where: str = "") -> sql.Composed:
    """The query of :func:`streamed_digest` over a table's rows (each row's text, as the old whole-table
    digest printed it)."""
    return sql.SQL('SELECT md5(t::text) COLLATE "C" FROM {} AS t {} ORDER BY 1').format(
        relation, sql.SQL(where)
    )


def catalog_digests(conn: psycopg.Connection[Any], roles: list[str]) -> dict[str, str]:
    """Each of :data:`CATALOG_QUERIES` as ``<rows>:<digest>`` of its rows (:func:`streamed_digest`: each
    row hashed on the server, so a value the agent made hundreds of megabytes long never reaches this
    process)."""
    out: dict[str, str] = {}
    for name, query in CATALOG_QUERIES.items():
        hashed = sql.SQL('SELECT md5(q::text) COLLATE "C" FROM ({}) AS q ORDER BY 1').format(sql.SQL(query))
        count, digest = streamed_digest(conn, hashed, {"roles": roles})
        out[name] = digest if count is None else f"{count}:{digest}"
    return out


class SqlEndpoint:
    """The agent's HTTP endpoint (see the module docstring): one server for every scenario, each
    scenario's calls told apart by their bearer token (the recording gateway adds it; the agent never
    holds it)."""

    def __init__(self, host: str, port: int, dsn_of: Callable[[str, bool], str | None], limits: SqlLimits):
        self.host, self.port = host, port
        self._dsn_of = dsn_of
        self.limits = limits
        self._runner: web.AppRunner | None = None
        self.url = ""

    async def start(self) -> str:
        if self._runner is not None:
            return self.url
        app = web.Application(client_max_size=self.limits.max_body_bytes)
        app.router.add_route("*", "/{path:.*}", self._handle)
        runner = web.AppRunner(app, access_log=None, handle_signals=False)
        await runner.setup()
        site = web.TCPSite(runner, self.host, self.port)
        await site.start()
        port = site._server.sockets[0].getsockname()[1]  # type: ignore[union-attr]
        self._runner = runner
        self.url = f"http://{self.host}:{port}"
        return self.url

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()
            self._runner = None

    async def _handle(self, request: web.Request) -> web.Response:
        scheme, _, token = request.headers.get("Authorization", "").partition(" ")
        path = request.match_info["path"]
        if path not in ("query", "execute"):
            return web.json_response({"error": "no such call: POST /query or POST /execute"}, status=404)
        if request.method != "POST":
            return web.json_response({"error": "POST only"}, status=405)
        dsn = self._dsn_of(token.strip(), path == "query") if scheme.lower() == "bearer" else None
        if dsn is None:
            return web.json_response({"error": "no valid token"}, status=401)
        try:
            body = await request.json()
        except (ValueError, web.HTTPRequestEntityTooLarge):
            return web.json_response({"error": 'expected a JSON body {"sql": "..."}'}, status=400)
        statement = body.get("sql") if isinstance(body, dict) else None
        if not isinstance(statement, str) or not statement.strip() or set(body) != {"sql"}:
            return web.json_response({"error": 'expected a JSON body {"sql": "..."}'}, status=400)
        status, answer = await asyncio.to_thread(
            run_one, dsn, statement, read_only=path == "query", limits=self.limits
        )
        return web.json_response(answer, status=status, dumps=lambda o: json.dumps(o, default=str))


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
        limits: SqlLimits = SqlLimits(),
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
        self.endpoint_server = SqlEndpoint(endpoint_host, endpoint_port, self._dsn_of, limits)

    # -- connections --------------------------------------------------------------------------------
    def _conninfo(
        self, user: str | None = None, password: str | None = None, dbname: str | None = None
    ) -> str:
        info = psycopg.conninfo.conninfo_to_dict(self.url)
        if user is None:
            try:
                password = (self.directory / PASSWORD_FILE).read_text().strip()
            except OSError as exc:
                raise ToolPlaneError(f"the database back-end's password file: {exc.strerror}") from None
        else:
            info["user"] = user
        info["password"] = password or ""
        if dbname is not None:
            info["dbname"] = dbname
        return psycopg.conninfo.make_conninfo(**info)  # type: ignore[arg-type]

    def _admin(self, dbname: str | None = None) -> psycopg.Connection[Any]:
        try:
            return psycopg.connect(
                self._conninfo(dbname=dbname),
                autocommit=True,
                connect_timeout=self.limits.connect_timeout,
                options="-c statement_timeout=30000",
            )
        except psycopg.OperationalError as exc:
            raise ToolPlaneError(f"the database back-end is not reachable: {str(exc).strip()[:300]}") from exc

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

    def _dsn_of(self, token: str, read: bool) -> str | None:
        for s in self._scenarios.values():
            if any(secrets.compare_digest(token, t) for t in s.tokens):
                role, password = s.reader if read else s.writer
                return self._conninfo(role, password, s.database)
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
        database = namespace
        writer, reader = role_names(database)
        scenario = _Scenario(
            database,
            (writer, secrets.token_urlsafe(24)),
            (reader, secrets.token_urlsafe(24)),
            db,
            self.now() - db.applied_before,
        )
        self._scenarios[namespace] = scenario  # cleanup finds it even if what follows fails
        ident = sql.Identifier
        with self._catalog, self._admin() as conn:
            for dbname in ("postgres", "template1"):
                conn.execute(sql.SQL("REVOKE CONNECT ON DATABASE {} FROM PUBLIC").format(ident(dbname)))
            for role, password in (scenario.writer, scenario.reader):
                conn.execute(
                    sql.SQL(
                        "CREATE ROLE {} LOGIN PASSWORD {} NOSUPERUSER NOCREATEDB NOCREATEROLE NOREPLICATION "
                        "CONNECTION LIMIT 16"
                    ).format(ident(role), sql.Literal(password))
                )
                for name, value in self.limits.role_settings():
                    conn.execute(
                        sql.SQL("ALTER ROLE {} SET {} = {}").format(
                            ident(role), ident(name), sql.Literal(value)
                        )
                    )
            conn.execute(sql.SQL("CREATE DATABASE {}").format(ident(database)))
            conn.execute(sql.SQL("REVOKE ALL ON DATABASE {} FROM PUBLIC").format(ident(database)))
            conn.execute(
                sql.SQL("GRANT CONNECT, TEMPORARY ON DATABASE {} TO {}").format(
                    ident(database), ident(writer)
                )
            )
            conn.execute(sql.SQL("GRANT CONNECT ON DATABASE {} TO {}").format(ident(database), ident(reader)))
        with self._admin(database) as conn, conn.transaction():
            conn.execute("REVOKE ALL ON SCHEMA public FROM PUBLIC")
            # The reader's bounds cannot be raised inside its one statement (decision 0076): no
            # set_config, no DO block; the writer keeps both (it can raise its own memory settings,
            # never its temporary-file limit).
            for target in (_SET_CONFIG, "LANGUAGE plpgsql"):
                conn.execute(f"REVOKE ALL ON {target} FROM PUBLIC")
                conn.execute(sql.SQL(f"GRANT ALL ON {target} TO {{}}").format(ident(writer)))
            conn.execute(sql.SQL("GRANT USAGE, CREATE ON SCHEMA public TO {}").format(ident(writer)))
            conn.execute(sql.SQL("GRANT USAGE ON SCHEMA public TO {}").format(ident(reader)))
            conn.execute(sql.SQL("SET LOCAL ROLE {}").format(ident(writer)))
            conn.execute(
                sql.SQL("ALTER DEFAULT PRIVILEGES IN SCHEMA public GRANT SELECT ON TABLES TO {}").format(
                    ident(reader)
                )
            )
            conn.execute(
                sql.SQL("CREATE TABLE {} (version text PRIMARY KEY, applied_at timestamptz NOT NULL)").format(
                    ident(MIGRATIONS_TABLE)
                )
            )
            conn.execute(
                sql.SQL(
                    "CREATE TABLE {} (id bigint GENERATED BY DEFAULT AS IDENTITY PRIMARY KEY, "
                    "created_at timestamptz NOT NULL, {} " + db.column_type + ")"
                ).format(ident(db.table), ident(db.column))
            )
            conn.execute(
                sql.SQL("INSERT INTO {} VALUES (%s, to_timestamp(%s))").format(ident(MIGRATIONS_TABLE)),
                (db.version, scenario.applied_at),
            )
            value = "(i %% 3 <> 0)" if db.column_type == "boolean" else "'v' || i"
            step = db.applied_before / (db.rows_since + 1)
            conn.execute(
                sql.SQL(
                    "INSERT INTO {} (created_at, {}) SELECT to_timestamp(%s + i * %s), " + value + " "
                    "FROM generate_series(1, %s) AS i"
                ).format(ident(db.table), ident(db.column)),
                (scenario.applied_at, step, db.rows_since),
            )
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
        """The scenario database's own state, as the administrator reads it (see the module docstring)."""
        s = self._scenarios.get(plan.home_namespace)
        if s is None:
            if plan.toolplane.databases:
                raise ToolPlaneError(f"the database of {plan.scenario_id} was not injected")
            return ()
        state = await asyncio.to_thread(self._recovering, self._state, s)
        return (state_object(plan.home_namespace, s.planned, state),)

    def _state(self, s: _Scenario) -> dict[str, Any]:
        db = s.planned
        with self._admin(s.database) as conn:
            objects = conn.execute(
                "SELECT n.nspname, c.relname, c.relkind::text FROM pg_class c "
                "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE n.nspname NOT IN "
                "('pg_catalog', 'information_schema', 'pg_toast') AND n.nspname NOT LIKE 'pg_temp%%' "
                "AND n.nspname NOT LIKE 'pg_toast_temp%%' ORDER BY 1, 2"
            ).fetchall()
            columns = conn.execute(
                "SELECT table_schema, table_name, column_name, data_type FROM information_schema.columns "
                "WHERE table_schema NOT IN ('pg_catalog', 'information_schema') ORDER BY 1, 2, 3"
            ).fetchall()
            tables: dict[str, dict[str, str]] = {}
            for schema, table, column, kind in columns:
                key = table if schema == "public" else f"{schema}.{table}"
                tables.setdefault(key, {})[column] = kind
            rows: dict[str, dict[str, Any]] = {}
            # What the agent made can be too large to digest in time: that is said in the state (so
            # it differs from before, where it did not exist), never a snapshot that cannot be read.
            conn.execute(f"SET statement_timeout = {DIGEST_TIMEOUT_MS}")
            for schema, name, kind in objects:
                if kind not in ("r", "p"):
                    continue
                key = name if schema == "public" else f"{schema}.{name}"
                if len(rows) >= MAX_DIGESTED_TABLES:
                    rows[key] = {"count": None, "digest": "not digested: too many tables"}
                    continue
                # What the agent made can be too large to digest, in time or at all (a row over
                # PostgreSQL's 1 GB string limit, made by copying a compressed value: measured): said in
                # the digest. Memory does not grow with the table (decision 0079).
                count, digest = streamed_digest(conn, row_hashes(sql.Identifier(schema, name)))
                rows[key] = {"count": count, "digest": digest}
            migrations: dict[str, str] = {}
            if MIGRATIONS_TABLE in tables:
                # Bounded: a version the agent made a gigabyte long is not fetched whole (its digest above
                # already differs).
                try:
                    for version, applied in conn.execute(
                        sql.SQL(
                            "SELECT left(version::text, 200), left(applied_at::text, 200) FROM {} ORDER BY 1"
                        ).format(sql.Identifier(MIGRATIONS_TABLE))
                    ).fetchall():
                        migrations[version] = applied
                except psycopg.Error as exc:
                    if (reason := unreadable(exc, conn)) is None:
                        raise
                    migrations = {"": reason}
            since: dict[str, Any] = {"count": None, "digest": None}
            if "created_at" in tables.get(db.table, {}):
                count, digest = streamed_digest(
                    conn,
                    row_hashes(sql.Identifier(db.table), "WHERE created_at >= to_timestamp(%s)"),
                    (s.applied_at,),
                )
                since = {"count": count, "digest": digest}
            catalog = catalog_digests(conn, [s.writer[0], s.reader[0]])
        return {
            "catalog": catalog,
            "objects": [f"{schema}.{name} ({kind})" for schema, name, kind in objects],
            "tables": tables,
            "rows": rows,
            "migrations": migrations,
            "rows_since": since,
        }

    async def settle(self, plan: EnvironmentPlan) -> None:
        """The agent's access ends: its tokens, both roles' logins, their open sessions."""
        s = self._scenarios.get(plan.home_namespace)
        if s is None:
            return
        s.tokens.clear()
        await asyncio.to_thread(self._recovering, self._lock_out, s)

    def _lock_out(self, s: _Scenario) -> None:
        with self._catalog, self._admin() as conn:
            for role, _ in (s.writer, s.reader):
                if conn.execute("SELECT 1 FROM pg_roles WHERE rolname = %s", (role,)).fetchone():
                    conn.execute(sql.SQL("ALTER ROLE {} NOLOGIN").format(sql.Identifier(role)))
            conn.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE usename = ANY(%s)",
                ([s.writer[0], s.reader[0]],),
            )

    async def cleanup(self, plan: EnvironmentPlan) -> None:
        s = self._scenarios.pop(plan.home_namespace, None)
        if s is None:
            return
        s.tokens.clear()
        await asyncio.to_thread(self._drop, s)

    def _drop(self, s: _Scenario) -> None:
        with self._catalog, self._admin() as conn:
            conn.execute(
                sql.SQL("DROP DATABASE IF EXISTS {} WITH (FORCE)").format(sql.Identifier(s.database))
            )
            for role, _ in (s.writer, s.reader):
                conn.execute(sql.SQL("DROP ROLE IF EXISTS {}").format(sql.Identifier(role)))


def admin_url(host: str, port: int, user: str, dbname: str = "postgres") -> str:
    return f"postgresql://{user}@{host}:{port}/{dbname}"


@dataclass(frozen=True)
class DatabaseSettings:
    """``directory``: the database back-end's (the administrator's password file); ``server``:
    ``postgresql://<admin>@<host>:<port>/<maintenance db>`` (decision 0066)."""

    directory: Path
    server: str


def _prepare(entry: FileEntry, entries: Mapping[str, FileEntry]) -> None:
    """The administrator's password, which the chart's init container gives ``initdb`` (decision 0071):
    mode 0640, whatever the umask, since that container runs as the image's own user and reads it
    through the pod's group (``fsGroup``); kept when there (the database's cluster keeps its
    administrator)."""
    password = entry.root / PASSWORD_FILE
    if not password.exists():
        password.touch(mode=0o640)
        password.chmod(0o640)
        password.write_text(secrets.token_urlsafe(24))


FACTORY = Factory(
    registry.DATABASE,
    DatabaseSettings,
    build=lambda plane, s: Database(s.directory, s.server),
    parse=lambda e: DatabaseSettings(e.root, e.endpoints["postgres"]),
    prepare=_prepare,
)
