"""A run's status writes on the real API server, against the operator's orphan sweep.

The sweep spares the owners a run's *stored* status shows in flight. A scenario records its owner there
before it creates anything; the run's loop also writes the whole status when it starts the scenario,
before the owner is known. Two such writes in flight at once may land in either order (a request
queued by the API server's priority and fairness, a new connection); the older landing last drops the
owner, and a sweep in the next seconds tears the scenario down while it is being provisioned (seen in a
demo: ``ProvisioningFailed: ApiError: deployments.apps "web-app" not found``). Here the older write is
made to arrive late on purpose; the driver must not let it overwrite the newer one.
"""

from __future__ import annotations

import asyncio
import copy
import dataclasses
from typing import Any

from oasis_operator.adapters.k8s.client import async_client
from oasis_operator.adapters.k8s.environment import KubeEnvironment
from oasis_operator.adapters.k8s.store import Store
from oasis_operator.core.environment.plan import EnvironmentPlan
from oasis_operator.core.ports import AgentAccess
from oasis_operator.devcluster import kube, stack
from oasis_operator.handlers.operator import live_owners
from oasis_operator.workflows.run import RunDriver
from tests.fakes import FakeEnvironment
from tests.workflows.world import DESTRUCTION, PROFILE, World, si_manifests

#: How late the older write arrives.
LATE = 0.5


class LateOlderWrites:
    """The real store, but a status write that shows a started scenario without its owner (one computed
    before the scenario recorded it) reaches the API server ``LATE`` seconds after it was made."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.in_flight = 0
        self.landed = asyncio.Event()
        self.landed.set()

    def __getattr__(self, name: str) -> Any:
        return getattr(self.store, name)

    async def patch_run_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        self.in_flight += 1
        self.landed.clear()
        try:
            entries = status.get("scenarios") or []
            if any(e.get("step") == "Running" and not e.get("owner") for e in entries):
                await asyncio.sleep(LATE)
            await self.store.patch_run_status(namespace, name, status)
        finally:
            self.in_flight -= 1
            if not self.in_flight:
                self.landed.set()


class SweptWhileProvisioning(FakeEnvironment):
    """Provisioning creates the plan's namespaces on the cluster first (as the real provisioner does);
    then, once every status write in flight has landed, the operator's orphan sweep runs with the
    operator's own live owners (read from the stored runs), as its housekeeping may at any moment."""

    def __init__(self, kube_env: KubeEnvironment, store: LateOlderWrites) -> None:
        super().__init__()
        self.kube_env = kube_env
        self.store = store
        self.plans: list[EnvironmentPlan] = []
        self.swept: list[str] = []

    async def provision(
        self, plan: EnvironmentPlan, *, token_seconds: int = 900, ready_timeout: float = 30.0
    ) -> AgentAccess:
        self.plans.append(plan)
        for m in plan.manifests:
            if m["kind"] == "Namespace":
                await self.kube_env.apply(m)
        await self.store.landed.wait()
        client = self.kube_env.client
        self.swept += await self.kube_env.sweep_orphans(lambda: live_owners(client), timeout=0)
        return await super().provision(plan, token_seconds=token_seconds, ready_timeout=ready_timeout)


async def test_an_older_status_write_never_drops_a_started_scenarios_owner(cluster, admin) -> None:
    ns = f"evals-{kube.random_suffix()}"
    stack.install_crds(admin)
    stack.ensure_namespace(admin, ns)
    head, *scenarios = si_manifests()
    profile = copy.deepcopy(head)
    profile["spec"]["suites"] = [
        {
            "id": "s",
            "name": "s",
            "version": "1.0.0",
            "domain_profile": profile["spec"]["id"],
            "scenarios": [DESTRUCTION],
            "environment": {"provider": "oasis-operator", "config": {}},
        }
    ]
    stack.apply(admin, profile, ns)
    stack.apply(admin, next(m for m in scenarios if m["spec"]["id"] == DESTRUCTION), ns)
    run = {
        "apiVersion": "oasis.dev/v1alpha1",
        "kind": "EvaluationRun",
        "metadata": {"name": "late-writes"},
        "spec": {
            "profileRef": {"name": PROFILE},
            "agent": {"adapter": "http", "endpoint": "http://agent"},
            "tier": 1,
            "incomplete": True,  # this provider cannot meet every SI requirement (decision 0105)
            "parallelism": 4,
            "scenarios": {"suite": "s"},
        },
    }
    stack.apply(admin, run, ns)
    client = async_client(cluster.kubeconfig)
    kube_env = KubeEnvironment(client, server="", ca_data="")
    store = LateOlderWrites(Store(client))
    env = SweptWhileProvisioning(kube_env, store)
    world = World(env=env)
    # The operator's own poll: the run's loop writes the status again only this long after a start.
    ports = dataclasses.replace(world.ports, store=store, poll_seconds=2.0)
    try:
        assert await RunDriver(ports, ns, "late-writes").drive() == "finished"
        assert [p.scenario_id for p in env.plans] == [DESTRUCTION]
        assert env.plans[0].owner not in env.swept, "the sweep took a scenario in flight for an orphan"
        status = (await Store(client).get_run(ns, "late-writes") or {}).get("status") or {}
        assert status.get("verdict") == "PASS", status.get("message")
    finally:
        for plan in env.plans:
            await kube_env.teardown(plan.namespaces.values(), plan.owner, timeout=0)
        kube.delete_namespace(admin, ns)
        await client.close()
