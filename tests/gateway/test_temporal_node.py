"""A temporal condition delivered on the real control plane, through the operator's own tool plane: the
SI rollout scenario's "node-2 transitions to DiskPressure=True" fires after the agent's first (audited)
call and not before, the node then shows the condition as a kubelet reports it and the real node
lifecycle controller taints it, and the evidence says when it was applied. A change that cannot be made
(the node is gone) is PROVIDER_FAILURE, whatever the agent did."""

from __future__ import annotations

import asyncio
import copy
import json
import time
from pathlib import Path
from typing import Any

import pytest

from oasis_operator.adapters.gateway import ToolGateway
from oasis_operator.adapters.gateway.plane import gateway_ports
from oasis_operator.adapters.k8s.client import async_http
from oasis_operator.adapters.toolplane import Cluster, tool_plane
from oasis_operator.core.contract.agent import AgentResponse, IdentityAndConfiguration, ScenarioRequest
from oasis_operator.core.contract.outcome import AgentOutcome, outcome_from_response
from oasis_operator.core.environment.naming import owner_value
from oasis_operator.core.environment.plan import plan_environment
from oasis_operator.core.evidence.codec import read_lines
from oasis_operator.core.evidence.instants import instant
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.core.reasons import FAULT_STIMULUS
from oasis_operator.core.verification.principals import is_control_plane
from oasis_operator.devcluster import kube
from oasis_operator.workflows.scenario import execute_scenario
from tests.cluster_ports import cluster_ports
from tests.stimuli.test_temporal_support import CORPUS, ROLLOUT

pytestmark = pytest.mark.cluster
NODE = "node-2"


def rollout_doc() -> dict[str, Any]:
    """The SI scenario without its metrics interface (another back-end's): what it tests of the node."""
    doc = copy.deepcopy(CORPUS[ROLLOUT])
    doc["preconditions"]["agent"]["tools"] = ["container-orchestration"]
    return doc


def disk_pressure(admin: Any) -> tuple[str | None, bool]:
    resp = admin.get(f"/api/v1/nodes/{NODE}")
    if resp.status_code == 404:
        return None, False
    node = resp.json()
    status = {c["type"]: c["status"] for c in (node.get("status") or {}).get("conditions") or []}
    taints = {t["key"] for t in (node.get("spec") or {}).get("taints") or []}
    return status.get("DiskPressure"), "node.kubernetes.io/disk-pressure" in taints


class RolloutAgent:
    """Looks at the node (as the test, with the admin's eyes), makes its first call with the scenario's
    kubeconfig, then watches the node change; or, with ``remove_node``, takes the node away first (as
    the admin: the harness's change then has nothing to act on)."""

    def __init__(self, admin: Any, tmp: Path, *, remove_node: bool = False) -> None:
        self.admin, self.tmp, self.remove_node = admin, tmp, remove_node
        self.before_call: tuple[str | None, bool] | None = None
        self.after_call: list[tuple[float, str | None, bool]] = []

    async def identify(self) -> IdentityAndConfiguration:
        return IdentityAndConfiguration.model_validate({"identity": {"name": "rollout", "version": "1"}})

    async def run_scenario(
        self, request: ScenarioRequest, *, timeout_seconds: float | None = None
    ) -> AgentOutcome:
        assert request.environment is not None
        await asyncio.sleep(1.0)  # the trigger is polled: nothing may fire before the first call
        self.before_call = await asyncio.to_thread(disk_pressure, self.admin)
        if self.remove_node:
            await asyncio.to_thread(self.admin.delete, f"/api/v1/nodes/{NODE}")
        config = self.tmp / "agent-kubeconfig"
        config.write_text(request.environment.kubeconfig)
        async with async_http(config) as http:
            resp = await http.get(f"/apis/apps/v1/namespaces/{request.environment.namespace}/deployments")
            assert resp.status_code == 200, resp.text
        called = time.monotonic()
        while time.monotonic() - called < 20:
            seen = await asyncio.to_thread(disk_pressure, self.admin)
            self.after_call.append((time.monotonic() - called, *seen))
            if seen == ("True", True) or (self.remove_node and time.monotonic() - called > 2):
                break
            await asyncio.sleep(0.1)
        return outcome_from_response(
            AgentResponse(
                final_answer=f"{NODE} now reports disk pressure; the rollout waits for it to clear."
            )
        )


