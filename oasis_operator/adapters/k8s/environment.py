"""Realising an environment plan on a Kubernetes cluster, snapshotting it, and tearing it down.

Called by the scenario workflow (and the tests of the 21 SI safety scenarios); turns an
:class:`~oasis_operator.core.environment.plan.EnvironmentPlan` into objects on the cluster (server-side
apply, dependency order), an agent principal (ServiceAccount, Roles, a TokenRequest token, a
kubeconfig), failing pods that look exactly as a kubelet reports them, a check that the declared
symptoms are really there, before/after snapshots, and an idempotent teardown plus an orphan sweep.
"""

from __future__ import annotations

import asyncio
import base64
import datetime as dt
import hashlib
import importlib
import json
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import replace
from typing import Any, cast

import yaml
from lightkube import ApiError, AsyncClient, codecs, operators
from lightkube.generic_resource import create_namespaced_resource
from lightkube.models.authentication_v1 import TokenRequestSpec
from lightkube.models.authorization_v1 import ResourceAttributes, SubjectAccessReviewSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apps_v1 import Deployment, ReplicaSet
from lightkube.resources.authorization_v1 import SubjectAccessReview
from lightkube.resources.core_v1 import (
    Event,
    Namespace,
    Node,
    Pod,
    ResourceQuota,
    Secret,
    ServiceAccount,
)
from lightkube.resources.discovery_v1 import EndpointSlice
from lightkube.resources.rbac_authorization_v1 import ClusterRole, ClusterRoleBinding, Role, RoleBinding
from lightkube.types import PatchType

from oasis_operator.adapters.k8s.injected_failures import FailureInjector
from oasis_operator.adapters.plumbing.polling import poll, wait_until
from oasis_operator.core import kinds
from oasis_operator.core.environment import pod_status, provider_pods
from oasis_operator.core.environment.admission import policy_manifests
from oasis_operator.core.environment.grants import GrantedResource, snapshot_resources
from oasis_operator.core.environment.manifests import BackdatedEvent, WorkloadState
from oasis_operator.core.environment.naming import OWNER_LABEL, is_owner_value
from oasis_operator.core.environment.plan import EnvironmentPlan, Injection
from oasis_operator.core.environment.pod_states import POD_STATES
from oasis_operator.core.environment.revocation import (
    SA_TOKEN_TYPE,
    Route,
    access_reviews,
    acting_principals,
    beyond_baseline,
    describe_review,
    grants_of,
    routes_to_remove,
)
from oasis_operator.core.environment.symptoms import (
    available_problems,
    endpoint_problems,
    node_problems,
    observed,
    quota_counted,
    rolled_out,
    rollout_caught_halfway,
    workload_problems,
)
from oasis_operator.core.errors import ProvisioningError, RevocationFailed, StateRefused
from oasis_operator.core.kubeconfig import kubeconfig
from oasis_operator.core.ports import AgentAccess, LiveOwners, Revocation

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


def cluster_grant_name(plan: EnvironmentPlan) -> str:
    """The name of the ClusterRole and ClusterRoleBinding of the agent's grant on cluster objects (a
    scope with node operations, a node pool to read)."""
    return f"{AGENT_ACCOUNT}-{plan.suffix}"


DEFAULT_POD_CIDR = "10.244.0.0/16"

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


def _kubeconfig(server: str, ca_data: str, token: str, namespace: str) -> str:
    return yaml.safe_dump(
        kubeconfig(server, ca_data, AGENT_ACCOUNT, {"token": token}, namespace), sort_keys=False
    )


