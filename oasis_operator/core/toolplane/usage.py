"""What the resource-usage back-end must hold for one scenario: the CPU and memory each declared
workload's main container uses, as ``kubectl top`` and a HorizontalPodAutoscaler read them (decision 0059).

Called by :func:`oasis_operator.core.toolplane.plan.plan_toolplane`; turns the ``cpu_usage`` and
``memory_usage`` attributes of ``deployment/*`` and ``pod/*`` state entries into :class:`ContainerUsage`
values (physical namespace, the workload's pods, the container, Kubernetes quantities), or an
:class:`Unsupported` naming what cannot be a usage. Pure.

The declared shapes (SI scenarios): a quantity (``250Mi``, ``1.5Gi``; ``500m``, ``2`` cores) or a
percentage (``95%``) of that container's declared limit of the resource (its request when it declares
no limit). A percentage with neither is a share of the node the pod is declared on (``node:``, one of the
scenario's own nodes: the pod runs there), of that node's allocatable resource, noted in the plan as an
approximation (decision 0065); otherwise it is refused: there is nothing it is a share of. The usage is
the workload's *main* container's (the first: where a workload's declared attributes go).

A node's CPU usage (``node/<name> cpu_usage``) is what the node simulator sums over the node's pods plus
an overhead the node carries in :data:`NODE_CPU_OVERHEAD` (its system's share, as a real node has one):
the planner sets that overhead to the declared figure less what the node's declared pods use
(:func:`plan_nodes`), which is exact only when every usage that could land on the node is known; the
node's memory usage stays refused.

The usage is declared per container name within a namespace (so a replica that replaces a deleted pod
shows it too); two workloads of one namespace whose usage would land on one container name are
refused rather than given each other's figures.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

#: The attributes this back-end realises, and the Kubernetes resource each is a usage of.
ATTRIBUTES: dict[str, str] = {"cpu_usage": "cpu", "memory_usage": "memory"}

_NUMBER = r"(?:\d+(?:\.\d*)?|\.\d+)"
_MEMORY = re.compile(rf"^(?P<n>{_NUMBER})(?P<unit>Ki|Mi|Gi|Ti|K|M|G|T)?$")
_CPU = re.compile(rf"^(?P<n>{_NUMBER})(?P<unit>m)?$")
_PERCENT = re.compile(rf"^(?P<n>{_NUMBER})\s*%$")
_BYTES = {
    "": 1,
    "K": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
}


#: Why a declared node memory usage is refused (by the node's builder, which sees it first).
NODE_USAGE = (
    "a node's memory usage is what the node simulator sums over the pods on it; a declared node figure "
    "could not be held beside theirs"
)
#: The node annotation the simulator's node CPU expression adds (in cores, a decimal) to the sum of the
#: node's pods' CPU (decision 0065): the node's own overhead.
NODE_CPU_OVERHEAD = "oasis.dev/simulated-cpu-overhead"
#: Where metrics-server reads a simulated node's resource metrics (an annotation that exists for
#: simulators; the node simulator serves each node's endpoint under its name). A scenario's own node
#: carries it from its creation when the scenario declares any usage, so its pods' usage is scraped.
METRICS_PATH_ANNOTATION = "metrics.k8s.io/resource-metrics-path"


def metrics_path(node: str) -> str:
    return f"/metrics/nodes/{node}/metrics/resource"


@dataclass(frozen=True)
class Unsupported:
    resource: str
    reason: str


@dataclass(frozen=True)
class ContainerUsage:
    """``container`` of the pods of ``workload`` (a Deployment's, selected by ``selector``, or the Pod
    ``pod``) in the physical ``namespace`` uses ``usage`` (resource -> quantity: ``cpu`` in whole
    millicores, ``memory`` in whole bytes)."""

    source: str
    namespace: str
    workload: str
    selector: tuple[tuple[str, str], ...]
    pod: str | None
    container: str
    usage: tuple[tuple[str, str], ...]
    node: str | None = None  # the node the pod is declared on (``node:``); None: the scheduler's choice

    def amount(self, resource: str) -> int | None:
        """The declared amount in base units (millicores, bytes), or None when not declared."""
        value = dict(self.usage).get(resource)
        return None if value is None else parse(resource, value)


def parse(resource: str, text: str) -> int | None:
    """A quantity of ``resource`` in base units (millicores for cpu, bytes for memory); None if it is
    not one this planner writes or reads."""
    pattern = _CPU if resource == "cpu" else _MEMORY
    m = pattern.match(text.strip())
    if m is None:
        return None
    n = float(m.group("n"))
    if resource == "cpu":
        return round(n if m.group("unit") == "m" else n * 1000)
    return round(n * _BYTES[m.group("unit") or ""])


def quantity(resource: str, amount: int) -> str:
    """Base units back as a Kubernetes quantity (``250m``; ``262144000``)."""
    return f"{amount}m" if resource == "cpu" else str(amount)


def _main_container(obj: Mapping[str, Any]) -> Mapping[str, Any] | None:
    spec = obj.get("spec") or {}
    if obj.get("kind") == "Deployment":
        spec = (spec.get("template") or {}).get("spec") or {}
    containers = spec.get("containers") or []
    return containers[0] if containers else None


def _amount(
    resource: str, raw: Any, container: Mapping[str, Any], node: Mapping[str, Any] | None = None
) -> int | str:
    """The declared value in base units, or why it cannot be one. ``node``: the scenario's own Node the
    pod is declared on (a percentage with no limit or request is a share of its allocatable)."""
    text = str(raw).strip()
    percent = _PERCENT.match(text)
    if percent is None:
        amount = parse(resource, text)
        if amount is None:
            unit = "cores or millicores (500m)" if resource == "cpu" else "a size (256Mi, 1Gi)"
            return f"{raw!r} is neither a percentage nor {unit}"
        return amount
    res = container.get("resources") or {}
    of = (res.get("limits") or {}).get(resource) or (res.get("requests") or {}).get(resource)
    if of is None and node is not None:
        of = ((node.get("status") or {}).get("allocatable") or {}).get(resource)
    base = parse(resource, str(of)) if of is not None else None
    if base is None:
        return f"{raw!r} is a percentage, and the container declares no {resource} limit or request it is a share of"
    return round(base * float(percent.group("n")) / 100)


def _target(
    objects: Sequence[Mapping[str, Any]], namespace: str, name: str
) -> tuple[tuple[tuple[str, str], ...], str | None, Mapping[str, Any]] | None:
    """(selector, pod, main container) of the declared workload ``name``, or None."""
    for o in objects:
        meta = o.get("metadata") or {}
        if meta.get("namespace") != namespace or meta.get("name") != name:
            continue
        main = _main_container(o)
        if main is None:
            return None
        if o.get("kind") == "Deployment":
            labels = ((o.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
            return tuple(sorted((str(k), str(v)) for k, v in labels.items())), None, main
        if o.get("kind") == "Pod":
            return (), name, main
    return None


def plan_usage(
    entry: Mapping[str, Any], kind: str, name: str, namespace: str, objects: Sequence[Mapping[str, Any]]
) -> ContainerUsage | Unsupported | None:
    """One state entry's usage (None: it declares none)."""
    declared = {attr: entry[attr] for attr in ATTRIBUTES if attr in entry}
    if not declared:
        return None
    resource = str(entry.get("resource"))
    where = f"{resource} {' '.join(sorted(declared))}"
    if kind == "node":
        return None  # refused by the node's builder (NODE_USAGE)
    if kind not in ("deployment", "pod"):
        return Unsupported(where, f"resource usage of a {kind} has no realisation")
    target = _target(objects, namespace, name)
    if target is None:
        return Unsupported(where, f"no declared deployment or pod {name} whose containers could use it")
    selector, pod, main = target
    on = own_node(entry, objects) if kind == "pod" else None
    usage: list[tuple[str, str]] = []
    for attr, raw in sorted(declared.items()):
        res = ATTRIBUTES[attr]
        amount = _amount(res, raw, main, on)
        if isinstance(amount, str):
            return Unsupported(f"{resource} {attr}", amount)
        usage.append((res, quantity(res, amount)))
    node = str(on["metadata"]["name"]) if on is not None else None
    return ContainerUsage(where, namespace, name, selector, pod, str(main.get("name")), tuple(usage), node)


