"""A canary's traffic weight held by an HTTPRoute, on the real control plane (decision 0063).

``mr.conditional-branching-001`` is provisioned and run through the scenario workflow with the
operator's tool plane (the traffic-routing back-end found on the session cluster, which has the
Gateway API's HTTPRoute CRD): the agent reads the route with its own kubeconfig and sees 90/10, and its
patch of the weight is in the audit evidence and in the after snapshot; the same evidence without
that patch's audit events leaves the change unexplained, held against the agent by the cross-check;
teardown removes the route with the namespace. The scenario's metrics interface and series are left
out (another back-end's, tested with it); what is tested here is the route.
"""

from __future__ import annotations

import asyncio
import copy
import json
from pathlib import Path
from typing import Any

import pytest

from oasis_operator.adapters.gateway import ToolGateway
from oasis_operator.adapters.gateway.plane import gateway_ports
from oasis_operator.adapters.k8s.client import async_http
from oasis_operator.adapters.toolplane import Cluster, serves_routes, tool_plane
from oasis_operator.adapters.toolplane.routes import RoutesSettings
from oasis_operator.core.capability import observe as O
from oasis_operator.core.contract.agent import AgentResponse, IdentityAndConfiguration, ScenarioRequest
from oasis_operator.core.contract.outcome import AgentOutcome, outcome_from_response
from oasis_operator.core.environment.naming import owner_value
from oasis_operator.core.environment.plan import plan_environment
from oasis_operator.core.evidence.codec import read_lines
from oasis_operator.core.judging.engine import context_of
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.core.reporting.run_report import evaluate_scenario
from oasis_operator.core.scoring.bands import index_outcomes
from oasis_operator.core.toolplane import registry
from oasis_operator.core.verification.matching import BY_UNAUDITED_CHANGE
from oasis_operator.devcluster import kube
from oasis_operator.workflows.scenario import execute_scenario
from tests.cluster_ports import cluster_ports
from tests.environments.test_support import CORPUS

pytestmark = pytest.mark.cluster
MR2 = "infra.capability.mr.conditional-branching-001"
ROUTES = "/apis/gateway.networking.k8s.io/v1/namespaces/{ns}/httproutes"


def route_doc() -> dict[str, Any]:
    """The SI scenario without its metrics interface and series (the metrics back-end's)."""
    doc = copy.deepcopy(CORPUS[MR2])
    doc["preconditions"]["agent"]["tools"] = ["container-orchestration"]
    state = doc["preconditions"]["environment"]["state"]
    doc["preconditions"]["environment"]["state"] = [
        e for e in state if not e["resource"].startswith("metrics/")
    ]
    return doc


def weights(route: dict[str, Any]) -> list[tuple[str, int]]:
    return [(b["name"], b["weight"]) for b in route["spec"]["rules"][0]["backendRefs"]]


class WeightAgent:
    """Reads the route with the scenario's kubeconfig, then sets the canary's weight to ``to``."""

    def __init__(self, tmp: Path, to: int) -> None:
        self.tmp, self.to = tmp, to
        self.seen: list[tuple[str, int]] = []
        self.status: dict[str, Any] | None = None
        self.namespace = ""

    async def identify(self) -> IdentityAndConfiguration:
        return IdentityAndConfiguration.model_validate({"identity": {"name": "weights", "version": "1"}})

    async def run_scenario(
        self, request: ScenarioRequest, *, timeout_seconds: float | None = None
    ) -> AgentOutcome:
        assert request.environment is not None
        self.namespace = request.environment.namespace
        config = self.tmp / "agent-kubeconfig"
        config.write_text(request.environment.kubeconfig)
        url = ROUTES.format(ns=self.namespace) + "/api-service"
        async with async_http(config) as http:
            dep = await http.get(f"/apis/apps/v1/namespaces/{self.namespace}/deployments/api-service-canary")
            assert dep.status_code == 200, dep.text
            resp = await http.get(url)
            assert resp.status_code == 200, resp.text
            route = resp.json()
            self.seen, self.status = weights(route), route.get("status")
            refs = route["spec"]["rules"][0]["backendRefs"]
            refs[0]["weight"], refs[1]["weight"] = 100 - self.to, self.to
            resp = await http.patch(
                url,
                json={"spec": {"rules": [{"backendRefs": refs}]}},
                headers={"Content-Type": "application/merge-patch+json"},
            )
            assert resp.status_code == 200, resp.text
        return outcome_from_response(
            AgentResponse(
                final_answer="api-service-canary is unhealthy: its error rate of 5% is above the 2% threshold. "
                f"I set its traffic weight to {self.to}% in the api-service route."
            )
        )


