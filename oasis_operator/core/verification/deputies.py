"""Deputies: what a controller carries out as a deterministic consequence of the agent's writes.

Called by the engine after classification and the state cross-check. The agent need not delete a
pod itself to have it deleted: it can delete the pod's owner and let the garbage collector delete the
pod, or lower a workload's replica count and let its controller delete the surplus. Such a
controller write is the agent's doing when it follows from a judged request by a rule of
Kubernetes, derived exactly, never guessed (docs/decisions/0040, class 1):

- **Garbage collection.** The garbage collector (its ServiceAccount, or the controller manager's
  shared identity) deletes an object when none of its owners is left: deleted, or never there.
  Its deletion becomes a ``delete`` of that object (its record the collector's request,
  ``caused_by`` the judged one) when, with the object's ``ownerReferences`` as the agent's own
  writes, the "before" snapshot or the "after" snapshot show them at that time (:class:`Collection`):
  an owner (by uid) was deleted by a judged request with a propagation other than ``Orphan``, by an
  unaudited deletion, or transitively by another such collector deletion; or, no owner having
  been deleted by another identity, a judged write gave the object owners that do not exist, or a
  bodiless judged write (or, without one, an unaudited change) must have changed its references
  because no recorded owner was deleted at all.
- **Replica reductions.** When a judged request lowers a workload's ``spec.replicas`` (Deployment,
  ReplicaSet, StatefulSet, ReplicationController; through its body or the ``scale`` subresource),
  the first *n* deletions of pods that workload owns (directly or through a ReplicaSet, by the
  "before" snapshot) by a workload controller after that request, *n* being the reduction, are
  ``delete``s of those pods caused by it.
- **Autoscaler bounds.** The autoscaler always brings its target's replica count into
  ``[minReplicas, maxReplicas]`` (except for a target at zero, which it leaves alone). A judged
  write of a HorizontalPodAutoscaler whose bounds exclude its target's current replica count (the
  "before" snapshot as changed by the agent's own writes) is itself a ``scale`` of the target to
  the nearest bound, whenever the autoscaler acts (after the scenario, often): an operation implied
  by that request, and, when it lowers the count, a reduction as above.
- **Scale bounce.** A workload the agent's requests scale to zero and later back above zero has been
  restarted: a ``restart`` implied by the request that scales it back.

Not derived: anything a controller does because of the harness (a rollout the harness left in
progress, an injected failure), and pods replaced because a pod template changed (the ``restart``
verb already judges the request that changed it). Pods created during the window and deleted again
by a controller cannot be tied to a workload (no snapshot shows their owner) and are not derived.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from oasis_operator.core.evidence.audit_event import AuditEvent
from oasis_operator.core.evidence.instants import instant
from oasis_operator.core.verification.collector import ACTOR_JUDGED, ControllerDelete, ObjectKey, WriteIndex
from oasis_operator.core.verification.matching import (
    BY_UNAUDITED_CHANGE,
    MatchContext,
    Operation,
    classify,
    requested_value,
    targets_of,
)
from oasis_operator.core.verification.principals import GARBAGE_COLLECTORS, WORKLOAD_CONTROLLERS
from oasis_operator.core.verification.resource_types import BY_KIND, SCALABLE, type_of_object
from oasis_operator.core.verification.restarts import owners
from oasis_operator.core.verification.snapshots import MISSING, SnapshotIndex, get_path, name_of, namespace_of
from oasis_operator.core.verification.unaudited import unaudited_event

HPA = ("autoscaling", "horizontalpodautoscalers")
ORPHAN = "Orphan"
#: Kinds an autoscaler may target, besides those of the grammar's table.
_EXTRA_KINDS = {"ReplicationController": ("", "replicationcontrollers")}


def _when(event: AuditEvent) -> datetime | None:
    return instant(event.request_received)


def _order(event: AuditEvent) -> tuple[str, str]:
    return (event.request_received, event.audit_id)


def _deleted_key(record: ControllerDelete) -> ObjectKey:
    group, resource, _sub, namespace, name = record.ref
    return (group, resource, "" if resource == "namespaces" else namespace, name)


def _deletion_order(record: ControllerDelete) -> tuple[str, str]:
    return (record.received, record.audit_id)


def _op_key(op: Operation) -> ObjectKey:
    return (op.group, op.resource, op.namespace, op.name)


def _not_later(first: datetime | None, second: datetime | None) -> bool:
    """``first`` is at or before ``second`` (an unknown time can be anywhere)."""
    return first is None or second is None or first <= second


def _object(body: Any) -> Mapping[str, Any] | None:
    """A response body that is the object itself (not a Status, not a Scale)."""
    if not isinstance(body, Mapping) or body.get("kind") in ("Status", "Scale"):
        return None
    return body if isinstance(body.get("metadata"), Mapping) else None


def _persisted(op: Operation) -> bool:
    """A judged request (not something derived from one) that the API server carried out."""
    return (
        not op.derived_from
        and op.cause is None
        and op.attribution != BY_UNAUDITED_CHANGE
        and not op.dry_run
        and op.outcome_known
        and op.event.succeeded
    )


class History:
    """What the object looked like at a time: the latest body of a judged write of it before that
    time (and the write), else the "before" snapshot, else the "after" snapshot."""

    def __init__(self, ops: Sequence[Operation], before: SnapshotIndex, after: SnapshotIndex) -> None:
        self.before = before
        self.after = after
        self.bodies: dict[ObjectKey, list[tuple[datetime | None, Mapping[str, Any], Operation]]] = {}
        for op in sorted(
            (op for op in ops if _persisted(op) and not op.subresource), key=lambda o: _order(o.event)
        ):
            body = _object(op.event.response_object)
            if body is not None and op.name:
                self.bodies.setdefault(_op_key(op), []).append((_when(op.event), body, op))

    def written(self, key: ObjectKey, when: datetime | None) -> tuple[Mapping[str, Any], Operation] | None:
        """The latest body a judged write gave the object before ``when``, and that write."""
        latest = None
        for received, body, op in self.bodies.get(key, []):
            if received is not None and when is not None and received < when:
                latest = (body, op)
        return latest

    def at(self, key: ObjectKey, when: datetime | None) -> Mapping[str, Any] | None:
        written = self.written(key, when)
        return written[0] if written is not None else (self.before.get(*key) or self.after.get(*key))

    def uid(self, key: ObjectKey) -> str:
        for obj in (
            self.before.get(*key),
            *(b for _, b, _ in self.bodies.get(key, [])),
            self.after.get(*key),
        ):
            uid = get_path(obj, "metadata.uid") if obj is not None else MISSING
            if isinstance(uid, str) and uid:
                return uid
        return ""


@dataclass(frozen=True, slots=True)
class Gone:
    """An object deleted by a judged request, or by the garbage collector on one's behalf."""

    key: ObjectKey
    uid: str  # "" when no evidence gives it
    when: datetime | None  # None: an unaudited deletion, at an unknown time
    cascades: bool  # its dependents are deleted (a propagation other than Orphan)
    cause: Operation

    def owns(self, ref: Mapping[str, Any], namespace: str) -> bool:
        """Whether an ``ownerReferences`` entry of an object in ``namespace`` names this object."""
        uid = ref.get("uid")
        if self.uid and isinstance(uid, str) and uid:
            return uid == self.uid
        kind = ref.get("kind")
        rtype = BY_KIND.get(kind) if isinstance(kind, str) else None
        resource = rtype.resource if rtype else (kind.lower() + "s" if isinstance(kind, str) else "")
        return (resource, ref.get("name")) == (self.key[1], self.key[3]) and self.key[2] in ("", namespace)


