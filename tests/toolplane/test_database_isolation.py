"""What one scenario's database roles can learn of the others (L-5 of the security review, decision 0088)
and how much they can store (decision 0089), on a real PostgreSQL behind the real SQL endpoint and
recording gateway (no control plane)."""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest

from oasis_operator.adapters.toolplane.database import Database, SqlLimits
from tests.toolplane.postgres_server import Scenario, gateway_scenario, running_postgres

pytestmark = pytest.mark.cluster  # a PostgreSQL server: outside the unit suite


@pytest.fixture(scope="module")
def postgres() -> Iterator[Database]:
    with running_postgres() as db:
        yield db


#: Ways for a scenario's role to list the server's databases, roles and sessions.
LISTINGS = (
    "SELECT current_database(), current_user, session_user, current_schema()",
    "SELECT datname FROM pg_database",
    "SELECT rolname FROM pg_roles",
    "SELECT datname, usename, application_name FROM pg_stat_activity",
    "SELECT datname FROM pg_stat_database",
    "SELECT pg_describe_object('pg_database'::regclass, oid, 0) FROM pg_database",
    "SELECT g::oid::regrole::text FROM generate_series(16384, 40000) AS g WHERE g::oid::regrole::text !~ '^[0-9]+$'",
    "SELECT setdatabase, setrole::regrole::text, setconfig::text FROM pg_db_role_setting",
)


async def test_a_scenarios_roles_see_no_scenarios_namespace_in_what_they_can_list(postgres: Database) -> None:
    """L-5: the reader could list every database and role of the server, each named after its scenario's
    namespace; concurrent scenarios' namespaces were one ``SELECT datname FROM pg_database`` away. The
    names are random now: what the listings show says nothing of whose they are (they still show that
    other databases exist, as on any shared server)."""
    async with gateway_scenario(postgres) as a, gateway_scenario(postgres) as b:
        namespaces = {a.namespace, b.namespace, *(ns.replace("-", "_") for ns in (a.namespace, b.namespace))}
        seen: dict[str, str] = {}
        for call in ("query", "execute"):
            for statement in LISTINGS:
                status, got = await a.call(call, statement)
                assert status == 200, (call, statement, got)
                seen[f"{call} {statement[:50]}"] = json.dumps(got["rows"])
        leaks = {k: [ns for ns in namespaces if ns in v] for k, v in seen.items()}
        assert {k: v for k, v in leaks.items() if v} == {}
        # Its own names too: nothing of the namespace in its database, roles or schema.
        [[database, user, _, schema]] = json.loads(seen["query " + LISTINGS[0][:50]])
        assert a.database == database
        assert not {database, user, schema} & namespaces


def _sizes(adapter: Database, database: str) -> tuple[int, int]:
    with adapter._admin() as conn:
        row = conn.execute(
            "SELECT pg_database_size(%s), (SELECT sum(pg_database_size(oid)) FROM pg_database)", (database,)
        ).fetchone()
    assert row is not None
    return int(row[0]), int(row[1])


#: Rows of a kilobyte each (below the size at which PostgreSQL compresses a value), millions of them: far
#: more than any bound, written as fast as the server can.
FILL = (
    "INSERT INTO fill SELECT repeat(md5(random()::text), 32) "
    "FROM generate_series(1, 2000) AS a, generate_series(1, 2000) AS b"
)
MB = 1024 * 1024


async def _filled(scenario: Scenario, statement: str) -> tuple[int, dict[str, str]]:
    status, got = await scenario.call("execute", statement)
    assert scenario.route.records[-1].writes
    return status, got


