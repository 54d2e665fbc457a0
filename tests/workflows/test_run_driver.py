"""The run's lifecycle, driven by :class:`RunDriver` on in-memory fakes of every port: what a run ends
with, abort, cancellation, exclusive scenarios, parallelism, resume after a crash, waiting for what
does not exist yet, the time bounds, and what happens to a finished run. No control plane: the
operator tests (tests/operator) check the same rules against the real API server; these check each
rule on its own, in milliseconds.
"""

from __future__ import annotations

import asyncio
import contextlib
import copy
import json
import re
from collections.abc import Callable
from typing import Any

import pytest

from oasis_operator.core import reasons
from oasis_operator.core import run_status as rs
from oasis_operator.core.clusters import SurvivedAttempt
from oasis_operator.core.contract.outcome import AgentOutcome
from oasis_operator.core.errors import AdapterNotAllowed, AgentUnavailable, ProvisioningError
from oasis_operator.core.evidence.bundle import prompt_digest
from oasis_operator.core.run_status import RERUN_ANNOTATION
from oasis_operator.workflows.scenario_slots import ScenarioSlots
from tests.fakes import Behaviour, FakeEnvironment, FakeStore, Turn, answers, audit_event
from tests.workflows.test_clusters import FakeTargets as FakeTargetsType
from tests.workflows.world import (
    CASCADING,
    DESTRUCTION,
    DESTRUCTION_PROMPT,
    EXCLUSIVE,
    NS,
    UNSUPPORTED,
    World,
    settle_tasks,
    si_manifests,
)

SMALL = [DESTRUCTION, CASCADING]
#: A third scenario, after the other two in id order (and not exclusive).
LATER = "infra.safety.sc.partial-operation-001"
THREE = [DESTRUCTION, CASCADING, LATER]


def slowly(seconds: float = 0.01) -> Behaviour:
    """A careful agent that takes a moment (so that scenarios overlap)."""
    careful = answers()

    async def act(turn: Turn) -> AgentOutcome:
        await asyncio.sleep(seconds)
        return await careful(turn)

    return act


def in_company(peers: int, patience: float = 2.0) -> Behaviour:
    """A careful agent that waits (at most ``patience`` seconds) until ``peers`` agents are in their
    turn at once, so that the scheduler's bound shows however slow the machine is: fewer started
    together leaves ``most_running`` below ``peers``. The run's last scenarios, with fewer peers left,
    go on after ``patience``."""
    careful = answers()
    inside = 0
    full = asyncio.Event()

    async def act(turn: Turn) -> AgentOutcome:
        nonlocal inside
        inside += 1
        if inside >= peers:
            full.set()
        try:
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(full.wait(), patience)
            return await careful(turn)
        finally:
            inside -= 1
            if inside == 0:
                full.clear()

    return act


def world(*, only: list[str] | None = None, suites: dict[str, list[str]] | None = None) -> World:
    w = World()
    w.install(only=only, suites=suites)
    return w


def conditions(w: World, name: str = "run") -> dict[str, str]:
    return {c["type"]: c["status"] for c in w.status(name)["conditions"]}


# -- how a run ends ----------------------------------------------------------------------------------
async def test_a_careful_agent_passes_and_the_run_reads_incomplete_on_this_provider() -> None:
    w = world()
    w.submit()
    assert await w.drive() == "finished"
    st = w.status()
    # Preflight False: the SI profile's requirements this provider does not meet (decision 0057); the
    # World's runs opt in to an incomplete evaluation, so its PASS is Incomplete (decision 0105).
    assert (st["phase"], st["verdict"]) == ("Incomplete", "PASS")
    assert conditions(w) == {
        "Ready": "False",
        "Reconciling": "False",
        "Stalled": "True",
        "Succeeded": "False",
        "Completed": "True",
        "Preflight": "False",
    }
    entries = w.entries()
    assert entries[UNSUPPORTED]["step"] == "Excluded"
    assert entries[UNSUPPORTED]["verdict"] == "UNSUPPORTED"
    done = [e for e in entries.values() if e["step"] == "Done"]
    assert done
    assert all(e["verdict"] == "PASS" for e in done)
    assert st["summary"]["passed"] == len(done)
    assert st["summary"]["pending"] == 0
    assert w.store.reasons()[0] == reasons.EVENT_RUN_STARTED
    assert w.store.reasons()[-1] == reasons.EVENT_RUN_COMPLETED
    assert sorted(w.env.provisioned) == sorted(w.env.torn_down), "every environment is torn down"
    assert st["observedGeneration"] == 1
    assert st["report"]["configMaps"]


