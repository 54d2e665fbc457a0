"""A capability scenario the provider could not set up, on the real control plane: the agent never
ran, so its silence is not an answer — the scenario is a PROVIDER_FAILURE without a score, never a
FAIL scored 0 by behaviours that look only at the (absent) answer."""

from __future__ import annotations

from typing import Any

import pytest

from oasis_operator.adapters.k8s.client import async_http
from oasis_operator.core.contract import AgentOutcome
from oasis_operator.core.contract.agent import IdentityAndConfiguration
from oasis_operator.core.environment.naming import owner_value
from oasis_operator.core.environment.plan import plan_environment
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.core.reasons import FAULT_PROVISIONING, FAULT_SYMPTOM_MISSING
from oasis_operator.devcluster import kube
from oasis_operator.workflows.scenario import ScenarioTimeouts, execute_scenario
from tests.capability.replay import documents
from tests.cluster_ports import cluster_ports

pytestmark = pytest.mark.cluster

#: Behaviours that read only the agent's answer (the owners and how to reach them), and three judged on
#: state or output alone: they were a FAIL when the fault marked only the audit log unreachable.
#: How each is made to fail before the agent's turn: pods that can never run, or (a scenario with no pod)
#: declared state the provider reports as not observed.
SCENARIOS = {
    "infra.capability.ca.organizational-context-001": "pods never run",
    "infra.capability.au.state-delta-recording-001": "pods never run",
    "infra.capability.mr.plan-generation-001": "pods never run",
    "infra.capability.oe.idempotent-configmap-001": "state not observed",
}


class StateNotObserved:
    """The real environment provider, except that it reports the declared state as not observed."""

    def __init__(self, env: Any) -> None:
        self._env = env

    def __getattr__(self, name: str) -> Any:
        return getattr(self._env, name)

    async def verify(self, plan: Any) -> list[str]:
        await self._env.verify(plan)
        return ["configmap/app-config: the declared data was not observed (made to fail by the test)"]


class NeverCalled:
    """An agent the workflow must not reach: provisioning fails first."""

    calls = 0

    async def identify(self) -> IdentityAndConfiguration:
        return IdentityAndConfiguration.model_validate({"identity": {"name": "never", "version": "1"}})

    async def run_scenario(self, request: Any, *, timeout_seconds: float | None = None) -> AgentOutcome:
        self.calls += 1
        raise AssertionError("the agent ran although provisioning failed")


@pytest.mark.parametrize(("sid", "how"), SCENARIOS.items(), ids=SCENARIOS.keys())
async def test_a_capability_scenario_whose_provisioning_failed_is_a_provider_failure_without_a_score(
    env: Any, audit_source: Any, cluster: Any, sid: str, how: str
) -> None:
    doc = documents()[sid]
    scenario, _ = parse_scenario(doc)
    # Pods selected for a node pool that does not exist never run: provisioning fails, for real, every time
    # (a 1 ms readiness wait did not: on a loaded machine the second look could find the pods running).
    selector = {"node.platform.k8s.io/pool": "no-such-pool"} if how == "pods never run" else None
    plan = plan_environment(
        scenario,
        suffix=kube.random_suffix(),
        owner=owner_value("capfault", kube.random_suffix()),
        node_selector=selector,
    )
    assert plan.supported
    assert bool(plan.workloads) == (how == "pods never run")
    agent = NeverCalled()
    async with async_http(cluster.kubeconfig) as http:
        execution = await execute_scenario(
            scenario,
            plan,
            cluster_ports(
                env if how == "pods never run" else StateNotObserved(env),
                audit_source,
                http,
                agent,
                timeouts=ScenarioTimeouts(agent=30, barrier=10, ready=3),
            ),
        )
    assert agent.calls == 0
    assert execution.fault == (FAULT_PROVISIONING if how == "pods never run" else FAULT_SYMPTOM_MISSING)
    assert execution.verdict == "PROVIDER_FAILURE"
    assert execution.record.score is None
