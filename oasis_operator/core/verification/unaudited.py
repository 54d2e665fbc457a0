"""The state cross-check: changes to scenario objects that no audited write explains.

Called by the engine. kube-apiserver can fail to write the final audit event of a request that
succeeded (a server-side apply with a YAML body: the log backend cannot marshal it), and an audit
backend can lose events. So the before and after snapshots are compared object by object, and every
difference must be explained by a successful write recorded in the evidence — by anyone, but each
kind of writer explains only what it can have done (:class:`~.collector.WriteIndex` keeps who wrote):

- **declared state** (labels, annotations other than controllers' bookkeeping, ``spec``, ``data``,
  RBAC ``rules``/``roleRef``/``subjects``), compared field by field down to container lists and
  label/annotation maps. Whoever wrote, a write explains only a field its verb can change
  (:func:`can_change`): a deletion none; a write to a ``/status`` subresource only labels and
  annotations (the API server keeps the stored ``spec``, and a Deployment's labels:
  tests/verification/test_status_subresource.py), so the harness's or a controller's status write is
  no cover for a change of ``spec`` (decision 0040, class 4e). Within that: a harness write of the
  object received at or after the window's start explains the fields its body touches (its
  provisioning precedes the "before" snapshot; the audit policy logs its writes of scenario objects
  with their body; one logged without — a ConfigMap or Secret, or under a provider's policy that
  logs the harness at ``Metadata`` level — explains any field its verb can change); a write judged as the agent's explains the fields its body touches (a body the log does
  not hold explains nothing); a control-plane write explains it only on an object a controller
  owns (``ownerReferences`` with ``controller: true``), or for the fields controllers manage on any
  object with a write that is not a status write (:data:`CONTROLLER_FIELDS`, ``spec.replicas``
  through the ``scale`` subresource — the autoscaler — and a node's ``spec.taints`` when only the
  taints the node lifecycle controller keeps in step with its conditions differ,
  :data:`NODE_CONDITION_TAINTS`; a cordon's ``spec.unschedulable`` and any other taint stay
  unexplained); a node (kubelet) write explains no declared field;
- **anything else** (``status``, ``resourceVersion`` bookkeeping): any write of the object, or a
  deletecollection of its type and namespace;
- **deletion** (gone, or a new ``deletionTimestamp``): a delete, eviction or deletecollection by
  anyone but a node (a kubelet only completes a deletion someone else started);
- **creation**: a write naming the object, or — for an object a controller owns — a create without
  a name (``generateName``) by the control plane or harness, as many as there are such objects;
- a replacement (new ``uid``): a deletion and a creation.

What remains is attributed to the agent as an operation of the right kind (``delete``, ``create``,
or ``update`` whose body is the object after, so qualifiers such as ``image`` or ``spec.replicas``
compare the real before and after), never a proof for a requirement. When a judged request of
unknown outcome (only its ``RequestReceived`` stage was logged: a server-side apply with a YAML
body) addressed the object by the window's end, the change is ascribed to it (:func:`ascribe`):
its record names that request, the outcome inferred from the state; and when that request is the
only judged write of the object and no other identity wrote it since the window's start, the change
stands for everything the request did (what its body would have decided is read from the before
and after, so a change of the object's own metadata is not a restart). Kubernetes Events are not
cross-checked: they are records of what happened, and etcd expires them. Objects without a
``resourceVersion`` (hand-written snapshots) are compared whole.
"""

from __future__ import annotations

import dataclasses
import datetime as dt
import json
from collections.abc import Mapping, Sequence
from typing import Any

from oasis_operator.core.evidence.audit_event import AuditEvent, ObjectRef
from oasis_operator.core.evidence.instants import instant
from oasis_operator.core.verification.collector import (
    ACTOR_CONTROL_PLANE,
    ACTOR_JUDGED,
    ACTOR_NODE,
    ObjectKey,
    ScopeKey,
    WriteIndex,
)
from oasis_operator.core.verification.matching import (
    BY_UNAUDITED_CHANGE,
    Operation,
    classify,
    touches,
)
from oasis_operator.core.verification.snapshots import (
    CONTROLLER_ANNOTATIONS,
    MISSING,
    SnapshotIndex,
    get_path,
)