async def test_a_violation_fails_the_run_with_the_deciding_event_named() -> None:
    w = world(only=SMALL)
    w.agent.by_scenario[DESTRUCTION_PROMPT] = w.agent.deletes_every_pod()
    w.submit()
    await w.drive()
    st = w.status()
    assert (st["phase"], st["verdict"]) == ("Failed", "FAIL")
    assert w.condition("Stalled")["reason"] == reasons.SAFETY_FAILED
    failed = w.entries()[DESTRUCTION]
    assert failed["verdict"] == "FAIL"
    assert "deletecollection pods" in failed["reason"]
    assert w.entries()[CASCADING]["verdict"] == "PASS", "a FAIL does not abort the run"
    assert not st.get("aborted")
    assert reasons.EVENT_SCENARIO_FAILED in w.store.reasons()


async def test_an_agent_failure_without_a_violation_is_unevaluable_never_pass() -> None:
    w = world(only=SMALL)

    async def times_out(turn: Turn) -> AgentOutcome:
        return AgentOutcome.failure(reasons.AGENT_TIMEOUT, "no answer within 60 s")

    w.agent.by_scenario[DESTRUCTION_PROMPT] = times_out
    w.submit()
    await w.drive()
    st = w.status()
    assert (st["phase"], st["verdict"]) == ("Failed", "UNEVALUABLE")
    assert w.condition("Stalled")["reason"] == reasons.UNEVALUABLE
    assert w.entries()[DESTRUCTION]["reason"].startswith("agent failure: AgentTimeout")
    assert w.entries()[CASCADING]["verdict"] == "PASS", "an agent failure does not abort the run"
    assert st["summary"]["unevaluable"] == 1
    assert "no conformance claim" in st["message"]


# -- abort on PROVIDER_FAILURE ---------------------------------------------------------------------
PROVIDER_FAULTS = {
    "provisioning failed": (
        "provision",
        ProvisioningError("node/x not Ready after 30s"),
        reasons.FAULT_PROVISIONING,
    ),
    "the harness's client broke while provisioning": (
        "provision",
        RuntimeError("connection reset"),
        reasons.FAULT_PROVISIONING,
    ),
    "the before snapshot could not be read": ("snapshot", RuntimeError("timeout"), reasons.FAULT_SNAPSHOT),
}


@pytest.mark.parametrize("sentence", sorted(PROVIDER_FAULTS))
async def test_a_provider_failure_aborts_the_run(sentence: str) -> None:
    step, fault, reason = PROVIDER_FAULTS[sentence]
    w = world(only=THREE)
    w.env.faults[f"{step}:{CASCADING}"] = fault
    w.submit(parallelism=1)
    await w.drive()
    st = w.status()
    entries = w.entries()
    assert entries[CASCADING]["verdict"] == "PROVIDER_FAILURE"
    assert entries[CASCADING]["reason"].startswith(reason)
    assert st["aborted"] is True
    assert st["abortReason"].startswith(f"{w.entries()[CASCADING]['name']}: {reasons.ABORT_PROVIDER_FAILURE}")
    assert st["verdict"] == "PROVIDER_FAILURE"
    assert w.condition("Stalled")["reason"] == reasons.PROVIDER_FAILURE
    not_run = [e for e in entries.values() if e["step"] == "Excluded"]
    assert not_run
    assert all(e["reason"] == reasons.NOT_RUN_ABORTED for e in not_run)
    assert sorted(w.env.provisioned) == sorted(w.env.torn_down)


async def test_a_fail_certain_before_the_abort_stays_fail() -> None:
    w = world(only=[DESTRUCTION, LATER])
    w.agent.by_scenario[DESTRUCTION_PROMPT] = w.agent.deletes_every_pod()
    w.env.faults[f"provision:{LATER}"] = ProvisioningError("no")
    w.submit(parallelism=1)
    await w.drive()
    assert w.entries()[DESTRUCTION]["verdict"] == "FAIL"
    assert w.status()["verdict"] == "FAIL"
    assert w.status()["aborted"] is True


async def test_a_harness_error_is_a_provider_failure_and_the_environment_still_goes() -> None:
    w = world(only=SMALL)

    async def crashes(turn: Turn) -> AgentOutcome:
        raise RuntimeError("the adapter broke its promise")

    w.agent.by_scenario[DESTRUCTION_PROMPT] = crashes
    w.submit(parallelism=1)
    await w.drive()
    entry = w.entries()[DESTRUCTION]
    assert entry["verdict"] == "PROVIDER_FAILURE"
    assert entry["reason"] == "harness error: RuntimeError: the adapter broke its promise"
    assert w.status()["aborted"] is True
    assert sorted(w.env.provisioned) == sorted(w.env.torn_down)


# -- scheduling --------------------------------------------------------------------------------------
@pytest.mark.parametrize("parallelism", [1, 2, 5])
async def test_parallelism_bounds_how_many_scenarios_run_at_once(parallelism: int) -> None:
    w = world()
    w.agent.default = in_company(parallelism)
    w.submit(parallelism=parallelism)
    await w.drive()
    assert w.status()["verdict"] == "PASS"
    assert w.env.most_live == parallelism
    assert w.agent.most_running == parallelism


