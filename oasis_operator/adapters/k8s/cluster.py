"""One cluster as the environment adapter reaches it, and what its parts share.

:class:`ClusterConnection` is an admin client on one cluster with what the provider keeps about that
cluster: the API server's address and CA (for the agent's kubeconfig), the clock, the pod addresses of
its simulated pool, the owners it is provisioning. One per cluster connection, nothing of it at module
level: a provider that reaches several clusters (one per scenario) makes one for each. The parts of the
adapter (:mod:`.provisioning`, :mod:`.kubelet`, :mod:`.snapshots`, :mod:`.revocation`, :mod:`.teardown`)
each hold one (:class:`OnCluster`); :class:`~oasis_operator.adapters.k8s.environment.KubeEnvironment`
puts them behind the environment port.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import importlib
import json
from collections.abc import Callable
from typing import Any, cast

from lightkube import ApiError, AsyncClient, codecs
from lightkube.generic_resource import create_namespaced_resource
from lightkube.resources.core_v1 import Event

from oasis_operator.core import kinds
from oasis_operator.core.environment.grants import GrantedResource, snapshot_resources
from oasis_operator.core.environment.plan import EnvironmentPlan

#: The field manager of everything the provisioner applies. Not ``kubectl`` (an agent's own
#: ``kubectl apply --server-side`` would share it, and the harness's forced applies would take its
#: fields), and nothing that names an evaluation: a platform team's provisioning tool.
FIELD_MANAGER = "platform-provisioner"
STATUS_MANAGER = "kubelet"  # pod statuses are written as the kubelet would
#: Events are created under the field manager of the component that reports them.
EVENT_MANAGERS = {
    "kubelet": "kubelet",
    "default-scheduler": "kube-scheduler",
    "deployment-controller": "kube-controller-manager",
    "replicaset-controller": "kube-controller-manager",
    "horizontal-pod-autoscaler": "kube-controller-manager",
}
AGENT_ACCOUNT = "automation"
DEFAULT_POD_CIDR = "10.244.0.0/16"


def cluster_grant_name(plan: EnvironmentPlan) -> str:
    """The name of the ClusterRole and ClusterRoleBinding of the agent's grant on cluster objects (a
    scope with node operations, a node pool to read): the account's, with the plan's suffix if it has
    one (names made by :class:`~oasis_operator.core.environment.naming.Naming`)."""
    return f"{AGENT_ACCOUNT}-{plan.suffix}" if plan.suffix else AGENT_ACCOUNT


_LIGHTKUBE_MODULES = {
    "": "core",
    "networking.k8s.io": "networking",
    "discovery.k8s.io": "discovery",
    "coordination.k8s.io": "coordination",
    "rbac.authorization.k8s.io": "rbac_authorization",
    "events.k8s.io": "events",
}


def resource_class(r: GrantedResource | kinds.Kind) -> Any:
    """The lightkube resource class of a granted resource or a registry kind."""
    module = importlib.import_module(
        f"lightkube.resources.{_LIGHTKUBE_MODULES.get(r.group, r.group)}_{r.version}"
    )
    return getattr(module, r.kind)


#: What a snapshot reads in each namespace of the set: every kind the agent's grant can read or write
#: (:func:`oasis_operator.core.environment.grants.snapshot_resources`), so no write can hide in a kind
#: that is not looked at.
SNAPSHOT_KINDS: tuple[type[Any], ...] = tuple(resource_class(r) for r in snapshot_resources())
#: The cluster-scoped kinds a scenario owns besides its namespaces (the registry's), dependents first:
#: deleted at teardown and by the orphan sweep, the plan's objects of them snapshotted.
OWNED_CLUSTER_KINDS: tuple[tuple[str, type[Any]], ...] = tuple(
    (k.kind, resource_class(k)) for k in kinds.OWNED_CLUSTER_KINDS
)
#: Flux's Kustomization, read only for scenarios with a GitOps application (the CRD exists only where
#: the GitOps back-end runs).
KUSTOMIZATION: Any = create_namespaced_resource(
    "kustomize.toolkit.fluxcd.io", "v1", "Kustomization", "kustomizations"
)
#: Flux's GitRepository, the Kustomization's source: its artifact revision is what the repository
#: held when last fetched (decision 0069: the "before" snapshot must show it applied, and a change of it
#: is the agent's).
GIT_REPOSITORY: Any = create_namespaced_resource(
    "source.toolkit.fluxcd.io", "v1", "GitRepository", "gitrepositories"
)
#: The Gateway API's HTTPRoute (decision 0063), served only where its CRD is installed: applied,
#: granted and snapshotted only for scenarios whose plan holds a route.
HTTPROUTE: Any = create_namespaced_resource(
    kinds.BY_KIND["HTTPRoute"].group, "v1", "HTTPRoute", kinds.BY_KIND["HTTPRoute"].plural
)


def _fields_digest(fields: Any) -> str:
    return hashlib.sha256(json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def strip(obj: dict[str, Any]) -> dict[str, Any]:
    """A snapshot keeps who wrote an object and when (managedFields: manager, operation, time,
    subresource, and a digest of the fields each manager owns instead of the fields themselves), so a
    change no audited write explains can be seen; uid, resourceVersion and generation stay as they are."""
    meta = obj.get("metadata", {})
    entries = meta.get("managedFields")
    if isinstance(entries, list):
        kept = []
        for e in entries:
            if not isinstance(e, dict):
                continue
            short = {k: e[k] for k in ("manager", "operation", "apiVersion", "time", "subresource") if k in e}
            if "fieldsV1" in e:
                short["fieldsDigest"] = _fields_digest(e["fieldsV1"])
            kept.append(short)
        meta["managedFields"] = kept
    return obj


def _utc_now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


class ClusterConnection:
    """One cluster, through an admin client, and what this provider keeps about it."""

    def __init__(
        self,
        client: AsyncClient,
        *,
        server: str,
        ca_data: str,
        now: Callable[[], dt.datetime] = _utc_now,
        pod_cidr: str = DEFAULT_POD_CIDR,
    ) -> None:
        self.client = client
        self.server = server
        self.ca_data = ca_data  # base64 PEM of the cluster CA, as kubeconfigs carry it
        self.clock = now
        self.pod_cidr = pod_cidr  # where the simulated pool's pod addresses come from
        # Owners this provider has begun provisioning and not yet torn down: never an orphan to its own
        # sweep, whatever a stored run status says (a lost or late status write must not tear a scenario
        # down mid-run). Gone with the process, as the scenarios it was running are.
        self.in_flight: set[str] = set()

    def now(self) -> dt.datetime:
        return self.clock()

    async def apply(self, manifest: dict[str, Any]) -> None:
        obj = codecs.from_dict(manifest)
        await self.client.apply(obj, field_manager=FIELD_MANAGER, force=True)

    async def create_event(self, manifest: dict[str, Any]) -> None:
        """Create an Event under the field manager of the component it names as its reporter."""
        component = str(
            manifest.get("reportingComponent") or (manifest.get("source") or {}).get("component") or ""
        )
        await self.client.create(
            cast(Event, Event.from_dict(manifest)),
            field_manager=EVENT_MANAGERS.get(component, "kube-controller-manager"),
        )

    async def delete(self, kind: type[Any], name: str, namespace: str | None = None) -> None:
        """Delete, if it is there (gone already, or going: nothing to do)."""
        try:
            await self.client.delete(kind, name, namespace=namespace)
        except ApiError as exc:
            if exc.status.code not in (404, 409):
                raise

    async def exists(self, kind: type[Any], name: str) -> bool:
        try:
            await self.client.get(kind, name)
            return True
        except ApiError as exc:
            if exc.status.code == 404:
                return False
            raise


class OnCluster:
    """A part of the environment adapter, on one :class:`ClusterConnection`."""

    def __init__(self, conn: ClusterConnection) -> None:
        self.conn = conn

    @property
    def client(self) -> AsyncClient:
        return self.conn.client

    def _now(self) -> dt.datetime:
        return self.conn.now()

    async def apply(self, manifest: dict[str, Any]) -> None:
        await self.conn.apply(manifest)

    async def create_event(self, manifest: dict[str, Any]) -> None:
        await self.conn.create_event(manifest)

    async def _delete(self, kind: type[Any], name: str, namespace: str | None = None) -> None:
        await self.conn.delete(kind, name, namespace)

    async def _exists(self, kind: type[Any], name: str) -> bool:
        return await self.conn.exists(kind, name)
