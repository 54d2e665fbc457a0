"""The tool plane in a scenario's steps (in-memory fakes): injected before the turn, settled after it,
cleaned up always; a tool-plane fault is a PROVIDER_FAILURE naming it, never a turn without the data."""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from oasis_operator.core import reasons
from oasis_operator.core.environment.plan import EnvironmentPlan
from oasis_operator.core.errors import ToolPlaneError
from oasis_operator.core.evidence.codec import read_lines
from oasis_operator.core.ports import AgentAccess, NoToolPlane, ToolEndpoint
from oasis_operator.core.toolplane.plan import GitOpsApp, LogLine, TimedChange, ToolPlanePlan, WorkloadLogs
from oasis_operator.workflows.scenario import ScenarioExecution, ScenarioTimeouts, execute_scenario
from tests.workflows.test_scenario_steps import DOC, SCENARIO, plan_of
from tests.workflows.world import World

LOGS = WorkloadLogs("logs/web", "default-bcdfg", "web", (("app", "web"),), None, (LogLine(-3.0, "hello"),))


class FakeToolPlane:
    backends = frozenset({"logs"})

    def __init__(self, faults: dict[str, BaseException] | None = None) -> None:
        self.faults = faults or {}
        self.calls: list[str] = []

    def _step(self, name: str) -> None:
        self.calls.append(name)
        if name in self.faults:
            raise self.faults[name]

    async def inject(self, plan: EnvironmentPlan) -> None:
        self._step("inject")

    async def apply(self, plan: EnvironmentPlan, change: TimedChange) -> None:
        self._step(f"apply@{change.at:g}")

    async def endpoints(self, plan: EnvironmentPlan, access: AgentAccess) -> dict[str, ToolEndpoint]:
        return {}

    async def settle(self, plan: EnvironmentPlan) -> None:
        self._step("settle")

    async def cleanup(self, plan: EnvironmentPlan) -> None:
        self._step("cleanup")


def with_toolplane(part: ToolPlanePlan) -> EnvironmentPlan:
    return dataclasses.replace(plan_of(DOC), toolplane=part)


async def execute(w: World, toolplane: Any, plan: EnvironmentPlan | None = None) -> ScenarioExecution:
    return await execute_scenario(
        SCENARIO,
        plan or with_toolplane(ToolPlanePlan(backends=frozenset({"logs"}), logs=(LOGS,))),
        w.scenario_ports(toolplane=toolplane),
    )


async def test_without_a_fault_the_tool_plane_is_injected_settled_and_cleaned_up_in_order() -> None:
    w, tp = World(), FakeToolPlane()
    execution = await execute(w, tp)
    assert execution.fault is None
    assert execution.verdict == "PASS"
    assert tp.calls == ["inject", "settle", "cleanup"]


#: sentence -> (the failing step, whether the agent got its turn)
FAULTS: dict[str, tuple[str, bool]] = {
    "an injection that cannot be verified: the agent never runs": ("inject", False),
    "a settle that fails after the turn (a credential not revoked, a controller not caught up)": (
        "settle",
        True,
    ),
}


@pytest.mark.parametrize("sentence", sorted(FAULTS))
async def test_a_tool_plane_fault_is_a_provider_failure_and_cleanup_still_runs(sentence: str) -> None:
    step, turn = FAULTS[sentence]
    w, tp = World(), FakeToolPlane({step: ToolPlaneError(f"{step} broke")})
    execution = await execute(w, tp)
    assert execution.fault == reasons.FAULT_TOOLPLANE
    assert execution.verdict == "PROVIDER_FAILURE"
    assert execution.record.fault is not None
    assert f"{step} broke" in execution.record.fault
    assert bool(w.agent.turns) is turn
    assert tp.calls[-1] == "cleanup"


async def test_an_operator_without_a_tool_plane_refuses_a_plan_that_needs_one() -> None:
    w = World()
    execution = await execute(w, NoToolPlane())
    assert execution.fault == reasons.FAULT_TOOLPLANE
    assert w.agent.turns == []


async def test_a_timed_change_the_agent_outruns_is_a_fault_not_a_pass() -> None:
    w, tp = World(), FakeToolPlane()
    change = TimedChange(at=60.0, backend="logs", logs=LOGS)
    plan = with_toolplane(ToolPlanePlan(backends=frozenset({"logs"}), logs=(LOGS,), schedule=(change,)))
    execution = await execute(w, tp, plan)
    assert execution.fault == reasons.FAULT_TOOLPLANE
    assert "apply@60" not in tp.calls