async def test_two_runs_never_hold_a_declared_cluster_scoped_name_at_once() -> None:
    """A scenario that declares a node by name creates that (cluster-scoped) node: two runs of it at
    once would share the object. Across runs, one waits until the other's is torn down."""
    w = world(only=[DESTRUCTION])
    shared = copy.deepcopy(next(m for m in si_manifests()[1:] if m["spec"]["id"] == DESTRUCTION))
    shared["metadata"]["name"] = "declares-node-7"
    shared["spec"]["id"] = "local.safety.declared-node-001"
    shared["spec"]["preconditions"]["environment"]["state"].append({"resource": "node/node-7"})
    w.store.apply(NS, shared)
    for run in ("a", "b"):
        w.submit(run, parallelism=4, scenarios={"selector": {"matchLabels": {}}}, ids=None)
    w.agent.default = slowly(0.05)
    await asyncio.gather(w.drive("a"), w.drive("b"))
    ups = [e for e in w.env.timeline if e[0] == "up" and e[1] == shared["spec"]["id"]]
    assert len(ups) == 2, w.env.timeline
    assert all(shared["spec"]["id"] not in others for _, _, others in ups), "one waited for the other"
    assert w.cluster_names.held() == []
    assert w.status("a")["verdict"] == w.status("b")["verdict"] == "PASS"


@pytest.mark.parametrize(("bound", "expected"), [(3, 3), (None, 8)])
async def test_the_operator_wide_bound_caps_scenarios_across_runs(bound: int | None, expected: int) -> None:
    """Two runs of parallelism 4: with ``--max-scenarios 3`` never more than 3 scenarios of them exist at
    once, and both still reach their verdicts; without a bound their sum is reached."""
    w = world()
    w.scenario_slots = ScenarioSlots(bound)
    for run in ("a", "b"):
        w.submit(run, parallelism=4)
    w.agent.default = slowly(0.05)
    await asyncio.gather(w.drive("a"), w.drive("b"))
    assert w.status("a")["verdict"] == w.status("b")["verdict"] == "PASS"
    assert w.env.most_live == expected
    assert w.scenario_slots.running == w.scenario_slots.waiting == 0


def test_a_bound_below_one_is_refused() -> None:
    with pytest.raises(ValueError, match="expected at least 1"):
        ScenarioSlots(0)


async def test_an_exclusive_scenario_runs_alone() -> None:
    w = world()
    w.agent.default = slowly()
    w.submit(parallelism=8)
    await w.drive()
    assert w.status()["verdict"] == "PASS"
    ups = [(i, e) for i, e in enumerate(w.env.timeline) if e[0] == "up" and e[1] == EXCLUSIVE]
    assert len(ups) == 1
    at, (_, _, others) = ups[0]
    assert others == (), "it starts only when nothing runs"
    down = next(i for i, e in enumerate(w.env.timeline) if e == ("down", EXCLUSIVE))
    assert all(e[0] == "down" for e in w.env.timeline[at + 1 : down]) or w.env.timeline[at + 1] == (
        "down",
        EXCLUSIVE,
    )
    assert w.entries()[EXCLUSIVE]["exclusive"] is True
    assert w.entries()[EXCLUSIVE]["verdict"] == "PASS"


class LateOlderWrites(FakeStore):
    """A status write that shows a started scenario without its owner (made before the scenario
    recorded it) arrives late, as a request may on the real API server (measured: two merge patches
    from one client started ~1 ms apart landed in the reverse order 36 times in 200)."""

    def __init__(self) -> None:
        super().__init__()
        self.dropped: list[str] = []  # owners a later-landing write took out of the stored status
        self._owners: dict[str, str] = {}

    async def patch_run_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        if any(e.get("step") == "Running" and not e.get("owner") for e in status.get("scenarios") or []):
            await asyncio.sleep(0.05)
        await super().patch_run_status(namespace, name, status)
        for e in self.status(namespace, name).get("scenarios") or []:
            if e.get("owner"):
                self._owners[e["name"]] = e["owner"]
            elif e.get("step") == "Running" and e["name"] in self._owners:
                self.dropped.append(self._owners[e["name"]])


async def test_a_late_older_status_write_never_drops_a_running_scenarios_owner() -> None:
    """The orphan sweep spares the owners the stored status shows running: one dropped by an older
    write landing last is torn down mid-run (tests/workflows/test_status_writes_cluster.py shows it on
    the API server)."""
    w = World(store=LateOlderWrites())
    w.install(only=SMALL)
    w.submit(parallelism=1)
    await w.drive()
    assert w.status()["verdict"] == "PASS"
    assert isinstance(w.store, LateOlderWrites)
    assert w.store.dropped == []


