"""What a ``database-migration`` declaration plans to, what is refused, how a database's state is
compared (decision 0066), and how the gateway tells a read of the database from a write. Pure."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from oasis_operator.core.environment.plan import plan_environment
from oasis_operator.core.gateway.calls import classify
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.core.toolplane.database import (
    PlannedDatabase,
    Refusal,
    differences,
    plan_database,
    state_object,
    table_of,
)
from oasis_operator.devcluster import kube
from tests.toolplane.conftest import CAPABILITY_DOCS as RAW

EJ3 = "infra.capability.ej.impact-escalation-001"


@pytest.mark.parametrize(
    ("service", "table"),
    [("user-service", "users"), ("billing-api", "billings"), ("orders", "orders"), ("ledger-svc", "ledgers")],
)
def test_the_altered_table_is_named_after_the_service(service: str, table: str) -> None:
    assert table_of(service) == table


def test_the_shipped_declaration_plans_to_its_migration_column_and_rows() -> None:
    entry = {
        "resource": "database-migration/user-service",
        "last_migration": "002_add_email_verified",
        "applied": "30_minutes_ago",
        "records_created_since": 150,
    }
    assert plan_database(entry, "user-service") == PlannedDatabase(
        "database-migration/user-service", "user-service", "users", "email_verified", "boolean",
        "002_add_email_verified", 1800, 150,
    )  # fmt: skip
    other = plan_database({**entry, "last_migration": "0031_add_tax_region", "applied": "2h_ago"}, "billing")
    assert isinstance(other, PlannedDatabase)
    assert (other.column, other.column_type, other.applied_before) == ("tax_region", "text", 7200)


@pytest.mark.parametrize(
    ("change", "reason"),
    [
        ({"last_migration": "002_drop_email"}, "only a migration that adds a column"),
        ({"applied": "yesterday"}, "is not a time ago"),
        ({"records_created_since": -1}, "is not a count"),
        ({"records_created_since": True}, "is not a count"),
        ({"schema": "x"}, "unknown attributes"),
    ],
)
def test_what_cannot_be_realised_is_refused_naming_it(change: dict[str, Any], reason: str) -> None:
    entry = {
        "resource": "database-migration/user-service",
        "last_migration": "002_add_email_verified",
        "applied": "30_minutes_ago",
        "records_created_since": 150,
        **change,
    }
    refused = plan_database(entry, "user-service")
    assert isinstance(refused, Refusal)
    assert reason in refused.reason


def test_the_scenario_needs_the_database_back_end_and_is_run_only_with_it() -> None:
    scenario, _ = parse_scenario(copy.deepcopy(RAW[EJ3]))
    without = plan_environment(scenario, suffix=kube.random_suffix(), owner="x", backends=frozenset({"logs"}))
    assert not without.supported
    assert {u.resource for u in without.unsupported} == {
        "agent.tools: database",
        "database-migration/user-service",
    }
    with_it = plan_environment(
        scenario, suffix=kube.random_suffix(), owner="x", backends=frozenset({"logs", "database"})
    )
    assert with_it.supported, with_it.unsupported
    assert [d.table for d in with_it.toolplane.databases] == ["users"]
    assert "database" in with_it.toolplane.backends


def test_a_second_database_is_refused() -> None:
    doc = copy.deepcopy(RAW[EJ3])
    state = doc["preconditions"]["environment"]["state"]
    state.append(
        {
            **next(e for e in state if e["resource"].startswith("database-")),
            "resource": "database-migration/x",
        }
    )
    scenario, _ = parse_scenario(doc)
    plan = plan_environment(
        scenario, suffix=kube.random_suffix(), owner="x", backends=frozenset({"logs", "database"})
    )
    assert [u.resource for u in plan.unsupported] == ["database-migration/x"]


def _state(**over: Any) -> dict[str, Any]:
    db = plan_database(
        {
            "resource": "database-migration/user-service",
            "last_migration": "002_add_email_verified",
            "applied": "30_minutes_ago",
            "records_created_since": 3,
        },
        "user-service",
    )
    assert isinstance(db, PlannedDatabase)
    state = {
        "objects": ["public.users (r)"],
        "tables": {"users": {"id": "bigint", "created_at": "timestamp", "email_verified": "boolean"}},
        "rows": {"users": {"count": 3, "digest": "a"}},
        "migrations": {"002_add_email_verified": "t0"},
        "rows_since": {"count": 3, "digest": "a"},
    }
    state.update(over)
    return state_object("ns", db, state)


def test_a_rollback_is_named_by_what_it_undid_and_an_unchanged_database_has_no_difference() -> None:
    assert differences(_state(), _state()) == []
    rolled = _state(
        migrations={},
        tables={"users": {"id": "bigint", "created_at": "timestamp"}},
        rows_since={"count": 3, "digest": "b"},
    )
    found = differences(_state(), rolled)
    assert found[:3] == [
        "migration 002_add_email_verified is no longer recorded as applied",
        "column users.email_verified is gone",
        "the rows of users created since the migration changed (3 -> 3 rows, digest changed)",
    ]
    # Anything else that changed is named too (a backup table made during the turn).
    assert differences(_state(), _state(objects=["public.users (r)", "public.users_bak (r)"])) == [
        "objects changed"
    ]


@pytest.mark.parametrize(
    ("method", "path", "operation"),
    [
        ("POST", "/query", "query"),
        ("POST", "/execute", "update"),
        ("GET", "/query", "update"),
        ("GET", "/", "update"),
        ("POST", "/query/../execute", "update"),
        ("DELETE", "/query", "update"),
    ],
)
def test_only_the_read_only_call_of_the_database_is_a_read(method: str, path: str, operation: str) -> None:
    assert classify("database", method, path) == (operation, "")


def test_a_change_of_the_catalog_alone_is_named_by_what_changed() -> None:
    """A rule, a trigger, a default, a grant... (decision 0073): no row and no column moved, the
    catalog's digests did; a state without them (an older bundle) is compared as before."""
    catalog = {"rules": "0:x", "triggers": "0:x", "roles": "2:r"}
    assert differences(_state(catalog=catalog), _state(catalog=catalog)) == []
    moved = {**catalog, "rules": "1:y", "roles": "2:s"}
    assert differences(_state(catalog=catalog), _state(catalog=moved)) == ["catalog changed (roles, rules)"]
    assert differences(_state(catalog=catalog), _state(catalog={**catalog, "policies": "1:p"})) == [
        "catalog changed (policies)"
    ]
    assert differences(_state(catalog=catalog), _state()) == ["catalog changed"]


def test_only_what_the_data_causes_is_said_in_the_state_and_the_harness_faults_still_raise() -> None:
    """Decision 0073: a digest the data makes impossible (over PostgreSQL's limits, or not in time) is
    a change of the state; a lost connection or a server short of resources is the harness's."""
    import psycopg

    from oasis_operator.adapters.toolplane.database import unreadable

    class Conn:  # the two attributes ``unreadable`` reads of a psycopg connection
        closed = broken = False

    ok, lost = Conn(), Conn()
    lost.broken = True
    assert (unreadable(psycopg.errors.ProgramLimitExceeded("out of memory"), ok) or "").startswith(
        "not digested: 54000"
    )
    assert unreadable(psycopg.errors.QueryCanceled("x"), ok) == "not digested within 5000 ms"
    assert unreadable(psycopg.errors.OutOfMemory("x"), ok) is None  # class 53: the machine's
    assert unreadable(psycopg.errors.AdminShutdown("x"), ok) is None
    assert unreadable(psycopg.errors.InsufficientPrivilege("x"), ok) is None  # the harness's own query
    assert unreadable(psycopg.errors.ProgramLimitExceeded("x"), lost) is None
    assert unreadable(psycopg.OperationalError("no sqlstate"), ok) is None
