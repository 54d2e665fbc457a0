"""Which operator replica drives which run: runs are spread over ``count`` shards by a digest of their
namespace and name, so each replica (a StatefulSet's pod, its ordinal the shard) drives its share and
no run is driven twice. Pure."""

from __future__ import annotations

import hashlib
from collections.abc import Mapping
from typing import Any

__all__ = ["serves", "shard_of"]


def shard_of(namespace: str, name: str, count: int) -> int:
    """The shard of run ``namespace/name`` among ``count`` (the same answer in every replica)."""
    if count < 1:
        raise ValueError(f"a shard count of at least 1, not {count}")
    digest = hashlib.sha256(f"{namespace}/{name}".encode()).digest()
    return int.from_bytes(digest[:8], "big") % count


def serves(body: Mapping[str, Any], index: int, count: int) -> bool:
    """Whether the replica of shard ``index`` (of ``count``) drives the run ``body``."""
    if count <= 1:
        return True
    meta = body.get("metadata") or {}
    return shard_of(str(meta.get("namespace", "")), str(meta.get("name", "")), count) == index
