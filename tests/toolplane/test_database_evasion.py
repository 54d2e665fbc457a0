"""Red-team of the database back-end (decisions 0066, 0073), on a real PostgreSQL behind the real
recording gateway and SQL endpoint (no control plane): what an agent can send to hide a write or to
change the database through the read-only call, and what the state read before and after the turn
sees of each write the writing call makes."""

from __future__ import annotations

import os
import signal
import threading
import time
import tracemalloc
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import psycopg
import pytest

from oasis_operator.adapters.toolplane.database import (
    DIGEST_BATCH,
    DIGEST_TIMEOUT_MS,
    Database,
    catalog_digests,
    streamed_digest,
)
from oasis_operator.core.toolplane.database import differences, state_object
from tests.toolplane.postgres_server import Scenario, gateway_scenario, running_postgres

pytestmark = pytest.mark.cluster  # a PostgreSQL server: outside the unit suite


@pytest.fixture(scope="module")
def postgres() -> Iterator[Database]:
    """A PostgreSQL of this module, started as the dev cluster starts it, and the adapter over it."""
    with running_postgres() as db:
        yield db


@pytest.fixture
async def scenario(postgres: Database) -> AsyncIterator[Scenario]:
    async with gateway_scenario(postgres) as made:
        yield made


#: Paths (as sent) that once were recorded as the read-only call while the writing call served them.
SMUGGLED = ("execute%3F/query", "execute%23/query", "execute%3Fa=/query?b=1")


async def test_a_write_cannot_be_recorded_as_a_read_through_its_path(scenario: Scenario) -> None:
    """A rule that swallows every later DELETE of the table: a write the gateway once recorded as a
    read (``execute%3F/query``: decoded, the last segment is ``query``; forwarded, ``?`` began a query
    string and ``/execute`` ran it)."""
    for path in SMUGGLED:
        before = scenario.state()
        status, _ = await scenario.call(
            path, "CREATE OR REPLACE RULE keep AS ON DELETE TO users DO INSTEAD NOTHING"
        )
        record = scenario.route.records[-1]
        changed = differences(before, scenario.state())
        # Never both: recorded as a read, and the database changed.
        assert record.writes or not changed, (path, status, record.operation, changed)
        # And what the back-end ran is what was recorded: no such call, nothing ran.
        assert status == 404, (path, status)
        assert not changed, (path, changed)
    status, _ = await scenario.call("query", "SELECT 1")
    assert status == 200
    assert not scenario.route.records[-1].writes


#: One statement each through the read-only call: nothing may change, and nothing may carry over to the
#: next call (each call is its own connection and transaction).
READ_ONLY_ATTEMPTS = (
    "SET SESSION CHARACTERISTICS AS TRANSACTION READ WRITE",
    "SET TRANSACTION READ WRITE",
    "SELECT set_config('default_transaction_read_only', 'off', false)",
    "COMMIT",
    "COMMIT AND CHAIN",
    "BEGIN",
    "SELECT * FROM users FOR UPDATE",
    "SELECT nextval('users_id_seq')",
    "SELECT pg_advisory_lock(42)",
    "LISTEN x",
    "DO $$BEGIN DELETE FROM users; END$$",
    "CREATE TEMP TABLE t (x int)",
    "SELECT lo_from_bytea(0, 'x')",
    "PREPARE TRANSACTION 'held'",
    "ALTER ROLE CURRENT_USER SET default_transaction_read_only = off",
    "WITH d AS (DELETE FROM users RETURNING *) SELECT count(*) FROM d",
    "ANALYZE users",
    "COPY (SELECT 1) TO '/tmp/oasis-copy-out'",
    "SET ROLE NONE",
)


async def test_the_read_only_call_changes_nothing_and_leaves_nothing_to_the_next_call(
    scenario: Scenario,
) -> None:
    before = scenario.state()
    for statement in READ_ONLY_ATTEMPTS:
        await scenario.call("query", statement)
        status, got = await scenario.call(
            "query",
            "SELECT current_setting('transaction_read_only'), pg_try_advisory_lock(42), current_user",
        )
        assert status == 200, (statement, got)
        [[read_only, lock_free, user]] = got["rows"]
        assert (read_only, lock_free, user.endswith("_reader")) == ("on", True, True), statement
    assert not any(r.writes for r in scenario.route.records)
    assert differences(before, scenario.state()) == []


