"""Matching audit events of the agent against abstract actions.

Called by the checks. Two steps:

1. :func:`classify` turns one audit event into an :class:`Operation`: the set of abstract verbs the
   request performed (a ``PATCH`` of ``spec.replicas`` is a ``patch`` *and* a ``scale``; a change of
   the pod template is a ``restart``; a ``list`` is also a read of every object it returned), with
   the target and flags (dry-run, denied).
2. :func:`find` returns the operations of a sequence that match an :class:`ActionPattern`. Most
   qualifiers are judged per operation; two are judged over the sequence of writes, because a
   client turns them into several requests: ``labels=*`` (``kubectl delete -l`` is a list with a
   selector, then one delete per object) and ``all`` (every instance of a type in a namespace).

Rules fixed here (see docs/decisions/0021-action-matching.md):
- dry-run requests are never mutations; they match no verb at all;
- denied (403) and otherwise failed requests are attempts and match like successful ones; the
  result records that they were denied;
- a request without a name (list, watch, deletecollection) acts on every object of its type and
  namespace that its selectors admit, judged against the "before" snapshot;
- a request without a namespace on a namespaced type (``kubectl get pods -A``) acts in every
  namespace.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from fnmatch import fnmatchcase
from typing import Any

from oasis_operator.core.evidence.audit_event import AuditEvent
from oasis_operator.core.verification.actions import MODIFY_VERBS, WRITE_VERBS, ActionPattern
from oasis_operator.core.verification.resource_types import RESOURCE_TYPES, SCALABLE, TEMPLATED
from oasis_operator.core.verification.snapshots import (
    MISSING,
    SnapshotIndex,
    containers_of,
    get_path,
    labels_of,
    name_of,
)

RESTARTED_AT = "kubectl.kubernetes.io/restartedAt"

#: Resources known to be cluster-scoped (a request on them without a namespace is not "everywhere").
CLUSTER_SCOPED = frozenset(
    {r.resource for r in RESOURCE_TYPES.values() if not r.namespaced}
    | {
        "persistentvolumes",
        "storageclasses",
        "customresourcedefinitions",
        "apiservices",
        "priorityclasses",
        "mutatingwebhookconfigurations",
        "validatingwebhookconfigurations",
        "certificatesigningrequests",
        "ingressclasses",
        "runtimeclasses",
        "tokenreviews",
        "subjectaccessreviews",
        "selfsubjectaccessreviews",
        "selfsubjectrulesreviews",
        "componentstatuses",
        "csidrivers",
        "csinodes",
        "volumeattachments",
    }
)


@dataclass(frozen=True, slots=True)
class Operation:
    """One judged request of the agent, in abstract terms."""

    event: AuditEvent
    verbs: frozenset[str]
    group: str
    resource: str
    subresource: str
    namespace: str
    name: str
    dry_run: bool
    selector: dict[str, str] | None  # equality requirements of the label selector, None if no selector
    name_unknown: bool = False  # a create whose body the log does not hold (e.g. denied): any name

    @property
    def denied(self) -> bool:
        return self.event.denied

    def describe(self) -> dict[str, Any]:
        """The deciding-event record shown in verdicts."""
        ev = self.event
        return {
            "audit_id": ev.audit_id,
            "verb": ev.verb,
            "resource": self.resource + (f"/{self.subresource}" if self.subresource else ""),
            "namespace": self.namespace,
            "name": self.name,
            "user": ev.username,
            **({"impersonated_user": ev.impersonated_username} if ev.impersonated_username else {}),
            "code": ev.response_code,
            "denied": ev.denied,
            "time": ev.request_received,
        }


# --- request bodies ----------------------------------------------------------------------------


def _json_patch_ops(body: Any) -> list[Mapping[str, Any]]:
    if isinstance(body, list):
        return [op for op in body if isinstance(op, Mapping) and isinstance(op.get("path"), str)]
    return []


def _pointer(path: str) -> str:
    return "/" + path.replace(".", "/")


def _merge_changes(patch: Any, base: Any) -> bool:
    """Whether applying ``patch`` with merge semantics to ``base`` changes it."""
    if isinstance(patch, Mapping):
        if not isinstance(base, Mapping):
            return True
        for k, v in patch.items():
            if v is None:
                if k in base:
                    return True
            elif _merge_changes(v, base.get(k, MISSING)):
                return True
        return False
    # Strategic merge lists of named items (containers, env): merge by name.
    if (
        isinstance(patch, list)
        and isinstance(base, list)
        and all(isinstance(p, Mapping) and "name" in p for p in patch)
        and all(isinstance(b, Mapping) and "name" in b for b in base)
    ):
        by_name = {b["name"]: b for b in base}
        return any(_merge_changes(p, by_name.get(p["name"], MISSING)) for p in patch)
    return bool(patch != base)


def touches(event: AuditEvent, path: str, before: Mapping[str, Any] | None) -> bool:
    """Whether the request changes (or tries to change) the field at ``path``."""
    body = event.request_object
    ops = _json_patch_ops(body)
    if ops:
        pointer = _pointer(path)
        return any(
            op.get("op") != "test"
            and (
                op["path"] == pointer
                or op["path"].startswith(pointer + "/")
                or pointer.startswith(op["path"] + "/")
            )
            for op in ops
        )
    if not isinstance(body, Mapping):
        return False
    new = get_path(body, path)
    old = get_path(before, path) if before is not None else MISSING
    if event.verb == "update":  # a full replacement: absent means removed
        if before is None:
            return new is not MISSING
        return bool(new != old)
    if new is MISSING:
        # A merge patch may replace a parent wholesale (``{"metadata": {"labels": null}}``).
        parts = path.split(".")
        for i in range(1, len(parts)):
            parent = get_path(body, ".".join(parts[:i]))
            if parent is None:
                return old is not MISSING
        return False
    if before is None:
        return True
    return _merge_changes(new, old)


def touches_image(event: AuditEvent, before: Mapping[str, Any] | None) -> bool:
    """Whether the request changes the image of any container (or replaces the container lists)."""
    ops = _json_patch_ops(event.request_object)
    if ops:
        return any(
            op.get("op") != "test"
            and (
                "/containers" in op["path"]
                or "/initContainers" in op["path"]
                or op["path"] in ("/spec", "/spec/template", "/spec/template/spec")
            )
            for op in ops
        )
    new = containers_of(event.request_object)
    if not new:
        return False
    old = containers_of(before) if before is not None else {}
    return any(old.get(k) != v for k, v in new.items())


def requested_value(event: AuditEvent, path: str) -> Any:
    """The value a request asks for at ``path`` (from its body), else the persisted result's."""
    for op in reversed(_json_patch_ops(event.request_object)):
        if op.get("op") in ("add", "replace") and op["path"] == _pointer(path):
            return op.get("value", MISSING)
    if isinstance(event.request_object, Mapping):
        value = get_path(event.request_object, path)
        if value is not MISSING:
            return value
    if isinstance(event.response_object, Mapping) and event.succeeded:
        return get_path(event.response_object, path)
    return MISSING


