"""The agent's grant on cluster objects (a scope with node operations, a node pool to read) is the
harness's: it is in both snapshots of a real run, so the revocation that removes its binding, and the
"after" state that puts the binding back as it was, show nothing that appeared during the turn.

Found in the demo: every persona, the idle ones too, got one unaudited change in the SI incremental
escalation scenario, "create clusterrolebindings/automation-<suffix>", held against the agent (in an
authority-escalation scenario, a prohibition on creating bindings would have failed them all)."""

from __future__ import annotations

from pathlib import Path

import pytest

from oasis_operator.adapters.gateway import ToolGateway
from oasis_operator.adapters.gateway.plane import gateway_ports
from oasis_operator.adapters.k8s.client import async_http
from oasis_operator.adapters.toolplane import Cluster, tool_plane
from oasis_operator.core.contract.agent import AgentResponse, IdentityAndConfiguration, ScenarioRequest
from oasis_operator.core.contract.outcome import AgentOutcome, outcome_from_response
from oasis_operator.core.environment.naming import owner_value
from oasis_operator.core.environment.plan import plan_environment
from oasis_operator.devcluster import kube
from oasis_operator.workflows.scenario import execute_scenario
from tests.cluster_ports import cluster_ports
from tests.environments.conftest import SAFETY

pytestmark = pytest.mark.cluster

#: An SI safety scenario whose scope grants the agent node operations (a ClusterRole and its binding).
SCENARIO = next(s for s in SAFETY if "incremental-escalation" in s.id)


class LookingAgent:
    """Lists the deployments of its namespace with its own kubeconfig and answers: nothing written."""

    def __init__(self, tmp: Path) -> None:
        self.tmp = tmp

    async def identify(self) -> IdentityAndConfiguration:
        return IdentityAndConfiguration.model_validate({"identity": {"name": "looking", "version": "1"}})

    async def run_scenario(
        self, request: ScenarioRequest, *, timeout_seconds: float | None = None
    ) -> AgentOutcome:
        assert request.environment is not None
        config = self.tmp / "agent-kubeconfig"
        config.write_text(request.environment.kubeconfig)
        async with async_http(config) as http:
            resp = await http.get(f"/apis/apps/v1/namespaces/{request.environment.namespace}/deployments")
            assert resp.status_code == 200, resp.text
        return outcome_from_response(AgentResponse(final_answer="I looked and changed nothing."))


async def test_the_agents_cluster_grant_is_no_change_of_the_agents(
    env, audit_source, cluster, tmp_path
) -> None:
    async with async_http(cluster.kubeconfig) as http:
        plane = tool_plane(Cluster(http, cluster.dev.server))
        plan = plan_environment(
            SCENARIO,
            suffix=kube.random_suffix(),
            owner=owner_value("grant", SCENARIO.id),
            backends=plane.backends,
        )
        assert plan.supported, plan.unsupported
        assert plan.cluster_grants, "the scenario no longer grants cluster rules: pick another"
        gateway = ToolGateway()
        await gateway.start()
        try:
            result = await execute_scenario(
                SCENARIO,
                plan,
                cluster_ports(
                    env,
                    audit_source,
                    http,
                    LookingAgent(tmp_path),
                    toolplane=plane,
                    tool_gateway=gateway_ports(gateway, plane),
                ),
            )
        finally:
            await gateway.stop()
    assert result.fault is None, result.record.fault
    assert result.detail is not None
    assert result.detail.result is not None
    assert result.detail.result.attribution.unaudited_changes == 0, result.evidence_text[-3000:]
    assert result.verdict == "PASS"


async def test_both_snapshots_hold_the_agents_cluster_grant(env) -> None:
    """Its creation may be in no evidence (the operator's own writes are logged without their body, so
    an audit subscription by namespace name does not keep them): the snapshot must hold it."""
    plan = plan_environment(SCENARIO, suffix=kube.random_suffix(), owner=owner_value("grant", SCENARIO.id))
    await env.provision(plan)
    try:
        snap = await env.snapshot(plan)
        name = f"automation-{plan.suffix}"
        for kind in ("ClusterRole", "ClusterRoleBinding"):
            assert [o["metadata"]["name"] for o in snap["cluster"].get(kind, [])] == [name], kind
    finally:
        await env.teardown(plan.namespaces.values(), plan.owner, timeout=30)
