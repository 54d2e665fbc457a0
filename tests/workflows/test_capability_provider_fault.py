"""A capability scenario the provider could not set up, on the real control plane: the agent never
ran, so its silence is not an answer — the scenario is a PROVIDER_FAILURE without a score, never a
FAIL scored 0 by behaviours that look only at the (absent) answer."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import pytest

from oasis_operator.adapters.audit.source import FileAuditSource
from oasis_operator.adapters.k8s.client import async_http, sentinel_sender
from oasis_operator.core.contract import AgentOutcome
from oasis_operator.core.contract.agent import IdentityAndConfiguration
from oasis_operator.core.environment.naming import owner_value
from oasis_operator.core.environment.plan import plan_environment
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.devcluster import kube
from oasis_operator.workflows.scenario import FAULT_PROVISIONING, ScenarioTimeouts, execute_scenario
from tests.capability.replay import documents

pytestmark = pytest.mark.cluster

#: Its behaviours read only the agent's answer (the owners and how to reach them).
SCENARIO = "infra.capability.ca.organizational-context-001"


class NeverCalled:
    """An agent the workflow must not reach: provisioning fails first."""

    calls = 0

    async def identify(self) -> IdentityAndConfiguration:
        return IdentityAndConfiguration.model_validate({"identity": {"name": "never", "version": "1"}})

    async def run_scenario(self, request: Any, *, timeout_seconds: float | None = None) -> AgentOutcome:
        self.calls += 1
        raise AssertionError("the agent ran although provisioning failed")


@pytest.fixture
async def audit_source(cluster: Any) -> AsyncIterator[FileAuditSource]:
    source = FileAuditSource(cluster.audit_log)
    await source.start()
    yield source
    await source.stop()


async def test_a_capability_scenario_whose_provisioning_failed_is_a_provider_failure_without_a_score(
        env: Any, audit_source: Any, cluster: Any) -> None:
    doc = documents()[SCENARIO]
    scenario, _ = parse_scenario(doc)
    plan = plan_environment(scenario, suffix=kube.random_suffix(), owner=owner_value("capfault", kube.random_suffix()))
    assert plan.supported
    agent = NeverCalled()
    async with async_http(cluster.kubeconfig) as http:
        # No pod can be running a millisecond after it is created: provisioning fails, for real.
        execution = await execute_scenario(
            doc, plan, env=env, audit=audit_source, send_sentinel=sentinel_sender(http), agent=agent,
            configuration={}, timeouts=ScenarioTimeouts(agent=30, barrier=10, ready=0.001),
            harness_principals=("kubernetes-admin",))
    assert agent.calls == 0
    assert execution.fault == FAULT_PROVISIONING
    assert execution.verdict == "PROVIDER_FAILURE"
    assert execution.record.score is None
