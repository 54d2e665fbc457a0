"""C-3 of the security review: nothing the agent's database roles make is ever run by the harness, on a
real PostgreSQL behind the real recording gateway and SQL endpoint (decision 0088).

The harness reads each scenario's database after the agent had its writer role: the state read (objects,
columns, every table's digest, the migrations, the rows created since, the catalog's digests) and the
lock-out of the agent's roles. The writer can make functions, operators, aggregates, casts, domains,
triggers, rules, views, defaults, index and statistics expressions, partition keys, checks and
policies; each of them is a way for PostgreSQL to call code of the writer's. A plant's payload says so
when it runs (a warning on the connection that ran it), and tries to record who ran it and to make the
writer a superuser. The tests plant, run the harness's reads, and require: no warning on any of the
harness's connections, an empty marker table, a writer that is still no superuser, a state read that
did not fail, a state that shows the plant, and nothing made in ``public`` (where the writer may not
create any more)."""

from __future__ import annotations

import random
import re
import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import psycopg
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from psycopg import sql

from oasis_operator.adapters.toolplane.database import CATALOG_QUERIES, Database, run_one
from oasis_operator.core.toolplane.database import PlannedDatabase, differences, state_object
from oasis_operator.devcluster import kube
from tests.toolplane.database_plants import HARNESS_FUNCTIONS, KINDS, MARK, SUPERUSER_ONLY, Site, setup
from tests.toolplane.postgres_server import PLANNED, Scenario, gateway_scenario, running_postgres
from tests.toolplane.test_database_sql_text import STATEMENTS, SYNTAX

pytestmark = pytest.mark.cluster  # a PostgreSQL server: outside the unit suite

#: Words followed by a parenthesis in SQL that are no function of their own.
_NOT_FUNCTIONS = {
    "any",
    "all",
    "in",
    "coalesce",
    "exists",
    "values",
    "row",
    "array",
    "cast",
    "operator",
} | SYNTAX


def harness_names() -> tuple[str, ...]:
    """Every function name the harness's SQL calls after the turn (``test_database_sql_text.STATEMENTS``),
    and a few more."""
    found = set(HARNESS_FUNCTIONS)
    for query in [*CATALOG_QUERIES.values(), *STATEMENTS.values()]:
        found |= {m.lower() for m in re.findall(r"\b([A-Za-z_][A-Za-z0-9_]*)\s*\(", query)}
    return tuple(sorted(found - _NOT_FUNCTIONS))


@pytest.fixture(scope="module")
def postgres() -> Iterator[Database]:
    with running_postgres() as db:
        yield db


class HarnessNotices:
    """The notices and warnings of every connection opened while ``watching`` (the harness's reads)."""

    def __init__(self, monkeypatch: pytest.MonkeyPatch) -> None:
        self.seen: list[str] = []
        self.watching = False
        real = psycopg.connect

        def connect(*args: Any, **kwargs: Any) -> Any:
            conn = real(*args, **kwargs)
            if self.watching:
                conn.add_notice_handler(lambda d: self.seen.append(d.message_primary or ""))
            return conn

        monkeypatch.setattr(psycopg, "connect", connect)

    def planted(self) -> list[str]:
        return [m for m in self.seen if MARK in m]


@pytest.fixture
def notices(monkeypatch: pytest.MonkeyPatch) -> HarnessNotices:
    return HarnessNotices(monkeypatch)


