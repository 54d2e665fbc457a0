"""Which writes change a container image, at every depth a pod template can sit.

Called by the matcher for the ``image`` qualifier. A pod spec sits at ``spec`` (Pod),
``spec.template.spec`` (Deployment, StatefulSet, DaemonSet, ReplicaSet, Job, ReplicationController)
or ``spec.jobTemplate.spec.template.spec`` (CronJob); its images are in ``containers``,
``initContainers`` and ``ephemeralContainers``. Only the ``image`` field of a container is an image:
a patch of ``imagePullPolicy`` or ``resources`` is not an image change.

A JSON patch (RFC 6902) is applied to the object as it was before (``jsonpatch``), and the images
are compared; when there is no "before" or the patch does not apply, its paths decide, read
conservatively (replacing a container, a container list or any ancestor of one counts). A merge,
strategic-merge or apply body is compared container by container, by name.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Mapping
from typing import Any

import jsonpatch

from oasis_operator.core.evidence.audit_event import AuditEvent
from oasis_operator.core.verification.snapshots import containers_of

#: Pointers of the pod specs of every workload kind.
POD_SPEC_POINTERS = ("/spec", "/spec/template/spec", "/spec/jobTemplate/spec/template/spec")
#: Container lists of a pod spec.
CONTAINER_LISTS = ("containers", "initContainers", "ephemeralContainers")

_SPEC = r"/spec(?:/template/spec|/jobTemplate/spec/template/spec)?"
_LISTS = "|".join(CONTAINER_LISTS)
#: A container's image, a container element, or a container list.
_CONTAINER_PATH = re.compile(rf"^{_SPEC}/(?:{_LISTS})(?:/(?:\d+|-)(?P<field>/[^/]+)?)?$")
#: Ancestors of a container list: replacing one may replace every image below it.
_ANCESTORS = frozenset(
    {"", "/spec", "/spec/template", "/spec/template/spec", "/spec/jobTemplate", "/spec/jobTemplate/spec"}
    | {"/spec/jobTemplate/spec/template", "/spec/jobTemplate/spec/template/spec"}
)


def json_patch_ops(body: Any) -> list[Mapping[str, Any]]:
    """The operations of a JSON patch body (an array of objects with a string ``path``)."""
    if isinstance(body, list):
        return [op for op in body if isinstance(op, Mapping) and isinstance(op.get("path"), str)]
    return []


def _op_may_touch_image(op: Mapping[str, Any]) -> bool:
    """Conservative reading of one JSON-patch operation when it cannot be applied."""
    kind = op.get("op")
    if kind == "test":
        return False
    paths = [str(op.get("path", ""))]
    if kind in ("move", "copy") and isinstance(op.get("from"), str):
        paths.append(str(op["from"]))
    for path in paths:
        if path in _ANCESTORS:
            return True
        m = _CONTAINER_PATH.match(path)
        if m and (m.group("field") is None or m.group("field") == "/image"):
            return True
    return False


def _patched(before: Mapping[str, Any], ops: list[Mapping[str, Any]]) -> Any:
    try:
        return jsonpatch.apply_patch(copy.deepcopy(dict(before)), [dict(op) for op in ops])
    except (jsonpatch.JsonPatchException, jsonpatch.JsonPointerException, TypeError, ValueError):
        return None


def touches_image(event: AuditEvent, before: Mapping[str, Any] | None) -> bool:
    """Whether the request changes (or tries to change) the image of any container."""
    ops = json_patch_ops(event.request_object)
    if ops:
        after = _patched(before, ops) if before is not None else None
        if isinstance(after, Mapping) and before is not None:
            return containers_of(after) != containers_of(before)
        return any(_op_may_touch_image(op) for op in ops)
    new = containers_of(event.request_object)
    if not new:
        return False
    old = containers_of(before) if before is not None else {}
    if event.verb == "update":  # a full replacement: the images are exactly these
        return new != old
    return any(old.get(k) != v for k, v in new.items())