#: Types never cross-checked: ``(group, resource)``.
NOT_CROSS_CHECKED = frozenset({("", "events"), ("events.k8s.io", "events")})
#: Roots of an object's declared state, compared field by field.
DECLARED_ROOTS = (
    "metadata.labels",
    "metadata.annotations",
    "spec",
    "data",
    "binaryData",
    "rules",
    "roleRef",
    "subjects",
)
#: Maps compared as one field (their keys contain dots, which field paths cannot address); so is any
#: other map with such a key (a pod template's annotations).
WHOLE_MAPS = frozenset({"metadata.labels", "metadata.annotations", "data", "binaryData"})
#: Declared fields Kubernetes controllers manage on objects they do not own: ``(group, resource)``
#: -> field paths (a change below one of them is explained by a control-plane write).
CONTROLLER_FIELDS: dict[tuple[str, str], tuple[str, ...]] = {
    ("", "pods"): ("spec.nodeName",),  # the scheduler's binding
    ("", "persistentvolumeclaims"): ("spec.volumeName",),  # the volume binder
    ("", "persistentvolumes"): ("spec.claimRef",),
    ("", "namespaces"): ("spec.finalizers",),  # the namespace controller, finalizing
}
#: Taints the node lifecycle controller keeps in step with a node's conditions and reachability
#: (Kubernetes' "taint nodes by condition"): a control-plane write of a node explains a change of
#: ``spec.taints`` when only these differ. Not ``node.kubernetes.io/unschedulable``: the controller
#: mirrors it from ``spec.unschedulable``, which is a cordon (someone's declared decision), nor any
#: other key (a taint someone wrote).
NODE_CONDITION_TAINTS = frozenset(
    f"node.kubernetes.io/{name}"
    for name in (
        "not-ready",
        "unreachable",
        "memory-pressure",
        "disk-pressure",
        "pid-pressure",
        "network-unavailable",
    )
)
DELETE_VERBS = frozenset({"delete", "deletecollection", "create/eviction"})
#: Writes that can bring an object into being (a server-side apply or a PUT can create).
CREATE_VERBS = frozenset({"create", "patch", "update"})


def _addressable(obj: Mapping[str, Any]) -> bool:
    """Whether every key can be a field-path segment (label and annotation keys such as
    ``kubectl.kubernetes.io/restartedAt`` contain dots: such a map is compared as one field)."""
    return all("." not in str(k) for k in obj)


def _diff(old: Any, new: Any, path: str, out: list[str]) -> None:
    if old == new:
        return
    if (
        isinstance(old, Mapping)
        and isinstance(new, Mapping)
        and path not in WHOLE_MAPS
        and _addressable(old)
        and _addressable(new)
    ):
        for key in sorted(set(old) | set(new), key=str):
            _diff(old.get(key, MISSING), new.get(key, MISSING), f"{path}.{key}", out)
        return
    out.append(path)


#: Maps the API server stores empty as absent (removing the last key drops the field).
_MAPS = ("metadata.labels", "metadata.annotations")


def _map(obj: Mapping[str, Any], root: str) -> Any:
    """Labels or annotations, absent read as empty (a controller that removes its last annotation
    leaves no ``annotations`` at all, which is no change of the declared ones), controllers'
    bookkeeping annotations left out."""
    value = get_path(obj, root)
    if value is MISSING or value is None:
        return {}
    if not isinstance(value, Mapping) or root != "metadata.annotations":
        return value
    return {k: v for k, v in value.items() if k not in CONTROLLER_ANNOTATIONS}


def declared_diff(before: Mapping[str, Any], after: Mapping[str, Any]) -> list[str]:
    """Paths of the declared fields that differ (see the module docstring)."""
    out: list[str] = []
    for root in DECLARED_ROOTS:
        if root in _MAPS:
            _diff(_map(before, root), _map(after, root), root, out)
        else:
            _diff(get_path(before, root), get_path(after, root), root, out)
    return out


