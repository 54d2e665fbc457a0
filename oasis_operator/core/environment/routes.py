"""A declared traffic weight as a real object: one Gateway API HTTPRoute per weighted workload family.

Called by :mod:`oasis_operator.core.environment.plan` when the traffic-routing back-end is usable
(decision 0063); turns ``deployment/<name>-canary`` declaring ``traffic_weight: 10%`` beside its stable
``deployment/<name>`` into an ``HTTPRoute <name>`` whose one rule sends 90 to ``service/<name>`` and 10
to ``service/<name>-canary`` (the Services are built for the two deployments unless the scenario
declares them), attached to ``service/<name>`` as its parent (the Gateway API's form for traffic to a
Service inside the cluster). The agent reads and changes the weight with its kubeconfig like any
object of its namespaces; no Gateway controller runs, so the route's status stays empty. Anything the
route cannot hold as declared is refused with the reason. Pure: values in, values out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from oasis_operator.core import kinds
from oasis_operator.core.environment.support import Unsupported

CANARY_SUFFIX = "-canary"
ROUTE = kinds.BY_KIND["HTTPRoute"]
#: What the plan notes beside each route: what is real of it and what is not.
NO_CONTROLLER = (
    "no Gateway controller runs, so the route's status stays empty and no request is routed (simulated "
    "pods serve none); the weights are the declared fact the agent reads and changes, in the audit "
    "log and the snapshots"
)


@dataclass
class Routed:
    """The objects the weighted routes add (Services, HTTPRoutes), what was refused, and notes."""

    objects: list[dict[str, Any]] = field(default_factory=list)
    unsupported: list[Unsupported] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def parse_weight(value: Any) -> int | None:
    """``10%``, ``"10"`` or ``10`` -> 10; None for anything that is not a whole percentage 0..100."""
    if isinstance(value, bool):
        return None
    text = str(value).strip()
    m = re.fullmatch(r"(\d{1,3})\s*%?", text)
    if m is None or int(m.group(1)) > 100:
        return None
    return int(m.group(1))


def _deployment_entries(
    entries: Sequence[Mapping[str, Any]],
) -> dict[tuple[str | None, str], Mapping[str, Any]]:
    out = {}
    for e in entries:
        kind, _, name = str(e.get("resource")).partition("/")
        if kind.strip().lower() == "deployment" and name.strip():
            ns = e.get("namespace") if isinstance(e.get("namespace"), str) else None
            out[(ns, name.strip())] = e
    return out


def _find(objects: Sequence[dict[str, Any]], kind: str, ns: str, name: str) -> dict[str, Any] | None:
    for o in objects:
        meta = o.get("metadata") or {}
        if o.get("kind") == kind and meta.get("namespace") == ns and meta.get("name") == name:
            return o
    return None


def _pair_problem(
    resource: str, entry: Mapping[str, Any], deployments: Mapping[tuple[str | None, str], Mapping[str, Any]]
) -> tuple[str, int] | str:
    """The stable workload's name and the canary's weight, or why the weight cannot be held."""
    weight = parse_weight(entry.get("traffic_weight"))
    if weight is None:
        return f"expected a whole percentage from 0 to 100, found {entry.get('traffic_weight')!r}"
    name = resource.partition("/")[2].strip()
    if not name.endswith(CANARY_SUFFIX) or name == CANARY_SUFFIX:
        return (
            f"a route holds a weight between deployment/<name> and deployment/<name>{CANARY_SUFFIX}; "
            f"{name} is not a canary (declare the weight on the canary)"
        )
    stable = name[: -len(CANARY_SUFFIX)]
    ns = entry.get("namespace") if isinstance(entry.get("namespace"), str) else None
    partner = deployments.get((ns, stable))
    if partner is None:
        return f"the route splits traffic between deployment/{stable} and {name}: declare deployment/{stable} beside it"
    if "traffic_weight" in partner and parse_weight(partner["traffic_weight"]) != 100 - weight:
        return (
            f"deployment/{stable} declares traffic_weight {partner['traffic_weight']!r}, which with "
            f"{weight}% on its canary does not add up to 100%"
        )
    return stable, weight


def _service_port(svc: Mapping[str, Any]) -> int:
    ports = (svc.get("spec") or {}).get("ports") or [{}]
    return int(ports[0].get("port", 80))


def _backend_service(
    out: Routed, objects: Sequence[dict[str, Any]], ns: str, name: str
) -> tuple[str, int] | None:
    """The Service in front of deployment ``name`` (declared, or built on its selector), and its port."""
    declared = _find([*objects, *out.objects], "Service", ns, name)
    if declared is not None:
        return name, _service_port(declared)
    dep = _find(objects, "Deployment", ns, name)
    if dep is None:
        return None
    selector = dict(dep["spec"]["selector"]["matchLabels"])
    out.objects.append(
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": {"name": name, "namespace": ns, "labels": {"app": name}},
            "spec": {
                "type": "ClusterIP",
                "selector": selector,
                "ports": [{"name": "http", "port": 80, "targetPort": 8080, "protocol": "TCP"}],
            },
        }
    )
    out.notes.append(f"service/{name} fronts deployment/{name}: the route's backends are Services")
    return name, 80


def http_route(ns: str, stable: tuple[str, int], canary: tuple[str, int], weight: int) -> dict[str, Any]:
    """The HTTPRoute ``<stable>``: its one rule sends ``100 - weight`` to the stable Service and
    ``weight`` to the canary's, for traffic to the stable Service (its parent)."""
    return {
        "apiVersion": ROUTE.api_version,
        "kind": ROUTE.kind,
        "metadata": {"name": stable[0], "namespace": ns, "labels": {"app": stable[0]}},
        "spec": {
            "parentRefs": [{"group": "", "kind": "Service", "name": stable[0], "port": stable[1]}],
            "rules": [
                {
                    "backendRefs": [
                        {"name": stable[0], "port": stable[1], "weight": 100 - weight},
                        {"name": canary[0], "port": canary[1], "weight": weight},
                    ]
                }
            ],
        },
    }


