"""The database back-end's SQL endpoint: the agent's HTTP door to its scenario's database (decisions
0066, 0076, 0089).

Called by :class:`~oasis_operator.adapters.toolplane.database.Database`, which starts one
:class:`SqlEndpoint` for every scenario and tells it, per bearer token, which role of which database a
call runs as (:class:`Target`). The recording gateway fronts it (every call recorded, interface
``database``): ``POST /query`` runs one statement as the scenario's reader in a read-only transaction,
``POST /execute`` one statement as its writer. One statement per call (libpq's ``PQexecParams`` refuses
several), a statement timeout, a row limit, memory and temporary-file bounds on both roles (decision
0076), and a bound on the data the writer stores (:class:`SizeWatch`, decision 0089): a writing statement
runs in a transaction, and one that grows its database past ``SqlLimits.database_mb``, or while all
databases together are past ``SqlLimits.server_mb``, is cancelled as it runs (within
``SqlLimits.size_poll_seconds``) or rolled back before its commit, and answered as a full disk (53100);
the scenario's database then takes no more writes in the turn (``Target.full``).
"""

from __future__ import annotations

import asyncio
import json
import threading
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from aiohttp import web

from oasis_operator.adapters.plumbing.postgres import ExecStatus, psycopg

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
    # The data the writer stores (decision 0089): a writing statement is cancelled once it has grown
    # its database past ``database_mb``, or all databases together past ``server_mb``; the sizes are
    # read every ``size_poll_seconds`` while it runs.
    database_mb: int = 64
    server_mb: int = 512
    size_poll_seconds: float = 0.05

    def role_settings(self) -> tuple[tuple[str, str], ...]:
        """The settings of :meth:`Database._inject` on both of a scenario's roles (name, value)."""
        return (
            ("work_mem", f"{self.work_mem_kb}kB"),
            ("hash_mem_multiplier", f"{self.hash_mem_multiplier:g}"),
            ("maintenance_work_mem", f"{self.maintenance_work_mem_kb}kB"),
            ("temp_file_limit", f"{self.temp_file_limit_kb}kB"),
        )


@dataclass(frozen=True)
class Target:
    """Where one call runs: ``dsn``, the agent's role in its database; for a writing call, ``watch``, the
    harness's connection string to that database, which :class:`SizeWatch` measures it through, ``full``,
    why the database takes no more writes (a statement of the turn passed a bound: nothing runs), and
    ``filled``, told why when a statement does."""

    dsn: str
    watch: str | None = None
    full: str = ""
    filled: Callable[[str], None] | None = None


#: The sizes :class:`SizeWatch` reads: the database's, and all databases' together.
SIZES = (
    "SELECT pg_catalog.pg_database_size(pg_catalog.current_database()), "
    "(SELECT pg_catalog.sum(pg_catalog.pg_database_size(d.oid)) FROM pg_catalog.pg_database d)"
)
_MB = 1024 * 1024


