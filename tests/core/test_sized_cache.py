"""The core's size-bounded cache (issue 31: the operator's memory grew with every run through caches
bounded only by their count): whatever is asked, in any order, the cache answers what ``make`` would,
never holds more than its count or its budget, and keeps nothing larger than the budget."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oasis_operator.core.sized_cache import SizedCache
from oasis_operator.core.verification import canonical, disclosure

asks = st.lists(st.tuples(st.integers(0, 30), st.integers(0, 40)), max_size=200)


@settings(derandomize=True, max_examples=200)
@given(asks, st.integers(1, 8), st.integers(1, 100))
def test_answers_are_makes_and_both_bounds_hold(
    calls: list[tuple[int, int]], entries: int, budget: int
) -> None:
    cache: SizedCache[int, str] = SizedCache(entries=entries, budget=budget)
    made: list[int] = []

    def make(key: int) -> str:
        made.append(key)
        return f"value-{key}"

    for key, size in calls:
        assert cache.get_or_make(key, size, lambda k=key: make(k)) == f"value-{key}"
        assert len(cache) <= entries
        assert cache.size <= budget
        assert cache.size == sum(s for _, s in cache._items.values())


def test_the_most_recent_stays_and_an_entry_over_the_budget_is_never_kept() -> None:
    cache: SizedCache[str, int] = SizedCache(entries=2, budget=10)
    cache.get_or_make("a", 4, lambda: 1)
    cache.get_or_make("b", 4, lambda: 2)
    assert cache.get_or_make("a", 4, lambda: 99) == 1  # a hit: now the most recent
    cache.get_or_make("c", 4, lambda: 3)  # over the count: b, the least recent, goes
    assert cache.get_or_make("b", 4, lambda: 22) == 22
    assert cache.get_or_make("huge", 11, lambda: 5) == 5
    assert cache.get_or_make("huge", 11, lambda: 6) == 6  # not kept
    with pytest.raises(ValueError, match="at least 1"):
        SizedCache(entries=0, budget=1)


def test_the_canonical_caches_stay_within_their_budgets_over_many_large_texts() -> None:
    """What grew the operator by ~110 MiB a run: the canonical forms and window digests of large
    texts, 4096 and 512 of them kept whatever their size."""
    value = canonical.patterns("s3cr3t-Pa55word-xyz")
    for i in range(300):
        text = f"log line {i} " + "lorem ipsum dolor sit amet " * 800  # ~21 KiB each
        canonical.exposed(value, text)
        disclosure._window_digests("salt", text[:2000], 12)
    assert canonical._CANONS.size <= canonical._CANONS.budget
    assert canonical._EXPOSED.size <= canonical._EXPOSED.budget
    assert disclosure._WINDOWS.size <= disclosure._WINDOWS.budget
    assert len(canonical._CANONS) < 300