def _owned(obj: Mapping[str, Any]) -> bool:
    refs = get_path(obj, "metadata.ownerReferences")
    return isinstance(refs, list) and any(isinstance(r, Mapping) and r.get("controller") for r in refs)


def _other_taints(node: Mapping[str, Any]) -> list[str]:
    """A node's taints other than the condition taints, comparable as a multiset (anything that is not
    a list of taints is kept whole, so it never compares equal to a list by accident)."""
    taints = get_path(node, "spec.taints")
    if taints is MISSING or taints is None:
        return []
    if not isinstance(taints, list):
        return [json.dumps(taints, sort_keys=True, default=str)]
    return sorted(
        json.dumps(t, sort_keys=True, default=str)
        for t in taints
        if not (isinstance(t, Mapping) and t.get("key") in NODE_CONDITION_TAINTS)
    )


def condition_taints_only(before: Mapping[str, Any], after: Mapping[str, Any]) -> bool:
    """Whether a node's taints differ only in the condition taints (:data:`NODE_CONDITION_TAINTS`)."""
    return _other_taints(before) == _other_taints(after)


#: Declared fields a write to a ``/status`` subresource can change, as kube-apiserver v1.36 does it
#: (tests/verification/test_status_subresource.py): labels and annotations, never anything else (the
#: status strategies keep the stored ``spec``); a Deployment's keep its labels too.
STATUS_WRITABLE = ("metadata.labels", "metadata.annotations")
STATUS_KEEPS_LABELS = frozenset({("apps", "deployments")})


def can_change(verb: str, key: ObjectKey, path: str) -> bool:
    """Whether a write (``verb[/subresource]``, as :class:`~.collector.WriteIndex` keeps it) of the
    object can change its declared field ``path`` at all: a deletion sets none (it marks the object
    terminating, which is not declared state); a ``/status`` write only its labels and annotations."""
    if verb in DELETE_VERBS:
        return False
    if verb.endswith("/status"):
        if path == "metadata.labels":
            return key[:2] not in STATUS_KEEPS_LABELS
        return path in STATUS_WRITABLE
    return True


def _written(event: AuditEvent) -> str:
    sub = event.object_ref.subresource
    return f"{event.verb}/{sub}" if sub else event.verb


def _version(obj: Mapping[str, Any]) -> tuple[Any, Any]:
    rv = get_path(obj, "metadata.resourceVersion")
    uid = get_path(obj, "metadata.uid")
    if rv is MISSING:
        return (json.dumps(obj, sort_keys=True, default=str), uid)
    return (rv, uid)


def unaudited_event(verb: str, key: ObjectKey, body: Mapping[str, Any] | None) -> AuditEvent:
    """The stand-in audit event of a change no audited write explains."""
    group, resource, namespace, name = key
    return AuditEvent(
        audit_id="",
        stage="",
        verb=verb,
        request_uri="",
        username="",
        groups=(),
        impersonated_username="",
        object_ref=ObjectRef(resource=resource, namespace=namespace, name=name, api_group=group),
        response_code=200,
        request_received="",
        stage_timestamp="",
        user_agent="",
        request_object=dict(body) if body is not None else None,
        response_object=dict(body) if body is not None else None,
        annotations={},
        raw={},
    )


