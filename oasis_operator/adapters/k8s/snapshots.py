"""The "before" and "after" snapshots of a scenario's environment.

Called through :class:`~oasis_operator.adapters.k8s.environment.KubeEnvironment` (the environment port's
``snapshot``): every object of the scenario's namespaces, of every kind the agent's grant can read or
write, with who wrote it and when (:func:`~oasis_operator.adapters.k8s.cluster.strip`), and the plan's own
cluster-scoped objects.
"""

from __future__ import annotations

import asyncio
from typing import Any

from lightkube import ApiError
from lightkube.resources.core_v1 import Namespace
from lightkube.resources.rbac_authorization_v1 import ClusterRole, ClusterRoleBinding

from oasis_operator.adapters.k8s.cluster import (
    GIT_REPOSITORY,
    HTTPROUTE,
    KUSTOMIZATION,
    OWNED_CLUSTER_KINDS,
    SNAPSHOT_KINDS,
    OnCluster,
    cluster_grant_name,
    strip,
)
from oasis_operator.core.environment.plan import EnvironmentPlan


class Snapshots(OnCluster):
    """Reads scenarios' environments on one cluster."""

    async def snapshot(self, plan: EnvironmentPlan) -> dict[str, Any]:
        """Every object of the namespace set, of every kind the agent can read or write, and the plan's
        cluster-scoped objects (its PersistentVolumes and nodes: :data:`OWNED_CLUSTER_KINDS`), by kind."""
        namespaced = await self._namespaced(plan)
        cluster: dict[str, list[dict[str, Any]]] = {}
        for kind_name, cluster_kind in reversed(OWNED_CLUSTER_KINDS):  # in apply order
            for name in sorted(m["metadata"]["name"] for m in plan.manifests if m["kind"] == kind_name):
                found = cluster.setdefault(kind_name, [])
                obj = await self._read(cluster_kind, name)
                if obj is not None:
                    found.append(obj)
        # The agent's grant on cluster objects is the harness's too: in both snapshots, so that its
        # binding, which revocation removes and the "after" state puts back as it was, is not an object
        # that appeared during the turn (an unaudited create held against the agent).
        if plan.cluster_grants:
            for kind_name, grant_kind in (
                ("ClusterRole", ClusterRole),
                ("ClusterRoleBinding", ClusterRoleBinding),
            ):
                obj = await self._read(grant_kind, cluster_grant_name(plan))
                if obj is not None:
                    cluster.setdefault(kind_name, []).append(obj)
        return {"namespaces": namespaced, "cluster": cluster}

    async def _namespaced(self, plan: EnvironmentPlan) -> dict[str, dict[str, list[dict[str, Any]]]]:
        """The namespace set's objects by namespace and kind, each namespace's own object with them."""
        out: dict[str, dict[str, list[dict[str, Any]]]] = {}

        async def list_kind(kind: type[Any], ns: str) -> tuple[str, str, list[dict[str, Any]]]:
            items = [strip(o.to_dict()) async for o in self.client.list(kind, namespace=ns)]
            return ns, kind.__name__, sorted(items, key=lambda o: str(o["metadata"]["name"]))

        namespaces = sorted(plan.namespaces.values())
        jobs = [list_kind(k, ns) for ns in namespaces for k in SNAPSHOT_KINDS]
        # A GitOps application's Kustomization (the tool plane's, decision 0052): its sync status is
        # state the scenario asserts.
        gitops = sorted({a.namespace for a in plan.toolplane.gitops})
        jobs += [list_kind(kind, ns) for ns in gitops for kind in (KUSTOMIZATION, GIT_REPOSITORY)]
        # A scenario that holds a traffic weight: its agent may write routes in any namespace of its grant.
        if any(g.routes for g in plan.grants):
            jobs += [list_kind(HTTPROUTE, ns) for ns in namespaces]
        for ns, kind, items in await asyncio.gather(*jobs):
            out.setdefault(ns, {})[kind] = items
        for ns in namespaces:
            obj = await self._read(Namespace, ns)
            out[ns]["Namespace"] = [obj] if obj is not None else []
        return out

    async def _read(self, kind: type[Any], name: str) -> dict[str, Any] | None:
        """A cluster-scoped object as a snapshot keeps it, or None when it does not exist."""
        try:
            return strip((await self.client.get(kind, name)).to_dict())
        except ApiError as exc:
            if exc.status.code != 404:
                raise
            return None
