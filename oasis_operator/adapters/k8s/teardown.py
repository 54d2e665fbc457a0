"""Tearing a scenario's environment down, and sweeping what no live run owns.

Called through :class:`~oasis_operator.adapters.k8s.environment.KubeEnvironment` (the environment port's
``teardown`` and the operator's orphan sweep): the namespace set and the owner's cluster-scoped objects
deleted, idempotently; owned means an ownership label value the harness made.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterable

from lightkube import ApiError, operators
from lightkube.resources.apps_v1 import Deployment, ReplicaSet
from lightkube.resources.core_v1 import Namespace, Pod

from oasis_operator.adapters.k8s.cluster import OWNED_CLUSTER_KINDS, OnCluster
from oasis_operator.adapters.plumbing.polling import poll
from oasis_operator.core.environment.naming import OWNER_LABEL, is_owner_value
from oasis_operator.core.ports import LiveOwners


class Teardown(OnCluster):
    """Tears scenarios' environments down on one cluster."""

    async def teardown(self, namespaces: Iterable[str], owner: str, *, timeout: float = 60.0) -> list[str]:
        """Delete the namespace set and the owner's cluster-scoped objects; wait until they are gone.

        Idempotent: what is already gone is skipped. Returns what is still present at the deadline
        (empty on success). The owner stops being this provider's own once its deletes are issued."""
        try:
            return await self._teardown(namespaces, owner, timeout)
        finally:
            self.conn.in_flight.discard(owner)

    async def _teardown(self, namespaces: Iterable[str], owner: str, timeout: float) -> list[str]:
        names = sorted(set(namespaces))
        # Simulated pods have no kubelet to confirm a graceful stop: left to the namespace controller
        # they hold a namespace in Terminating for their grace estimate. So the workloads go first
        # (controllers before their pods, so nothing is recreated), pods without grace, then the
        # namespaces, whose controller then finds almost nothing left to wait for.
        await asyncio.gather(*(self._clear_workloads(ns) for ns in names))
        for ns in names:
            await self._delete(Namespace, ns)
        for _, kind in OWNED_CLUSTER_KINDS:
            async for obj in self.client.list(kind, labels={OWNER_LABEL: owner}):
                await self._delete(kind, obj.to_dict()["metadata"]["name"])
        remaining = list(names)

        async def still_there() -> list[str]:
            remaining[:] = [ns for ns in remaining if await self._exists(Namespace, ns)]
            return list(remaining)

        return (await poll(still_there, lambda left: not left, timeout=timeout, interval=0.2)).value

    async def _clear_workloads(self, ns: str) -> None:
        for kind, grace in ((Deployment, None), (ReplicaSet, None), (Pod, 0)):
            try:
                await self.client.deletecollection(kind, namespace=ns, grace_period=grace)
            except ApiError as exc:
                if exc.status.code != 404:
                    raise

    async def sweep_orphans(self, live_owners: LiveOwners, *, timeout: float = 60.0) -> list[str]:
        """Tear down every owned namespace set whose owner is not live. Returns the owners swept.

        Owned means an ownership label value the harness made (``is_owner_value``): the label key is a
        common one (GitOps tools set it), so its presence alone says nothing. ``live_owners`` may be a
        coroutine function: it is then asked *after* the owned objects are listed, so a scenario that
        starts in between (its owner recorded as live before its namespaces exist) is either not among
        the candidates or among the live owners, never torn down mid-run. The owners this provider is
        running itself (provisioned, not yet torn down) are live whatever ``live_owners`` says."""
        stale: dict[str, list[str]] = {}
        async for ns in self.client.list(Namespace, labels={OWNER_LABEL: operators.exists()}):
            meta = ns.to_dict()["metadata"]
            owner = meta.get("labels", {}).get(OWNER_LABEL, "")
            if is_owner_value(owner):
                stale.setdefault(owner, []).append(meta["name"])
        for _, kind in OWNED_CLUSTER_KINDS:
            async for obj in self.client.list(kind, labels={OWNER_LABEL: operators.exists()}):
                owner = obj.to_dict()["metadata"].get("labels", {}).get(OWNER_LABEL, "")
                if is_owner_value(owner):
                    stale.setdefault(owner, [])
        live = set(await live_owners() if callable(live_owners) else live_owners) | self.conn.in_flight
        for owner, nss in sorted(stale.items()):
            if owner not in live:
                await self.teardown(nss, owner, timeout=timeout)
        return sorted(o for o in stale if o not in live)