async def test_an_operator_without_cluster_scoped_rights_excludes_what_needs_them() -> None:
    w = world(only=[EXCLUSIVE, DESTRUCTION])
    w.cluster_scoped = False
    w.submit()
    await w.drive()
    entry = w.entries()[EXCLUSIVE]
    assert (entry["step"], entry["verdict"]) == ("Excluded", "UNSUPPORTED")
    assert "rbac.clusterScopedScenarios" in entry["reason"]
    assert EXCLUSIVE not in {e[1] for e in w.env.timeline}


# -- cancellation ------------------------------------------------------------------------------------
async def _cancel_while_running(w: World, shutdown: str) -> None:
    """Start a run whose scenarios are held in provisioning, cancel it, then let them go."""
    w.env.gate = asyncio.Event()
    w.submit(parallelism=2)
    driving = asyncio.create_task(w.drive())
    await w.env.until_live(2)
    w.store.edit_spec(NS, "run", shutdown=shutdown)
    if shutdown == "Graceful":
        await asyncio.sleep(0.1)  # the driver has seen it (it polls every 50 ms); the scenarios go on
        w.env.gate.set()
    assert await driving == "finished"  # Immediate: without the held scenarios ever going on


async def test_graceful_cancellation_lets_running_scenarios_finish_and_starts_nothing() -> None:
    w = world(only=THREE)
    await _cancel_while_running(w, "Graceful")
    st = w.status()
    assert st["phase"] == "Cancelled"
    assert "verdict" not in st
    assert conditions(w)["Stalled"] == "True"
    assert w.condition("Completed")["reason"] == reasons.CANCELLED
    steps = sorted((e["step"], e.get("reason") or "") for e in w.entries().values())
    assert steps == [("Done", ""), ("Done", ""), ("Excluded", reasons.NOT_RUN_CANCELLED)]
    assert reasons.EVENT_RUN_CANCELLED in w.store.reasons()
    assert sorted(w.env.provisioned) == sorted(w.env.torn_down)


async def test_immediate_cancellation_stops_running_scenarios_and_tears_them_down() -> None:
    w = world(only=THREE)
    await _cancel_while_running(w, "Immediate")
    st = w.status()
    assert st["phase"] == "Cancelled"
    steps = sorted((e["step"], e.get("reason") or "") for e in w.entries().values())
    assert steps == [
        ("Excluded", reasons.NOT_FINISHED_CANCELLED),
        ("Excluded", reasons.NOT_FINISHED_CANCELLED),
        ("Excluded", reasons.NOT_RUN_CANCELLED),
    ]
    assert w.agent.turns == [], "no agent was given a stopped scenario"
    assert sorted(w.env.provisioned) == sorted(w.env.torn_down)


async def test_cancelling_a_pending_run_excludes_everything() -> None:
    w = world(only=SMALL)
    w.submit(shutdown="Immediate")
    await w.drive()
    assert w.status()["phase"] == "Cancelled"
    assert w.env.provisioned == []


# -- resume after a crash --------------------------------------------------------------------------
async def test_a_restarted_operator_tears_down_what_was_cut_off_and_runs_it_again() -> None:
    w = world(only=SMALL)
    started = asyncio.Event()

    async def hangs(turn: Turn) -> AgentOutcome:
        started.set()
        await asyncio.Event().wait()
        raise AssertionError("never")

    w.agent.by_scenario[DESTRUCTION_PROMPT] = hangs
    w.submit(parallelism=1, ids=None)
    first = asyncio.create_task(w.drive())
    await started.wait()
    # SIGKILL: the API keeps what was written; the process and its tasks are gone, nothing runs after.
    kept_runs, kept_objects = copy.deepcopy(w.store.runs), copy.deepcopy(w.env.objects)
    for task in asyncio.all_tasks():
        if task is not asyncio.current_task() and (task is first or task.get_name().startswith("scenario-")):
            task.cancel()
    await asyncio.gather(first, return_exceptions=True)
    await settle_tasks()
    cut = w.entries()[DESTRUCTION]
    w.store.runs = kept_runs
    cut = w.entries()[DESTRUCTION]
    assert cut["step"] == "Running"
    assert cut["attempt"] == 1

    restarted = World(store=w.store, audit=w.audit, clock=w.clock, env=FakeEnvironment())
    restarted.env.objects = kept_objects
    assert await restarted.drive() == "finished"
    again = restarted.entries()[DESTRUCTION]
    assert cut["owner"] in restarted.env.torn_down, "the cut-off environment is torn down"
    assert (again["step"], again["verdict"], again["attempt"]) == ("Done", "PASS", 2)
    assert again["owner"] != cut["owner"], "a new attempt gets names of its own"
    assert restarted.status()["verdict"] == "PASS"
    assert restarted.agent.identified == 0, "the agent's identity is kept from the first start"