async def test_a_timed_change_is_applied_during_the_turn() -> None:
    w, tp = World(), FakeToolPlane()
    change = TimedChange(at=0.0, backend="logs", logs=LOGS)
    plan = with_toolplane(ToolPlanePlan(backends=frozenset({"logs"}), logs=(LOGS,), schedule=(change,)))
    execution = await execute(w, tp, plan)
    assert "apply@0" in tp.calls
    assert execution.fault is None


# -- a GitOps application: settled before the turn, read again when caught mid-reconcile (decision 0069) ----


def flux_objects(namespace: str, ready: str) -> list[dict[str, Any]]:
    revision = "main@sha1:" + "e" * 40
    condition = {
        "type": "Ready",
        "status": ready,
        "reason": "Progressing" if ready == "Unknown" else "Applied",
    }
    return [
        {
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
            "kind": "Kustomization",
            "metadata": {"name": "app", "namespace": namespace},
            "spec": {"sourceRef": {"kind": "GitRepository", "name": "app"}},
            "status": {
                "conditions": [condition],
                "lastAppliedRevision": revision,
                "lastAttemptedRevision": revision,
            },
        },
        {
            "apiVersion": "source.toolkit.fluxcd.io/v1",
            "kind": "GitRepository",
            "metadata": {"name": "app", "namespace": namespace},
            "status": {
                "conditions": [{"type": "Ready", "status": "True"}],
                "artifact": {"revision": revision},
            },
        },
    ]


class FakeGitOps(FakeToolPlane):
    """Puts a Kustomization in the fake cluster whose Ready condition reads, snapshot after snapshot,
    as ``readings`` says (the last one stays)."""

    backends = frozenset({"gitops"})

    def __init__(self, w: World, readings: list[str]) -> None:
        super().__init__()
        self.w, self.readings, self.read = w, readings, 0
        snapshot = w.env.snapshot

        async def reading(plan: EnvironmentPlan) -> dict[str, Any]:
            ready = self.readings[min(self.read, len(self.readings) - 1)]
            self.read += 1
            kept = [o for o in w.env.objects.get(plan.owner, []) if "fluxcd" not in o["apiVersion"]]
            w.env.objects[plan.owner] = kept + flux_objects(plan.home_namespace, ready)
            return await snapshot(plan)

        w.env.snapshot = reading  # type: ignore[method-assign]


def gitops_plan() -> EnvironmentPlan:
    plan = plan_of(DOC)
    app = GitOpsApp("gitops-application/app", "app", plan.home_namespace, "infra", ".", ())
    return dataclasses.replace(plan, toolplane=ToolPlanePlan(backends=frozenset({"gitops"}), gitops=(app,)))


async def test_an_application_never_settled_before_the_turn_is_a_provider_failure_and_the_agent_never_runs() -> (
    None
):
    w = World()
    tp = FakeGitOps(w, ["Unknown"])
    execution = await execute_scenario(
        SCENARIO,
        gitops_plan(),
        w.scenario_ports(toolplane=tp, timeouts=ScenarioTimeouts(agent=5, barrier=0.2, ready=1.5)),
    )
    assert execution.fault == reasons.FAULT_TOOLPLANE
    assert execution.verdict == "PROVIDER_FAILURE"
    assert "not settled before the turn" in (execution.record.fault or "")
    assert "Ready=Unknown Progressing" in (execution.record.fault or "")
    assert w.agent.turns == []
    assert tp.read >= 2  # read again before giving up


@pytest.mark.parametrize(
    ("readings", "before", "after"),
    [
        (["Unknown", "True"], "True", "True"),  # the before snapshot waits for the reconcile to end
        (["True", "Unknown", "True"], "True", "True"),  # so does the after snapshot
        (["True", "False"], "True", "False"),  # a failed reconcile is not read again: it is judged
    ],
    ids=["before-waits", "after-waits", "after-failure-kept"],
)
async def test_a_reconcile_in_progress_is_read_again(readings: list[str], before: str, after: str) -> None:
    w = World()
    tp = FakeGitOps(w, readings)
    execution = await execute_scenario(
        SCENARIO,
        gitops_plan(),
        w.scenario_ports(toolplane=tp, timeouts=ScenarioTimeouts(agent=5, barrier=0.2, ready=5)),
    )
    assert execution.fault is None, execution.record.fault
    assert w.agent.turns
    bundle, _ = read_lines(execution.evidence_text.splitlines())

    def ready(objects: Any) -> str:
        [k] = [o for o in objects if o["kind"] == "Kustomization"]
        return str(k["status"]["conditions"][0]["status"])

    assert (ready(bundle.before), ready(bundle.after)) == (before, after)
