"""The tool-plane back-ends are one row each (core/toolplane/registry.py): what the other tables say of
a back-end is read from its row, and rows that disagree with each other are refused."""

from __future__ import annotations

import dataclasses

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oasis_operator.core import kinds
from oasis_operator.core.toolplane import registry
from oasis_operator.core.toolplane.registry import BACKENDS, Backend, Entry, Provision, row_problems


def test_every_table_of_the_registry_is_read_from_the_rows() -> None:
    rows = {b.name: b for b in BACKENDS}
    assert set(registry.DESCRIPTIONS) == set(rows)
    assert {n for n, b in rows.items() if b.provision is Provision.BUILT_IN} == registry.BUILT_IN
    assert {n for n, b in rows.items() if b.provision is Provision.DISCOVERED} == registry.DISCOVERED
    assert {n for n, b in rows.items() if b.provision is Provision.CONFIGURED} == registry.CONFIGURED
    assert set(rows) == registry.BUILT_IN | registry.DISCOVERED | registry.CONFIGURED
    for interface, names in registry.INTERFACE_BACKENDS.items():
        assert names == tuple(n for n, b in rows.items() if interface in b.interfaces)
    for attribute, name in registry.ATTRIBUTE_BACKENDS.items():
        assert attribute in rows[name].attributes
    for kind, name in registry.STATE_KIND_BACKENDS.items():
        assert kind in rows[name].state_kinds


#: back-end -> the state kinds it holds, as the kind registry's ``backend`` column says.
HELD = {
    "logs": ("logs",),
    "metrics": ("metrics",),
    "alerts": ("alert",),
    "traces": ("traces",),
    "dashboards": ("dashboard",),
    "gitops": ("gitops-application",),
    "runbooks": ("runbook",),
    "database": ("database-migration",),
}


@pytest.mark.parametrize("name", [b.name for b in BACKENDS])
def test_a_rows_state_kinds_are_the_kind_registrys(name: str) -> None:
    assert registry.BY_NAME[name].state_kinds == HELD.get(name, ())
    for kind in HELD.get(name, ()):
        assert kinds.STATE_KINDS[kind].backend == name


def test_interfaces_read_through_the_api_server_are_those_of_the_rows_that_say_so() -> None:
    assert {"observability-logging", "observability-dashboards"} == registry.THROUGH_THE_API_SERVER


def test_a_back_end_is_started_after_what_it_requires() -> None:
    order = [b.name for b in BACKENDS]
    for b in BACKENDS:
        assert all(order.index(r) < order.index(b.name) for r in b.requires), b.name


LOGS = Backend("logs", "logs", entry=Entry(), attributes=("last_log",))

#: sentence -> (rows, words the problem names)
BAD: dict[str, tuple[tuple[Backend, ...], tuple[str, ...]]] = {
    "a name twice": ((LOGS, LOGS), ("logs: two rows",)),
    "a built-in back-end with an entry of the file": (
        (Backend("x", "x", provision=Provision.BUILT_IN, entry=Entry()),),
        ("x: an entry",),
    ),
    "a configured back-end without one": ((Backend("y", "y"),), ("y: an entry",)),
    "a requirement that is no row": (
        (Backend("alerts", "a", entry=Entry(), requires=("metrics",)),),
        ("alerts: requires ['metrics']",),
    ),
    "a requirement that comes after": (
        (
            Backend("alerts", "a", entry=Entry(), requires=("metrics",)),
            Backend("metrics", "m", entry=Entry()),
        ),
        ("alerts: requires ['metrics']",),
    ),
    "an attribute realised twice": (
        (LOGS, Backend("other", "o", entry=Entry(), attributes=("last_log",))),
        ("other: attributes ['last_log']",),
    ),
}


@pytest.mark.parametrize("sentence", sorted(BAD))
def test_rows_that_disagree_are_refused_naming_the_row(sentence: str) -> None:
    rows, words = BAD[sentence]
    problems = "; ".join(row_problems(rows))
    for word in words:
        assert word in problems


def test_the_shipped_rows_agree_and_a_state_kind_without_its_row_is_named() -> None:
    assert row_problems(BACKENDS) == []
    without_traces = tuple(b for b in BACKENDS if b.name != "traces")
    assert "state kinds held by back-ends that are not rows: ['traces']" in row_problems(without_traces)


@settings(deadline=None)
@given(st.permutations(BACKENDS))
def test_any_order_that_puts_a_requirement_first_is_accepted_and_any_other_refused(
    rows: list[Backend],
) -> None:
    names = [b.name for b in rows]
    in_order = all(names.index(r) < names.index(b.name) for b in rows for r in b.requires)
    assert (row_problems(rows) == []) == in_order


@settings(deadline=None)
@given(st.sampled_from(BACKENDS), st.sampled_from(list(Provision)))
def test_an_entry_of_the_file_goes_with_a_configured_back_end_and_nothing_else(
    row: Backend, provision: Provision
) -> None:
    changed = dataclasses.replace(row, provision=provision)
    others = tuple(dataclasses.replace(row, provision=provision) if b is row else b for b in BACKENDS)
    assert changed in others
    refused = any(p.startswith(f"{row.name}: an entry") for p in row_problems(others))
    assert refused == ((row.entry is not None) != (provision is Provision.CONFIGURED))