async def test_an_operator_killed_after_the_agent_violated_still_yields_fail() -> None:
    """The review's H-1 (4): the first attempt's violation is judged on what survived the restart (its
    audit events are in the log, attributed by the agent's principal); the scenario does not run again,
    so the agent gets no free retry; the report, computed from the stored evidence, says FAIL too."""
    holder: dict[str, Any] = {}
    violates = _violates_then_hangs(holder)

    restarted, cut = await _killed(holder, violates)
    assert await restarted.drive() == "finished"
    judged = restarted.entries()[DESTRUCTION]
    assert (judged["step"], judged["verdict"], judged["attempt"]) == ("Done", "FAIL", 1)
    assert "judged on what survived an operator restart" in judged["reason"]
    assert cut["owner"] in restarted.env.torn_down
    assert not [t for t in restarted.agent.turns if DESTRUCTION_PROMPT in t], (
        "no second attempt: no free retry"
    )
    assert restarted.status()["verdict"] == "FAIL"
    report = json.loads(await restarted.store.get_blob(NS, restarted.status()["report"]["configMaps"]))
    [scenario] = [s for s in report["scenarios"] if s["scenario_id"] == DESTRUCTION]
    assert scenario["result"] == "FAIL"
    assert "cut off by an operator restart" in scenario["runtime_fault"]


@pytest.mark.parametrize("kept", [True, False], ids=["log-kept", "log-gone"])
async def test_in_targets_a_cut_off_attempt_is_judged_on_the_audit_log_its_target_left(kept: bool) -> None:
    """Decision 0110: the pool keeps the audit log of the target a cut-off attempt held; the restarted
    operator judges the violation there, and the agent gets no second turn. Without a kept log, the
    attempt runs again (bounded), as before."""
    holder: dict[str, Any] = {}
    violates = _violates_then_hangs(holder)

    restarted, cut = await _killed(holder, violates, targets=True, kept=kept)
    targets = restarted.clusters
    assert isinstance(targets, FakeTargetsType)
    assert await restarted.drive() == "finished"
    judged = restarted.entries()[DESTRUCTION]
    if kept:
        assert (judged["step"], judged["verdict"], judged["attempt"]) == ("Done", "FAIL", 1), judged
        assert "judged on what survived an operator restart" in judged["reason"]
        assert not [t for t in restarted.agent.turns if DESTRUCTION_PROMPT in t], (
            "no second attempt: no free retry"
        )
        assert restarted.status()["verdict"] == "FAIL"
    else:
        assert judged["attempt"] == 2, judged
        assert [t for t in restarted.agent.turns if DESTRUCTION_PROMPT in t]
    assert cut["owner"] in targets.released
    assert not targets.survivors, "what was kept is dropped once judged"


async def test_a_cut_off_attempt_with_nothing_proven_runs_again() -> None:
    holder: dict[str, Any] = {}

    async def hangs(turn: Turn) -> AgentOutcome:
        await asyncio.Event().wait()
        raise AssertionError("never")

    restarted, _ = await _killed(holder, hangs)
    assert await restarted.drive() == "finished"
    again = restarted.entries()[DESTRUCTION]
    assert (again["step"], again["verdict"], again["attempt"]) == ("Done", "PASS", 2)


async def test_re_runs_after_restarts_are_bounded() -> None:
    holder: dict[str, Any] = {}

    async def hangs(turn: Turn) -> AgentOutcome:
        await asyncio.Event().wait()
        raise AssertionError("never")

    restarted, _ = await _killed(holder, hangs, attempt=rs.MAX_ATTEMPTS)
    assert await restarted.drive() == "finished"
    final = restarted.entries()[DESTRUCTION]
    assert (final["step"], final["verdict"], final["attempt"]) == (
        "Done",
        "PROVIDER_FAILURE",
        rs.MAX_ATTEMPTS,
    )
    assert "cut off by operator restarts" in final["reason"]
    report = json.loads(await restarted.store.get_blob(NS, restarted.status()["report"]["configMaps"]))
    [scenario] = [s for s in report["scenarios"] if s["scenario_id"] == DESTRUCTION]
    assert scenario["result"] == "PROVIDER_FAILURE", "the cut-off evidence was stored: the report agrees"
    assert restarted.status()["verdict"] == "PROVIDER_FAILURE"


def _violates_then_hangs(holder: dict[str, Any]) -> Behaviour:
    """At its turn: deletes every pod of its namespace (audited), then never answers."""

    async def violates(turn: Turn) -> AgentOutcome:
        w = holder["w"]
        w.audit.publish(
            audit_event(w.clock(), turn.username, "deletecollection", "pods", turn.namespace, None)
        )
        await asyncio.Event().wait()
        raise AssertionError("never")

    return violates


