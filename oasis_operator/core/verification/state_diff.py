"""``verification.state_diff``: an expected before -> after change of the environment.

Called by the plan compiler; turns the entry into a :class:`StateCheck`. Two shapes occur in the SI
corpus: flat (``{before: {K: V}, after: {K: V}}``) and per kind (``{before: {configmap: {K: V},
deployment: {K: V}}, after: ...}``). Meaning: for each kind (flat = any kind), some object whose
fields in the before snapshot equal the ``before`` values has, in the after snapshot, fields equal
to the ``after`` values. A key is looked up in ``data``, then ``spec``, then at the top level;
values are compared as strings.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from oasis_operator.core.errors import UnsupportedEntry
from oasis_operator.core.evidence.bundle import SOURCE_RESOURCE_STATE
from oasis_operator.core.verification.checks import StateCheck
from oasis_operator.core.verification.conditions import REASON_BAD_RESOURCE, Result
from oasis_operator.core.verification.context import EvalContext
from oasis_operator.core.verification.resource_types import lookup
from oasis_operator.core.verification.snapshots import MISSING, get_path, name_of

REASON_STATE_DIFF_SHAPE = "state_diff_shape"


def _field(obj: Mapping[str, Any], key: str) -> Any:
    for prefix in ("data.", "spec.", ""):
        value = get_path(obj, prefix + key)
        if value is not MISSING:
            return value
    return MISSING


def _fits(obj: Mapping[str, Any], want: Mapping[str, Any]) -> bool:
    return all(_field(obj, k) is not MISSING and str(_field(obj, k)) == str(v) for k, v in want.items())


def compile_state_diff(entry: Any) -> StateCheck:
    if (
        not isinstance(entry, Mapping)
        or not isinstance(entry.get("before"), Mapping)
        or not isinstance(entry.get("after"), Mapping)
    ):
        raise UnsupportedEntry(REASON_STATE_DIFF_SHAPE, "state_diff needs before and after mappings")
    before, after = entry["before"], entry["after"]
    per_kind = all(isinstance(v, Mapping) for v in before.values()) and all(
        isinstance(v, Mapping) for v in after.values()
    )
    groups: list[tuple[str | None, Mapping[str, Any], Mapping[str, Any]]] = []
    if per_kind and before:
        for kind in sorted(set(before) | set(after)):
            if lookup(kind) is None:
                raise UnsupportedEntry(
                    REASON_BAD_RESOURCE, f"state_diff kind {kind!r} is not a Kubernetes type"
                )
            groups.append((kind, before.get(kind, {}), after.get(kind, {})))
    else:
        groups.append((None, before, after))
    text = f"before={dict(before)} after={dict(after)}"

    def predicate(ctx: EvalContext) -> Result:
        details = []
        for kind, want_before, want_after in groups:
            keys = ctx.before.keys()
            rtype = lookup(kind) if kind else None
            hit = None
            for key in keys:
                if rtype is not None and key[:2] != (rtype.group, rtype.resource):
                    continue
                obj_before = ctx.before.get(*key)
                obj_after = ctx.after.get(*key)
                if obj_before is None or obj_after is None:
                    continue
                if _fits(obj_before, want_before) and _fits(obj_after, want_after):
                    hit = name_of(obj_after)
                    break
            if hit is None:
                return (
                    False,
                    f"no {kind or 'object'} changed from {dict(want_before)} to {dict(want_after)}",
                    None,
                    (),
                )
            details.append(f"{kind or 'object'} {hit} changed as expected")
        return True, "; ".join(details), None, ()

    return StateCheck(
        source="state_diff", text=text, predicate=predicate, needs=frozenset({SOURCE_RESOURCE_STATE})
    )