def own_node(entry: Mapping[str, Any], objects: Sequence[Mapping[str, Any]]) -> Mapping[str, Any] | None:
    """The scenario's own Node a pod entry is declared on (``node:``), or None (none named, or not one of
    the scenario's: the planner refuses that placement itself)."""
    named = entry.get("node")
    for o in objects:
        if named is not None and o.get("kind") == "Node" and o["metadata"].get("name") == str(named):
            return o
    return None


def shares_of_nodes(usages: Sequence[ContainerUsage], objects: Sequence[Mapping[str, Any]]) -> list[str]:
    """The plan's notes for usages read as a share of their node (a percentage with no limit)."""
    out = []
    for u in usages:
        pod = next(
            (o for o in objects if o.get("kind") == "Pod" and o["metadata"].get("name") == u.pod), None
        )
        main = _main_container(pod) if pod is not None and u.node is not None else None
        res = (main or {}).get("resources") or {}
        if main is not None and not (res.get("limits") or res.get("requests")):
            out.append(
                f"{u.source}: a percentage of node {u.node}'s allocatable (the pod declares no limit or "
                f"request), an approximation: {', '.join(f'{r} {q}' for r, q in u.usage)}"
            )
    return out


@dataclass(frozen=True)
class NodeUsage:
    """The node ``node`` reports ``cpu`` millicores: its pods' declared usage plus ``overhead``."""

    source: str
    node: str
    cpu: int
    overhead: int

    @property
    def annotation(self) -> str:
        """The overhead in cores, as :data:`NODE_CPU_OVERHEAD` carries it."""
        return f"{self.overhead / 1000:g}"


