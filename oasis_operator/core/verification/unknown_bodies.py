"""Writes whose body the audit log does not hold, judged from the snapshots where they can be.

Called by the engine after classification. Secrets (and anything else a policy logs at Metadata
level) are written without a request body in the log, so a pattern about a field ("patch
secret/db-credentials data.DB_PASSWORD") cannot be judged from the request. The before and after
snapshots often can (docs/decisions/0040, class 11). For every successful update or patch judged as
the agent's, on an object present in both snapshots, whose body is not in the log, this module
attaches a :class:`~.matching.StateEvidence`; the matcher then reads, per field:

- the field differs between the snapshots and only the judged writes without a body can have
  changed it (no other identity wrote the object since the window's start, no judged write with a
  body touched the field) -> every such write received by the window's end *touched* it;
- the field is equal and this is the only such write, received by the window's end, with no
  other writer -> it did *not* touch it (a single write cannot change a field and restore it);
- anything else (two or more such writes and an equal field, another writer, a write after the
  window, a refused or unanswered request, an object created or deleted) -> still unknown.

Writes received after the window's end may come after the "after" snapshot: they are never taken as
"not touched", and never as the one that made a change.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from datetime import datetime

from oasis_operator.core.evidence.instants import instant
from oasis_operator.core.verification.collector import ACTOR_JUDGED, ObjectKey, WriteIndex
from oasis_operator.core.verification.matching import BY_UNAUDITED_CHANGE, Operation, StateEvidence
from oasis_operator.core.verification.snapshots import SnapshotIndex

#: Request verbs that change an existing object's fields.
FIELD_WRITES = frozenset({"update", "patch"})


def _key(op: Operation) -> ObjectKey:
    return (op.group, op.resource, op.namespace, op.name)


def _unknown(op: Operation) -> bool:
    """A judged write of an object's fields, without a body in the log, that may have persisted."""
    return (
        op.attribution != BY_UNAUDITED_CHANGE
        and not op.derived_from
        and not op.body_known
        and op.event.verb in FIELD_WRITES
        and not op.subresource
        and not op.dry_run
        and bool(op.name)
        and (op.event.succeeded or not op.outcome_known)
    )


def _known(op: Operation) -> bool:
    """A judged, persisted write whose body is in the log."""
    return (
        op.attribution != BY_UNAUDITED_CHANGE
        and not op.derived_from
        and op.body_known
        and op.event.verb in ("create", *FIELD_WRITES)
        and not op.dry_run
        and op.event.succeeded
    )


def _others(writes: WriteIndex, key: ObjectKey) -> bool:
    """Whether an identity not judged as the agent wrote the object (outside its status) since the
    window's start."""
    return any(
        actor != ACTOR_JUDGED and not verb.endswith("/status") for verb, actor in writes.recent_writers(key)
    )


def _placed(op: Operation, end: datetime | None) -> bool:
    when = instant(op.event.request_received)
    return end is not None and when is not None and when <= end and op.outcome_known


def with_state(
    ops: Sequence[Operation], before: SnapshotIndex, after: SnapshotIndex, writes: WriteIndex, window_end: str
) -> list[Operation]:
    """``ops`` with :class:`StateEvidence` attached to every write it can be attached to."""
    end = instant(window_end)
    unknown: dict[ObjectKey, list[Operation]] = {}
    known: dict[ObjectKey, list[Operation]] = {}
    for op in ops:
        if _unknown(op):
            unknown.setdefault(_key(op), []).append(op)
        elif _known(op):
            known.setdefault(_key(op), []).append(op)
    attached: dict[int, Operation] = {}
    for key, group in unknown.items():
        b, a = before.get(*key), after.get(*key)
        if b is None or a is None:
            continue
        others = _others(writes, key)
        for op in group:
            evidence = StateEvidence(
                before=b,
                after=a,
                unknown_writes=len(group),
                placed=_placed(op, end) and op.event.succeeded,
                others=others,
                known=tuple(k.event for k in known.get(key, [])),
            )
            attached[id(op)] = dataclasses.replace(op, state=evidence)
    return [attached.get(id(op), op) for op in ops]
