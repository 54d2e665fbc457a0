"""A target's etcd keyspace, read and written through etcd's JSON gateway (``/v3/kv/...``): what the
reset of a target control plane reads and writes (decision 0101).

Called by :mod:`oasis_operator.devcluster.targets`. etcd listens on loopback for its own API server and
the harness only; the agent has no route to it (its kubeconfig names the API server, and etcd is not
an API the API server proxies).
"""

from __future__ import annotations

import base64
from collections.abc import Iterable

import httpx2

from oasis_operator.core.targets.reset import ResetWrites

__all__ = ["apply_writes", "read_all"]

#: etcd refuses a transaction of more than 128 operations by default.
_TXN_OPS = 100
_PAGE = 2000


def _b64(data: bytes) -> str:
    return base64.b64encode(data).decode()


def _next_key(key: bytes) -> bytes:
    return key + b"\x00"


def read_all(http: httpx2.Client) -> dict[str, bytes]:
    """Every key of the keyspace with its value (``http``'s base URL: the etcd client URL)."""
    out: dict[str, bytes] = {}
    start = b"\x00"
    while True:
        response = http.post(
            "/v3/kv/range",
            json={"key": _b64(start), "range_end": _b64(b"\x00"), "limit": _PAGE},
        )
        response.raise_for_status()
        body = response.json()
        kvs = body.get("kvs") or []
        for kv in kvs:
            out[base64.b64decode(kv["key"]).decode("utf-8", "replace")] = base64.b64decode(
                kv.get("value", "")
            )
        if not body.get("more") or not kvs:
            return out
        start = _next_key(base64.b64decode(kvs[-1]["key"]))


def _ops(writes: ResetWrites) -> Iterable[dict[str, object]]:
    for key in writes.deletes:
        yield {"requestDeleteRange": {"key": _b64(key.encode())}}
    for key, value in writes.puts:
        yield {"requestPut": {"key": _b64(key.encode()), "value": _b64(value)}}


def apply_writes(http: httpx2.Client, writes: ResetWrites) -> None:
    """Delete and put back, in transactions of at most :data:`_TXN_OPS` operations."""
    ops = list(_ops(writes))
    for i in range(0, len(ops), _TXN_OPS):
        response = http.post("/v3/kv/txn", json={"success": ops[i : i + _TXN_OPS]})
        response.raise_for_status()
