"""Putting a target control plane back to its baseline, and the proof that it is back (decision 0101).

A target's state is its etcd keyspace: key -> stored value (JSON: the targets' API servers store every
object as JSON, ``--storage-media-type=application/json``, so the harness can read what it compares).
The **baseline** is the keyspace read once the target has finished its own bootstrap, before any
scenario. A reset is computed here from the baseline and the current keyspace, as values:

- every key that is not in the baseline is deleted (what the scenario and the agent made);
- every baseline key whose object differs (or is missing) gets its baseline value back (what they
  changed or deleted: a cordoned node, an edited ClusterRole, a deleted ServiceAccount);
- keys under :data:`VOLATILE_PREFIXES` are the control plane's own bookkeeping that changes on its own
  (leases, events, compaction marks): never written, never compared.

Two objects are the same when they are equal without what the control plane rewrites on its own
(:func:`comparable`): ``status``, ``metadata.resourceVersion``, ``managedFields`` and the timestamps
in them. A value that is not a JSON object is compared byte for byte.

The **proof** is :func:`residue` on the keyspace read after the writes settled: empty, or the target
is not handed out again (it is destroyed and replaced).

**No credential outlives a reset** (decision 0115): a token names its
ServiceAccount by uid, and the keyspace a reset writes back would give a baseline account (``default``
in ``default``, ``kube-public``, ``kube-node-lease``) its old uid again, so a token minted for it in
one attempt would authenticate in every later attempt on the target. Before each reset the baseline's
accounts get new uids (:func:`rekeyed`), and the reset writes those: a token of an earlier attempt
names a uid no account has any more. ``kube-system``'s accounts keep theirs: the controller-manager
holds tokens for them, and the provider's admission policy issues none there to anyone else.
Pure: values in, values out.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

__all__ = [
    "VOLATILE_PREFIXES",
    "ResetWrites",
    "comparable",
    "is_volatile",
    "rekeyed",
    "reset_writes",
    "residue",
]

#: The control plane's own bookkeeping: changes without anyone asking, carries no scenario state.
VOLATILE_PREFIXES: tuple[str, ...] = (
    "/registry/leases/",
    "/registry/masterleases/",
    "/registry/peerserverleases/",
    "/registry/events/",
    "/registry/events.k8s.io/",
    "compact_rev_key",
)

#: What the control plane rewrites in an object on its own (heartbeats, versions, field owners).
_METADATA_NOISE = ("resourceVersion", "managedFields", "generation", "selfLink")


@dataclass(frozen=True)
class ResetWrites:
    """What a reset writes: keys to delete, and keys to put back with their baseline values."""

    deletes: tuple[str, ...]
    puts: tuple[tuple[str, bytes], ...]

    def __len__(self) -> int:
        return len(self.deletes) + len(self.puts)


def is_volatile(key: str) -> bool:
    return key.startswith(VOLATILE_PREFIXES)


def comparable(value: bytes) -> Any:
    """The part of a stored value that is scenario state: a JSON object without its status and the
    metadata the control plane rewrites; anything else, its bytes."""
    try:
        obj = json.loads(value)
    except (ValueError, UnicodeDecodeError):
        return value
    if not isinstance(obj, dict):
        return value
    out = {k: v for k, v in obj.items() if k != "status"}
    meta = out.get("metadata")
    if isinstance(meta, dict):
        out["metadata"] = {k: v for k, v in meta.items() if k not in _METADATA_NOISE}
    return out


#: ServiceAccounts in the keyspace, and the namespace whose accounts keep their uid (the
#: controller-manager's: new uids would void the tokens it holds and stop the controllers).
ACCOUNT_PREFIX = "/registry/serviceaccounts/"
CONTROL_PLANE_NAMESPACE = "kube-system"


def _rekeyable(key: str) -> bool:
    return key.startswith(ACCOUNT_PREFIX) and not key.startswith(
        f"{ACCOUNT_PREFIX}{CONTROL_PLANE_NAMESPACE}/"
    )


def rekeyed(baseline: Mapping[str, bytes], fresh_uid: Callable[[], str]) -> dict[str, bytes]:
    """``baseline`` with a new ``metadata.uid`` (from ``fresh_uid``) for every ServiceAccount outside
    ``kube-system``; every other key as it was. A value that is not a JSON object with metadata is
    kept as it is (the reset then restores it byte for byte, and no token can name it by uid)."""
    out = dict(baseline)
    for key, value in baseline.items():
        if not _rekeyable(key):
            continue
        try:
            obj = json.loads(value)
        except (ValueError, UnicodeDecodeError):
            continue
        if not isinstance(obj, dict) or not isinstance(obj.get("metadata"), dict):
            continue
        obj["metadata"]["uid"] = fresh_uid()
        text = json.dumps(obj, separators=(",", ":")).encode()
        out[key] = text + b"\n" if value.endswith(b"\n") else text
    return out


def _same(a: bytes, b: bytes) -> bool:
    return a == b or comparable(a) == comparable(b)


def reset_writes(baseline: Mapping[str, bytes], current: Mapping[str, bytes]) -> ResetWrites:
    """The writes that put ``current`` back to ``baseline`` (volatile keys left alone)."""
    deletes = tuple(sorted(k for k in current if k not in baseline and not is_volatile(k)))
    puts = tuple(
        (k, v)
        for k, v in sorted(baseline.items())
        if not is_volatile(k) and (k not in current or not _same(current[k], v))
    )
    return ResetWrites(deletes, puts)


def residue(baseline: Mapping[str, bytes], current: Mapping[str, bytes], limit: int = 20) -> list[str]:
    """Why ``current`` is not the baseline (empty: it is), one line per key, at most ``limit``."""
    writes = reset_writes(baseline, current)
    lines = [f"{k}: not in the baseline" for k in writes.deletes]
    lines += [
        f"{k}: {'missing' if k not in current else 'differs from the baseline'}" for k, _v in writes.puts
    ]
    return lines[:limit]
