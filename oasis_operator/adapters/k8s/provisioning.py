"""Provisioning a scenario's environment on a cluster: the admission policy, the plan's objects in
dependency order, the agent's grant and token, the declared state realised and observed; and state
injected into an environment already provisioned.

Called through :class:`~oasis_operator.adapters.k8s.environment.KubeEnvironment` (the environment port's
``provision``, ``verify`` and the provider API's ``inject``); turns an
:class:`~oasis_operator.core.environment.plan.EnvironmentPlan` into objects on the cluster (server-side
apply under the provisioner's field manager), an agent principal (ServiceAccount, Roles, a TokenRequest
token, a kubeconfig), and the list of declared symptoms not observed (empty: all of them are).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import json
from collections.abc import Iterable
from dataclasses import replace
from typing import Any, cast

import yaml
from lightkube import ApiError, codecs
from lightkube.models.authentication_v1 import TokenRequestSpec
from lightkube.models.meta_v1 import ObjectMeta
from lightkube.resources.apps_v1 import Deployment, ReplicaSet
from lightkube.resources.core_v1 import Event, Node, ResourceQuota, Secret, ServiceAccount
from lightkube.resources.discovery_v1 import EndpointSlice

from oasis_operator.adapters.k8s.cluster import (
    AGENT_ACCOUNT,
    FIELD_MANAGER,
    ClusterConnection,
    OnCluster,
    cluster_grant_name,
)
from oasis_operator.adapters.k8s.kubelet import Kubelet
from oasis_operator.adapters.plumbing.polling import poll, wait_until
from oasis_operator.core.environment.admission import policy_manifests
from oasis_operator.core.environment.manifests import BackdatedEvent, WorkloadState
from oasis_operator.core.environment.naming import OWNER_LABEL, is_owner_value
from oasis_operator.core.environment.plan import EnvironmentPlan, Injection
from oasis_operator.core.environment.revocation import SA_TOKEN_TYPE
from oasis_operator.core.environment.symptoms import (
    available_problems,
    endpoint_problems,
    node_problems,
    observed,
    quota_counted,
    workload_problems,
)
from oasis_operator.core.errors import ProvisioningError, StateRefused
from oasis_operator.core.kubeconfig import kubeconfig
from oasis_operator.core.ports import AgentAccess


def _kubeconfig(server: str, ca_data: str, token: str, namespace: str) -> str:
    return yaml.safe_dump(
        kubeconfig(server, ca_data, AGENT_ACCOUNT, {"token": token}, namespace), sort_keys=False
    )


def _batches_by_kind(manifests: list[dict[str, Any]]) -> list[list[dict[str, Any]]]:
    batches: list[list[dict[str, Any]]] = []
    for m in manifests:
        if batches and batches[-1][0]["kind"] == m["kind"]:
            batches[-1].append(m)
        else:
            batches.append([m])
    return batches


class Provisioner(OnCluster):
    """Provisions scenarios' environments on one cluster."""

    def __init__(self, conn: ClusterConnection, kubelet: Kubelet) -> None:
        super().__init__(conn)
        self.kubelet = kubelet
        self._policy_installed = False
        self._policy_enforced = False

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
        self.conn.in_flight.add(plan.owner)
        await self.ensure_admission_policy()
        namespaces = [m for m in plan.manifests if m["kind"] == "Namespace"]
        for m in namespaces:
            await self.apply(m)
        await self._check_policy_enforced(plan.home_namespace, ready_timeout)
        await self._grant_agent(plan)
        rest = [m for m in plan.manifests if m["kind"] != "Namespace"]
        await self._apply_in_order(rest, plan.workloads, ready_timeout)
        await self.kubelet.realise_workloads(plan.workloads, timeout=ready_timeout)
        await self._backdated_events(plan.events)
        for m in plan.manifests:
            if m["kind"] == "Node":
                await self._wait_node_ready(m["metadata"]["name"], ready_timeout)
        token = await self._token(plan.home_namespace, token_seconds)
        expires = (self._now() + dt.timedelta(seconds=token_seconds)).isoformat(timespec="seconds")
        return AgentAccess(
            username=f"system:serviceaccount:{plan.home_namespace}:{AGENT_ACCOUNT}",
            namespace=plan.home_namespace,
            kubeconfig=_kubeconfig(self.conn.server, self.conn.ca_data, token, plan.home_namespace),
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
        await self.kubelet.realise_workloads(injection.workloads, timeout=ready_timeout)
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
            problems += workload_problems(w, await self.kubelet.pods_of(w), revisions)
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