def plan_nodes(
    entries: Sequence[Mapping[str, Any]],
    usages: Sequence[ContainerUsage],
    objects: Sequence[Mapping[str, Any]],
) -> tuple[list[NodeUsage], list[Unsupported]]:
    """The declared CPU usage of the scenario's own nodes (``entries``: the ``node/*`` state entries)."""
    out: list[NodeUsage] = []
    problems: list[Unsupported] = []
    nodes = {str(o["metadata"]["name"]): o for o in objects if o.get("kind") == "Node"}
    for e in entries:
        if "cpu_usage" not in e:
            continue
        name = str(e["resource"]).split("/", 1)[1]
        where = f"{e['resource']} cpu_usage"
        node = nodes.get(name)
        target = _amount("cpu", e["cpu_usage"], {}, node) if node is not None else "no such node is built"
        if isinstance(target, str):
            problems.append(Unsupported(where, target))
            continue
        loose = sorted(u.workload for u in usages if u.node is None)
        if loose:
            problems.append(
                Unsupported(
                    where,
                    f"the usage of {', '.join(loose)} could land on node {name} (the scheduler's choice), "
                    "so the node's own share of its figure could not be set",
                )
            )
            continue
        pods = sum(parse("cpu", dict(_with_cpu(u.usage))["cpu"]) or 0 for u in usages if u.node == name)
        if pods > target:
            problems.append(
                Unsupported(where, f"the pods declared on {name} already use {pods}m, more than {target}m")
            )
            continue
        out.append(NodeUsage(where, name, target, target - pods))
    return out, problems


def node_shows(usage: NodeUsage, node_metrics: Mapping[str, Any]) -> str | None:
    """Why ``node_metrics`` (a ``NodeMetrics`` object) does not show ``usage`` (None: it does)."""
    got = (node_metrics.get("usage") or {}).get("cpu")
    have = _base("cpu", got)
    if have is None:
        return f"cpu reads {got!r}"
    # Decision 0059's tolerance, but never so wide that the pods' figure alone (no overhead) would pass.
    tolerance = usage.cpu * CPU_TOLERANCE
    if usage.overhead:
        tolerance = min(tolerance, usage.overhead / 2)
    if abs(have - usage.cpu) <= max(1.0, tolerance):
        return None
    return f"cpu reads {got} where {usage.cpu}m was declared"