def _template(event: AuditEvent) -> Any:
    for op in _json_patch_ops(event.request_object):
        if op.get("op") in ("add", "replace") and op["path"] == "/spec/template":
            return op.get("value")
    return (
        get_path(event.request_object, "spec.template")
        if isinstance(event.request_object, Mapping)
        else MISSING
    )


def _is_rollback(event: AuditEvent, before: Mapping[str, Any] | None, index: SnapshotIndex) -> bool:
    """A template change whose images are those of an older ReplicaSet of the same workload."""
    template = _template(event)
    if not isinstance(template, Mapping) or before is None:
        return False
    new_images = containers_of({"spec": {"template": template}})
    current = containers_of(before)
    if not new_images or new_images == current:
        return False
    for rs in index.of_type("apps", "replicasets", event.object_ref.namespace):
        owners = get_path(rs, "metadata.ownerReferences")
        if not isinstance(owners, list) or not any(
            isinstance(o, Mapping) and o.get("name") == event.object_ref.name for o in owners
        ):
            continue
        if containers_of(rs) == new_images:
            return True
    return False


def _parse_selector(selector: str) -> dict[str, str] | None:
    """The positive requirements of a label selector: ``key -> value`` for equality, ``key -> '*'``
    for ``in`` and existence. Negative terms (``!=``, ``notin``, ``!key``) are dropped, so the result
    admits at least every object the selector admits (a set judged from it is never too small)."""
    if not selector:
        return None
    out: dict[str, str] = {}
    for term in re.split(r",(?![^()]*\))", selector):  # commas inside "in (a,b)" do not split
        term = term.strip()
        if not term or "!=" in term or term.startswith("!") or " notin " in f" {term} ":
            continue
        if "==" in term:
            k, v = term.split("==", 1)
        elif "=" in term:
            k, v = term.split("=", 1)
        else:
            k, v = term.split(" ", 1)[0], "*"
        out[k.strip()] = v.strip()
    return out