class Planted:
    """A scenario's database, injected as before the turn, and the writer's statements into it."""

    def __init__(self, adapter: Database, namespace: str | None = None) -> None:
        assert isinstance(PLANNED, PlannedDatabase)
        self.adapter = adapter
        self.namespace = namespace or f"rt-{kube.random_suffix()}"
        adapter._inject(self.namespace, PLANNED)  # nothing when it is injected already
        self.s = adapter._scenarios[self.namespace]
        self.writer = self.s.writer[0]
        self.dsn = adapter._conninfo(*self.s.writer, self.s.database)
        status, got = self.write("SELECT current_schema()")
        assert status == 200, got
        self.home = str(got["rows"][0][0])  # where the writer's unqualified objects go
        self.failed: list[tuple[str, str]] = []

    def write(self, statement: str) -> tuple[int, dict[str, Any]]:
        return run_one(self.dsn, statement, read_only=False, limits=self.adapter.limits)

    def all(self, statements: list[str]) -> bool:
        """Each statement as the writer; whether any of them succeeded (failures are kept)."""
        made = False
        for statement in statements:
            status, got = self.write(statement)
            if status == 200:
                made = True
            else:
                self.failed.append((statement[:120], f"{got.get('sqlstate')} {got.get('error')}"))
        return made

    def state(self) -> dict[str, Any]:
        return state_object(self.namespace, self.s.planned, self.adapter._state(self.s))

    def admin_rows(
        self, query: sql.Composed | str, params: Any = None, dbname: str | None = None
    ) -> list[Any]:
        with self.adapter._admin(dbname) as conn:
            conn.execute("SET search_path = pg_catalog")
            return conn.execute(query, params).fetchall()

    def marker(self, table: str = "plant_marker") -> list[Any]:
        return self.admin_rows(
            sql.SQL("SELECT * FROM ONLY {}").format(sql.Identifier(self.home, table)), dbname=self.s.database
        )

    def writer_is_superuser(self) -> bool:
        [(su,)] = self.admin_rows("SELECT rolsuper FROM pg_roles WHERE rolname = %s", (self.writer,))
        return bool(su)

    def made_in_public(self) -> list[Any]:
        """Objects of the database's ``public`` schema (none: the writer may not create there)."""
        return self.admin_rows(
            "SELECT 'relation', relname::text FROM pg_class WHERE relnamespace = 'public'::regnamespace "
            "UNION ALL SELECT 'function', proname::text FROM pg_proc WHERE pronamespace = 'public'::regnamespace "
            "UNION ALL SELECT 'type', typname::text FROM pg_type WHERE typnamespace = 'public'::regnamespace "
            "UNION ALL SELECT 'operator', oprname::text FROM pg_operator WHERE oprnamespace = 'public'::regnamespace",
            dbname=self.s.database,
        )

    def drop(self) -> None:
        self.adapter._drop(self.adapter._scenarios.pop(self.namespace))


def harness_reads(planted: Planted, notices: HarnessNotices) -> tuple[dict[str, Any] | None, list[str]]:
    """What the harness does with the database after the turn (the state read, the lock-out), watched."""
    problems: list[str] = []
    state = None
    notices.seen.clear()
    notices.watching = True
    try:
        try:
            state = planted.state()
        except Exception as exc:  # an agent-made fault of the harness's read: a finding of its own
            problems.append(f"the state read failed: {type(exc).__name__}: {str(exc)[:300]}")
        try:
            planted.adapter._lock_out(planted.s)
        except Exception as exc:
            problems.append(f"the lock-out failed: {type(exc).__name__}: {str(exc)[:300]}")
    finally:
        notices.watching = False
    return state, problems


def never_ran(
    planted: Planted, notices: HarnessNotices, problems: list[str], marker: str = "plant_marker"
) -> list[str]:
    """Everything that shows a plant ran during the harness's reads (empty: none did)."""
    found = list(problems)
    if notices.planted():
        found.append(f"plants ran on the harness's connections: {sorted(set(notices.planted()))[:6]}")
    if rows := planted.marker(marker):
        found.append(f"the marker table holds {rows[:6]}")
    if planted.writer_is_superuser():
        found.append(f"the writer {planted.writer} became a superuser")
    return found


# -- the review's experiment 2, through the agent's gateway endpoint -----------------------------------
@pytest.fixture
async def through_gateway(postgres: Database) -> AsyncIterator[tuple[Planted, Scenario]]:
    """A scenario behind the real endpoint and gateway, and the same scenario as :class:`Planted` sees it."""
    async with gateway_scenario(postgres) as scenario:
        yield Planted(postgres, scenario.namespace), scenario