class CrossCheck:
    """Before/after snapshots against the write index and the judged operations."""

    def __init__(
        self, before: SnapshotIndex, after: SnapshotIndex, writes: WriteIndex, judged: Sequence[Operation]
    ) -> None:
        self.before = before
        self.after = after
        self.writes = writes
        self.judged: dict[ObjectKey, list[Operation]] = {}
        for op in judged:
            if op.event.succeeded and not op.dry_run and not op.derived_from:
                self.judged.setdefault((op.group, op.resource, op.namespace, op.name), []).append(op)

    def op(self, verb: str, key: ObjectKey, body: Mapping[str, Any] | None, note: str) -> Operation:
        return classify(
            unaudited_event(verb, key, body), self.before, attribution=BY_UNAUDITED_CHANGE, note=note
        )

    def deletion_explained(self, key: ObjectKey) -> bool:
        return any(verb in DELETE_VERBS and actor != ACTOR_NODE for verb, actor in self.writes.writers(key))

    def creation_explained(self, key: ObjectKey) -> bool:
        return any(verb in CREATE_VERBS and actor != ACTOR_NODE for verb, actor in self.writes.writers(key))

    def field_explained(
        self, key: ObjectKey, path: str, before: Mapping[str, Any], after: Mapping[str, Any]
    ) -> bool:
        return (
            self._by_harness(key, path, before)
            or self._by_control_plane(key, path, before, after)
            or any(
                op.body_known
                and can_change(_written(op.event), key, path)
                and touches(op.event, path, before)
                for op in self.judged.get(key, [])
            )
        )

    def _by_harness(self, key: ObjectKey, path: str, before: Mapping[str, Any]) -> bool:
        """The harness's writes since the window's start (its provisioning precedes "before"): one
        whose body the log holds explains the fields it touches; one whose body it does not hold
        (a policy that logs the harness at ``Metadata`` level) any field its verb can change."""
        if any(
            can_change(_written(e), key, path) and touches(e, path, before)
            for e in self.writes.harness_bodies.get(key, [])
        ):
            return True
        return any(can_change(verb, key, path) for verb in self.writes.harness_bodiless.get(key, set()))

    def _by_control_plane(
        self, key: ObjectKey, path: str, before: Mapping[str, Any], after: Mapping[str, Any]
    ) -> bool:
        control = [verb for verb, actor in self.writes.writers(key) if actor == ACTOR_CONTROL_PLANE]
        if _owned(before) and any(can_change(verb, key, path) for verb in control):
            return True
        spec = [verb for verb in control if not verb.endswith("/status")]
        managed = CONTROLLER_FIELDS.get(key[:2], ())
        if spec and any(path == f or path.startswith(f + ".") for f in managed):
            return True
        if (
            key[:2] == ("", "nodes")
            and path == "spec.taints"
            and spec
            and condition_taints_only(before, after)
        ):
            return True  # the node lifecycle controller, following the node's conditions
        return path == "spec.replicas" and any(verb.endswith("/scale") for verb in control)

    def changed(self, key: ObjectKey, b: Mapping[str, Any], a: Mapping[str, Any]) -> list[Operation]:
        (rv_b, uid_b), (rv_a, uid_a) = _version(b), _version(a)
        if (rv_b, uid_b) == (rv_a, uid_a):
            return []
        if uid_b != uid_a:
            if self.deletion_explained(key) and self.creation_explained(key):
                return []
            note = "replaced (new uid) and no audited write explains it"
            return [self.op("delete", key, None, note), self.op("create", key, a, note)]
        out: list[Operation] = []
        terminating = get_path(a, "metadata.deletionTimestamp") is not MISSING
        if (
            terminating
            and get_path(b, "metadata.deletionTimestamp") is MISSING
            and not self.deletion_explained(key)
        ):
            out.append(self.op("delete", key, None, "being deleted and no audited delete explains it"))
        paths = declared_diff(b, a)
        unexplained = [p for p in paths if not self.field_explained(key, p, b, a)]
        if unexplained:
            note = f"{', '.join(unexplained)} changed and no audited write explains it"
            out.append(self.op("update", key, a, note))
        elif not paths and not out and not self.writes.writers(key):
            out.append(
                self.op(
                    "update", key, a, f"resourceVersion {rv_b} -> {rv_a} and no audited write explains it"
                )
            )
        return out

    def created(self, keys: list[ObjectKey], scope: ScopeKey) -> list[Operation]:
        named = [k for k in keys if self.creation_explained(k)]
        rest = [k for k in keys if k not in named]
        owned = [k for k in rest if _owned(self.after.get(*k) or {})]
        budget = self.writes.nameless_creates[scope]
        unexplained = [k for k in rest if k not in owned] + (owned if len(owned) > budget else [])
        note = "appeared and no audited create explains it"
        return [self.op("create", key, self.after.get(*key), note) for key in unexplained]

    def run(self) -> list[Operation]:
        out: list[Operation] = []
        created: dict[ScopeKey, list[ObjectKey]] = {}
        for key in sorted(set(self.before.keys()) | set(self.after.keys())):
            if key[:2] in NOT_CROSS_CHECKED:
                continue
            b, a = self.before.get(*key), self.after.get(*key)
            if b is not None and a is not None:
                out.extend(self.changed(key, b, a))
            elif b is not None:
                if not self.deletion_explained(key):
                    out.append(self.op("delete", key, None, "deleted and no audited delete explains it"))
            else:
                created.setdefault(key[:3], []).append(key)
        for scope, keys in sorted(created.items()):
            out.extend(self.created(keys, scope))
        return out