def selector_admits(selector: dict[str, str] | None, labels: Mapping[str, str]) -> bool:
    if selector is None:
        return True
    return all(k in labels and (v == "*" or labels[k] == v) for k, v in selector.items())


def classify(event: AuditEvent, before: SnapshotIndex) -> Operation:
    """The abstract operation one audit event performed."""
    ref = event.object_ref
    verb, sub, res = event.verb, ref.subresource, ref.resource
    obj = before.get(ref.api_group, res, ref.namespace, ref.name) if ref.name else None
    verbs: set[str] = set()
    if sub == "log":
        verbs = {"log"}
    elif sub in ("exec", "attach", "portforward"):
        verbs = {"exec"}
    elif sub == "eviction":
        verbs = {"delete"}
    elif verb == "get":
        verbs = {"get"}
    elif verb in ("list", "watch"):
        verbs = {"list", "get"}
    elif verb == "create":
        verbs = {"create", "apply"}
    elif verb in ("update", "patch"):
        verbs = set(MODIFY_VERBS)
        if verb == "patch" and event.response_code == 201:
            verbs.add("create")
        if res in SCALABLE:
            if sub == "scale":
                verbs.add("scale")
            elif not sub:
                wanted = requested_value(event, "spec.replicas")
                if wanted is not MISSING and (obj is None or wanted != get_path(obj, "spec.replicas")):
                    verbs.add("scale")
        if res in TEMPLATED and not sub and touches(event, "spec.template", obj):
            verbs.add("restart")
            if _is_rollback(event, obj, before):
                verbs.add("rollback")
    elif verb in ("delete", "deletecollection"):
        verbs = {"delete"}
    name = ref.name
    name_unknown = False
    if verb == "create" and not sub and not name:
        for body in (event.request_object, event.response_object):
            found = get_path(body, "metadata.name") if isinstance(body, Mapping) else MISSING
            if isinstance(found, str) and found:
                name = found
                break
        else:
            name_unknown = True
    dry_run = event.dry_run and bool(verbs & WRITE_VERBS)
    if dry_run:
        verbs = set()
    if event.impersonated_username:
        verbs.add("authenticate")
    return Operation(
        event=event,
        verbs=frozenset(verbs),
        group=ref.api_group,
        resource=res,
        subresource=sub,
        namespace=ref.namespace,
        name=name,
        dry_run=dry_run,
        selector=_parse_selector(event.label_selector),
        name_unknown=name_unknown,
    )


# --- matching ----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class MatchContext:
    """What matching needs besides the events: the snapshot before, and namespace resolution."""

    before: SnapshotIndex
    physical: Callable[[str], str]


def _field_name(op: Operation) -> str | None:
    fs = op.event.field_selector
    for term in fs.split(","):
        if term.startswith("metadata.name="):
            return term.split("=", 1)[1]
    return None


def _targets(op: Operation, ctx: MatchContext) -> list[Mapping[str, Any]] | None:
    """Snapshot objects a nameless request acted on; None for a named request (or a create)."""
    if op.name or op.name_unknown:
        return None
    namespace = op.namespace if op.namespace or op.resource in CLUSTER_SCOPED else None
    objs = ctx.before.of_type(op.group, op.resource, namespace)
    only = _field_name(op)
    return [
        o for o in objs if selector_admits(op.selector, labels_of(o)) and (only is None or name_of(o) == only)
    ]


def _object_labels(op: Operation, ctx: MatchContext) -> dict[str, str]:
    obj = ctx.before.get(op.group, op.resource, op.namespace, op.name)
    if obj is not None:
        return labels_of(obj)
    for body in (op.event.response_object, op.event.request_object):
        labels = labels_of(body)
        if labels:
            return labels
    return {}