class SizeWatch:
    """The sizes of one writing call's database and of all databases, read through the harness's
    ``conninfo``: at the start (:meth:`__init__`), every ``limits.size_poll_seconds`` while a statement
    runs on ``conn`` (:meth:`watching`, which cancels it when :meth:`over` says so) and once after it
    (:meth:`settle`, before its transaction commits). ``reason`` says why the statement must not stay;
    a size that cannot be read is a reason too."""

    def __init__(self, conninfo: str, conn: psycopg.Connection[Any], limits: SqlLimits) -> None:
        self.limits = limits
        self.reason = ""
        self._conn = conn
        self._monitor = psycopg.connect(conninfo, autocommit=True, connect_timeout=limits.connect_timeout)
        try:
            self._start = self._sizes()
        except psycopg.Error:
            self._monitor.close()
            raise

    def _sizes(self) -> tuple[int, int]:
        row = self._monitor.execute(SIZES).fetchone()
        assert row is not None
        return int(row[0] or 0), int(row[1] or 0)

    def over(self, database: int, total: int) -> str:
        """Why a statement that left (``database``, ``total``) bytes must end, or ``""``: it grew its
        database, which is past its own bound or with all databases past the server's. Growth only: a
        statement that frees space in a database over its bound may complete."""
        if database <= self._start[0]:
            return ""
        if database > self.limits.database_mb * _MB:
            return f"the statement was ended: it grew the database past its bound of {self.limits.database_mb} MiB"
        if total > self.limits.server_mb * _MB:
            return (
                "the statement was ended: it grew the database while the server's databases are past their "
                f"bound of {self.limits.server_mb} MiB together"
            )
        return ""

    def _check(self) -> bool:
        """Read the sizes once; whether the statement must end (``reason`` set)."""
        try:
            self.reason = self.reason or self.over(*self._sizes())
        except psycopg.Error as exc:
            self.reason = (
                f"the statement was ended: the database's size could not be read ({str(exc).strip()[:200]})"
            )
        return bool(self.reason)

    @contextmanager
    def watching(self) -> Iterator[None]:
        """While the body runs a statement on ``conn``: poll, and cancel the statement on a reason."""
        stop = threading.Event()

        def watch() -> None:
            while not stop.wait(self.limits.size_poll_seconds):
                if self._check():
                    if not stop.is_set():
                        self._conn.cancel_safe(timeout=self.limits.connect_timeout)
                    return

        thread = threading.Thread(target=watch, name="database-size-watch", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(timeout=self.limits.connect_timeout + 1)

    def settle(self) -> str:
        """The sizes once more, after the statement and before its commit: the reason to roll it back."""
        self._check()
        return self.reason

    def close(self) -> None:
        self._monitor.close()


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


_INT_OIDS = {20, 21, 23, 26}
_FLOAT_OIDS = {700, 701}
_BOOL_OID = 16


def _answer(res: psycopg.pq.abc.PGresult, limits: SqlLimits) -> tuple[int, dict[str, Any]]:
    """The HTTP status and JSON answer of one statement's result."""
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
        return 400, {"error": message or (res.error_message or b"").decode().strip(), "sqlstate": sqlstate}
    return 400, {"error": f"statement not supported through this endpoint ({ExecStatus(status).name})"}


#: The errors of a statement that may not run inside a transaction block (``VACUUM``, ``CREATE INDEX
#: CONCURRENTLY``; a procedure that commits): such a statement of the writer runs on its own, watched.
OUTSIDE_A_TRANSACTION = (b"25001", b"2D000")


def _exec(pg: psycopg.pq.abc.PGconn, statement: str) -> psycopg.pq.abc.PGresult:
    # PQexecParams: exactly one statement (the extended protocol refuses several), no client-side parameter
    # parsing of the agent's text.
    return pg.exec_params(statement.encode(), [], result_format=0)


def _write(
    conn: psycopg.Connection[Any], statement: str, watch: str, limits: SqlLimits
) -> tuple[int, dict[str, Any]]:
    """One writing statement, its stored data bounded (:class:`SizeWatch`): in a transaction that commits
    only when the statement left its database within its bounds (or not larger than it found it)."""
    pg = conn.pgconn
    try:
        sizes = SizeWatch(watch, conn, limits)
    except psycopg.Error as exc:
        return 503, {"error": f"the database's size could not be read: {str(exc).strip()[:200]}"}
    try:
        pg.exec_(b"BEGIN")
        with sizes.watching():
            res = _exec(pg, statement)
        if res.status == ExecStatus.FATAL_ERROR and res.error_field(psycopg.pq.DiagnosticField.SQLSTATE) in (
            OUTSIDE_A_TRANSACTION
        ):
            pg.exec_(b"ROLLBACK")
            with sizes.watching():
                res = _exec(pg, statement)
        elif sizes.reason or sizes.settle():
            pg.exec_(b"ROLLBACK")
        else:
            end = pg.exec_(b"COMMIT")  # a deferred constraint can still refuse it
            if end.status == ExecStatus.FATAL_ERROR:
                return _answer(end, limits)
    finally:
        sizes.close()
    if sizes.reason:
        return 400, {"error": sizes.reason, "sqlstate": "53100"}
    return _answer(res, limits)


def run_one(
    dsn: str, statement: str, *, read_only: bool, limits: SqlLimits, watch: str | None = None
) -> tuple[int, dict[str, Any]]:
    """One statement on a fresh connection as the role of ``dsn``: (HTTP status, JSON answer). Blocking.
    ``watch``: the harness's connection string to the same database, to bound what a writing statement
    stores (:func:`_write`)."""
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
        if watch is not None:
            return _write(conn, statement, watch, limits)
        pg = conn.pgconn
        if read_only:
            pg.exec_(b"BEGIN READ ONLY")
        res = _exec(pg, statement)
        if read_only:
            pg.exec_(b"ROLLBACK")
        return _answer(res, limits)
    finally:
        conn.close()


class SqlEndpoint:
    """The agent's HTTP endpoint (see the module docstring): one server for every scenario, each
    scenario's calls told apart by their bearer token (the recording gateway adds it; the agent never
    holds it). ``target_of(token, read)``: where a call with that token runs, or ``None``."""

    def __init__(
        self, host: str, port: int, target_of: Callable[[str, bool], Target | None], limits: SqlLimits
    ) -> None:
        self.host, self.port = host, port
        self._target_of = target_of
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
        target = self._target_of(token.strip(), path == "query") if scheme.lower() == "bearer" else None
        if target is None:
            return web.json_response({"error": "no valid token"}, status=401)
        try:
            body = await request.json()
        except (ValueError, web.HTTPRequestEntityTooLarge):
            return web.json_response({"error": 'expected a JSON body {"sql": "..."}'}, status=400)
        statement = body.get("sql") if isinstance(body, dict) else None
        if not isinstance(statement, str) or not statement.strip() or set(body) != {"sql"}:
            return web.json_response({"error": 'expected a JSON body {"sql": "..."}'}, status=400)
        if target.full:
            return web.json_response(
                {
                    "error": f"{target.full}; the database takes no more writes in this turn",
                    "sqlstate": "53100",
                },
                status=400,
            )
        status, answer = await asyncio.to_thread(
            run_one, target.dsn, statement, read_only=path == "query", limits=self.limits, watch=target.watch
        )
        if status == 400 and answer.get("sqlstate") == "53100" and target.filled is not None:
            target.filled(str(answer.get("error")))  # a bound passed, or the disk full: no more writes
        return web.json_response(answer, status=status, dumps=lambda o: json.dumps(o, default=str))
