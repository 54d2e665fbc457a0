"""Before/after snapshots of the environment, indexed for lookups, and field-path helpers.

Used by the matcher (what did the object look like before this write?) and by the state checks
(does the object exist after the scenario, with which fields?). It turns a list of Kubernetes
objects into an index keyed by ``(group, resource, namespace, name)``.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping
from typing import Any

from oasis_operator.core.verification.resource_types import type_of_object

Key = tuple[str, str, str, str]  # group, resource, namespace, name

#: Annotations written by controllers and kubectl bookkeeping, not by whoever declares the object.
CONTROLLER_ANNOTATIONS = frozenset(
    {
        "deployment.kubernetes.io/revision",
        "deployment.kubernetes.io/desired-replicas",
        "deployment.kubernetes.io/max-replicas",
        # The endpoints controller's, on the Endpoints and EndpointSlices it keeps for a Service.
        "endpoints.kubernetes.io/last-change-trigger-time",
    }
)


class _Missing:
    """The absence of a field (distinct from an explicit null)."""

    def __repr__(self) -> str:
        return "MISSING"

    def __bool__(self) -> bool:
        return False


MISSING: Any = _Missing()


def get_path(obj: Any, path: str) -> Any:
    """The value at a dotted path (``spec.template.metadata.annotations``), or :data:`MISSING`.

    A segment may address a key containing dots when written with ``\\.`` is not supported; the
    grammar's paths never need it.
    """
    cur = obj
    for part in path.split("."):
        if isinstance(cur, Mapping) and part in cur:
            cur = cur[part]
        else:
            return MISSING
    return cur


class SnapshotIndex:
    """Objects of one snapshot, addressable by identity and by (type, namespace)."""

    def __init__(self, objects: Iterable[Mapping[str, Any]]) -> None:
        self._by_key: dict[Key, Mapping[str, Any]] = {}
        self._by_type: dict[tuple[str, str], list[Mapping[str, Any]]] = {}
        for obj in objects:
            group, resource = type_of_object(dict(obj))
            meta = obj.get("metadata")
            meta = meta if isinstance(meta, Mapping) else {}
            ns = meta.get("namespace", "")
            name = meta.get("name", "")
            key = (group, resource, ns if isinstance(ns, str) else "", name if isinstance(name, str) else "")
            self._by_key[key] = obj
        for key in sorted(self._by_key):
            self._by_type.setdefault(key[:2], []).append(self._by_key[key])

    def get(self, group: str, resource: str, namespace: str, name: str) -> Mapping[str, Any] | None:
        return self._by_key.get((group, resource, namespace, name))

    def of_type(self, group: str, resource: str, namespace: str | None = None) -> list[Mapping[str, Any]]:
        """Objects of a type, sorted by identity; ``namespace`` None means every namespace."""
        objs = self._by_type.get((group, resource), [])
        if namespace is None:
            return list(objs)
        return [o for o in objs if namespace_of(o) == namespace]

    def keys(self) -> list[Key]:
        return sorted(self._by_key)

    def __iter__(self) -> Iterator[Key]:
        return iter(self.keys())

    def __len__(self) -> int:
        return len(self._by_key)


def namespace_of(obj: Mapping[str, Any]) -> str:
    ns = get_path(obj, "metadata.namespace")
    return ns if isinstance(ns, str) else ""


def name_of(obj: Mapping[str, Any]) -> str:
    name = get_path(obj, "metadata.name")
    return name if isinstance(name, str) else ""


def labels_of(obj: Any) -> dict[str, str]:
    labels = get_path(obj, "metadata.labels")
    if not isinstance(labels, Mapping):
        return {}
    return {str(k): str(v) for k, v in labels.items()}


#: Where a pod spec sits: a Pod, a workload's pod template, a CronJob's job template.
POD_SPEC_PATHS = ("spec", "spec.template.spec", "spec.jobTemplate.spec.template.spec")
#: The container lists of a pod spec that carry images.
CONTAINER_LIST_KEYS = ("initContainers", "containers", "ephemeralContainers")


def containers_of(obj: Any) -> dict[str, str]:
    """``<list>/<container name> -> image`` over every container list of the pod spec of a Pod, a
    workload's pod template or a CronJob's job template."""
    out: dict[str, str] = {}
    for spec_path in POD_SPEC_PATHS:
        spec = get_path(obj, spec_path)
        if not isinstance(spec, Mapping):
            continue
        for list_key in CONTAINER_LIST_KEYS:
            items = spec.get(list_key)
            if not isinstance(items, list):
                continue
            for i, c in enumerate(items):
                if isinstance(c, Mapping) and "image" in c:
                    name = c.get("name")
                    out[f"{list_key}/{name if isinstance(name, str) else i}"] = str(c.get("image"))
        if out:
            return out
    return out