async def test_a_writer_cannot_store_past_its_databases_bound(postgres: Database) -> None:
    """The writer could store until the server's volume was full (in the chart the kubelet then evicts the
    whole operator pod): each statement bounded by its timeout only, and as many statements as the turn
    allows. Now a writing statement that grows its database past ``database_mb`` is ended and rolled back
    (53100), whether it is one long statement (the watch ends it as it runs) or the last of many short
    ones (checked before it commits); the database then takes no more writes in the turn (a rolled-back
    write leaves its space behind until a vacuum: retried, it would fill the disk all the same)."""
    bounded = Database(postgres.directory, postgres.url, limits=SqlLimits(database_mb=24))
    async with gateway_scenario(bounded) as s:
        assert (await _filled(s, "CREATE TABLE fill (v text)"))[0] == 200
        status, got = await _filled(s, FILL)
        assert (status, got.get("sqlstate")) == (400, "53100"), got
        assert "past its bound of 24 MiB" in got["error"]
        size, _ = _sizes(bounded, s.database)
        print(f"\none long statement ended: {size / MB:.1f} MiB for a bound of 24 MiB")
        assert size < 24 * MB + 24 * MB, size  # what it wrote before the watch saw it, at most
        # Nothing more is written, not even what would free space: the call does not run.
        for statement in (FILL, "DROP TABLE fill", "INSERT INTO users (created_at) VALUES (now())"):
            status, got = await _filled(s, statement)
            assert (status, got.get("sqlstate")) == (400, "53100"), (statement, got)
            assert "takes no more writes" in got["error"], got
        assert _sizes(bounded, s.database)[0] == size
        # Reads, and the harness's state read, go on.
        status, got = await s.call("query", "SELECT count(*) FROM users")
        assert (status, got.get("rows")) == (200, [[150]]), got
        assert "fill" in s.state()["state"]["rows"]
    async with gateway_scenario(bounded) as s:
        assert (await _filled(s, "CREATE TABLE fill (v text)"))[0] == 200
        small = "INSERT INTO fill SELECT repeat(md5(random()::text), 32) FROM generate_series(1, 1000)"
        answers = [await _filled(s, small) for _ in range(40)]  # 1 MB each, each shorter than a poll
        statuses = [status for status, _ in answers]
        assert 400 in statuses, "no short statement was refused past the bound"
        first = statuses.index(400)
        assert set(statuses[:first]) == {200}
        assert "past its bound of 24 MiB" in answers[first][1]["error"], answers[first]
        assert all("takes no more writes" in got["error"] for _, got in answers[first + 1 :])
        size, _ = _sizes(bounded, s.database)
        print(
            f"short statements: {first} committed, then refused at {size / MB:.1f} MiB for a bound of 24 MiB"
        )
        assert size < 24 * MB + 4 * MB, size


async def test_a_writer_cannot_grow_its_database_while_the_server_is_past_its_bound(
    postgres: Database,
) -> None:
    """All databases together have a bound too (``server_mb``): past it, a statement that grows its
    database is ended, whichever database made the server full."""
    async with gateway_scenario(postgres) as other:
        _, total = _sizes(postgres, other.database)
        near = Database(
            postgres.directory, postgres.url, limits=SqlLimits(database_mb=1024, server_mb=total // MB + 16)
        )
        async with gateway_scenario(near) as s:
            assert (await _filled(s, "CREATE TABLE fill (v text)"))[0] == 200
            status, got = await _filled(s, FILL)
            assert (status, got.get("sqlstate")) == (400, "53100"), got
            assert "past their bound" in got["error"], got
            # A read is no write: it is never ended for size.
            status, got = await s.call("query", "SELECT count(*) FROM users")
            assert status == 200, got


async def test_statements_that_cannot_run_in_a_transaction_still_run(postgres: Database) -> None:
    """The writer's statement runs in a transaction that commits only within the bounds; those PostgreSQL
    refuses in a transaction block run on their own, watched the same way."""
    async with gateway_scenario(postgres) as s:
        for statement in (
            "VACUUM users",
            "CREATE INDEX CONCURRENTLY users_created ON users (created_at)",
            "COMMIT",
            "BEGIN",
            "LOCK TABLE users",
        ):
            status, got = await _filled(s, statement)
            assert status == 200, (statement, got)
        assert "app.users_created (i)" in s.state()["state"]["objects"]