def _trojan(home: str, writer: str, what: str, shell: Path) -> str:
    """The body of a PL/pgSQL trojan: say it ran, record who ran it, make the writer a superuser, and run
    a command on the server's host (``COPY ... TO PROGRAM``: a superuser's, or pg_execute_server_program's)."""
    return (
        f"RAISE WARNING '{MARK} {what} as %', current_user; "
        f"BEGIN INSERT INTO {home}.pwned VALUES ('{what}:' || current_user, current_setting('is_superuser')); "
        "EXCEPTION WHEN OTHERS THEN NULL; END; "
        f"BEGIN EXECUTE 'ALTER ROLE {writer} SUPERUSER'; EXCEPTION WHEN OTHERS THEN NULL; END; "
        f"BEGIN EXECUTE 'COPY (SELECT 1) TO PROGRAM ''touch {shell}'''; EXCEPTION WHEN OTHERS THEN NULL; END;"
    )


async def test_a_function_operator_and_aggregate_the_writer_plants_are_never_run_by_the_state_read(
    through_gateway: tuple[Planted, Scenario], notices: HarnessNotices
) -> None:
    """The review's experiment 2 (eight statements through ``POST execute``): a domain given to
    ``created_at``, a ``>=`` on it and a ``string_agg(name, text)``, each a trojan. On the old adapter the
    state read (as the bootstrap superuser, default ``search_path``) ran the operator ~150 times and the
    aggregate once, the writer came out SUPERUSER, and the trojan ran a command on the server's host."""
    planted, endpoint = through_gateway
    status, got = await endpoint.call("query", "SELECT current_schema()")
    assert status == 200, got
    home, writer = got["rows"][0][0], planted.writer
    shell = Path("/tmp") / f"oasis-trojan-{uuid.uuid4().hex}"
    before = planted.state()
    statements = [
        "CREATE TABLE pwned (who text, superuser text)",
        "GRANT INSERT ON pwned TO PUBLIC",
        "CREATE DOMAIN stamp AS timestamptz",
        "ALTER TABLE users ALTER COLUMN created_at TYPE stamp",
        "CREATE FUNCTION trojan_ge(stamp, timestamptz) RETURNS boolean LANGUAGE plpgsql AS $$ BEGIN "
        + _trojan(home, writer, "operator", shell)
        + " RETURN $1::timestamptz >= $2; END $$",
        "CREATE OPERATOR >= (LEFTARG = stamp, RIGHTARG = timestamptz, FUNCTION = trojan_ge)",
        "CREATE FUNCTION trojan_agg(text, name, text) RETURNS text LANGUAGE plpgsql AS $$ BEGIN "
        + _trojan(home, writer, "aggregate", shell)
        + " RETURN coalesce($1 || $3, '') || $2; END $$",
        "CREATE AGGREGATE string_agg(name, text) (SFUNC = trojan_agg, STYPE = text)",
    ]
    for statement in statements:
        status, got = await endpoint.call("execute", statement)
        assert status == 200, (statement[:60], got)
        assert endpoint.route.records[-1].writes
    state, problems = harness_reads(planted, notices)
    try:
        assert never_ran(planted, notices, problems, marker="pwned") == []
        assert not shell.exists(), "a trojan ran a command on the database server's host"
    finally:
        shell.unlink(missing_ok=True)
    assert state is not None
    assert differences(before, state), "the plants are changes of the database"