def _fields_digest(fields: Any) -> str:
    return hashlib.sha256(json.dumps(fields, sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:16]


def _strip(obj: dict[str, Any]) -> dict[str, Any]:
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


class KubeEnvironment:
    """Provider operations on one cluster, through an admin client."""

    def __init__(
        self,
        client: AsyncClient,
        *,
        server: str,
        ca_data: str,
        now: Any = lambda: dt.datetime.now(dt.UTC),
        pod_cidr: str = DEFAULT_POD_CIDR,
    ) -> None:
        self.client = client
        self.server = server
        self.ca_data = ca_data  # base64 PEM of the cluster CA, as kubeconfigs carry it
        self._now = now
        self.pod_cidr = pod_cidr  # where the simulated pool's pod addresses come from
        self._node_ips: dict[str, str] = {}
        self._policy_installed = False
        self._policy_enforced = False
        # Owners this provider has begun provisioning and not yet torn down: never an orphan to its own
        # sweep, whatever a stored run status says (a lost or late status write must not tear a scenario
        # down mid-run). Gone with the process, as the scenarios it was running are.
        self._in_flight: set[str] = set()

    # -- provisioning ------------------------------------------------------------------------------
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

    async def ensure_admission_policy(self) -> None:
        """Install the provider's admission policy (once per provider; applying it again is harmless)."""
        if self._policy_installed:
            return
        for manifest in policy_manifests():
            await self.apply(manifest)
        self._policy_installed = True

    async def _check_policy_enforced(self, namespace: str, timeout: float) -> None:
        """The API server picks a new admission policy up through a watch: until it refuses a token
        Secret in a scenario namespace (asked as a dry run, which runs admission and stores nothing),
        no agent may start. Checked once per provider."""
        if self._policy_enforced:
            return
        probe = Secret.from_dict(
            {
                "apiVersion": "v1",
                "kind": "Secret",
                "type": SA_TOKEN_TYPE,
                "metadata": {
                    "name": "token-probe",
                    "namespace": namespace,
                    "annotations": {"kubernetes.io/service-account.name": "default"},
                },
            }
        )

        async def refused() -> bool:
            try:
                await self.client.create(cast(Secret, probe), dry_run=True, field_manager=FIELD_MANAGER)
            except ApiError as exc:
                if exc.status.code == 403:
                    return True
                raise
            return False

        await wait_until(
            refused,
            bool,
            timeout=timeout,
            timed_out=lambda _: ProvisioningError(
                f"the admission policy is not enforced in {namespace} after {timeout:.0f}s"
            ),
        )
        self._policy_enforced = True

    async def provision(
        self, plan: EnvironmentPlan, *, token_seconds: int = 900, ready_timeout: float = 30.0
    ) -> AgentAccess:
        if not plan.supported:
            reasons = "; ".join(f"{u.resource}: {u.reason}" for u in plan.unsupported)
            raise ProvisioningError(f"scenario {plan.scenario_id} is not supported yet: {reasons}")
        if not is_owner_value(plan.owner):
            # The admission policy, the orphan sweep and teardown recognise a scenario by this value.
            raise ProvisioningError(f"ownership value {plan.owner!r} was not made by owner_value()")
        self._in_flight.add(plan.owner)
        await self.ensure_admission_policy()
        namespaces = [m for m in plan.manifests if m["kind"] == "Namespace"]
        for m in namespaces:
            await self.apply(m)
        await self._check_policy_enforced(plan.home_namespace, ready_timeout)
        await self._grant_agent(plan)
        rest = [m for m in plan.manifests if m["kind"] != "Namespace"]
        await self._apply_in_order(rest, plan.workloads, ready_timeout)
        await self.realise_workloads(plan.workloads, timeout=ready_timeout)
        await self._backdated_events(plan.events)
        for m in plan.manifests:
            if m["kind"] == "Node":
                await self._wait_node_ready(m["metadata"]["name"], ready_timeout)
        token = await self._token(plan.home_namespace, token_seconds)
        expires = (self._now() + dt.timedelta(seconds=token_seconds)).isoformat(timespec="seconds")
        return AgentAccess(
            username=f"system:serviceaccount:{plan.home_namespace}:{AGENT_ACCOUNT}",
            namespace=plan.home_namespace,
            kubeconfig=_kubeconfig(self.server, self.ca_data, token, plan.home_namespace),
            token_expires_at=expires,
        )

    async def _apply_in_order(
        self, objects: list[dict[str, Any]], workloads: Iterable[WorkloadState], ready_timeout: float
    ) -> None:
        """Apply ``objects`` (in apply order): a Deployment's earlier revisions first, a quota counted
        by its controller before anything it covers comes."""
        history = {(w.namespace, w.name): w.history for w in workloads if w.history}
        # Objects of one kind do not depend on each other: apply each kind's batch concurrently.
        for batch in _batches_by_kind(objects):
            if history and batch[0]["kind"] == "Deployment":
                await asyncio.gather(
                    *(
                        self._roll_history(m, history[(m["metadata"]["namespace"], m["metadata"]["name"])])
                        for m in batch
                        if (m["metadata"]["namespace"], m["metadata"]["name"]) in history
                    )
                )
            await asyncio.gather(*(self.apply(m) for m in batch))
            if batch[0]["kind"] == "Node":  # Ready before anything is scheduled on them
                await asyncio.gather(
                    *(self._wait_node_ready(m["metadata"]["name"], ready_timeout) for m in batch)
                )
            if batch[0]["kind"] == "ResourceQuota":
                await asyncio.gather(
                    *(
                        self._wait_quota_counted(
                            m["metadata"]["namespace"], m["metadata"]["name"], ready_timeout
                        )
                        for m in batch
                    )
                )

    async def inject(self, injection: Injection, *, ready_timeout: float = 30.0) -> list[str]:
        """Apply state planned into a provisioned environment (:func:`plan_injection`) as provisioning
        applies it (server-side, under the provisioner's field manager, with this provider's own
        credentials: never the agent's), and wait until what it declares is observed. Returns what of
        it is not observed (empty: all of it is).

        Every object is first applied as a server-side dry run (admission and validation run, nothing
        is stored): when one is refused, nothing was applied (:class:`StateRefused`). The pod
        quotas the injection raises are dry-run too, and applied (and counted) before the objects
        they cover."""
        if not injection.supported:
            reasons = "; ".join(f"{u.resource}: {u.reason}" for u in injection.unsupported)
            raise ProvisioningError(f"state not injected: {reasons}")
        objects = list(injection.manifests)
        refused: list[str] = []

        async def dry_run(m: dict[str, Any]) -> None:
            try:
                await self.client.apply(
                    codecs.from_dict(m), field_manager=FIELD_MANAGER, force=True, dry_run=True
                )
            except ApiError as exc:
                meta = m["metadata"]
                refused.append(
                    f"{m['kind'].lower()}/{meta['name']} in {meta.get('namespace')}: {exc.status.message}"
                )

        await asyncio.gather(*(dry_run(m) for m in objects))
        if refused:
            raise StateRefused("the API server refuses " + "; ".join(sorted(refused)))
        await self._apply_in_order(objects, injection.workloads, ready_timeout)
        await self.realise_workloads(injection.workloads, timeout=ready_timeout)
        await self._backdated_events(injection.events)
        return await self.verify(
            replace(
                injection.plan,
                manifests=injection.manifests,
                workloads=injection.workloads,
                events=injection.events,
            )
        )

    async def _grant_agent(self, plan: EnvironmentPlan) -> None:
        home = plan.home_namespace
        subject = [{"kind": "ServiceAccount", "name": AGENT_ACCOUNT, "namespace": home}]
        await self.apply(
            {
                "apiVersion": "v1",
                "kind": "ServiceAccount",
                "metadata": {"name": AGENT_ACCOUNT, "namespace": home},
            }
        )
        docs: list[dict[str, Any]] = []
        for grant in plan.grants:
            docs.append(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "Role",
                    "metadata": {"name": AGENT_ACCOUNT, "namespace": grant.namespace},
                    "rules": grant.rules(),
                }
            )
            docs.append(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "RoleBinding",
                    "metadata": {"name": AGENT_ACCOUNT, "namespace": grant.namespace},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "Role",
                        "name": AGENT_ACCOUNT,
                    },
                    "subjects": subject,
                }
            )
        if plan.cluster_grants:
            name = cluster_grant_name(plan)
            labels = {OWNER_LABEL: plan.owner}
            docs.append(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRole",
                    "metadata": {"name": name, "labels": labels},
                    "rules": list(plan.cluster_grants),
                }
            )
            docs.append(
                {
                    "apiVersion": "rbac.authorization.k8s.io/v1",
                    "kind": "ClusterRoleBinding",
                    "metadata": {"name": name, "labels": labels},
                    "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": name},
                    "subjects": subject,
                }
            )
        await asyncio.gather(*(self.apply(d) for d in docs))

    async def _token(self, namespace: str, seconds: int) -> str:
        # The API server's minimum token lifetime is 10 minutes.
        req = ServiceAccount.Token(
            metadata=ObjectMeta(name=AGENT_ACCOUNT, namespace=namespace),
            spec=TokenRequestSpec(audiences=[], expirationSeconds=max(600, seconds)),
        )
        out = await self.client.create(req, AGENT_ACCOUNT, namespace=namespace)
        if out.status is None:
            raise ProvisioningError(f"TokenRequest for {namespace}/{AGENT_ACCOUNT} returned no token")
        return str(out.status.token)

    # -- simulated workloads -------------------------------------------------------------------------
    async def _pods_of(self, w: WorkloadState) -> list[dict[str, Any]]:
        if w.kind == "Pod":
            try:
                return [(await self.client.get(Pod, w.name, namespace=w.namespace)).to_dict()]
            except ApiError as exc:
                if exc.status.code == 404:
                    return []
                raise
        selector: dict[str, Any] = dict(w.selector)
        pods = [p.to_dict() async for p in self.client.list(Pod, namespace=w.namespace, labels=selector)]
        return [p for p in pods if not p["metadata"].get("deletionTimestamp")]

    async def realise_workloads(self, workloads: Iterable[WorkloadState], timeout: float) -> None:
        """Wait for each workload's pods to exist and be bound; then write failing statuses."""
        await asyncio.gather(*(self._realise(w, timeout) for w in workloads))

    async def _rolled_out(self, w: WorkloadState) -> bool:
        """A running Deployment's rollout is complete (no old revision's pods left, all available);
        failing workloads never become available, so only their pod count matters."""
        if w.kind != "Deployment" or w.state != "running":
            return True
        return rolled_out(w, (await self.client.get(Deployment, w.name, namespace=w.namespace)).to_dict())

    async def node_ip(self, node: str) -> str:
        """The node's InternalIP (the hostIP of its pods)."""
        if node not in self._node_ips:
            obj = (await self.client.get(Node, node)).to_dict()
            found = [
                a["address"]
                for a in obj.get("status", {}).get("addresses", [])
                if a.get("type") == "InternalIP"
            ]
            self._node_ips[node] = found[0] if found else "10.89.0.1"
        return self._node_ips[node]

    async def where(self, pod: dict[str, Any]) -> dict[str, Any]:
        """Addresses for a pod whose status the provisioner writes."""
        return pod_status.addresses(
            await self.node_ip(pod["spec"]["nodeName"]),
            pod_status.pod_ip(self.pod_cidr, str(pod["metadata"].get("uid", ""))),
        )

    async def write_pod_status(self, pod: dict[str, Any], status: dict[str, Any]) -> None:
        await self.client.patch(
            Pod.Status,
            pod["metadata"]["name"],
            {"status": status},
            namespace=pod["metadata"]["namespace"],
            patch_type=PatchType.MERGE,
            field_manager=STATUS_MANAGER,
        )

    def now(self) -> dt.datetime:
        return cast(dt.datetime, self._now())

    async def _start_pods(self, pods: list[dict[str, Any]], w: WorkloadState) -> int:
        """Give the live pods the simulator leaves to us their first status, as a kubelet writes it
        (running, or still starting for a rollout's new revision). Returns how many were written."""
        todo = [p for p in pods if provider_pods.is_live(p) and not provider_pods.has_status(p)]
        for p in todo:
            await self.write_pod_status(
                p, provider_pods.handover_status(w, p, self.now(), await self.where(p))
            )
        return len(todo)

    async def _realise(self, w: WorkloadState, timeout: float) -> None:
        deadline = time.monotonic() + timeout
        if w.state == "pending":  # the scheduler keeps them so; wait until it has said why
            await self._wait_pending(w, timeout)
        else:
            await self._realise_pods(w, deadline, timeout)
        if w.available is not None:
            await self._wait_available(w, max(1.0, deadline - time.monotonic()))

    async def _wait_pending(self, w: WorkloadState, timeout: float) -> None:
        """Wait until every pod of a pending workload exists and the scheduler reports Insufficient cpu."""
        await wait_until(
            lambda: self._pods_of(w),
            lambda pods: not workload_problems(w, pods),
            timeout=timeout,
            interval=0.1,
            timed_out=lambda pods: ProvisioningError(
                f"{'; '.join(workload_problems(w, pods))} after {timeout:.0f}s"
            ),
        )

    async def _wait_available(self, w: WorkloadState, timeout: float) -> None:
        """Wait for the deployment controller to write the declared Available condition."""

        async def deployment() -> dict[str, Any]:
            return cast(
                dict[str, Any], (await self.client.get(Deployment, w.name, namespace=w.namespace)).to_dict()
            )

        await wait_until(
            deployment,
            lambda dep: not available_problems(w, dep),
            timeout=timeout,
            interval=0.1,
            timed_out=lambda dep: ProvisioningError(
                f"{'; '.join(available_problems(w, dep))} after {timeout:.0f}s"
            ),
        )

    async def _realise_pods(self, w: WorkloadState, deadline: float, timeout: float) -> None:
        while True:
            pods = await self._pods_of(w)
            if w.status_by_provider and await self._start_pods(pods, w):
                continue  # read them again, with their statuses
            if w.state == "rolling":
                dep = (await self.client.get(Deployment, w.name, namespace=w.namespace)).to_dict()
                if rollout_caught_halfway(w, dep, pods):
                    return
                if time.monotonic() > deadline:
                    raise ProvisioningError(
                        f"deployment/{w.name} in {w.namespace}: no rollout in progress after "
                        f"{timeout:.0f}s ({workload_problems(w, pods)})"
                    )
                await asyncio.sleep(0.1)
                continue
            running = [p for p in pods if provider_pods.started(w, p)]
            if len(pods) == w.replicas and len(running) == w.replicas and await self._rolled_out(w):
                break
            if time.monotonic() > deadline:
                raise ProvisioningError(
                    f"{w.kind.lower()}/{w.name} in {w.namespace}: {len(running)}/{w.replicas} pods running "
                    f"after {timeout:.0f}s"
                )
            await asyncio.sleep(0.1)
        if not w.writes_pod_status:
            return
        targets = sorted(running, key=lambda p: str(p["metadata"]["name"]))
        targets = targets[: POD_STATES[w.state].fails(len(targets))]
        now = self._now()
        for p in targets:
            status = pod_status.failing_status(p, w.state, now, w.restarts, last_oom=w.last_oom, life=w.life)
            await self.write_pod_status(p, status)
            for ev in pod_status.kubelet_events(p, w.state, now, w.restarts):
                await self.create_event(ev)

    async def _wait_observed(self, ns: str, name: str, timeout: float) -> dict[str, Any]:
        async def deployment() -> dict[str, Any]:
            return cast(dict[str, Any], (await self.client.get(Deployment, name, namespace=ns)).to_dict())

        return await wait_until(
            deployment,
            observed,
            timeout=timeout,
            interval=0.05,
            timed_out=lambda _: ProvisioningError(
                f"deployment/{name} in {ns}: not observed by its controller in {timeout:.0f}s"
            ),
        )

    async def _wait_quota_counted(self, ns: str, name: str, timeout: float) -> None:
        """Nothing the quota covers can be created before its controller has counted it."""

        async def quota() -> dict[str, Any]:
            return cast(dict[str, Any], (await self.client.get(ResourceQuota, name, namespace=ns)).to_dict())

        await wait_until(
            quota,
            quota_counted,
            timeout=timeout,
            interval=0.05,
            timed_out=lambda _: ProvisioningError(
                f"resourcequota/{name} in {ns}: not counted by its controller in {timeout:.0f}s"
            ),
        )

    async def _wait_node_ready(self, name: str, timeout: float) -> None:
        async def node() -> dict[str, Any]:
            return cast(dict[str, Any], (await self.client.get(Node, name)).to_dict())

        def ready(obj: dict[str, Any]) -> bool:
            return any(
                c["type"] == "Ready" and c["status"] == "True"
                for c in obj.get("status", {}).get("conditions", [])
            )

        await wait_until(
            node,
            ready,
            timeout=timeout,
            timed_out=lambda _: ProvisioningError(f"node/{name} not Ready after {timeout:.0f}s"),
        )

    async def _roll_history(self, manifest: dict[str, Any], images: tuple[str, ...]) -> None:
        """Apply each earlier revision first, so the declared one is a real rollout on top of them."""
        ns, name = manifest["metadata"]["namespace"], manifest["metadata"]["name"]
        for image in images:
            old = json.loads(json.dumps(manifest))
            old["spec"]["template"]["spec"]["containers"][0]["image"] = image
            await self.apply(old)
            await self._wait_observed(ns, name, 30)

    async def _backdated_events(self, events: Iterable[BackdatedEvent]) -> None:
        now = self._now()
        for ev in events:
            manifest = json.loads(json.dumps(ev.manifest))
            ts = (now - dt.timedelta(seconds=ev.age_seconds)).strftime("%Y-%m-%dT%H:%M:%SZ")
            manifest["firstTimestamp"] = manifest["lastTimestamp"] = ts
            await self.create_event(manifest)

    def failure_injector(self, plan: EnvironmentPlan) -> FailureInjector:
        """The injector of the plan's declared failures (not started; inactive when there are none)."""
        return FailureInjector(self, plan.workloads, plan.owner)

    # -- verification of the declared symptoms ------------------------------------------------------
    async def verify(self, plan: EnvironmentPlan) -> list[str]:
        """Problems with the established state (empty: everything declared is observable)."""
        problems: list[str] = []
        for w in plan.workloads:
            revisions = None
            if w.history:
                revisions = len(
                    [
                        r
                        async for r in self.client.list(
                            ReplicaSet, namespace=w.namespace, labels=dict(w.selector)
                        )
                    ]
                )
            problems += workload_problems(w, await self._pods_of(w), revisions)
            if w.available is not None:
                dep = (await self.client.get(Deployment, w.name, namespace=w.namespace)).to_dict()
                problems += available_problems(w, dep)
        for ev in plan.events:
            name = ev.manifest["metadata"]["name"]
            try:
                await self.client.get(Event, name, namespace=ev.namespace)
            except ApiError:
                problems.append(f"event {name} in {ev.namespace} is missing")
        for m in plan.manifests:
            if m["kind"] == "Node":
                problems += node_problems(m, (await self.client.get(Node, m["metadata"]["name"])).to_dict())
        for ns, service in plan.empty_endpoints:
            problems += await self._endpoints_settled(ns, service)
        return problems

    async def _endpoints_settled(self, ns: str, service: str, timeout: float = 10.0) -> list[str]:
        """The problems of a Service declared with no endpoints, once the endpoint controller has caught up
        with its pods (or after ``timeout``)."""

        async def slices() -> list[dict[str, Any]]:
            labels: dict[str, Any] = {"kubernetes.io/service-name": service}
            return [s.to_dict() async for s in self.client.list(EndpointSlice, namespace=ns, labels=labels)]

        found = await poll(slices, lambda got: not endpoint_problems(ns, service, got), timeout=timeout)
        return endpoint_problems(ns, service, found.value)

    # -- snapshots ---------------------------------------------------------------------------------
    async def snapshot(self, plan: EnvironmentPlan) -> dict[str, Any]:
        """Every object of the namespace set, of every kind the agent can read or write, and the plan's
        cluster-scoped objects (its PersistentVolumes and nodes: :data:`OWNED_CLUSTER_KINDS`), by kind."""
        out: dict[str, Any] = {"namespaces": {}, "cluster": {}}

        async def list_kind(kind: type[Any], ns: str) -> tuple[str, str, list[dict[str, Any]]]:
            items = [_strip(o.to_dict()) async for o in self.client.list(kind, namespace=ns)]
            return ns, kind.__name__, sorted(items, key=lambda o: str(o["metadata"]["name"]))

        jobs = [list_kind(k, ns) for ns in sorted(plan.namespaces.values()) for k in SNAPSHOT_KINDS]
        # A GitOps application's Kustomization (the tool plane's, decision 0052): its sync status is
        # state the scenario asserts.
        gitops = sorted({a.namespace for a in plan.toolplane.gitops})
        jobs += [list_kind(kind, ns) for ns in gitops for kind in (KUSTOMIZATION, GIT_REPOSITORY)]
        # A scenario that holds a traffic weight: its agent may write routes in any namespace of its grant.
        if any(g.routes for g in plan.grants):
            jobs += [list_kind(HTTPROUTE, ns) for ns in sorted(plan.namespaces.values())]
        for ns, kind, items in await asyncio.gather(*jobs):
            out["namespaces"].setdefault(ns, {})[kind] = items
        for ns in sorted(plan.namespaces.values()):
            try:
                out["namespaces"][ns]["Namespace"] = [
                    _strip((await self.client.get(Namespace, ns)).to_dict())
                ]
            except ApiError as exc:
                if exc.status.code != 404:
                    raise
                out["namespaces"][ns]["Namespace"] = []
        for kind_name, cluster_kind in reversed(OWNED_CLUSTER_KINDS):  # in apply order
            for name in sorted(m["metadata"]["name"] for m in plan.manifests if m["kind"] == kind_name):
                try:
                    out["cluster"].setdefault(kind_name, []).append(
                        _strip((await self.client.get(cluster_kind, name)).to_dict())
                    )
                except ApiError as exc:
                    if exc.status.code != 404:
                        raise
        # The agent's grant on cluster objects is the harness's too: in both snapshots, so that its
        # binding, which revocation removes and the "after" state puts back as it was, is not an object
        # that appeared during the turn (an unaudited create held against the agent).
        if plan.cluster_grants:
            grant_kinds: tuple[tuple[str, type[Any]], ...] = (
                ("ClusterRole", ClusterRole),
                ("ClusterRoleBinding", ClusterRoleBinding),
            )
            for kind_name, grant_kind in grant_kinds:
                try:
                    obj = _strip((await self.client.get(grant_kind, cluster_grant_name(plan))).to_dict())
                except ApiError as exc:
                    if exc.status.code != 404:
                        raise
                    continue
                out["cluster"].setdefault(kind_name, []).append(obj)
        return out

    # -- revocation --------------------------------------------------------------------------------
    async def _list_routes(self, namespaces: Sequence[str]) -> dict[str, list[dict[str, Any]]]:
        """The RBAC objects and credentials of the namespaces, and the cluster's bindings (as dicts)."""
        listed: dict[str, list[dict[str, Any]]] = {}

        async def take(kind: type[Any], ns: str | None, **kw: Any) -> None:
            items = [
                {**o.to_dict(), "kind": kind.__name__}
                async for o in self.client.list(kind, namespace=ns, **kw)
            ]
            listed.setdefault(kind.__name__, []).extend(items)

        jobs = [take(k, ns) for ns in namespaces for k in (RoleBinding, Role, ServiceAccount)]
        jobs += [take(Secret, ns, fields={"type": SA_TOKEN_TYPE}) for ns in namespaces]
        jobs.append(take(ClusterRoleBinding, None))
        await asyncio.gather(*jobs)
        return listed

    async def _remove(
        self, routes: Iterable[Route], listed: Mapping[str, list[dict[str, Any]]]
    ) -> list[dict[str, Any]]:
        """Delete each route; return the objects as they were just before."""
        kinds: dict[str, type[Any]] = {
            "RoleBinding": RoleBinding,
            "Role": Role,
            "ServiceAccount": ServiceAccount,
            "Secret": Secret,
            "ClusterRoleBinding": ClusterRoleBinding,
        }
        by_ref = {
            (o["kind"], o["metadata"].get("namespace") or "", o["metadata"]["name"]): o
            for objs in listed.values()
            for o in objs
        }
        routes = list(routes)
        await asyncio.gather(*(self._delete(kinds[r.kind], r.name, r.namespace or None) for r in routes))
        return [
            _strip(json.loads(json.dumps(by_ref[(r.kind, r.namespace, r.name)])))
            for r in routes
            if (r.kind, r.namespace, r.name) in by_ref
        ]

    async def revoke(self, plan: EnvironmentPlan, *, rounds: int = 3) -> Revocation:
        """Close every route in (the proof is :meth:`verify_revoked`).

        First the harness's own grant goes: its account (which voids its tokens at once). Then every
        route: each RoleBinding, Role, ServiceAccount and token Secret in the scenario's namespaces that
        the scenario did not declare (the harness's bindings included), and each ClusterRoleBinding
        naming one of their subjects. When a pass finds more than the harness's own grant, something
        else was set up that might still add a route while we remove one: the scenario's objects are
        read again (up to ``rounds`` passes). Every object removed is returned as it was just before."""
        namespaces = sorted(plan.namespaces.values())
        removed: list[dict[str, Any]] = []
        try:
            account = {
                **(
                    await self.client.get(ServiceAccount, AGENT_ACCOUNT, namespace=plan.home_namespace)
                ).to_dict(),
                "kind": "ServiceAccount",
            }
            await self._delete(ServiceAccount, AGENT_ACCOUNT, plan.home_namespace)
            removed.append(_strip(account))
        except ApiError as exc:
            if exc.status.code != 404:
                raise
        declared = [m for m in plan.manifests if m.get("kind") in ("Role", "RoleBinding", "ServiceAccount")]
        routes: list[Route] = []
        own = {(kind, g.namespace, AGENT_ACCOUNT) for g in plan.grants for kind in ("Role", "RoleBinding")}
        own.add(("ClusterRoleBinding", "", cluster_grant_name(plan)))
        for _ in range(rounds):
            listed = await self._list_routes(namespaces)
            found = routes_to_remove(namespaces, listed, declared)
            routes += found
            removed += await self._remove(found, listed)
            # Only the harness's own grant was found: nothing else was acting that could add a route
            # while it was removed (verification re-reads everything anyway). Otherwise look again.
            if all((r.kind, r.namespace, r.name) in own for r in found):
                break
        return Revocation(removed=tuple(removed), routes=tuple(routes))

    async def verify_revoked(
        self,
        plan: EnvironmentPlan,
        revocation: Revocation,
        *,
        seen: Iterable[Mapping[str, Any]] = (),
        harness: Iterable[str] = (),
        settle: float = 5.0,
    ) -> Revocation:
        """Prove the window closed: the agent, ``system:anonymous`` and every principal of ``seen`` (the
        window's audit events) that is neither ``harness`` nor the control plane hold no binding that
        grants more than every caller has, no route of :func:`routes_to_remove` is back, and the API
        server answers "no" to every probe of
        :data:`~oasis_operator.core.environment.grants.REVOCATION_PROBES` for each of them.

        The authorizer follows RBAC objects through a watch, so it may answer from a cache a few
        milliseconds behind the deletions: a check that finds something is repeated until ``settle``
        seconds have passed. Raises :class:`RevocationFailed` when anything is still left then (a
        provider fault)."""
        namespaces = sorted(plan.namespaces.values())
        declared = [m for m in plan.manifests if m.get("kind") in ("Role", "RoleBinding", "ServiceAccount")]
        agent = f"system:serviceaccount:{plan.home_namespace}:{AGENT_ACCOUNT}"
        principals = acting_principals(seen, agent=(agent,), harness=harness)
        reviews = access_reviews(principals, namespaces)

        async def still_allowed() -> list[str]:
            listed = await self._list_routes(namespaces)
            grants = grants_of(principals, namespaces, listed)
            left = beyond_baseline(grants, await self._rules_of(grants))
            left += [
                f"{r.kind} {r.name}{' in ' + r.namespace if r.namespace else ''} is still there ({r.why})"
                for r in routes_to_remove(namespaces, listed, declared)
            ]
            answers = await asyncio.gather(*(self._allowed(spec) for spec in reviews))
            return left + [
                describe_review(spec) for spec, allowed in zip(reviews, answers, strict=True) if allowed
            ]

        left = (await poll(still_allowed, lambda found: not found, timeout=settle)).value
        result = Revocation(
            removed=revocation.removed,
            routes=revocation.routes,
            principals=tuple(p.username for p in principals),
            still_allowed=tuple(sorted(set(left))),
            reviews=len(reviews),
        )
        if not result.verified:
            raise RevocationFailed(result)
        return result

    async def _rules_of(self, grants: Iterable[Any]) -> dict[tuple[str, str, str], list[dict[str, Any]]]:
        """The rules of the roles the grants bind (only those: a cluster has many roles)."""
        wanted = sorted(
            {(g.role_kind, g.namespace if g.role_kind == "Role" else "", g.role_name) for g in grants}
        )

        async def rules(kind: str, ns: str, name: str) -> tuple[tuple[str, str, str], list[dict[str, Any]]]:
            try:
                obj = (
                    await self.client.get(Role, name, namespace=ns)
                    if kind == "Role"
                    else await self.client.get(ClusterRole, name)
                ).to_dict()
            except ApiError as exc:
                if exc.status.code != 404:
                    raise
                return (kind, ns, name), []
            return (kind, ns, name), list(obj.get("rules") or [])

        return dict(await asyncio.gather(*(rules(*key) for key in wanted)))

    async def _allowed(self, spec: Mapping[str, Any]) -> bool:
        """The API server's own answer: may this user (with these groups) do this?"""
        review = SubjectAccessReview(
            spec=SubjectAccessReviewSpec(
                user=spec["user"],
                groups=list(spec["groups"]),
                resourceAttributes=ResourceAttributes(**spec["resourceAttributes"]),
            )
        )
        out = await self.client.create(review)
        return bool(out.status is not None and out.status.allowed)

    # -- teardown ----------------------------------------------------------------------------------
    async def teardown(self, namespaces: Iterable[str], owner: str, *, timeout: float = 60.0) -> list[str]:
        """Delete the namespace set and the owner's cluster-scoped objects; wait until they are gone.

        Idempotent: what is already gone is skipped. Returns what is still present at the deadline
        (empty on success). The owner stops being this provider's own once its deletes are issued."""
        try:
            return await self._teardown(namespaces, owner, timeout)
        finally:
            self._in_flight.discard(owner)

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
        live = set(await live_owners() if callable(live_owners) else live_owners) | self._in_flight
        for owner, nss in sorted(stale.items()):
            if owner not in live:
                await self.teardown(nss, owner, timeout=timeout)
        return sorted(o for o in stale if o not in live)

    async def _delete(self, kind: type[Any], name: str, namespace: str | None = None) -> None:
        try:
            await self.client.delete(kind, name, namespace=namespace)
        except ApiError as exc:
            if exc.status.code not in (404, 409):
                raise

    async def _exists(self, kind: type[Any], name: str) -> bool:
        try:
            await self.client.get(kind, name)
            return True
        except ApiError as exc:
            if exc.status.code == 404:
                return False
            raise


def _batches_by_kind(manifests: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    batches: list[list[dict[str, Any]]] = []
    for m in manifests:
        if batches and batches[-1][0]["kind"] == m["kind"]:
            batches[-1].append(m)
        else:
            batches.append([m])
    return batches


def ca_data_from_file(path: str) -> str:
    with open(path, "rb") as fh:
        return base64.b64encode(fh.read()).decode()


__all__ = [
    "AgentAccess",
    "Event",
    "KubeEnvironment",
    "ProvisioningError",
    "Revocation",
    "RevocationFailed",
    "ca_data_from_file",
]
