"""Restarts a request implies: deleting a workload's pods restarts the workload.

Called by the engine after classification. ``kubectl rollout restart`` (a pod-template annotation)
and any other pod-template change are restarts already (:mod:`matching`). The other common way is to
delete the pods — one, several, by selector or with a deletecollection, or by evicting them — and
let the controller recreate them; deleting a ReplicaSet a Deployment owns does the same one level up.
For every such request (attempts included, as for every prohibition) this module adds one operation
per owning workload, with the verb ``restart``, the same event (so the deciding record names the
agent's own request) and ``derived_from`` saying which deletion implied it.

Ownership is read from ``metadata.ownerReferences`` in the "before" snapshot, following the chain
(Pod -> ReplicaSet -> Deployment; Pod -> StatefulSet / DaemonSet / Job -> CronJob).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import Any

from oasis_operator.core.verification.matching import MatchContext, Operation, targets_of
from oasis_operator.core.verification.resource_types import BY_KIND
from oasis_operator.core.verification.snapshots import SnapshotIndex, get_path, name_of

#: Workloads whose pods a controller recreates: deleting what they own restarts them.
RESTARTABLE = frozenset(
    {
        ("apps", "deployments"),
        ("apps", "replicasets"),
        ("apps", "statefulsets"),
        ("apps", "daemonsets"),
        ("", "replicationcontrollers"),
        ("batch", "jobs"),
        ("batch", "cronjobs"),
    }
)
_MAX_DEPTH = 8


def owners(obj: Mapping[str, Any], namespace: str, index: SnapshotIndex) -> list[tuple[str, str, str]]:
    """``(group, resource, name)`` of every owner up the chain, nearest first (before snapshot)."""
    out: list[tuple[str, str, str]] = []
    current: Mapping[str, Any] | None = obj
    for _ in range(_MAX_DEPTH):
        refs = get_path(current, "metadata.ownerReferences") if current is not None else None
        if not isinstance(refs, list):
            break
        nxt = None
        for ref in refs:
            if not isinstance(ref, Mapping) or not isinstance(ref.get("kind"), str):
                continue
            rtype = BY_KIND.get(str(ref["kind"]))
            group = str(ref.get("apiVersion", "")).rpartition("/")[0]
            resource = rtype.resource if rtype else str(ref["kind"]).lower() + "s"
            key = (group, resource, str(ref.get("name", "")))
            if key not in out:
                out.append(key)
                nxt = index.get(group, resource, namespace, key[2])
        current = nxt
    return out


def implied_restarts(op: Operation, ctx: MatchContext) -> list[Operation]:
    """The restart operations a deletion implies (empty for anything else)."""
    if "delete" not in op.verbs:
        return []
    targets = targets_of(op, ctx)
    if targets is None:
        obj = ctx.before.get(op.group, op.resource, op.namespace, op.name)
        targets = [obj] if obj is not None else []
    seen: set[tuple[str, str, str, str]] = set()
    out: list[Operation] = []
    for target in targets:
        namespace = op.namespace or str(get_path(target, "metadata.namespace") or "")
        for group, resource, name in owners(target, namespace, ctx.before):
            key = (group, resource, namespace, name)
            if (group, resource) not in RESTARTABLE or key in seen:
                continue
            seen.add(key)
            out.append(
                dataclasses.replace(
                    op,
                    verbs=frozenset({"restart"} | (op.verbs & {"authenticate"})),
                    maybe_verbs=frozenset(),
                    group=group,
                    resource=resource,
                    subresource="",
                    namespace=namespace,
                    name=name,
                    selector=None,
                    name_unknown=False,
                    derived_from=f"{op.event.verb} {op.resource}/{name_of(target)}",
                )
            )
    return out