# -- the class, generated --------------------------------------------------------------------------------
def plant_and_read(
    postgres: Database, notices: HarnessNotices, plants: list[tuple[str, bool]], draw: Any
) -> None:
    """Plant each (kind, in public?) with options drawn by ``draw``, then run the harness's reads."""
    planted = Planted(postgres)
    try:
        assert planted.all(
            [*setup(planted.home, planted.writer), f"GRANT USAGE ON SCHEMA {planted.home} TO PUBLIC"]
        )
        planted.write("TRUNCATE plant_marker")
        before = planted.state()
        made = False
        names = harness_names()
        for n, (kind, in_public) in enumerate(plants):
            site = Site(planted.home, "public" if in_public else planted.home, f"p{n}")
            made_now = planted.all(KINDS[kind](site, draw, names))
            if kind in SUPERUSER_ONLY:
                assert not [s for s in planted.failed if "EVENT TRIGGER" in s[0] and "42501" not in s[1]]
            made = made or made_now
        assert planted.made_in_public() == [], planted.failed
        assert planted.admin_rows("SELECT evtname FROM pg_event_trigger", dbname=planted.s.database) == []
        planted.write(f"TRUNCATE {planted.home}.plant_marker")  # what ran as the writer while planting
        state, problems = harness_reads(planted, notices)
        found = never_ran(planted, notices, problems)
        assert found == [], (plants, found, planted.failed[:8])
        if made:
            assert state is not None
            assert differences(before, state), (plants, "a plant the state does not show")
    finally:
        planted.drop()


@settings(
    max_examples=25,
    deadline=None,
    suppress_health_check=[HealthCheck.function_scoped_fixture, HealthCheck.too_slow],
)
@given(data=st.data())
def test_no_plant_of_the_writer_is_ever_run_by_the_harness(
    postgres: Database, notices: HarnessNotices, data: st.DataObject
) -> None:
    plants = data.draw(
        st.lists(st.tuples(st.sampled_from(sorted(KINDS)), st.booleans()), min_size=1, max_size=3),
        label="plants",
    )
    plant_and_read(postgres, notices, plants, lambda options: data.draw(st.sampled_from(list(options))))


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_every_kind_of_plant_at_once_is_never_run_by_the_harness(
    postgres: Database, notices: HarnessNotices, seed: int
) -> None:
    """Each kind once (options picked by a seeded choice), in the writer's schema and in ``public``."""
    rnd = random.Random(seed)
    plants = [(kind, in_public) for kind in sorted(KINDS) for in_public in (False, True)]
    plant_and_read(postgres, notices, plants, lambda options: rnd.choice(list(options)))


def test_a_cast_on_a_tables_row_type_neither_runs_nor_hides_a_change_of_its_rows(
    postgres: Database, notices: HarnessNotices
) -> None:
    """The writer owns its table's row type, so it may make the cast from it to text. The old digest
    (``md5(t::text)``) called that cast for every row, as the superuser (measured: 600 calls in two state
    reads), and printed what the cast answered: a constant made the digest of ``users`` the same after
    every row had changed. Rows are printed by their type's output function now."""
    planted = Planted(postgres)
    try:
        assert planted.all(
            [*setup(planted.home, planted.writer), f"GRANT USAGE ON SCHEMA {planted.home} TO PUBLIC"]
        )
        assert planted.all(
            [
                f"CREATE FUNCTION {planted.home}.same(users) RETURNS text LANGUAGE sql VOLATILE "
                f"AS $f$ SELECT CASE WHEN {planted.home}.oasis_plant('cast') THEN 'same' END $f$",
                f"CREATE CAST (users AS text) WITH FUNCTION {planted.home}.same(users)",
            ]
        )
        before, problems = harness_reads(planted, notices)
        assert problems == []
        with planted.adapter._admin() as conn:  # the lock-out ended the writer's logins: again, for the test
            conn.execute(f'ALTER ROLE "{planted.writer}" LOGIN')
        status, got = planted.write("UPDATE users SET email_verified = NOT email_verified")
        assert status == 200, got
        after, problems = harness_reads(planted, notices)
        assert never_ran(planted, notices, problems) == []
        assert before is not None
        assert after is not None
        assert before["state"]["rows"]["users"]["digest"] != after["state"]["rows"]["users"]["digest"]
        assert any("rows" in d for d in differences(before, after)), differences(before, after)
    finally:
        planted.drop()