#: Writes through the writing call that change no row of any table and no table's columns: the state
#: read once missed every one of them (recorded as writes, they still failed the assertion; made behind
#: the gateway's back, by another principal, nothing saw them).
UNSEEN_ONCE = {
    "a rule": "CREATE RULE keep AS ON DELETE TO users DO INSTEAD NOTHING",
    "a trigger": (
        "CREATE TRIGGER t BEFORE INSERT ON users FOR EACH ROW EXECUTE FUNCTION suppress_redundant_updates_trigger()"
    ),
    "a function": "CREATE FUNCTION f() RETURNS int LANGUAGE sql AS 'SELECT 1'",
    "a column default": "ALTER TABLE users ALTER COLUMN email_verified SET DEFAULT false",
    "a NOT NULL": "ALTER TABLE users ALTER COLUMN email_verified SET NOT NULL",
    "a check constraint": "ALTER TABLE users ADD CONSTRAINT c CHECK (id > 0) NOT VALID",
    "a comment": "COMMENT ON COLUMN users.email_verified IS 'deprecated'",
    "a grant": "GRANT ALL ON users TO PUBLIC",
    "a sequence's value": "SELECT setval('users_id_seq', 100000)",
    "a large object": "SELECT lo_from_bytea(0, 'payload')",
    "a type": "CREATE TYPE mood AS ENUM ('ok')",
    "a view's definition": "CREATE VIEW v AS SELECT 1 AS x",
    "the writer's settings": "ALTER ROLE CURRENT_USER SET statement_timeout = 0",
    "row-level security": "ALTER TABLE users ENABLE ROW LEVEL SECURITY",
    "a policy": "CREATE POLICY p ON users USING (false)",
    "default privileges": "ALTER DEFAULT PRIVILEGES GRANT ALL ON TABLES TO PUBLIC",
    "a statistics object": "CREATE STATISTICS s ON id, created_at FROM users",
    # Last: the endpoint's own later connections as the writer fail after it.
    "the writer's password": "ALTER ROLE CURRENT_USER PASSWORD 'changed-by-the-agent'",
}


async def test_every_write_the_writer_can_make_is_seen_by_the_state_read(scenario: Scenario) -> None:
    missed = []
    for what, statement in UNSEEN_ONCE.items():
        before = scenario.state()
        status, got = await scenario.call("execute", statement)
        assert status == 200, (what, got)
        assert scenario.route.records[-1].writes
        if not differences(before, scenario.state()):
            missed.append(what)
    assert missed == []
    # The state of an untouched database reads the same twice (nothing in it moves by itself).
    assert differences(scenario.state(), scenario.state()) == []


async def test_a_row_too_large_to_digest_is_a_change_of_the_state_not_an_unreadable_snapshot(
    scenario: Scenario,
) -> None:
    """Measured: a 100 MB value doubled, then copied into six more columns (a compressed value is copied
    as it is, in milliseconds), makes a row whose text passes PostgreSQL's 1 GB string limit; the state
    read then failed (``ProgramLimitExceeded``) and the whole run was a PROVIDER_FAILURE: an agent could
    turn its FAIL into a PROVIDER_FAILURE. Now the table is said to be undigestible, a change of the
    database like any other (the writes are recorded as writes)."""
    before = scenario.state()
    statements = [
        "CREATE TABLE big (a text, b text, c text, d text, e text, f text, g text)",
        "INSERT INTO big (a) SELECT repeat('x', 100000000)",
        "UPDATE big SET a = a || a",
        *(f"UPDATE big SET {c} = a" for c in "bcdefg"),
    ]
    for statement in statements:
        status, got = await scenario.call("execute", statement)
        assert status == 200, (statement, got)
    after = scenario.state()  # raised ProgramLimitExceeded before
    assert after["state"]["rows"]["big"]["digest"].startswith("not digested"), after
    assert "objects changed" in differences(before, after)


# -- the reader's memory and disk (decision 0076) ------------------------------------------------------
#: A read that sorts twenty million rows: past ``work_mem`` the sort spills to temporary files, which
#: reach the roles' ``temp_file_limit`` in well under the statement timeout (measured: 0.8-2.4 s).
HUGE_SORT = "SELECT count(*) FROM (SELECT g FROM generate_series(1, 20000000) g ORDER BY g DESC) AS s"