def _in_namespace(op: Operation, physical: str) -> bool:
    if op.namespace:
        return op.namespace == physical
    if op.resource == "namespaces":
        return op.name == physical or not op.name
    # A request on a namespaced type without a namespace acts in every namespace.
    return bool(op.resource) and op.resource not in CLUSTER_SCOPED


def matches_one(pattern: ActionPattern, op: Operation, ctx: MatchContext) -> bool:
    """Per-operation part of matching (everything but ``labels=*`` and ``all`` over sequences)."""
    if pattern.external_credentials:
        return "authenticate" in op.verbs
    if not op.verbs:
        return False
    if pattern.verbs and not (pattern.verbs & op.verbs):
        return False
    rtype = pattern.rtype
    if rtype is not None and (op.group, op.resource) != (rtype.group, rtype.resource):
        return False
    if pattern.namespace is not None and not _in_namespace(op, ctx.physical(pattern.namespace)):
        return False
    targets = _targets(op, ctx)
    name = pattern.name
    if name is not None and rtype is not None and rtype.resource == "namespaces" and not pattern.name_glob:
        name = ctx.physical(name)  # a namespace's name is a logical token too
    if name is not None:
        if targets is None:
            if not op.name_unknown and not (
                fnmatchcase(op.name, name) if pattern.name_glob else op.name == name
            ):
                return False
        else:
            targets = [
                o
                for o in targets
                if (fnmatchcase(name_of(o), name) if pattern.name_glob else name_of(o) == name)
            ]
            if not targets:
                return False
    if pattern.labels:
        wanted = dict(pattern.labels)
        if targets is None:
            labels = _object_labels(op, ctx)
            if not all(labels.get(k) == v for k, v in wanted.items()):
                return False
        elif op.selector is not None and all(op.selector.get(k) == v for k, v in wanted.items()):
            pass
        elif not any(all(labels_of(o).get(k) == v for k, v in wanted.items()) for o in targets):
            return False
    before_obj = ctx.before.get(op.group, op.resource, op.namespace, op.name) if op.name else None
    for path in pattern.fields:
        if path == "image":
            if not touches_image(op.event, before_obj):
                return False
        elif op.subresource == "scale" and path == "spec.replicas":
            continue
        elif not touches(op.event, path, before_obj):
            return False
    for path, expected in pattern.values:
        got = requested_value(op.event, path)
        if got is MISSING or str(got) != expected:
            return False
    return True


def find(pattern: ActionPattern, ops: Sequence[Operation], ctx: MatchContext) -> list[Operation]:
    """The operations of ``ops`` (sorted in time) that perform ``pattern``."""
    hits = [op for op in ops if matches_one(pattern, op, ctx)]
    if pattern.any_selector:
        position = {id(op): i for i, op in enumerate(ops)}
        hits = [op for op in hits if _selector_driven(op, ops[: position[id(op)]], ctx)]
    if pattern.all_instances:
        hits = _covers_all(pattern, hits, ctx)
    return hits


def _selector_driven(op: Operation, earlier: Sequence[Operation], ctx: MatchContext) -> bool:
    """A request carrying a label selector, or a named write preceded by a selector read."""
    if op.selector is not None:
        return True
    if not op.name:
        return False
    labels = _object_labels(op, ctx)
    return any(
        prev.selector is not None
        and (prev.group, prev.resource) == (op.group, op.resource)
        and (not prev.namespace or prev.namespace == op.namespace)
        and selector_admits(prev.selector, labels)
        for prev in earlier
    )


def _covers_all(pattern: ActionPattern, hits: list[Operation], ctx: MatchContext) -> list[Operation]:
    """``all``: a selector-free collection request, or named requests covering every instance."""
    whole = [op for op in hits if not op.name and op.selector is None and not op.event.field_selector]
    if whole:
        return whole
    by_scope: dict[tuple[str, str, str], list[Operation]] = {}
    for op in hits:
        if op.name:
            by_scope.setdefault((op.group, op.resource, op.namespace), []).append(op)
    out: list[Operation] = []
    for (group, resource, namespace), ops in sorted(by_scope.items()):
        present = {name_of(o) for o in ctx.before.of_type(group, resource, namespace)}
        if present and present <= {op.name for op in ops}:
            out.extend(ops)
    return out
