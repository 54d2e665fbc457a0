"""Service names in declared configuration, rewritten to the namespaces the provider really made.

The provider runs a scenario's namespace ``orders`` as ``orders-<suffix>``. A declared value that names a
service by its cluster DNS name (``http://orders-service.orders.svc.cluster.local:8080`` in an
environment variable or a ConfigMap) would otherwise point at a namespace that does not exist here: an
agent following it would never reach the scenario's ``orders``, and whatever it then did would be judged
against the wrong name. Only the DNS form is rewritten (``<service>.<namespace>.svc``): a bare word in
a value (``QUEUE=orders``) may mean anything. Secrets are never touched: their values are registered
for containment exactly as declared. Called by the environment planner; pure.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

_SVC = re.compile(
    r"(?P<svc>[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)\.(?P<ns>[a-z0-9](?:[a-z0-9-]*[a-z0-9])?)(?=\.svc\b)"
)
#: The API server's own Service, which every cluster has in its real ``default`` namespace.
API_SERVER = ("kubernetes", "default")


def rewrite_service_names(text: str, mapping: Mapping[str, str]) -> str:
    """``<service>.<logical>.svc...`` -> ``<service>.<physical>.svc...`` for every mapped namespace
    (never ``kubernetes.default.svc``: the API server's own name)."""

    def one(m: re.Match[str]) -> str:
        if (m["svc"], m["ns"]) == API_SERVER:
            return m[0]
        return f"{m['svc']}.{mapping.get(m['ns'], m['ns'])}"

    return _SVC.sub(one, text)


def _containers(obj: Mapping[str, Any]) -> list[dict[str, Any]]:
    spec = obj.get("spec") or {}
    if obj.get("kind") in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"):
        spec = (spec.get("template") or {}).get("spec") or {}
    return [c for key in ("initContainers", "containers") for c in spec.get(key) or [] if isinstance(c, dict)]


def rewrite_references(objects: list[dict[str, Any]], mapping: Mapping[str, str]) -> None:
    """In place: ConfigMap data values and container environment values of ``objects``."""
    for obj in objects:
        if obj.get("kind") == "ConfigMap":
            data = obj.get("data") or {}
            for key, value in data.items():
                if isinstance(value, str):
                    data[key] = rewrite_service_names(value, mapping)
        for container in _containers(obj):
            for var in container.get("env") or []:
                if isinstance(var, dict) and isinstance(var.get("value"), str):
                    var["value"] = rewrite_service_names(var["value"], mapping)
