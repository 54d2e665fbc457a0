"""The reset of a target and its proof, as values (decision 0101): whatever a scenario did to the
keyspace, the reset's writes bring it back to a state the proof accepts, and the proof refuses every
state that is not the baseline (volatile bookkeeping aside)."""

from __future__ import annotations

import json

from hypothesis import given, settings
from hypothesis import strategies as st

from oasis_operator.core.targets.reset import (
    VOLATILE_PREFIXES,
    comparable,
    rekeyed,
    reset_writes,
    residue,
)

PREFIXES = (
    "/registry/pods/default/",
    "/registry/namespaces/",
    "/registry/clusterrolebindings/",
    "/registry/serviceaccounts/kube-system/",
    "/registry/serviceaccounts/default/",
    "/registry/serviceaccounts/kube-public/",
    "/registry/minions/",
    *VOLATILE_PREFIXES[:3],
)


def obj(name: str, spec: int, status: int = 0, rv: int = 1) -> bytes:
    return json.dumps(
        {
            "kind": "Thing",
            "metadata": {
                "name": name,
                "uid": f"uid-{name}",
                "resourceVersion": str(rv),
                "managedFields": [{"time": str(rv)}],
            },
            "spec": {"n": spec},
            "status": {"heartbeat": status},
        }
    ).encode()


keys = st.builds(lambda p, n: p + n, st.sampled_from(PREFIXES), st.text("abcdef", min_size=1, max_size=4))
values = st.builds(
    obj, st.text("xyz", min_size=1, max_size=2), st.integers(0, 3), st.integers(0, 3), st.integers(1, 9)
)
raw = st.binary(min_size=0, max_size=8)
keyspaces = st.dictionaries(keys, st.one_of(values, raw), max_size=12)


def apply(current: dict[str, bytes], baseline: dict[str, bytes]) -> dict[str, bytes]:
    writes = reset_writes(baseline, current)
    out = dict(current)
    for k in writes.deletes:
        del out[k]
    out.update(writes.puts)
    return out


@settings(derandomize=True, max_examples=120)
@given(keyspaces, keyspaces)
def test_after_the_writes_the_proof_holds(baseline: dict[str, bytes], current: dict[str, bytes]) -> None:
    assert residue(baseline, apply(current, baseline)) == []


@settings(derandomize=True, max_examples=120)
@given(keyspaces, keyspaces)
def test_the_proof_fails_exactly_when_scenario_state_differs(
    baseline: dict[str, bytes], current: dict[str, bytes]
) -> None:
    def state(space: dict[str, bytes]) -> dict[str, object]:
        return {k: comparable(v) for k, v in space.items() if not k.startswith(VOLATILE_PREFIXES)}

    assert (residue(baseline, current, limit=10_000) == []) == (state(baseline) == state(current))


@settings(derandomize=True, max_examples=80)
@given(keyspaces, keyspaces)
def test_volatile_keys_are_never_written(baseline: dict[str, bytes], current: dict[str, bytes]) -> None:
    writes = reset_writes(baseline, current)
    assert not any(k.startswith(VOLATILE_PREFIXES) for k in writes.deletes)
    assert not any(k.startswith(VOLATILE_PREFIXES) for k, _ in writes.puts)


def test_examples_of_what_a_scenario_leaves() -> None:
    node = obj("node-1", spec=0, status=5, rv=10)
    baseline = {
        "/registry/minions/node-1": node,
        "/registry/clusterroles/admin": obj("admin", 1),
        "/registry/leases/kube-node-lease/node-1": obj("lease", 0),
    }
    current = {
        # A heartbeat later: status and version moved, nothing else: the same.
        "/registry/minions/node-1": obj("node-1", spec=0, status=9, rv=44),
        # Edited by the agent.
        "/registry/clusterroles/admin": obj("admin", 2),
        # Made by the agent.
        "/registry/clusterrolebindings/mine": obj("mine", 0),
        # The control plane's own, renewed.
        "/registry/leases/kube-node-lease/node-1": obj("lease", 7),
    }
    writes = reset_writes(baseline, current)
    assert writes.deletes == ("/registry/clusterrolebindings/mine",)
    assert [k for k, _ in writes.puts] == ["/registry/clusterroles/admin"]
    assert residue(baseline, current) == [
        "/registry/clusterrolebindings/mine: not in the baseline",
        "/registry/clusterroles/admin: differs from the baseline",
    ]
    # A cordoned node is scenario state: put back.
    cordoned = dict(current, **{"/registry/minions/node-1": obj("node-1", spec=1, status=9, rv=45)})
    assert "/registry/minions/node-1" in dict(reset_writes(baseline, cordoned).puts)


def _uid(value: bytes) -> str | None:
    try:
        obj = json.loads(value)
    except (ValueError, UnicodeDecodeError):
        return None
    return (
        obj["metadata"].get("uid")
        if isinstance(obj, dict) and isinstance(obj.get("metadata"), dict)
        else None
    )


@settings(derandomize=True, max_examples=150)
@given(keyspaces, keyspaces)
def test_no_uid_of_an_account_outside_kube_system_survives_a_reset(
    baseline: dict[str, bytes], current: dict[str, bytes]
) -> None:
    """Decision 0115: whatever the attempt left, after the reset no ServiceAccount outside kube-system
    has a uid it had before (a token names its account by uid), every other key is the baseline's (up to what the control plane rewrites), and
    the proof holds on the rekeyed baseline."""
    fresh = (f"fresh-{i}" for i in range(10_000))
    new = rekeyed(baseline, lambda: next(fresh))
    after = apply(current, new)
    assert residue(new, after) == []
    before_uids = {_uid(v) for v in (*baseline.values(), *current.values())} - {None}
    for key, value in after.items():
        account = key.startswith("/registry/serviceaccounts/") and "/kube-system/" not in key
        if account and _uid(value) is not None:
            assert _uid(value) not in before_uids, key
        elif key in baseline and not key.startswith(VOLATILE_PREFIXES):
            assert comparable(value) == comparable(baseline[key]), key
    assert new.keys() == baseline.keys()


def test_a_rekeyed_account_keeps_everything_but_its_uid() -> None:
    sa = b'{"kind":"ServiceAccount","metadata":{"name":"default","namespace":"default","uid":"u1"}}\n'
    system = b'{"kind":"ServiceAccount","metadata":{"name":"job-controller","uid":"u2"}}\n'
    base = {
        "/registry/serviceaccounts/default/default": sa,
        "/registry/serviceaccounts/kube-system/job-controller": system,
        "/registry/namespaces/default": b'{"kind":"Namespace","metadata":{"uid":"u3"}}',
    }
    new = rekeyed(base, lambda: "u9")
    moved = json.loads(new["/registry/serviceaccounts/default/default"])
    assert moved["metadata"] == {"name": "default", "namespace": "default", "uid": "u9"}
    assert new["/registry/serviceaccounts/default/default"].endswith(b"\n")
    assert new["/registry/serviceaccounts/kube-system/job-controller"] == system
    assert new["/registry/namespaces/default"] == base["/registry/namespaces/default"]
