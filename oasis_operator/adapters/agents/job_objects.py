"""The objects a Job agent's run creates, and only those: generated names, deletion by uid, and the
throwaway namespace of the identity question.

Called by the Job agent adapter (:mod:`~oasis_operator.adapters.agents.job`) and by the operator's
housekeeping. Decision 0099 (review finding M-3):

- Every Job and ConfigMap is created with ``generateName``: its name is new, so it never meets an
  object someone else made, and the adapter deletes what it created by that name *and uid*
  (:func:`delete_exactly`, a delete precondition): a same-named object made since is never touched.
- The identity question runs before any scenario exists, so it is unjudged: it runs in a namespace
  made for it alone (:func:`open_identity_place`) whose NetworkPolicy admits no traffic either way,
  as that namespace's ``default`` account, with no token mounted. The run's namespace and its
  accounts are never lent to the image. The namespace carries :data:`IDENTITY_LABEL`; the adapter
  deletes it when the question is answered, and the housekeeping deletes any left by a crash
  (:func:`sweep_identity_places`).
"""

from __future__ import annotations

import contextlib
import datetime as dt
import json
from typing import Any

import httpx2
from lightkube import ApiError
from lightkube.resources.core_v1 import Namespace
from lightkube.resources.networking_v1 import NetworkPolicy

__all__ = [
    "IDENTITY_LABEL",
    "IDENTITY_NAMESPACE_PREFIX",
    "delete_exactly",
    "deny_all_policy",
    "identity_namespace",
    "open_identity_place",
    "sweep_identity_places",
]

#: The label of an identity question's throwaway namespace (its value: the run it was made for).
IDENTITY_LABEL = "oasis.dev/agent-identity"
IDENTITY_NAMESPACE_PREFIX = "agent-"
#: What the identity question's namespace allows: nothing in, nothing out.
_DENY_ALL = "deny-all"


def identity_namespace(run: str) -> dict[str, Any]:
    """The identity question's namespace (named by the API server)."""
    value = "".join(c if c.isalnum() or c in "-_." else "-" for c in run)[:63].strip("-_.") or "run"
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"generateName": IDENTITY_NAMESPACE_PREFIX, "labels": {IDENTITY_LABEL: value}},
    }


def deny_all_policy(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {"name": _DENY_ALL, "namespace": namespace},
        "spec": {"podSelector": {}, "policyTypes": ["Ingress", "Egress"]},
    }


async def open_identity_place(client: Any, run: str) -> tuple[str, str]:
    """Create the identity question's namespace and its deny-all policy; returns its name and uid."""
    made = await client.create(Namespace.from_dict(identity_namespace(run)))
    name, uid = made.metadata.name, made.metadata.uid
    try:
        await client.create(NetworkPolicy.from_dict(deny_all_policy(name)))
    except BaseException:
        await delete_exactly(client, Namespace, name, None, uid)
        raise
    return name, uid


async def delete_exactly(client: Any, kind: Any, name: str, namespace: str | None, uid: str) -> None:
    """Delete ``kind`` ``name`` only if it is still the object of ``uid`` (a precondition the API
    server checks); gone or replaced, nothing is deleted. Dependents go in the background."""
    inner = client._client  # lightkube sends no delete body; the precondition needs one
    prepared = inner.prepare_request("delete", kind, name=name, namespace=namespace)
    built = inner.build_adapter_request(prepared)
    body = {"preconditions": {"uid": uid}, "propagationPolicy": "Background"}
    request = httpx2.Request(
        "DELETE",
        built.url,
        headers={**dict(built.headers), "Content-Type": "application/json"},
        content=json.dumps(body).encode(),
    )
    response = await inner.send(request)
    await response.aread()
    if response.status_code in (404, 409):  # gone, or a new object of that name: not ours
        return
    inner.raise_for_status(response)


async def sweep_identity_places(client: Any, *, older_than: dt.timedelta, now: dt.datetime) -> list[str]:
    """Delete every identity namespace created before ``now - older_than`` (left by a crash)."""
    from lightkube import operators

    swept = []
    async for ns in client.list(Namespace, labels={IDENTITY_LABEL: operators.exists()}):
        meta = ns.metadata
        created = meta.creationTimestamp if meta is not None else None
        if meta is None or created is None or now - created < older_than:
            continue
        with contextlib.suppress(ApiError):
            await delete_exactly(client, Namespace, str(meta.name), None, str(meta.uid))
            swept.append(str(meta.name))
    return swept