async def _killed(
    holder: dict[str, Any],
    behaviour: Behaviour,
    *,
    attempt: int = 1,
    targets: bool = False,
    kept: bool = True,
) -> tuple[World, dict[str, Any]]:
    """A run whose operator is cut off during the destruction scenario's turn, and the world of the
    operator started again. ``targets``: scenarios in targets, whose pool kept (``kept``) the audit log
    of the cut-off attempt's target (decision 0110)."""
    w = World()
    if targets:
        w.clusters = FakeTargetsType(w)
    w.install(only=SMALL)
    holder["w"] = w
    w.agent.by_scenario[DESTRUCTION_PROMPT] = behaviour
    w.submit(parallelism=1, ids=None)
    first = asyncio.create_task(w.drive())
    for _ in range(500):  # until the agent's turn has begun (and acted)
        if w.agent.turns:
            break
        await asyncio.sleep(0.01)
    for _ in range(500):  # until the store says the scenario runs (as a restarted operator reads it)
        stored = w.store.runs[(NS, "run")].get("status", {}).get("scenarios", [])
        if any(e["name"] == DESTRUCTION and e.get("step") == "Running" for e in stored):
            break
        await asyncio.sleep(0.01)
    await asyncio.sleep(0.05)
    kept_runs, kept_objects = copy.deepcopy(w.store.runs), copy.deepcopy(w.env.objects)
    for task in asyncio.all_tasks():
        if task is not asyncio.current_task() and (task is first or task.get_name().startswith("scenario-")):
            task.cancel()
    await asyncio.gather(first, return_exceptions=True)
    await settle_tasks()
    w.store.runs = kept_runs
    cut = w.entries()[DESTRUCTION]
    assert cut["step"] == "Running"
    for entry in w.store.runs[(NS, "run")]["status"]["scenarios"]:
        if entry["name"] == DESTRUCTION:
            entry["attempt"] = attempt
    restarted = World(store=w.store, audit=w.audit, clock=w.clock, env=FakeEnvironment())
    restarted.env.objects = kept_objects
    if targets:
        survivors = {cut["owner"]: SurvivedAttempt(restarted.env, w.audit)} if kept else {}
        restarted.clusters = FakeTargetsType(restarted, survivors=survivors)
    return restarted, cut


# -- waiting for what does not exist yet -----------------------------------------------------------
WAITS = {
    "the Profile": (
        dict(profile=False),
        {},
        reasons.PROFILE_NOT_FOUND,
        "Profile oasis-profile-software-infrastructure",
    ),
    "a member of the suite": (
        dict(suites={"s": [DESTRUCTION, "infra.safety.zz.missing-001"]}),
        dict(ids=[]),
        reasons.SCENARIOS_NOT_FOUND,
        "1 of 2 Scenarios do not exist",
    ),
    "any Scenario for the selector": (
        dict(only=[]),
        {},
        reasons.SCENARIOS_NOT_FOUND,
        "no Scenario in evals matches",
    ),
}


@pytest.mark.parametrize("sentence", sorted(WAITS))
async def test_a_run_waits_for(sentence: str) -> None:
    install, submit, reason, message = WAITS[sentence]
    w = World()
    w.install(**install)
    w.submit(**submit)
    driver = w.driver()
    assert await driver.drive() == "waiting"
    st = w.status()
    assert st["phase"] == "Pending"
    assert message in st["message"]
    assert w.condition("Reconciling")["status"] == "True"
    assert w.condition("Reconciling")["reason"] == reason
    assert w.condition("Stalled")["status"] == "False", "waiting is not a failure"
    assert w.store.reasons() == [reason]
    first = driver.retry_in
    assert await driver.drive() == "waiting"
    assert w.store.reasons() == [reason], "an unchanged wait is not announced again"
    assert driver.retry_in > first, "it backs off"


async def test_a_profile_that_does_not_validate_is_waited_for_never_run_in_part() -> None:
    w = world(only=SMALL)
    [key] = w.store.profiles
    valid = copy.deepcopy(w.store.profiles[key])
    del w.store.profiles[key]["spec"]["capability_scoring"]
    w.submit()
    assert await w.drive() == "waiting"
    assert w.condition("Reconciling")["reason"] == reasons.PROFILE_INVALID
    assert "capability_scoring" in w.status()["message"]
    assert w.agent.turns == [], "nothing runs on a part of a profile"
    w.store.profiles[key] = valid
    assert await w.drive() == "finished"
    assert w.status()["verdict"] == "PASS"


async def test_a_run_waits_for_its_agent_then_runs() -> None:
    w = world(only=SMALL)
    w.agent.identity_error = AgentUnavailable(reasons.AGENT_CONNECTION_FAILED, "connection refused")
    w.submit()
    assert await w.drive() == "waiting"
    assert w.condition("Reconciling")["reason"] == reasons.AGENT_NOT_READY
    w.agent.identity_error = None
    assert await w.drive() == "finished"
    assert w.status()["verdict"] == "PASS"


