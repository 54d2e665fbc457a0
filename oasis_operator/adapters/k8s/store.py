"""Our custom resources and the objects a run owns, on the API server.

Called by the run workflow and the kopf handlers; turns reads and writes of Profiles, Scenarios and
EvaluationRuns (status patches), report and evidence objects (ConfigMaps owned by the run: plain text when
it fits, else gzipped and split so none exceeds the API's size limit) and Events into single async calls over lightkube.
Implements :class:`~oasis_operator.core.ports.RunStore`.
"""

from __future__ import annotations

import contextlib
import datetime as dt
import hashlib
from typing import Any

from lightkube import ApiError, AsyncClient, operators
from lightkube.generic_resource import create_namespaced_resource
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.core_v1 import ConfigMap, Event
from lightkube.types import PatchType

from oasis_operator.core import reasons, stored_parts
from oasis_operator.core.model.run import LabelSelector

GROUP, VERSION = "oasis.dev", "v1alpha1"
EvaluationRun = create_namespaced_resource(GROUP, VERSION, "EvaluationRun", "evaluationruns")
Profile = create_namespaced_resource(GROUP, VERSION, "Profile", "profiles")
Scenario = create_namespaced_resource(GROUP, VERSION, "Scenario", "scenarios")

REPORT_LABEL = "oasis.dev/run"
MANAGER = "oasis-operator"


def label_query(selector: LabelSelector | None) -> dict[str, Any] | None:
    """A run's label selector as lightkube's ``labels=`` argument (None: every object)."""
    if selector is None:
        return None
    labels: dict[str, Any] = dict(selector.match_labels or {})
    for req in selector.match_expressions or []:
        if req.operator == "In":
            labels[req.key] = operators.in_(list(req.values or []))
        elif req.operator == "NotIn":
            labels[req.key] = operators.not_in(list(req.values or []))
        elif req.operator == "Exists":
            labels[req.key] = operators.exists()
        else:
            labels[req.key] = operators.not_exists()
    return labels or None


def _owner(run: dict[str, Any]) -> dict[str, Any]:
    meta = run["metadata"]
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "EvaluationRun",
        "name": meta["name"],
        "uid": meta["uid"],
        "controller": True,
        "blockOwnerDeletion": True,
    }


class Store:
    def __init__(self, client: AsyncClient) -> None:
        self.client = client

    async def get_run(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            obj: Any = await self.client.get(EvaluationRun, name, namespace=namespace)
            return dict(obj.to_dict())
        except ApiError as exc:
            if exc.status.code == 404:
                return None
            raise

    async def patch_run_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        await self.client.patch(
            EvaluationRun.Status, name, {"status": status}, namespace=namespace, patch_type=PatchType.MERGE
        )

    async def delete_run(self, namespace: str, name: str) -> None:
        with contextlib.suppress(ApiError):
            await self.client.delete(EvaluationRun, name, namespace=namespace)

    async def get_profile(self, namespace: str, name: str) -> dict[str, Any] | None:
        try:
            obj: Any = await self.client.get(Profile, name, namespace=namespace)
            return dict(obj.to_dict())
        except ApiError as exc:
            if exc.status.code == 404:
                return None
            raise

    async def list_scenarios(
        self, namespace: str, selector: LabelSelector | None = None
    ) -> list[dict[str, Any]]:
        items: list[Any] = [
            o async for o in self.client.list(Scenario, namespace=namespace, labels=label_query(selector))
        ]
        return [dict(o.to_dict()) for o in items]

    # -- parts: report and evidence -------------------------------------------------------------------
    async def put_blob(self, run: dict[str, Any], kind: str, key: str, data: bytes) -> list[str]:
        """Store ``data`` in ConfigMaps owned by the run (plain text when it fits, else gzipped parts:
        :mod:`~oasis_operator.core.stored_parts`); returns their names in order."""
        run_name = run["metadata"]["name"]
        ns = run["metadata"]["namespace"]
        digest = hashlib.sha256(key.encode()).hexdigest()[:10]
        names = []
        parts = stored_parts.layout(key, data)
        for i, part in enumerate(parts):
            name = f"{run_name[:200]}-{kind}-{digest}-{i}"
            cm = ConfigMap(
                metadata=ObjectMeta(
                    name=name,
                    namespace=ns,
                    labels={REPORT_LABEL: run_name, "oasis.dev/part-of": kind},
                    annotations={
                        "oasis.dev/key": key,
                        "oasis.dev/part": f"{i + 1}/{len(parts)}",
                        stored_parts.ENCODING_ANNOTATION: part.encoding,
                    },
                    ownerReferences=[_owner(run)],  # type: ignore[list-item]
                ),
                data=part.data or None,
                binaryData=part.binary_data or None,
            )
            await self.client.apply(cm, field_manager=MANAGER, force=True)
            names.append(name)
        return names

    async def delete_blobs(self, run: dict[str, Any], kind: str) -> int:
        """Delete every part of ``kind`` (``evidence``, ``report``) the run owns; returns how many."""
        ns = run["metadata"]["namespace"]
        labels = {REPORT_LABEL: run["metadata"]["name"], "oasis.dev/part-of": kind}
        names = [
            str(cm.metadata.name)
            async for cm in self.client.list(ConfigMap, namespace=ns, labels=labels)
            if cm.metadata is not None
        ]
        for name in names:
            with contextlib.suppress(ApiError):  # already gone
                await self.client.delete(ConfigMap, name, namespace=ns)
        return len(names)

    async def get_blob(self, namespace: str, names: list[str]) -> bytes:
        parts = [(await self.client.get(ConfigMap, name, namespace=namespace)).to_dict() for name in names]
        return stored_parts.read(parts)

    # -- events -----------------------------------------------------------------------------------
    async def event(
        self, run: dict[str, Any], etype: str, reason: str, message: str, now: dt.datetime
    ) -> None:
        meta = run["metadata"]
        ts = now.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        ev = Event(
            metadata=ObjectMeta(generateName=f"{meta['name']}.", namespace=meta["namespace"]),
            involvedObject={
                "apiVersion": f"{GROUP}/{VERSION}",
                "kind": "EvaluationRun",
                "name": meta["name"],  # type: ignore[arg-type]
                "namespace": meta["namespace"],
                "uid": meta["uid"],
            },
            reason=reason,
            message=reasons.clip(message, reasons.EVENT_MESSAGE_LIMIT),
            type=etype,
            count=1,
            firstTimestamp=ts,  # type: ignore[arg-type]
            lastTimestamp=ts,  # type: ignore[arg-type]
            source={"component": "oasis-operator"},  # type: ignore[arg-type]
            reportingComponent="oasis-operator",
            reportingInstance="oasis-operator",
        )
        with contextlib.suppress(ApiError):  # an Event is best effort: it never changes the run
            await self.client.create(ev)