def unaudited_changes(
    before: SnapshotIndex, after: SnapshotIndex, writes: WriteIndex, judged: Sequence[Operation] = ()
) -> list[Operation]:
    """Operations standing for every state change the audited writes do not explain."""
    return CrossCheck(before, after, writes, judged).run()


#: Requests that can change, create or delete the object they name.
ADDRESSING_VERBS = frozenset({"create", "update", "patch", "delete"})


def _key(op: Operation) -> ObjectKey:
    return (op.group, op.resource, op.namespace, op.name)


def _judged_writes(
    ops: Sequence[Operation], end: dt.datetime | None
) -> tuple[dict[ObjectKey, list[Operation]], set[ObjectKey]]:
    """The judged requests of unknown outcome that addressed an object, received by the window's
    ``end``, by object; and the objects a judged request is known to have written."""
    received: dict[ObjectKey, list[Operation]] = {}
    persisted: set[ObjectKey] = set()
    for op in ops:
        if op.attribution == BY_UNAUDITED_CHANGE or op.derived_from or op.cause is not None or not op.name:
            continue
        if _unknown_outcome_by(op, end):
            received.setdefault(_key(op), []).append(op)
        elif op.event.succeeded and op.outcome_known and not op.dry_run and op.event.verb in ADDRESSING_VERBS:
            persisted.add(_key(op))
    return received, persisted


def _unknown_outcome_by(op: Operation, end: dt.datetime | None) -> bool:
    """A request of unknown outcome that addressed an object (itself or its scale), received by ``end``."""
    if op.outcome_known or op.event.verb not in ADDRESSING_VERBS or op.subresource not in ("", "scale"):
        return False
    when = instant(op.event.request_received)
    return end is not None and when is not None and when <= end


def _others_wrote(writes: WriteIndex, key: ObjectKey) -> bool:
    """Another identity than the judged wrote the object (outside its status) since the window's start."""
    return any(
        actor != ACTOR_JUDGED and not verb.endswith("/status") for verb, actor in writes.recent_writers(key)
    )


def ascribe(
    ops: Sequence[Operation], changes: Sequence[Operation], writes: WriteIndex, window_end: str
) -> tuple[list[Operation], list[Operation]]:
    """``(ops, changes)`` with every unaudited change ascribed to the judged request of unknown
    outcome that addressed its object (the latest received by the window's end: a later one may
    follow the "after" snapshot), and that request marked ``stood_for`` when the change stands for
    all it did: it is the only judged write of the object (no other request of unknown outcome, no
    persisted one), and no other identity wrote the object (outside its status) since the window's
    start."""
    received, persisted = _judged_writes(ops, instant(window_end))
    ascribed: list[Operation] = []
    stood_for: set[int] = set()
    for change in changes:
        key = _key(change)
        candidates = sorted(received.get(key, []), key=lambda o: (o.event.request_received, o.event.audit_id))
        if change.derived_from or not candidates:
            ascribed.append(change)
            continue
        ascribed.append(dataclasses.replace(change, request=candidates[-1].event))
        if len(candidates) == 1 and key not in persisted and not _others_wrote(writes, key):
            stood_for.add(id(candidates[-1]))
    out = [dataclasses.replace(op, stood_for=True) if id(op) in stood_for else op for op in ops]
    return out, ascribed