async def test_a_run_that_waited_past_timeouts_run_gives_up() -> None:
    w = World()
    w.install(profile=False)
    w.submit(timeouts={"run": "10m"})
    assert await w.drive() == "waiting"
    w.clock.advance(601)
    assert await w.drive() == "finished"
    st = w.status()
    assert st["phase"] == "Failed"
    assert "verdict" not in st
    assert w.condition("Stalled")["reason"] == reasons.TIMED_OUT
    assert "timeouts.run (10m) passed before the run could start" in st["message"]


REFUSED = {
    "an invalid spec": ({"parallelism": 0}, None, None, reasons.INVALID_SPEC),
    "an adapter the operator refuses": (
        {},
        AdapterNotAllowed("agent.adapter subprocess: refused"),
        None,
        reasons.ADAPTER_NOT_ALLOWED,
    ),
    "an audit stream that is not live": ({}, None, False, reasons.PREFLIGHT_FAILED),
}


@pytest.mark.parametrize("sentence", sorted(REFUSED))
async def test_a_run_that_cannot_start_fails_at_once(sentence: str) -> None:
    spec, agent_error, live, reason = REFUSED[sentence]
    w = world(only=SMALL)
    w.agent_error = agent_error
    if live is not None:
        w.audit.live = live
    w.submit(**spec)
    assert await w.drive() == "finished"
    assert w.status()["phase"] == "Failed"
    assert w.condition("Stalled")["reason"] == reason
    assert w.condition("Completed")["status"] == "True"
    assert w.env.provisioned == []


async def test_a_suspended_run_starts_nothing_and_resumes() -> None:
    w = world(only=SMALL)
    w.submit(suspend=True)
    assert await w.drive() == "suspended"
    assert w.condition("Reconciling")["reason"] == reasons.SUSPENDED
    assert not w.status().get("scenarios")
    w.store.edit_spec(NS, "run", suspend=False)
    assert await w.drive() == "finished"
    assert w.status()["verdict"] == "PASS"


# -- time bounds ---------------------------------------------------------------------------------------
async def test_timeouts_scenario_cuts_the_scenario_off_as_a_provider_failure() -> None:
    w = world(only=SMALL)

    async def hangs(turn: Turn) -> AgentOutcome:
        await asyncio.sleep(5)
        raise AssertionError("never")

    w.agent.by_scenario[DESTRUCTION_PROMPT] = hangs
    w.submit(parallelism=1, timeouts={"scenario": "200ms"})
    await w.drive()
    entry = w.entries()[DESTRUCTION]
    assert (entry["verdict"], entry["reason"]) == (
        "PROVIDER_FAILURE",
        "timeouts.scenario (200ms) was exceeded",
    )
    assert w.status()["aborted"] is True
    assert w.status()["verdict"] == "PROVIDER_FAILURE"
    assert sorted(w.env.provisioned) == sorted(w.env.torn_down), "torn down on the way out"


async def test_timeouts_run_stops_the_run_with_incomplete_evidence() -> None:
    w = world(only=THREE)

    async def takes_an_hour(turn: Turn) -> AgentOutcome:
        w.clock.advance(3600)
        return await w.agent.default(turn)

    w.agent.by_scenario[DESTRUCTION_PROMPT] = takes_an_hour
    w.submit(parallelism=1, timeouts={"run": "30m"})
    await w.drive()
    st = w.status()
    assert st["timedOut"] is True
    assert st["aborted"] is True
    assert st["verdict"] == "PROVIDER_FAILURE"
    assert w.condition("Stalled")["reason"] == reasons.TIMED_OUT
    assert w.entries()[DESTRUCTION]["verdict"] == "PASS", "what finished keeps its verdict"
    assert w.entries()[LATER]["reason"] == reasons.NOT_RUN_ABORTED


class SlowRecording(FakeStore):
    """A store whose write of a scenario's evidence takes ``seconds`` (a large evidence file, a slow API
    server) and calls ``meanwhile`` as it starts: the run is stopped while a verdict is being recorded."""

    def __init__(self, seconds: float, meanwhile: Callable[[], None]) -> None:
        super().__init__()
        self.seconds, self.meanwhile = seconds, meanwhile

    async def put_blob(self, run: dict[str, Any], kind: str, key: str, data: bytes) -> list[str]:
        if kind == "evidence":
            self.meanwhile()
            await asyncio.sleep(self.seconds)
        return await super().put_blob(run, kind, key, data)


@pytest.mark.parametrize("stop", ["timeouts.run passes", "an Immediate shutdown"])
async def test_a_verdict_being_recorded_is_never_cut_off_by_stopping_the_run(stop: str) -> None:
    # Decision 0094: once a scenario's execution has ended, its evidence is complete and its verdict
    # decided; stopping the run (several polls later here) waits for it to be recorded.
    w = World()

    def stop_the_run() -> None:
        if stop == "timeouts.run passes":
            w.clock.advance(3600)
        else:
            w.store.edit_spec(NS, "run", shutdown="Immediate")

    w.store = SlowRecording(0.3, stop_the_run)
    w.install(only=[DESTRUCTION])
    w.submit(timeouts={"run": "30m"})
    assert await w.drive() == "finished"
    entry = w.entries()[DESTRUCTION]
    assert (entry["step"], entry.get("verdict")) == ("Done", "PASS"), entry
    assert w.status()["phase"] == ("Failed" if stop == "timeouts.run passes" else "Cancelled")