def weighted_routes(
    entries: Sequence[Mapping[str, Any]],
    objects: Sequence[dict[str, Any]],
    physical: Mapping[str | None, str],
) -> Routed:
    """The routes of every canary that declares a ``traffic_weight`` (and the Services they need), among
    the built ``objects``; ``physical`` maps an entry's logical namespace (None: none declared) to the
    physical one. A stable workload's own ``traffic_weight`` is checked against its canary's."""
    out = Routed()
    deployments = _deployment_entries(entries)
    for (ns_logical, name), entry in sorted(deployments.items(), key=lambda kv: (str(kv[0][0]), kv[0][1])):
        if "traffic_weight" not in entry:
            continue
        resource = str(entry.get("resource"))
        where = f"{resource} traffic_weight"
        canary_entry = deployments.get((ns_logical, f"{name}{CANARY_SUFFIX}"))
        if canary_entry is not None and "traffic_weight" in canary_entry:
            continue  # a stable workload's weight: checked with its canary's
        pair = _pair_problem(resource, entry, deployments)
        if isinstance(pair, str):
            out.unsupported.append(Unsupported(where, pair))
            continue
        stable_name, weight = pair
        ns = physical[ns_logical]
        stable = _backend_service(out, objects, ns, stable_name)
        canary = _backend_service(out, objects, ns, name)
        if stable is None or canary is None:
            out.unsupported.append(Unsupported(where, "the route's deployments were not built"))
            continue
        out.objects.append(http_route(ns, stable, canary, weight))
        out.notes.append(
            f"{where}: httproute/{stable_name} sends {100 - weight}% to service/{stable[0]} and {weight}% to "
            f"service/{canary[0]}; {NO_CONTROLLER}"
        )
    return out