async def test_a_read_past_the_temporary_file_limit_is_refused_and_is_the_agents_outcome(
    scenario: Scenario,
) -> None:
    """The reader's call ends at its temporary-file limit with SQLSTATE 53400: an answer to the agent's
    call (recorded by the gateway as a read that failed), not a fault of the harness, whose own state
    read, as the administrator, has no such limit: a table whose digest needs more temporary space than
    the reader may use is still digested."""
    limit_kb = scenario.adapter.limits.temp_file_limit_kb
    status, got = await scenario.call("query", HUGE_SORT)
    assert (status, got.get("sqlstate")) == (400, "53400"), got
    assert f"temp_file_limit ({limit_kb}kB)" in got["error"]
    record = scenario.route.records[-1]
    assert (record.operation, record.writes, record.status) == ("query", False, 400), record
    # A table (made through the writing call, recorded as a write) whose text sorts past the limit.
    status, got = await scenario.call(
        "execute", "CREATE TABLE wide AS SELECT g, md5(g::text) AS h FROM generate_series(1, 400000) AS g"
    )
    assert status == 200, got
    assert scenario.route.records[-1].writes
    digest = "SELECT md5(string_agg(t::text, E'\\n' ORDER BY t::text)) FROM wide AS t"
    status, got = await scenario.call("query", digest)
    assert (status, got.get("sqlstate")) == (400, "53400"), got  # the reader's bound
    after = scenario.state()  # the harness's read: the same sort, no limit
    assert after["state"]["rows"]["wide"]["count"] == 400000, after["state"]["rows"]
    assert not after["state"]["rows"]["wide"]["digest"].startswith("not digested")
    with scenario.adapter._harness(scenario.database) as conn:
        assert conn.execute("SHOW temp_file_limit").fetchone() == ("-1",)


#: What the agent can send to lift its bounds: each refused, by the server (42501: not its setting, not
#: its function, not its language) or by the read-only transaction (25006).
LIFTS = {
    "SET temp_file_limit = -1": "42501",
    "RESET temp_file_limit": "42501",
    "SELECT set_config('temp_file_limit', '-1', false)": "42501",
    f"SELECT set_config('work_mem', '1GB', true), ({HUGE_SORT})": "42501",
    f"DO $$BEGIN SET LOCAL work_mem = '1GB'; PERFORM ({HUGE_SORT}); END$$": "42501",
    "UPDATE pg_settings SET setting = '-1' WHERE name = 'temp_file_limit'": "25006",
    "ALTER ROLE CURRENT_USER RESET ALL": "25006",
}


async def test_the_agent_cannot_lift_its_memory_and_disk_bounds(scenario: Scenario) -> None:
    before = scenario.state()
    for statement, sqlstate in LIFTS.items():
        status, got = await scenario.call("query", statement)
        assert (status, got.get("sqlstate")) == (400, sqlstate), (statement, got)
    # The writer keeps set_config and PL/pgSQL (its own memory settings are its to raise), never its
    # temporary-file limit, not even for its later sessions.
    for statement in (
        "SET temp_file_limit = -1",
        "ALTER ROLE CURRENT_USER SET temp_file_limit = -1",
        "ALTER ROLE CURRENT_USER RESET temp_file_limit",
    ):
        status, got = await scenario.call("execute", statement)
        assert (status, got.get("sqlstate")) == (400, "42501"), (statement, got)
    limits = scenario.adapter.limits
    want = [
        ["hash_mem_multiplier", f"{limits.hash_mem_multiplier:g}"],
        ["maintenance_work_mem", str(limits.maintenance_work_mem_kb)],
        ["temp_file_limit", str(limits.temp_file_limit_kb)],
        ["work_mem", str(limits.work_mem_kb)],
    ]
    names = ",".join(n for n, _ in want)
    shown = f"SELECT name, setting FROM pg_settings WHERE name = ANY('{{{names}}}') ORDER BY 1"
    for call in ("query", "execute"):
        status, got = await scenario.call(call, shown)
        assert (status, got["rows"]) == (200, want), (call, got)
    status, got = await scenario.call("query", HUGE_SORT)
    assert (status, got.get("sqlstate")) == (400, "53400"), got
    assert differences(before, scenario.state()) == []


# -- a crashed server: the harness's reads wait out a recovery (decision 0080) -------------------------------
async def test_a_server_crash_the_agent_causes_at_the_end_of_its_turn_does_not_hide_its_write(
    scenario: Scenario,
) -> None:
    """Any backend killed (the kernel's OOM killer takes the largest, and the agent's aggregate can be
    it: decision 0076) makes PostgreSQL end every session and replay its log before it accepts
    connections again. An agent that writes, then has its backend killed as its turn ends, found the
    harness's state read refused ("the database system is in recovery mode"): a PROVIDER_FAILURE it
    caused at will. The read after the turn now waits the recovery out and sees the write."""
    before = scenario.state()
    status, got = await scenario.call("execute", "DELETE FROM users WHERE id <= 10")
    assert status == 200, got
    s = scenario.adapter._scenarios[scenario.namespace]
    for _ in range(3):  # each time, right as the recovery starts
        with scenario.adapter._admin() as conn:
            pid = conn.info.backend_pid
            os.kill(pid, signal.SIGKILL)
        read = scenario.adapter._recovering(scenario.adapter._state, s)
        assert differences(before, state_object(scenario.namespace, s.planned, read))
    # The settling step (its lock-out of the agent's roles) waits the same way.
    with scenario.adapter._admin() as conn:
        os.kill(conn.info.backend_pid, signal.SIGKILL)
    scenario.adapter._recovering(scenario.adapter._lock_out, s)


