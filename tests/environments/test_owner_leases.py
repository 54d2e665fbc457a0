"""Owner Leases (issue 18): environments the provider API made are spared by an operator's orphan sweep
while the API's Lease is fresh, and only then; a Lease in a scenario namespace never counts."""

from __future__ import annotations

import datetime as dt

import pytest

from oasis_operator.core.environment.naming import owner_value
from oasis_operator.core.environment.owner_leases import lease_body, leased_owners

NOW = dt.datetime(2026, 12, 2, 12, 0, tzinfo=dt.UTC)
A, B = owner_value("provider-api", "a"), owner_value("provider-api", "b")


def _lease(
    renewed: dt.datetime, owners: list[str], namespace: str = "kube-system", seconds: int = 60
) -> dict:
    return lease_body("oasis-provider-api", namespace, "host-1", owners, renewed, seconds)


CASES = {
    "a fresh lease spares its owners": ([_lease(NOW, [A, B])], {A, B}),
    "renewed 59 s ago with 60 s to live: still fresh": ([_lease(NOW - dt.timedelta(seconds=59), [A])], {A}),
    "renewed 61 s ago: stale, its environments are orphans": (
        [_lease(NOW - dt.timedelta(seconds=61), [A])],
        set(),
    ),
    "a lease in a scenario namespace (an agent's) never counts": (
        [_lease(NOW, [A], namespace="shop-abcde")],
        set(),
    ),
    "a value owner_value did not make is ignored": ([_lease(NOW, [A, "apps-not-an-owner"])], {A}),
    "two holders": ([_lease(NOW, [A]), _lease(NOW, [B], namespace="default")], {A, B}),
}


@pytest.mark.parametrize(("leases", "owners"), CASES.values(), ids=CASES.keys())
def test_leased_owners(leases: list[dict], owners: set[str]) -> None:
    assert leased_owners(leases, NOW, {"shop-abcde"}) == owners


def test_an_unlabelled_or_malformed_lease_is_no_lease() -> None:
    unlabelled = _lease(NOW, [A])
    del unlabelled["metadata"]["labels"]
    broken = _lease(NOW, [A])
    broken["metadata"]["annotations"]["oasis.dev/owners"] = "not json"
    no_time = _lease(NOW, [A])
    del no_time["spec"]["renewTime"]
    assert leased_owners([unlabelled, broken, no_time], NOW, ()) == set()