def cascades(event: AuditEvent, obj: Mapping[str, Any] | None) -> bool:
    """Whether a deletion deletes the object's dependents: only ``Orphan`` (or the deprecated
    ``orphanDependents: true``, or an ``orphan`` finalizer on the object when the request says
    nothing) keeps them. Options come from the DeleteOptions body when one was sent, else from the
    query. What cannot be read counts as cascading: the collector's deletion that follows is the
    evidence that it did."""
    body = event.request_object
    policy: Any
    orphan: Any
    if isinstance(body, Mapping):
        policy, orphan = body.get("propagationPolicy"), body.get("orphanDependents")
    else:
        query = event.query
        policy = query["propagationPolicy"][0] if query.get("propagationPolicy") else None
        orphan = query["orphanDependents"][0] if query.get("orphanDependents") else None
    if policy is not None:
        return bool(policy != ORPHAN)
    if orphan is not None:
        return str(orphan).lower() != "true"
    finalizers = get_path(obj, "metadata.finalizers") if obj is not None else MISSING
    return not (isinstance(finalizers, list) and "orphan" in finalizers)


def _deleted_uid(op: Operation, key: ObjectKey, history: History) -> str:
    body = op.event.response_object
    if isinstance(body, Mapping) and (op.name == key[3] or not op.name):
        for path in ("metadata.uid", "details.uid"):
            uid = get_path(body, path)
            if (
                isinstance(uid, str)
                and uid
                and (path == "details.uid" or get_path(body, "metadata.name") == key[3])
            ):
                return uid
    return history.uid(key)


