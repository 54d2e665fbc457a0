"""What the agent did, as the capability behaviours read it from the independent evidence.

Used by the behaviour evaluators. Two sources, neither of them the agent's own account:

- the audit log, through the engine's judged operations (:class:`EvalContext`): reads (``get``,
  ``list``, ``watch``, pod logs) and writes, each with the instant the API server received it;
- the recording gateway's tool records (:mod:`oasis_operator.core.evidence.tool_records`), for the
  tools that are not the Kubernetes API (metrics, traces, dashboards, databases).

Both carry RFC 3339 instants; :class:`Step` puts them on one time line (ties keep the audit order).
A read counts only when it succeeded (the agent saw something); a write counts as an act when it
was attempted (a denied write is still the agent trying to change something) and as a change when
it succeeded or the snapshots show a change nothing else explains.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from oasis_operator.core.evidence.instants import instant
from oasis_operator.core.evidence.tool_records import ToolRecord
from oasis_operator.core.verification.actions import WRITE_VERBS as WRITE_VERBS
from oasis_operator.core.verification.context import EvalContext
from oasis_operator.core.verification.matching import BY_UNAUDITED_CHANGE, Operation
from oasis_operator.core.verification.snapshots import get_path, labels_of, name_of

#: Verbs that read the Kubernetes API.
READ_VERBS = frozenset({"get", "list"})
#: The end of time, for operations that have none (unaudited changes are ordered last).
_LAST = datetime.max.replace(tzinfo=UTC)

#: Kinds an SI workload's health is read from.
WORKLOAD_KINDS = frozenset({"deployments", "replicasets", "pods", "statefulsets", "daemonsets"})


def when(op: Operation) -> tuple[datetime, str]:
    """The instant the API server received the request, with the audit id as a tie-break."""
    return (instant(op.event.request_received) or _LAST, op.event.audit_id)


def record_when(record: ToolRecord) -> tuple[datetime, str]:
    return (instant(record.time) or _LAST, "")


@dataclass(frozen=True, slots=True)
class Step:
    """One thing the agent did, from either source, on one time line."""

    at: tuple[datetime, str]
    op: Operation | None = None
    record: ToolRecord | None = None

    def describe(self) -> dict[str, Any]:
        if self.op is not None:
            return self.op.describe()
        assert self.record is not None
        return self.record.describe()


def reads(ctx: EvalContext, resources: Iterable[str] | None = None) -> list[Operation]:
    """The agent's successful reads (``get``/``list``/``watch`` of an object or a collection; not a
    subresource), optionally of some resource types, in time order."""
    kinds = frozenset(resources) if resources is not None else None
    out = [
        op
        for op in ctx.proven
        if op.verbs & READ_VERBS
        and not (op.verbs & WRITE_VERBS)
        and not op.subresource
        and op.resource
        and (kinds is None or op.resource in kinds)
    ]
    return sorted(out, key=when)


def log_reads(ctx: EvalContext) -> list[Operation]:
    """The agent's successful reads of container logs (``pods/log``)."""
    return sorted((op for op in ctx.proven if "log" in op.verbs), key=when)


def attempted_writes(ctx: EvalContext) -> list[Operation]:
    """Every write the agent attempted itself (denied ones included), in time order."""
    return sorted((op for op in ctx.own_ops if op.verbs & WRITE_VERBS), key=when)


def changes(ctx: EvalContext) -> list[Operation]:
    """The writes that changed something: the agent's successful writes, and state changes no
    audited write explains (attributed to the agent). What a behaviour holds *against* the agent (it
    changed something); never what credits it with an act: that is :func:`own_changes`."""
    done = [op for op in ctx.proven if op.verbs & WRITE_VERBS]
    unaudited = [op for op in ctx.ops if op.attribution == BY_UNAUDITED_CHANGE and op.verbs & WRITE_VERBS]
    return sorted([*done, *unaudited], key=when)


def own_changes(ctx: EvalContext) -> list[Operation]:
    """The changes the agent is credited with: its own successful writes, and the unaudited changes the
    engine ascribes to one of its requests (a request of unknown outcome that addressed the object,
    :func:`~oasis_operator.core.verification.unaudited.ascribe`). A change nothing audited explains
    and no request of the agent addressed (a controller's, the harness's timed change of a node) is
    nobody's act as far as credit goes: it never shows the agent doing something."""
    agent = set(ctx.bundle.agent_principals)
    done = [op for op in ctx.proven if op.verbs & WRITE_VERBS]
    ascribed = [
        op
        for op in ctx.ops
        if op.attribution == BY_UNAUDITED_CHANGE
        and op.verbs & WRITE_VERBS
        and op.request is not None
        and op.request.username in agent
    ]
    return sorted([*done, *ascribed], key=when)


def records(ctx: EvalContext, interface: str | None = None) -> list[ToolRecord]:
    """The gateway's records of the agent's tool calls (optionally of one interface), in time order."""
    found = [
        r
        for r in ctx.bundle.tool_records
        if not r.is_protocol and (interface is None or r.interface == interface)
    ]
    return sorted(found, key=record_when)


def timeline(ctx: EvalContext) -> list[Step]:
    """Everything the agent did (its judged operations and its recorded tool calls), in time order."""
    steps = [Step(at=when(op), op=op) for op in ctx.own_ops if op.verbs]
    steps += [Step(at=record_when(r), record=r) for r in ctx.bundle.tool_records if not r.is_protocol]
    return sorted(steps, key=lambda s: s.at)


def before_instant(a: tuple[datetime, str], b: tuple[datetime, str]) -> bool:
    return a < b


def scenario_objects(ctx: EvalContext, resource: str, *, after: bool = False) -> list[Mapping[str, Any]]:
    """Objects of one type in the scenario's own namespace (logical ``default``), before or after."""
    index = ctx.after if after else ctx.before
    return [o for o in index.of_type(_group(resource), resource, ctx.default_namespace)]


def _group(resource: str) -> str:
    return {
        "deployments": "apps",
        "replicasets": "apps",
        "statefulsets": "apps",
        "daemonsets": "apps",
        "networkpolicies": "networking.k8s.io",
        "ingresses": "networking.k8s.io",
        "horizontalpodautoscalers": "autoscaling",
        "poddisruptionbudgets": "policy",
    }.get(resource, "")


def namespace_objects(ctx: EvalContext) -> list[Mapping[str, Any]]:
    """The Namespace objects of the scenario (every logical namespace it provisioned), before."""
    names = set(ctx.bundle.namespaces.values()) or {ctx.default_namespace}
    return [o for o in ctx.before.of_type("", "namespaces", "") if name_of(o) in names]


def object_of(
    ctx: EvalContext, resource: str, name: str, *, after: bool = False, namespace: str | None = None
) -> Mapping[str, Any] | None:
    """The object in the snapshot, in the scenario's logical ``namespace`` (default: ``default``)."""
    index = ctx.after if after else ctx.before
    space = ctx.default_namespace if namespace is None else ctx.bundle.physical_namespace(namespace)
    return index.get(_group(resource), resource, space, name)


def pod_labels(workload: Mapping[str, Any]) -> dict[str, str]:
    """The labels a workload gives its pods (its pod template's)."""
    labels = get_path(workload, "spec.template.metadata.labels")
    if isinstance(labels, Mapping):
        return {str(k): str(v) for k, v in labels.items()}
    return labels_of(workload)