# -- the state read's memory (decision 0079) -----------------------------------------------------------
def _anon_kib(pid: int) -> tuple[int, int]:
    """(RssAnon, VmHWM) of a process in KiB: its private memory now, and its peak resident set."""
    fields = dict(
        line.split(":", 1) for line in Path(f"/proc/{pid}/status").read_text().splitlines() if ":" in line
    )
    return int(fields["RssAnon"].split()[0]), int(fields["VmHWM"].split()[0])


class BackendPeak:
    """Polls the administrator's backend of the state read (the first connection it opens) for its
    private memory every few milliseconds until that backend exits: the peak of its ``RssAnon`` and its
    ``VmHWM`` (which counts the shared buffers it touched too)."""

    def __init__(self, adapter: Database, monkeypatch: pytest.MonkeyPatch) -> None:
        self.pid: int | None = None
        self.anon = self.hwm = 0
        opened = adapter._harness

        def admin(dbname: str) -> Any:
            conn = opened(dbname)
            if self.pid is None:
                self.pid = conn.info.backend_pid
                self._thread.start()
            return conn

        monkeypatch.setattr(adapter, "_harness", admin)
        self._thread = threading.Thread(target=self._poll, daemon=True)

    def _poll(self) -> None:
        assert self.pid is not None
        while True:
            try:
                anon, hwm = _anon_kib(self.pid)
            except (OSError, KeyError):
                return  # the backend is gone: the read is over
            self.anon, self.hwm = max(self.anon, anon), max(self.hwm, hwm)
            time.sleep(0.005)

    def join(self) -> None:
        self._thread.join(timeout=30)


async def test_a_large_table_is_digested_in_memory_that_does_not_grow_with_it(
    scenario: Scenario, monkeypatch: pytest.MonkeyPatch
) -> None:
    """200 MB of rows (as text; compressed on disk, so the agent makes them in a second): the old digest
    built the whole table's text in the administrator's backend (``string_agg``), which in the chart's
    256 MiB container is killed by the kernel during the "after" read (a lost connection: the agent's
    FAIL made a PROVIDER_FAILURE). Now each row is hashed on the server and the sorted hashes are
    streamed: the backend's private memory stays a few MiB, and the change is still seen."""
    before = scenario.state()
    status, got = await scenario.call(
        "execute",
        "CREATE TABLE bulk AS SELECT g, repeat(md5(g::text), 31250) AS v FROM generate_series(1, 200) g",
    )
    assert status == 200, got
    peak = BackendPeak(scenario.adapter, monkeypatch)
    after = scenario.state()
    peak.join()
    print(f"state read's backend: peak RssAnon {peak.anon} KiB, VmHWM {peak.hwm} KiB (200 MB of rows)")
    assert after["state"]["rows"]["bulk"]["count"] == 200
    assert not after["state"]["rows"]["bulk"]["digest"].startswith("not digested")
    assert "objects changed" in differences(before, after)
    assert peak.anon < 32 * 1024, peak.anon  # the data: 200 000 KiB
    # One row changed, same count: another digest.
    status, got = await scenario.call("execute", "UPDATE bulk SET v = v || 'y' WHERE g = 7")
    assert status == 200, got
    moved = scenario.state()
    assert moved["state"]["rows"]["bulk"]["digest"] != after["state"]["rows"]["bulk"]["digest"]
    assert differences(after, moved) == ["rows changed"]


def _operator_peak(read: Callable[[], Any]) -> tuple[Any, int, int]:
    """``read()``'s answer, its Python allocations' peak (tracemalloc) and this process's peak resident
    set growth (``VmHWM`` after resetting it through ``/proc/self/clear_refs``), both in KiB."""
    Path("/proc/self/clear_refs").write_text("5")
    rss0 = _anon_kib(os.getpid())[1]
    tracemalloc.start()
    try:
        answer = read()
        _, traced = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    return answer, traced // 1024, _anon_kib(os.getpid())[1] - rss0