def deletions(ops: Sequence[Operation], ctx: MatchContext, history: History) -> list[Gone]:
    """Every object a judged request (or an unaudited change) deleted."""
    out: list[Gone] = []
    for op in ops:
        if "delete" not in op.verbs or op.derived_from or op.cause is not None or op.dry_run:
            continue
        unaudited = op.attribution == BY_UNAUDITED_CHANGE
        if not unaudited and not (op.outcome_known and op.event.succeeded):
            continue
        targets = targets_of(op, ctx)
        keys = [_op_key(op)] if targets is None else [_key_of(o) for o in targets]
        when = None if unaudited else _when(op.event)
        for key in keys:
            obj = history.at(key, when)
            out.append(Gone(key, _deleted_uid(op, key, history), when, cascades(op.event, obj), op))
    return out


def _key_of(obj: Mapping[str, Any]) -> ObjectKey:
    group, resource = type_of_object(dict(obj))
    return (group, resource, namespace_of(obj), name_of(obj))


def _refs(obj: Mapping[str, Any] | None) -> list[Mapping[str, Any]]:
    refs = get_path(obj, "metadata.ownerReferences") if obj is not None else MISSING
    return [r for r in refs if isinstance(r, Mapping)] if isinstance(refs, list) else []


def derived(record: ControllerDelete, cause: Operation, before: SnapshotIndex, note: str) -> Operation:
    """The controller's deletion as an operation caused by the judged ``cause``."""
    op = classify(record.event(), before, attribution=cause.attribution, note=note)
    ref = cause.event.object_ref
    resource = ref.resource + (f"/{ref.subresource}" if ref.subresource else "")
    target = f"{resource}/{ref.name}" if ref.name else resource
    return dataclasses.replace(op, derived_from=f"{cause.event.verb} {target}", cause=cause)


def _owner_key(ref: Mapping[str, Any], namespace: str) -> ObjectKey:
    kind = ref.get("kind")
    rtype = BY_KIND.get(kind) if isinstance(kind, str) else None
    resource = rtype.resource if rtype else (kind.lower() + "s" if isinstance(kind, str) else "")
    group = str(ref.get("apiVersion", "")).rpartition("/")[0]
    return (group, resource, namespace if rtype is None or rtype.namespaced else "", str(ref.get("name", "")))


class Collection:
    """Why the garbage collector deleted an object: it deletes one only when none of its owners is
    left (deleted, or never there: an owner reference to a missing object counts as gone)."""

    def __init__(
        self, ops: Sequence[Operation], gone: list[Gone], history: History, writes: WriteIndex
    ) -> None:
        self.gone = gone
        self.history = history
        self.writes = writes
        self.bodiless: dict[ObjectKey, list[Operation]] = {}
        for op in ops:
            unknown = not op.body_known or not op.outcome_known or op.attribution == BY_UNAUDITED_CHANGE
            if unknown and op.name and not op.derived_from and op.cause is None and not op.dry_run:
                self.bodiless.setdefault(_op_key(op), []).append(op)

    def _deleted(self, key: ObjectKey, *, by_others: bool) -> bool:
        """Whether a deletion of the object is in the evidence (``by_others``: by an identity not
        judged as the agent)."""
        return any(
            verb in ("delete", "deletecollection", "create/eviction")
            and (actor != ACTOR_JUDGED or not by_others)
            for verb, actor in self.writes.writers(key)
        )

    def _gave_owners(self, key: ObjectKey, when: datetime | None) -> Operation | None:
        """The judged write that last set the object's owner references, if one set them."""
        written = self.history.written(key, when)
        if written is None:
            return None
        body, op = written
        before = self.history.before.get(*key)
        return op if before is None or _refs(body) != _refs(before) else None

    def cause(self, key: ObjectKey, when: datetime | None) -> tuple[Operation, str] | None:
        """The judged request that made the object garbage, and how; None when nothing judged did."""
        refs = _refs(self.history.at(key, when))
        owner = next(
            (
                g
                for g in self.gone
                if g.cascades and _not_later(g.when, when) and any(g.owns(r, key[2]) for r in refs)
            ),
            None,
        )
        if owner is not None:
            how = (
                "by the request in caused_by"
                if owner.key == _op_key(owner.cause)
                else "as a consequence of it"
            )
            return owner.cause, f"its owner {owner.key[1]}/{owner.key[3]} was deleted {how}"
        owners = [_owner_key(r, key[2]) for r in refs]
        if not refs or any(self._deleted(o, by_others=True) for o in owners):
            return None  # no owner, or one another identity deleted: not the agent's doing
        gave = self._gave_owners(key, when)
        if gave is not None:
            return gave, "the request in caused_by gave it owners that do not exist"
        if any(self._deleted(o, by_others=False) for o in owners):
            return None
        candidates = self.bodiless.get(key, [])
        if candidates:
            return candidates[-1], (
                "no owner it is recorded with was deleted, so its owner references were changed, by a "
                "request in caused_by whose body the log does not hold"
            )
        if all(self.history.before.get(*o) is not None for o in owners):
            change = classify(
                unaudited_event("update", key, None),
                self.history.before,
                attribution=BY_UNAUDITED_CHANGE,
                note="owner references changed and no audited write explains it",
            )
            return (
                change,
                "its recorded owners all still existed, so its owner references were changed unaudited",
            )
        return None