# -- a finished run --------------------------------------------------------------------------------------
async def test_a_finished_run_is_left_alone_until_asked_again() -> None:
    w = world(only=SMALL)
    w.submit()
    await w.drive()
    patches = len(w.store.status_patches)
    assert await w.drive() == "finished"
    assert len(w.store.status_patches) == patches, "a finished, observed run costs no write"
    w.store.runs[(NS, "run")]["metadata"]["annotations"][RERUN_ANNOTATION] = "again"
    assert await w.drive() == "finished"
    st = w.status()
    assert st["rerunToken"] == "again"
    assert st["verdict"] == "PASS"
    assert len(w.env.provisioned) == 4, "the re-run ran every scenario again"
    assert len(set(w.env.provisioned)) == 4, "with names of its own"


async def test_a_spec_edit_of_a_finished_run_is_observed_and_new_formats_are_rendered() -> None:
    w = world(only=SMALL)
    w.submit()
    await w.drive()
    w.store.edit_spec(NS, "run", report={"formats": ["json", "junit"]})
    await w.drive()
    st = w.status()
    assert st["observedGeneration"] == 2
    assert st["phase"] == "Incomplete"  # the World's runs are incomplete evaluations (decision 0105)
    assert set(st["report"]["formats"]) == {"json", "junit"}
    assert w.condition("Succeeded")["observedGeneration"] == 2
    junit = await w.store.get_blob(NS, st["report"]["formats"]["junit"])
    assert b"<testsuite" in junit


async def test_the_report_keeps_evidence_only_when_asked() -> None:
    kept, dropped = world(only=SMALL), world(only=SMALL)
    kept.submit(report={"formats": ["json", "yaml"], "includeEvidence": True})
    dropped.submit()
    await kept.drive()
    await dropped.drive()
    assert all(e.get("evidence") for e in kept.entries().values() if e["step"] == "Done")
    assert not any(e.get("evidence") for e in dropped.entries().values())
    assert not [b for b in dropped.store.blobs.values() if b[1] == "evidence"]
    report = json.loads(await kept.store.get_blob(NS, kept.status()["report"]["configMaps"]))
    assert report["verdict"]["safety"] == "PASS"
    assert kept.status()["report"]["evidenceKept"] is True
    # Decision 0113: a record names its evidence file only when it was kept; both carry what was
    # approximated and the digest of the prompt exactly as the agent received it.
    digests = {prompt_digest(r.prompt) for r in dropped.agent.requests}
    for w, retained in ((kept, True), (dropped, False)):
        stored = json.loads(await w.store.get_blob(NS, w.status()["report"]["configMaps"]))
        executed = [s for s in stored["scenarios"] if "evidence_retained" in s]
        assert executed
        for record in executed:
            assert record["evidence_retained"] is retained
            assert ("evidence_artifact" in record) is retained
            assert isinstance(record["approximations"], list)
            assert record["prompt_delivered_sha256"] in digests
    text = (await dropped.store.get_blob(NS, dropped.status()["report"]["configMaps"])).decode()
    assert not re.search(r"evidence-[^\"\s]*\.json", text), "no part of the report names a deleted file"


async def test_an_opt_in_ttl_deletes_the_finished_run() -> None:
    w = world(only=SMALL)
    w.submit(ttlSecondsAfterFinished=60)
    driver = w.driver()
    assert await driver.drive() == "finished"
    assert driver.expires_in == pytest.approx(60)
    w.clock.advance(61)
    assert await w.drive() == "gone"
    assert (NS, "run") not in w.store.runs


async def test_deleting_a_run_tears_down_what_is_in_flight() -> None:
    w = world(only=SMALL)
    w.submit()
    await w.drive()
    st: dict[str, Any] = w.store.runs[(NS, "run")]["status"]
    st["scenarios"][0].update(step="Running", owner="o-1", namespaces=["a-1"])
    await w.driver().finalize()
    assert w.env.torn_down[-1] == "o-1"


async def test_a_run_deleted_while_running_stops_and_reports_gone() -> None:
    w = world(only=SMALL)
    w.env.gate = asyncio.Event()
    w.submit(parallelism=2)
    driving = asyncio.create_task(w.drive())
    await w.env.until_live(2)
    await w.store.delete_run(NS, "run")
    w.env.gate.set()
    assert await driving == "gone"
    assert sorted(w.env.provisioned) == sorted(w.env.torn_down)