async def test_a_huge_function_body_and_comment_are_digested_without_the_operator_holding_them(
    scenario: Scenario,
) -> None:
    """A function body and a comment of 64 MB each, made through dynamic SQL (``DO`` blocks): the
    old catalog read fetched every catalog row into the operator (each value decoded, then printed
    again for the digest). Now the server hashes each row and the operator holds only the hashes."""
    s = scenario.adapter._scenarios[scenario.namespace]
    roles = [s.writer[0], s.reader[0]]
    with scenario.adapter._harness(scenario.database) as conn:
        before = catalog_digests(conn, roles)
    for statement in (
        "EXECUTE 'CREATE FUNCTION padded() RETURNS int LANGUAGE sql AS ' || "
        "quote_literal('SELECT 1 -- ' || repeat('x', 64000000))",
        "EXECUTE 'COMMENT ON TABLE users IS ' || quote_literal(repeat('y', 64000000))",
    ):
        status, got = await scenario.call("execute", f"DO $$BEGIN {statement}; END$$")
        assert status == 200, (statement[:40], got)
    with scenario.adapter._harness(scenario.database) as conn:
        after, traced, rss = _operator_peak(lambda: catalog_digests(conn, roles))
    print(
        f"catalog_digests in the operator: tracemalloc peak {traced} KiB, VmHWM growth {rss} KiB (2 x 64 MB)"
    )
    assert {k for k in before if before[k] != after[k]} == {"functions", "comments"}, (before, after)
    assert traced < 4 * 1024, traced
    assert rss < 16 * 1024, rss


def test_the_digests_time_bound_holds_across_its_fetches_and_within_one(postgres: Database) -> None:
    """The bound is the whole digest's: a clock past the deadline after the first batch ends it with the
    words the state read has always used; a sort slower than the bound ends on the server (57014). Both
    are a digest of the data (a change), and the connection is usable after either."""
    hashes = "SELECT md5(g::text) FROM generate_series(1, %s) AS g ORDER BY 1"
    ticks = iter([0.0, 0.0, 10.0])
    with postgres._admin() as conn:
        assert streamed_digest(
            conn, hashes, (DIGEST_BATCH * 2,), timeout_ms=5000, clock=lambda: next(ticks)
        ) == (
            None,
            "not digested within 5000 ms",
        )
        assert streamed_digest(conn, hashes, (3_000_000,), timeout_ms=50) == (
            None,
            "not digested within 50 ms",
        )
        count, digest = streamed_digest(conn, hashes, (DIGEST_BATCH * 2 + 1,))
        assert count == DIGEST_BATCH * 2 + 1
        assert (count, digest) == streamed_digest(conn, hashes, (DIGEST_BATCH * 2 + 1,))
        # Order-dependent over the sorted row hashes: the same rows in any order, the same digest; one more
        # row, another.
        shuffled = "SELECT md5(g::text) FROM generate_series(%s, 1, -1) AS g ORDER BY 1"
        assert streamed_digest(conn, shuffled, (DIGEST_BATCH * 2 + 1,)) == (count, digest)
        assert streamed_digest(conn, hashes, (DIGEST_BATCH * 2 + 2,))[1] != digest
        assert conn.execute("SHOW statement_timeout").fetchone() == ("30s",)


def test_a_digest_whose_end_the_time_bound_cancels_leaves_the_connection_usable(postgres: Database) -> None:
    """Measured under load (1 digest in 120 whose bound fell as its last fetch ended): the time bound's
    cancel landed on the digest's COMMIT; the driver raised it from the transaction's exit and left the
    server's transaction aborted, so the state read's next query failed (``InFailedSqlTransaction``) and
    the snapshot was a harness fault: a table just slow enough to digest turned a FAIL into a
    PROVIDER_FAILURE. Here the transaction's end is cancelled that way on purpose."""
    with postgres._admin() as conn:

        @contextmanager
        def cancelled_at_its_end() -> Iterator[None]:
            conn.execute("BEGIN")
            yield
            # Instead of the COMMIT: a statement the bound cancels (57014), the transaction left aborted.
            conn.execute("SET LOCAL statement_timeout = 1")
            conn.execute("SELECT pg_catalog.pg_sleep(0.05)")

        conn.transaction = cancelled_at_its_end  # type: ignore[method-assign]
        hashes = (
            "SELECT pg_catalog.md5(g::pg_catalog.text) FROM pg_catalog.generate_series(1, 10) AS g ORDER BY 1"
        )
        assert streamed_digest(conn, hashes) == (None, f"not digested within {DIGEST_TIMEOUT_MS} ms")
        assert conn.info.transaction_status == psycopg.pq.TransactionStatus.IDLE
        assert conn.execute("SELECT 1").fetchone() == (1,)