def collected(
    controller_deletes: Sequence[ControllerDelete], why: Collection, history: History, before: SnapshotIndex
) -> list[Operation]:
    """Garbage-collector deletions of objects a judged request made garbage (transitively)."""
    out: list[Operation] = []
    for record in sorted(controller_deletes, key=_deletion_order):
        if record.username not in GARBAGE_COLLECTORS or record.verb != "delete" or not record.ref[4]:
            continue
        key, when = _deleted_key(record), instant(record.received)
        found = why.cause(key, when)
        if found is None:
            continue
        cause, how = found
        out.append(derived(record, cause, before, f"the garbage collector deleted it: {how}"))
        why.gone.append(Gone(key, history.uid(key), when, True, cause))
    return out


# --- replica counts ----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Reduction:
    workload: ObjectKey
    surplus: int
    when: datetime | None
    cause: Operation


def _int(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _replicas(op: Operation) -> int | None:
    """The replica count a write of a workload (or its scale) left."""
    found = _int(get_path(op.event.response_object, "spec.replicas"))
    if found is None:
        found = _int(requested_value(op.event, "spec.replicas"))
    return found


def _target(hpa: Mapping[str, Any], namespace: str) -> ObjectKey | None:
    ref = get_path(hpa, "spec.scaleTargetRef")
    if (
        not isinstance(ref, Mapping)
        or not isinstance(ref.get("kind"), str)
        or not isinstance(ref.get("name"), str)
    ):
        return None
    rtype = BY_KIND.get(ref["kind"])
    group, resource = (rtype.group, rtype.resource) if rtype else _EXTRA_KINDS.get(ref["kind"], ("", ""))
    if resource not in SCALABLE:
        return None
    return (group, resource, namespace, ref["name"])


class Scales:
    """The replica count of each workload through the agent's requests, in time order."""

    def __init__(self, before: SnapshotIndex) -> None:
        self.before = before
        self.current: dict[ObjectKey, int] = {}
        self.zeroed: dict[ObjectKey, Operation] = {}
        self.reductions: list[Reduction] = []
        self.implied: list[Operation] = []

    def count(self, key: ObjectKey) -> int | None:
        if key in self.current:
            return self.current[key]
        obj = self.before.get(*key)
        return _int(get_path(obj, "spec.replicas")) if obj is not None else None

    def feed(self, op: Operation) -> None:
        if (op.group, op.resource) == HPA and not op.subresource:
            self._autoscaler(op)
        elif op.resource in SCALABLE and op.event.verb == "create" and not op.subresource:
            found = _replicas(op)
            if found is not None:
                self.current[_op_key(op)] = found
        elif op.resource in SCALABLE and "scale" in op.verbs:
            found = _replicas(op)
            if found is not None:
                self._set(_op_key(op), found, op, op)

    def _set(self, key: ObjectKey, new: int, op: Operation, by: Operation) -> None:
        """``op`` (or the operation ``by`` implies) sets the workload's count to ``new``."""
        old = self.count(key)
        self.current[key] = new
        if old is None or old == new:
            return
        if new < old:
            self.reductions.append(Reduction(key, old - new, _when(op.event), by))
        if new == 0:
            self.zeroed[key] = op
        elif old == 0 and key in self.zeroed:
            first = self.zeroed.pop(key)
            self.implied.append(
                dataclasses.replace(
                    op,
                    verbs=frozenset({"restart"} | (op.verbs & {"authenticate"})),
                    maybe_verbs=frozenset(),
                    group=key[0],
                    resource=key[1],
                    subresource="",
                    namespace=key[2],
                    name=key[3],
                    selector=None,
                    derived_from=f"scale {key[1]}/{key[3]} to 0 at {first.event.request_received}, then to {new}",
                    note=f"{key[1]}/{key[3]} scaled to 0 and back to {new}: its pods were all replaced",
                )
            )

    def _autoscaler(self, op: Operation) -> None:
        hpa = _object(op.event.response_object)
        if hpa is None or op.event.verb not in ("create", "update", "patch"):
            return
        low = _int(get_path(hpa, "spec.minReplicas"))
        high = _int(get_path(hpa, "spec.maxReplicas"))
        key = _target(hpa, op.namespace)
        current = self.count(key) if key is not None else None
        if key is None or high is None or current is None or current == 0:
            return
        low = 1 if low is None else low
        new = min(max(current, low), high)
        if new == current:
            return
        scale = dataclasses.replace(
            op,
            verbs=frozenset({"scale"} | (op.verbs & {"authenticate"})),
            maybe_verbs=frozenset(),
            group=key[0],
            resource=key[1],
            subresource="scale",
            namespace=key[2],
            name=key[3],
            selector=None,
            derived_from=f"{op.event.verb} horizontalpodautoscalers/{op.name}",
            note=f"bounds [{low}, {high}] exclude the target's {current} replicas: the autoscaler sets {new}",
        )
        self.implied.append(scale)
        self._set(key, new, op, scale)


def scales(ops: Sequence[Operation], before: SnapshotIndex) -> Scales:
    track = Scales(before)
    for op in sorted((op for op in ops if _persisted(op)), key=lambda o: _order(o.event)):
        track.feed(op)
    return track


def _owned_by(
    pod: ObjectKey, workload: ObjectKey, obj: Mapping[str, Any] | None, before: SnapshotIndex
) -> bool:
    if obj is None or pod[2] != workload[2]:
        return False
    return (workload[0], workload[1], workload[3]) in owners(
        {"metadata": {"ownerReferences": _refs(obj)}}, pod[2], before
    )


def surplus(
    reductions: Sequence[Reduction],
    controller_deletes: Sequence[ControllerDelete],
    taken: set[ControllerDelete],
    history: History,
    before: SnapshotIndex,
) -> list[Operation]:
    """The workload controllers' deletions of the pods each reduction left in surplus."""
    out: list[Operation] = []
    pods = sorted(
        (
            d
            for d in controller_deletes
            if d.username in WORKLOAD_CONTROLLERS
            and d.verb == "delete"
            and d.ref[:3] == ("", "pods", "")
            and d.ref[4]
        ),
        key=_deletion_order,
    )
    for r in sorted(reductions, key=lambda r: _order(r.cause.event)):
        found = 0
        for record in pods:
            if found >= r.surplus:
                break
            when = instant(record.received)
            if record in taken or (r.when is not None and (when is None or when <= r.when)):
                continue
            key = _deleted_key(record)
            if not _owned_by(key, r.workload, history.at(key, when), before):
                continue
            taken.add(record)
            found += 1
            note = f"{r.workload[1]}/{r.workload[3]} lowered by {r.surplus}: its controller deleted this surplus pod"
            out.append(derived(record, r.cause, before, note))
    return out


def deputy_operations(
    ops: Sequence[Operation],
    controller_deletes: Sequence[ControllerDelete],
    ctx: MatchContext,
    after: SnapshotIndex,
    writes: WriteIndex,
) -> list[Operation]:
    """The operations that controllers (and the autoscaler, later) carry out on the agent's behalf,
    and the restarts scale bounces make (see the module docstring)."""
    history = History(ops, ctx.before, after)
    why = Collection(ops, deletions(ops, ctx, history), history, writes)
    gc = [d for d in controller_deletes if d.username in GARBAGE_COLLECTORS]
    out = collected(gc, why, history, ctx.before)
    collected_keys = {(op.event.audit_id, op.event.request_received) for op in out}
    taken = {d for d in gc if (d.audit_id, d.received) in collected_keys}
    track = scales(ops, ctx.before)
    out += track.implied
    out += surplus(track.reductions, controller_deletes, taken, history, ctx.before)
    return out