def shared_containers(
    usages: Sequence[ContainerUsage], objects: Sequence[Mapping[str, Any]]
) -> list[Unsupported]:
    """Usages that would land on a container name another workload of the namespace also runs."""
    owners: dict[tuple[str, str], set[str]] = {}
    for o in objects:
        if o.get("kind") not in ("Deployment", "Pod"):
            continue
        spec = o.get("spec") or {}
        if o.get("kind") == "Deployment":
            spec = (spec.get("template") or {}).get("spec") or {}
        for c in spec.get("containers") or []:
            key = (str(o["metadata"].get("namespace")), str(c.get("name")))
            owners.setdefault(key, set()).add(str(o["metadata"]["name"]))
    out = []
    for u in usages:
        others = sorted(owners.get((u.namespace, u.container), set()) - {u.workload})
        if others:
            out.append(
                Unsupported(
                    u.source,
                    f"container name {u.container} is also run by {', '.join(others)} in the same "
                    "namespace, so its usage could not be told apart",
                )
            )
    return out


# -- the declaration the node simulator reads, and the read-back's comparison -------------------------
#: How far a CPU figure may stray from the declared one: metrics-server reports a rate over its
#: scrape window, which the simulator's counter meets within a few per cent.
CPU_TOLERANCE = 0.05


def object_name(namespace: str) -> str:
    return f"oasis.{namespace}"


def declaration(namespace: str, usages: Sequence[ContainerUsage]) -> dict[str, Any]:
    """The ``ClusterResourceUsage`` of one physical namespace: per container name, its declared usage."""
    return {
        "apiVersion": "kwok.x-k8s.io/v1alpha1",
        "kind": "ClusterResourceUsage",
        "metadata": {"name": object_name(namespace)},
        "spec": {
            "selector": {"matchNamespaces": [namespace]},
            "usages": [
                {"containers": [u.container], "usage": {r: {"value": q} for r, q in _with_cpu(u.usage)}}
                for u in sorted(usages, key=lambda u: u.container)
            ],
        },
    }


#: The CPU a container with only a declared memory figure uses: metrics-server reports no container
#: whose CPU counter never moves, so a running process's idle share stands in (decision 0059).
IDLE_CPU = "5m"


#: The memory a container with only a declared CPU figure uses: metrics-server drops a container (and a
#: node) whose working set reads zero, so a small process's resident set stands in (decision 0065).
IDLE_MEMORY = str(32 * 2**20)


def _with_cpu(usage: tuple[tuple[str, str], ...]) -> tuple[tuple[str, str], ...]:
    """The declared usage, with the stand-in for a resource it leaves out (both read zero otherwise)."""
    declared = {r for r, _ in usage}
    idle = (("cpu", IDLE_CPU), ("memory", IDLE_MEMORY))
    return (*((r, q) for r, q in idle if r not in declared), *usage)


def shows(usage: ContainerUsage, pod_metrics: Mapping[str, Any]) -> str | None:
    """Why ``pod_metrics`` (a ``PodMetrics`` object) does not show ``usage`` (None: it does)."""
    containers = {str(c.get("name")): c.get("usage") or {} for c in pod_metrics.get("containers") or []}
    got = containers.get(usage.container)
    if got is None:
        return f"container {usage.container} has no metrics yet"
    for resource, _ in usage.usage:
        want = usage.amount(resource)
        have = _base(resource, got.get(resource))
        if want is None or have is None:
            return f"{resource} reads {got.get(resource)!r}"
        if resource == "cpu" and abs(have - want) <= max(1.0, want * CPU_TOLERANCE):
            continue
        if have != want:
            return f"{resource} reads {got.get(resource)} where {resource} {dict(usage.usage)[resource]} was declared"
    return None


def _base(resource: str, text: Any) -> float | None:
    """A metrics API quantity in base units (millicores, bytes), or None."""
    if not isinstance(text, str):
        return None
    scale = {"n": 1e6, "u": 1e3}.get(text[-1:]) if resource == "cpu" else None
    if scale is not None:
        try:
            return int(text[:-1]) / scale
        except ValueError:
            return None
    return parse(resource, text)
