"""Runs spread over operator replicas (issue 27, scale-out): every run has exactly one shard, the same
in every replica, and shards share the runs evenly."""

from __future__ import annotations

from collections import Counter

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oasis_operator.core.sharding import serves, shard_of

names = st.text("abcdefghijklmnopqrstuvwxyz0123456789-", min_size=1, max_size=30)


@settings(derandomize=True, max_examples=200)
@given(names, names, st.integers(1, 9))
def test_exactly_one_replica_serves_each_run(namespace: str, name: str, count: int) -> None:
    body = {"metadata": {"namespace": namespace, "name": name}}
    serving = [i for i in range(count) if serves(body, i, count)]
    assert serving == [shard_of(namespace, name, count)]


def test_one_shard_serves_everything_and_shards_share_evenly() -> None:
    assert serves({"metadata": {"namespace": "a", "name": "b"}}, 0, 1)
    spread = Counter(shard_of("evals", f"run-{i}", 4) for i in range(4000))
    assert set(spread) == {0, 1, 2, 3}
    assert min(spread.values()) > 800


def test_a_shard_count_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="at least 1"):
        shard_of("a", "b", 0)
