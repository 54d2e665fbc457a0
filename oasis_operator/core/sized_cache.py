"""A least-recently-used cache bounded by a size the caller gives each entry, not only by a count.

Used by the pure core's caches over texts (the canonical forms of texts and the digests of their
windows, :mod:`oasis_operator.core.verification.canonical` and ``disclosure``). ``functools.lru_cache``
bounds the number of entries, and an entry there can be a hundred times its text: 4096 cached forms of
the texts of a run were hundreds of MiB that stayed in the operator after every run (issue 31: the
operator grew by about 110 MiB per run). Here both the count and the sum of the entries' sizes are
bounded; an entry larger than the whole budget is not kept. Pure: no I/O, no clock.
"""

from __future__ import annotations

from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

__all__ = ["SizedCache"]

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")


class SizedCache(Generic[K, V]):
    """At most ``entries`` entries whose sizes sum to at most ``budget``; the least recently used go
    first."""

    def __init__(self, *, entries: int, budget: int) -> None:
        if entries < 1 or budget < 1:
            raise ValueError(f"SizedCache: entries {entries} and budget {budget} must be at least 1")
        self.entries = entries
        self.budget = budget
        self._items: OrderedDict[K, tuple[V, int]] = OrderedDict()
        self.size = 0

    def __len__(self) -> int:
        return len(self._items)

    def get_or_make(self, key: K, size: int, make: Callable[[], V]) -> V:
        """The value kept for ``key``, else ``make()``, kept when it fits (``size``: its weight)."""
        found = self._items.get(key)
        if found is not None:
            self._items.move_to_end(key)
            return found[0]
        value = make()
        if size <= self.budget:
            self._items[key] = (value, size)
            self.size += size
            while len(self._items) > self.entries or self.size > self.budget:
                _, (_, gone) = self._items.popitem(last=False)
                self.size -= gone
        return value

    def clear(self) -> None:
        self._items.clear()
        self.size = 0
