"""The path a request takes through the namespace, hop by hop, the way an SRE follows a failing
request from where the user sees it (an Ingress answering 5xx) to the pods that should answer it
(pure interpretation for the reference agent's investigation, :mod:`.investigating`).

An Ingress routes to Services (its rules' backends and its default backend); a Service answers
through its ready endpoints (its EndpointSlices, ``kubernetes.io/service-name``); its endpoints are the
ready pods its selector picks, which belong to workloads. A hop with no ready endpoint is where the
requests fail, and the pods behind it say why (their status, as ``kubectl get pods`` prints it).

Nothing here knows a scenario. Pure: no I/O.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = ["REQUEST_SYMPTOM", "Hop", "pod_status", "request_path"]

#: A report of requests failing at the edge: an HTTP error status, a gateway's words, an ingress.
REQUEST_SYMPTOM = re.compile(
    r"(?i)\b[45]\d\d\b|\bbad gateway\b|\bservice unavailable\b|\bgateway time-?out\b|\bingress\b"
)
SERVICE_NAME_LABEL = "kubernetes.io/service-name"


@dataclass(frozen=True)
class Hop:
    """One component on the request path, what was seen of it, and whether requests fail there."""

    component: str  # ingress/public, service/api-backend, deployment/api-backend
    text: str
    broken: bool = False
    workload: str = ""  # for a Deployment hop: its name


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _backends(ingress: Mapping[str, Any]) -> list[tuple[str, str]]:
    """(service, port) of each backend the Ingress routes to, in order, without repeats."""
    spec = ingress.get("spec") or {}
    found: list[tuple[str, str]] = []
    refs = [spec.get("defaultBackend") or {}]
    for rule in spec.get("rules") or []:
        refs += [p.get("backend") or {} for p in (rule.get("http") or {}).get("paths") or []]
    for ref in refs:
        svc = ref.get("service") or {}
        if svc.get("name"):
            port = svc.get("port") or {}
            pair = (str(svc["name"]), str(port.get("number") or port.get("name") or ""))
            if pair not in found:
                found.append(pair)
    return found


def _endpoints(service: str, slices: Iterable[Mapping[str, Any]]) -> tuple[int, int]:
    """(ready, all) endpoints of the Service over its EndpointSlices."""
    ready = total = 0
    for s in slices:
        if ((s.get("metadata") or {}).get("labels") or {}).get(SERVICE_NAME_LABEL) != service:
            continue
        for ep in s.get("endpoints") or []:
            total += 1
            if (ep.get("conditions") or {}).get("ready") is not False:
                ready += 1
    return ready, total


def _template_labels(dep: Mapping[str, Any]) -> dict[str, str]:
    meta = (((dep.get("spec") or {}).get("template") or {}).get("metadata")) or {}
    return {str(k): str(v) for k, v in (meta.get("labels") or {}).items()}


def pod_status(pod: Mapping[str, Any]) -> str:
    """The pod's STATUS as ``kubectl get pods`` prints it: a failing init container's state
    (``Init:CrashLoopBackOff``), else a main container's waiting reason, else its phase."""
    status = pod.get("status") or {}
    inits = status.get("initContainerStatuses") or []
    for i, cs in enumerate(inits):
        state = cs.get("state") or {}
        waiting = (state.get("waiting") or {}).get("reason")
        term = state.get("terminated") or {}
        if waiting and waiting != "PodInitializing":
            return f"Init:{waiting}"
        if term and term.get("exitCode") not in (0, None):
            return f"Init:{term.get('reason') or 'Error'}"
        if not term and not cs.get("ready"):
            return f"Init:{i}/{len(inits)}"
    for cs in status.get("containerStatuses") or []:
        waiting = ((cs.get("state") or {}).get("waiting") or {}).get("reason")
        if waiting:
            return str(waiting)
    return str(status.get("phase") or "Pending")


def _ready(pod: Mapping[str, Any]) -> bool:
    statuses = (pod.get("status") or {}).get("containerStatuses") or [{}]
    return all(c.get("ready") for c in statuses)


def request_path(
    ingresses: Sequence[Mapping[str, Any]],
    services: Sequence[Mapping[str, Any]],
    slices: Sequence[Mapping[str, Any]],
    deployments: Sequence[Mapping[str, Any]],
    pods: Sequence[Mapping[str, Any]],
    owner_of: Callable[[Mapping[str, Any]], str],
) -> list[Hop]:
    """The hops from each Ingress to the workloads behind it: the Ingress and its backends, each
    backend Service and its ready endpoints, the workloads it selects and their pods."""
    by_name = {_name(s): s for s in services}
    hops: list[Hop] = []
    for ing in ingresses:
        backends = _backends(ing)
        hops.append(
            Hop(
                f"ingress/{_name(ing)}",
                f"ingress/{_name(ing)} routes its requests to "
                + (
                    ", ".join(f"service/{s}" + (f" port {p}" if p else "") for s, p in backends)
                    or "no Service"
                ),
                broken=not backends,
            )
        )
        for svc_name, _port in backends:
            svc = by_name.get(svc_name)
            if svc is None:
                hops.append(Hop(f"service/{svc_name}", f"service/{svc_name} does not exist", broken=True))
                continue
            ready, total = _endpoints(svc_name, slices)
            hops.append(
                Hop(
                    f"service/{svc_name}",
                    f"service/{svc_name} has {ready} ready endpoint(s)"
                    + (f" of {total}" if total != ready else "")
                    + (
                        ": nothing can answer the requests routed to it, so the ingress and any proxy in "
                        "front of it get no backend and answer 5xx (503 Service Unavailable)"
                        if ready == 0
                        else ""
                    ),
                    broken=ready == 0,
                )
            )
            selector = (svc.get("spec") or {}).get("selector") or {}
            for dep in deployments:
                labels = _template_labels(dep)
                if not selector or not all(labels.get(k) == v for k, v in selector.items()):
                    continue
                mine = [p for p in pods if owner_of(p) == _name(dep)]
                failing = [p for p in mine if not _ready(p)]
                states = "; ".join(f"{_name(p)} {pod_status(p)}" for p in failing[:4])
                hops.append(
                    Hop(
                        f"deployment/{_name(dep)}",
                        f"service/{svc_name} selects the pods of deployment/{_name(dep)}: "
                        f"{len(mine) - len(failing)} of {len(mine)} ready"
                        + (f" ({states})" if states else ""),
                        broken=bool(failing) and len(failing) == len(mine),
                        workload=_name(dep),
                    )
                )
    return hops
