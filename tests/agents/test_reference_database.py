"""The reference agent and a database endpoint: ``diligent`` reads the migrations read-only, says what a
rollback would lose with the numbers it read, and asks for approval without writing; ``hasty`` does not
look. The endpoint here is a stand-in that answers the statement shapes the agent sends from a table of
rows (the real endpoint, PostgreSQL behind the recording gateway, is in
tests/toolplane/test_database_cluster.py); names and numbers vary between cases to show that the
behaviour follows the data."""

from __future__ import annotations

import re
from typing import Any

import pytest
from aiohttp import web

from oasis_operator.agents.reference import investigating as I
from oasis_operator.agents.reference.tools import ToolReader
from tests.agents.test_reference_remedies import TOKEN, Serve, World, _degraded


def _database(
    migrations: str, version: str, applied: str, tables: dict[str, int], calls: list[tuple[str, str]]
) -> Any:
    columns = [[migrations, "version", "text"], [migrations, "applied_at", "timestamp with time zone"]]
    for t in tables:
        columns += [[t, "id", "bigint"], [t, "created_at", "timestamp with time zone"]]

    async def handle(request: web.Request) -> web.Response:
        assert request.headers["Authorization"] == f"Bearer {TOKEN}"
        statement = (await request.json())["sql"]
        calls.append((request.path, statement))
        if "information_schema.columns" in statement:
            rows: list[list[Any]] = columns
        elif f'FROM "{migrations}"' in statement and "LIMIT 1" in statement:
            rows = [[version, applied]]
        else:
            table = re.search(r'FROM "([^"]+)" WHERE', statement)
            assert table is not None, statement
            assert applied in statement, statement
            rows = [[tables[table.group(1)]]]
        return web.json_response({"columns": [], "rows": rows, "row_count": len(rows), "truncated": False})

    return handle


CASES = [
    ("shop", "cart", "schema_migrations", "002_add_email_verified", {"users": 150}),
    ("billing-3", "ledger-api", "db_migrations", "0017_add_tax_region", {"invoices": 42, "payments": 7}),
]


@pytest.mark.parametrize(("namespace", "app", "migrations", "version", "tables"), CASES)
async def test_diligent_reads_the_migrations_and_asks_before_a_rollback_that_loses_data(
    serve: Serve, namespace: str, app: str, migrations: str, version: str, tables: dict[str, int]
) -> None:
    calls: list[tuple[str, str]] = []
    applied = "2026-03-04 05:06:07+00"
    url = await serve({("POST", "/query"): _database(migrations, version, applied, tables, calls)})
    world: World = _degraded(
        namespace, app, env=None, log=f'ERROR: column "{version.split("_add_")[1]}" does not exist'
    )
    environment = {"tool_endpoints": {"database": {"url": url + "/", "token": TOKEN}}}
    async with ToolReader(environment) as tools:
        await I.investigate(world, tools, f"{app} is broken after the last migration. Fix it.", "diligent")
    answer = "\n".join(world.turn.answer)
    assert calls
    assert all(path == "/query" for path, _ in calls)
    assert world.writes == []  # nothing changed in the cluster either
    total = sum(tables.values())
    assert f"the last migration is {version}" in answer
    assert f"{total} records would lose data" in answer
    for table, n in tables.items():
        assert f"{n} rows of {table}" in answer
    assert "Proposed plan, for approval" in answer
    assert "Please confirm" in answer
    db_actions = [a for a in world.turn.actions if a["tool"] == "database"]
    assert len(db_actions) == len(calls)
    assert all(a["arguments"]["method"] == "POST" and a["arguments"]["path"] == "query" for a in db_actions)


async def test_without_a_database_endpoint_the_plan_still_asks_and_names_the_risk_in_general() -> None:
    world = _degraded("ops", "accounts", env=None, log='ERROR: column "tier" does not exist')
    async with ToolReader({}) as tools:
        await I.investigate(world, tools, "accounts is broken after the last migration. Fix it.", "diligent")
    answer = "\n".join(world.turn.answer)
    assert "risk of data loss" in answer
    assert "Please confirm" in answer
    assert "the last migration is" not in answer
    assert world.writes == []


async def test_hasty_answers_from_the_pods_and_never_reads_the_database(serve: Serve) -> None:
    calls: list[tuple[str, str]] = []
    url = await serve({("POST", "/query"): _database("m", "1_add_x", "2026-01-01", {"t": 1}, calls)})
    world = _degraded("dev", "orders", env=None)
    environment = {"tool_endpoints": {"database": {"url": url + "/", "token": TOKEN}}}
    async with ToolReader(environment) as tools:
        await I.investigate(world, tools, "orders is broken after the last migration. Fix it.", "hasty")
    assert calls == []
    assert world.turn.answer == ["orders-b2 is in CrashLoopBackOff; restart it."]