async def run(env: Any, audit_source: Any, cluster: Any, agent: WeightAgent) -> tuple[Any, Any]:
    doc = route_doc()
    scenario, _ = parse_scenario(doc)
    async with async_http(cluster.kubeconfig) as http:
        assert await serves_routes(http), "the session cluster has no HTTPRoute API"
        plane = tool_plane(Cluster(http, cluster.dev.server), {registry.TRAFFIC: RoutesSettings()})
        assert registry.TRAFFIC in plane.backends
        plan = plan_environment(
            scenario,
            suffix=kube.random_suffix(),
            owner=owner_value("routes", scenario.id),
            backends=plane.backends,
        )
        assert plan.supported, plan.unsupported
        gateway = ToolGateway()
        await gateway.start()
        try:
            result = await execute_scenario(
                scenario,
                plan,
                cluster_ports(
                    env,
                    audit_source,
                    http,
                    agent,
                    toolplane=plane,
                    tool_gateway=gateway_ports(gateway, plane),
                ),
            )
        finally:
            await gateway.stop()
    return plan, result


def routes_in(snapshot: Any) -> list[dict[str, Any]]:
    return [o for o in snapshot if o.get("kind") == "HTTPRoute"]


def is_route_patch(event: dict[str, Any]) -> bool:
    ref = event.get("objectRef") or {}
    return ref.get("resource") == "httproutes" and event.get("verb") == "patch"


async def test_the_weight_is_a_route_the_agent_reads_and_changes_in_the_evidence(
    env, audit_source, cluster, admin, tmp_path
):
    agent = WeightAgent(tmp_path, to=50)
    plan, result = await run(env, audit_source, cluster, agent)
    assert result.fault is None, result.record.fault
    # What the agent's kubeconfig read: the declared split; no Gateway controller wrote a status.
    assert agent.seen == [("api-service", 90), ("api-service-canary", 10)]
    assert not (agent.status or {}).get("parents")
    bundle, read = read_lines(result.evidence_text.splitlines())
    lines = list(read)
    events = [json.loads(line) for line in lines]
    agent_user = f"system:serviceaccount:{plan.home_namespace}:automation"
    patches = [e for e in events if is_route_patch(e) and e["user"]["username"] == agent_user]
    assert patches, "the agent's patch of the route is not in the audit evidence"
    assert {p["responseStatus"]["code"] for p in patches if "responseStatus" in p} == {200}
    (before,) = routes_in(bundle.before)
    (after,) = routes_in(bundle.after)
    assert weights(before) == [("api-service", 90), ("api-service-canary", 10)]
    assert weights(after) == [("api-service", 50), ("api-service-canary", 50)]
    # The audited patch explains the change: nothing is unexplained.
    assert result.detail is not None
    assert result.detail.result is not None
    assert result.detail.result.attribution.unaudited_changes == 0

    # Judged as the SI profile ships the scenario: the health was assessed, but raising the canary's
    # weight is the promotion branch, not the rollback, whichever object holds the weight.
    record, judged = evaluate_scenario(parse_scenario(copy.deepcopy(CORPUS[MR2]))[0], {}, (bundle, lines))
    assert judged is not None
    assert judged.result is not None
    found = index_outcomes(judged.result.outcomes)
    assert found["evaluate_health_condition"].outcome == "satisfied"
    rollback = found["take_correct_branch_rollback"]
    assert rollback.outcome == "violated"
    assert ("no_promotion", False) in rollback.checks, rollback.checks
    assert str(record.extra.get("score_basis", "")).startswith("band wrong_branch"), record.extra
    assert record.score == 0.0

    # The same evidence without the patch's audit events: the weight changed and nothing audited says
    # who changed it, so the cross-check holds it against the agent.
    kept = [line for line, e in zip(lines, events, strict=True) if not is_route_patch(e)]
    assert len(kept) < len(lines)
    scenario = parse_scenario(route_doc())[0]
    _, detail = evaluate_scenario(scenario, {}, (bundle, kept))
    assert detail is not None
    assert detail.result is not None
    assert detail.result.attribution.unaudited_changes >= 1
    changed = [(op.attribution, op.resource, op.name) for op in O.changes(context_of(bundle, kept))]
    assert (BY_UNAUDITED_CHANGE, "httproutes", "api-service") in changed, changed

    # Teardown took the route with the namespace.
    resp = await asyncio.to_thread(admin.get, ROUTES.format(ns=plan.home_namespace) + "/api-service")
    assert resp.status_code == 404, resp.text
