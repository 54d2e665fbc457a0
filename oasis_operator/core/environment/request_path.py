"""The request path of a scenario: what a declared Service's endpoints and an ingress's answer follow
from, and the proxy whose log a scenario declares on that path (decision 0064).

Called by :func:`oasis_operator.core.environment.plan._draft` once every entry is built; turns the
declared entries and the objects and workload states built for them into what the request path holds:

- a Service declared with no endpoints (``endpoints: []``) is held when no pod it selects is ever
  ready (each selected workload's pods all fail or stay pending): the endpoint controller then derives
  no ready endpoint by itself, which the provisioner observes before the handover;
- an ingress declared ``returning_503`` is held when its backend Service has no ready endpoint, which
  is what any ingress controller answers 503 for; an ingress that declares no backend routes to its
  namespace's only declared Service (noted);
- a ``logs/<name>`` entry naming a mesh proxy (a sidecar, Envoy) that no declared workload is: the
  proxy on the request path runs as a workload of that name, one Envoy container whose log the entry
  is (noted).

Anything else is refused, with the reason. Pure: values in, values out.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from oasis_operator.core.environment import manifests
from oasis_operator.core.environment.manifests import WorkloadState
from oasis_operator.core.environment.pod_states import POD_STATES
from oasis_operator.core.environment.support import Unsupported

#: A ``logs/<name>`` that names a mesh proxy: the proxy's own workload stands in for the data path.
MESH_PROXY = re.compile(r"(sidecar|envoy|mesh-proxy|service-mesh)", re.IGNORECASE)
PROXY_IMAGE = "envoyproxy/envoy:v1.31.2"
PROXY_CONTAINER = "envoy"


@dataclass
class RequestPath:
    unsupported: list[Unsupported] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: (physical namespace, Service name) of each Service declared with no endpoints.
    empty_endpoints: list[tuple[str, str]] = field(default_factory=list)
    #: The mesh proxies' objects and workload states, to add to the plan.
    built: manifests.Built = field(default_factory=manifests.Built)


def _kind_name(resource: Any) -> tuple[str, str]:
    kind, _, name = str(resource).partition("/")
    return kind.strip().lower(), name.strip()


def _namespace(e: Mapping[str, Any], mapping: Mapping[str, str], home: str) -> str:
    ns = e.get("namespace")
    return mapping.get(ns, home) if isinstance(ns, str) else home


def _find(objects: Sequence[dict[str, Any]], kind: str, ns: str, name: str) -> dict[str, Any] | None:
    return next(
        (
            o
            for o in objects
            if o.get("kind") == kind
            and o["metadata"].get("namespace") == ns
            and o["metadata"]["name"] == name
        ),
        None,
    )


def _pod_labels(obj: Mapping[str, Any]) -> dict[str, str]:
    if obj.get("kind") == "Deployment":
        return dict(obj["spec"]["template"]["metadata"].get("labels") or {})
    return dict(obj["metadata"].get("labels") or {})


def _never_ready(state: str) -> bool:
    """No pod of a workload in ``state`` is ever ready: all fail, or none is scheduled."""
    row = POD_STATES[state]
    return state == "pending" or (row.writes_status and row.failing == "all")


def ready_workloads(
    service: Mapping[str, Any], objects: Sequence[dict[str, Any]], workloads: Sequence[WorkloadState]
) -> list[str]:
    """The workloads a Service selects that have (or will have) a ready pod, as ``kind/name (state)``."""
    ns = service["metadata"]["namespace"]
    selector = dict((service.get("spec") or {}).get("selector") or {})
    if not selector:
        return []  # no selector: the endpoint controller manages no endpoint of it
    states = {(w.kind, w.namespace, w.name): w.state for w in workloads}
    out = []
    for o in objects:
        if o.get("kind") not in ("Deployment", "Pod") or o["metadata"].get("namespace") != ns:
            continue
        labels = _pod_labels(o)
        if any(labels.get(k) != v for k, v in selector.items()):
            continue
        state = states.get((str(o["kind"]), ns, str(o["metadata"]["name"])), "running")
        if not _never_ready(state):
            out.append(f"{str(o['kind']).lower()}/{o['metadata']['name']} ({state})")
    return out


def check_request_path(
    entries: Sequence[Mapping[str, Any]],
    objects: list[dict[str, Any]],
    workloads: Sequence[WorkloadState],
    mapping: Mapping[str, str],
    home: str,
    owner: str,
) -> RequestPath:
    """Check the declared endpoints and ingress answers against the built workloads, route an ingress that
    declares no backend (in ``objects``, in place), and build the declared mesh proxies."""
    out = RequestPath()
    for e in entries:
        kind, name = _kind_name(e.get("resource"))
        ns = _namespace(e, mapping, home)
        if kind == "service" and e.get("endpoints") == []:
            _empty_endpoints(out, e, _find(objects, "Service", ns, name), objects, workloads)
        elif kind == "ingress" and manifests.ingress_status(dict(e)) in manifests.INGRESS_503:
            _answers_503(out, e, _find(objects, "Ingress", ns, name), objects, workloads)
    _mesh_proxies(out, entries, objects, mapping, home, owner)
    return out


def _empty_endpoints(
    out: RequestPath,
    e: Mapping[str, Any],
    service: dict[str, Any] | None,
    objects: Sequence[dict[str, Any]],
    workloads: Sequence[WorkloadState],
) -> None:
    if service is None:
        return  # refused by its builder already
    ready = ready_workloads(service, objects, workloads)
    if ready:
        out.unsupported.append(
            Unsupported(
                f"{e['resource']} endpoints",
                f"declared none, but it selects {', '.join(ready)}, whose ready pods the endpoint controller "
                "would list",
            )
        )
        return
    out.empty_endpoints.append((service["metadata"]["namespace"], service["metadata"]["name"]))


def _answers_503(
    out: RequestPath,
    e: Mapping[str, Any],
    ingress: dict[str, Any] | None,
    objects: Sequence[dict[str, Any]],
    workloads: Sequence[WorkloadState],
) -> None:
    if ingress is None:
        return
    where = f"{e['resource']} status"
    ns = ingress["metadata"]["namespace"]
    backend_ref = ingress["spec"]["rules"][0]["http"]["paths"][0]["backend"]["service"]
    if not e.get("backend"):
        services = [o for o in objects if o.get("kind") == "Service" and o["metadata"].get("namespace") == ns]
        if len(services) != 1:
            out.unsupported.append(
                Unsupported(
                    where,
                    f"a 503 follows from a backend without ready endpoints, and the ingress declares no backend "
                    f"while its namespace declares {len(services)} Services (not one to route to)",
                )
            )
            return
        backend_ref["name"] = services[0]["metadata"]["name"]
        out.notes.append(
            f"{e['resource']}: no backend declared; it routes to service/{backend_ref['name']}, its namespace's "
            "only Service"
        )
    service = _find(objects, "Service", ns, str(backend_ref["name"]))
    if service is None:
        out.unsupported.append(
            Unsupported(where, f"its backend service/{backend_ref['name']} is not declared in its namespace")
        )
        return
    backend_ref["port"] = {"number": int(service["spec"]["ports"][0]["port"])}
    ready = ready_workloads(service, objects, workloads)
    if ready or not service["spec"].get("selector"):
        why = (
            f"it selects {', '.join(ready)}" if ready else "it selects no pod (its endpoints are not derived)"
        )
        out.unsupported.append(
            Unsupported(
                where,
                f"a 503 is what an ingress controller answers when service/{backend_ref['name']} has no ready "
                f"endpoint, but {why}",
            )
        )
        return
    out.notes.append(
        f"{e['resource']} returning_503: no ingress controller runs; the 503 is what any controller answers for "
        f"service/{backend_ref['name']}, which has no ready endpoint (every pod it selects fails)"
    )


def _mesh_proxies(
    out: RequestPath,
    entries: Sequence[Mapping[str, Any]],
    objects: Sequence[dict[str, Any]],
    mapping: Mapping[str, str],
    home: str,
    owner: str,
) -> None:
    for e in entries:
        kind, name = _kind_name(e.get("resource"))
        ns = _namespace(e, mapping, home)
        if kind != "logs" or not MESH_PROXY.search(name):
            continue
        if _find(objects, "Deployment", ns, name) or _find(objects, "Pod", ns, name):
            continue
        entry = {
            "resource": f"deployment/{name}",
            "containers": [{"name": PROXY_CONTAINER, "image": PROXY_IMAGE}],
        }
        built = manifests.deployment(name, ns, entry, dict(mapping), owner)
        out.built.objects += built.objects
        out.built.workloads += built.workloads
        out.notes.append(
            f"{e['resource']}: no workload of that name is declared; the mesh proxy on the request path runs as "
            f"deployment/{name} (one {PROXY_CONTAINER} container, {PROXY_IMAGE}), whose log the entry is"
        )