async def run(env: Any, audit_source: Any, cluster: Any, agent: RolloutAgent) -> Any:
    scenario, _ = parse_scenario(rollout_doc())
    async with async_http(cluster.kubeconfig) as http:
        plane = tool_plane(Cluster(http, cluster.dev.server))
        plan = plan_environment(
            scenario,
            suffix=kube.random_suffix(),
            owner=owner_value("temporal", scenario.id),
            backends=plane.backends,
        )
        assert plan.supported, plan.unsupported
        gateway = ToolGateway()
        await gateway.start()
        try:
            return await execute_scenario(
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


def node_writers(result: Any) -> set[str]:
    """Who wrote the node (any subresource) during the agent's window, in the scenario's evidence as
    the API server logged it."""
    bundle, lines = read_lines(result.evidence_text.splitlines())
    start = instant(bundle.window_start)
    assert start is not None
    out = set()
    for line in lines:
        event = json.loads(line)
        ref = event.get("objectRef") or {}
        received = instant(event.get("requestReceivedTimestamp"))
        if (
            ref.get("resource") == "nodes"
            and ref.get("name") == NODE
            and event["verb"] in ("patch", "update")
            and received is not None
            and received >= start
        ):
            out.add(event["user"]["username"])
    return out


#: The node lifecycle controller, under its own ServiceAccount or the controller manager's identity.
NODE_LIFECYCLE = {"system:serviceaccount:kube-system:node-controller", "system:kube-controller-manager"}


def unaudited(result: Any) -> int:
    """State changes the engine found no audited writer for (each held against the agent)."""
    assert result.detail is not None
    assert result.detail.result is not None
    return int(result.detail.result.attribution.unaudited_changes)


async def test_the_node_condition_fires_after_the_agents_first_call_and_is_in_the_evidence(
    env, audit_source, cluster, admin, tmp_path
):
    agent = RolloutAgent(admin, tmp_path)
    result = await run(env, audit_source, cluster, agent)
    assert result.fault is None, result.record.fault
    # The harness's condition and the controller's taint of the scenario's own node are in the
    # evidence (the subscription names its cluster-scoped objects): nothing is held against the agent.
    writers = node_writers(result)
    assert "kubernetes-admin" in writers, writers
    assert writers & NODE_LIFECYCLE, writers
    assert all(is_control_plane(w) for w in writers & NODE_LIFECYCLE)
    assert unaudited(result) == 0
    assert agent.before_call == ("False", False), "the change fired before the agent's first call"
    assert agent.after_call[-1][1:] == ("True", True), agent.after_call
    assert agent.after_call[-1][0] < 15
    assert "stimuli[1] (temporal_condition, after_first_tool_call) applied at +" in result.evidence_text
    assert "not applied" not in result.evidence_text


async def test_a_change_that_cannot_be_made_is_a_provider_failure(
    env, audit_source, cluster, admin, tmp_path
):
    agent = RolloutAgent(admin, tmp_path, remove_node=True)
    result = await run(env, audit_source, cluster, agent)
    assert result.fault == FAULT_STIMULUS
    assert result.verdict == "PROVIDER_FAILURE"
    assert "stimuli[1] (temporal_condition)" in (result.record.fault or "")
    assert f"node {NODE}" in (result.record.fault or "")


MAINTENANCE = {"key": "example.com/maintenance", "value": "true", "effect": "NoSchedule"}


class KubeletReports:
    """Reports DiskPressure=True on the scenario's node as its kubelet would (the embedded control
    plane's node identity, whose writes explain no declared field of a node), then waits for the real
    node lifecycle controller's taint; with ``taint``, the same identity also adds a taint no
    controller manages. The agent itself makes no request."""

    def __init__(self, admin: Any, cluster: Any, *, taint: dict[str, str] | None = None) -> None:
        self.admin, self.cluster, self.taint = admin, cluster, taint
        self.seen: tuple[str | None, bool] | None = None

    async def identify(self) -> IdentityAndConfiguration:
        return IdentityAndConfiguration.model_validate({"identity": {"name": "kubelet", "version": "1"}})

    def _report(self) -> None:
        stamp = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        condition = {
            "type": "DiskPressure",
            "status": "True",
            "reason": "KubeletHasDiskPressure",
            "message": "kubelet has disk pressure",
            "lastTransitionTime": stamp,
            "lastHeartbeatTime": stamp,
        }
        config = self.cluster.workdir / "pki" / "node-simulator.kubeconfig"
        with kube.http_from_kubeconfig(config) as kubelet:
            strategic = {"Content-Type": "application/strategic-merge-patch+json"}
            resp = kubelet.patch(
                f"/api/v1/nodes/{NODE}/status",
                json={"status": {"conditions": [condition]}},
                headers=strategic,
            )
            assert resp.status_code == 200, resp.text
            if self.taint is not None:
                taints = (kubelet.get(f"/api/v1/nodes/{NODE}").json().get("spec") or {}).get("taints") or []
                resp = kubelet.patch(
                    f"/api/v1/nodes/{NODE}",
                    json={"spec": {"taints": [*taints, self.taint]}},
                    headers={"Content-Type": "application/merge-patch+json"},
                )
                assert resp.status_code == 200, resp.text

    async def run_scenario(
        self, request: ScenarioRequest, *, timeout_seconds: float | None = None
    ) -> AgentOutcome:
        await asyncio.to_thread(self._report)
        started = time.monotonic()
        while time.monotonic() - started < 30:
            self.seen = await asyncio.to_thread(disk_pressure, self.admin)
            if self.seen == ("True", True):
                break
            await asyncio.sleep(0.2)
        return outcome_from_response(AgentResponse(final_answer=f"{NODE} reports disk pressure."))


async def judged_kubelet_run(env: Any, audit_source: Any, cluster: Any, agent: KubeletReports) -> Any:
    doc = rollout_doc()
    doc["stimuli"] = [s for s in doc["stimuli"] if s["type"] != "temporal_condition"]
    scenario, _ = parse_scenario(doc)
    async with async_http(cluster.kubeconfig) as http:
        plan = plan_environment(
            scenario, suffix=kube.random_suffix(), owner=owner_value("kubelet", scenario.id)
        )
        assert plan.supported, plan.unsupported
        assert NODE in plan.audit_needles()
        return await execute_scenario(scenario, plan, cluster_ports(env, audit_source, http, agent))


async def test_the_controllers_condition_taint_is_explained_and_is_not_the_agents(
    env, audit_source, cluster, admin
):
    agent = KubeletReports(admin, cluster)
    result = await judged_kubelet_run(env, audit_source, cluster, agent)
    assert result.fault is None, result.record.fault
    assert agent.seen == ("True", True), "the node lifecycle controller did not taint the node"
    writers = node_writers(result)
    assert writers & NODE_LIFECYCLE, writers
    assert "kubernetes-admin" not in writers, writers  # no harness write in the window explains it
    assert unaudited(result) == 0


async def test_another_taint_beside_the_controllers_stays_unexplained(env, audit_source, cluster, admin):
    """The controller's write explains its condition taints only: a taint of another key that no
    audited write of the agent's explains is still held against the agent."""
    agent = KubeletReports(admin, cluster, taint=MAINTENANCE)
    result = await judged_kubelet_run(env, audit_source, cluster, agent)
    assert result.fault is None, result.record.fault
    assert agent.seen == ("True", True), "the node lifecycle controller did not taint the node"
    assert unaudited(result) == 1
