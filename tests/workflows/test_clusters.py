"""Where scenarios run (decision 0100): each attempt leases a cluster, runs there under its declared
names when the cluster is its alone, and gives it back; a cluster that cannot be had is the harness's
fault, never a verdict. On the fakes of ``tests/fakes.py``."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from oasis_operator.core import reasons
from oasis_operator.core.clusters import ScenarioCluster, SurvivedAttempt
from oasis_operator.core.environment.naming import Naming, owner_value, suffix_for
from oasis_operator.core.environment.plan import build_plan, operator_prompt
from oasis_operator.core.errors import TargetUnavailable
from oasis_operator.core.model.scenario import parse_scenario
from tests.fakes import HARNESS

from .world import DESTRUCTION, World, si_manifests

#: Its prompt names its namespace ("the payments namespace"): suffixed in a shared cluster.
SAFE = "infra.safety.be.zone-violation-001"


@dataclass
class FakeTargets:
    """A cluster per attempt on the world's fakes; records who leased and gave back, fails on demand."""

    world: World
    fail: bool = False
    leased: list[str] = field(default_factory=list)
    released: list[str] = field(default_factory=list)
    exact_names: bool = True
    backends: frozenset[str] = frozenset()
    #: What cut-off attempts left in their targets (the pool's kept audit logs), by owner.
    survivors: dict[str, SurvivedAttempt] = field(default_factory=dict)

    async def lease(self, owner: str) -> ScenarioCluster:
        if self.fail:
            raise TargetUnavailable("the target's API server did not become ready in 60s")
        self.leased.append(owner)
        w = self.world
        return ScenarioCluster(
            name=f"target-{len(self.leased)}",
            env=w.env,
            audit=w.audit,
            send_sentinel=w.audit.sentinel_sender(w.clock),
            harness_principals=(HARNESS,),
        )

    async def release(self, owner: str) -> None:
        self.released.append(owner)
        self.survivors.pop(owner, None)

    def survived(self, owner: str) -> SurvivedAttempt | None:
        return self.survivors.get(owner)


def _world(**kw: bool) -> tuple[World, FakeTargets]:
    world = World()
    targets = FakeTargets(world, **kw)
    world.clusters = targets
    world.install(only=[DESTRUCTION, SAFE])
    return world, targets


async def _finish(world: World) -> None:
    for _ in range(40):
        if await world.drive() != "waiting":
            return


def _declared(scenario_id: str) -> tuple[set[str], str]:
    """The scenario's declared namespaces and its operator prompt, as written in the profile."""
    spec = next(m["spec"] for m in si_manifests()[1:] if m["spec"]["id"] == scenario_id)
    scenario = parse_scenario(dict(spec))[0]
    plan = build_plan(scenario, Naming(owner=owner_value("uid", scenario_id)))
    return set(plan.namespaces), operator_prompt(scenario)


async def test_each_attempt_leases_its_own_cluster_keeps_the_declared_names_and_gives_it_back() -> None:
    world, targets = _world()
    world.submit()
    await _finish(world)
    entries = world.entries()
    assert set(entries) == {DESTRUCTION, SAFE}
    assert all(e["verdict"] in ("PASS", "FAIL") for e in entries.values()), entries
    # The preflight's lease, then one per scenario attempt: each its own, each given back.
    assert len(targets.leased) == len(set(targets.leased)) == 3
    assert sorted(targets.released) == sorted(targets.leased)
    for scenario_id, e in entries.items():
        declared, _prompt = _declared(scenario_id)
        assert set(e["namespaces"]) == declared, (scenario_id, e["namespaces"])


async def test_shared_mode_suffixes_the_same_names() -> None:
    """The control: in the one shared cluster the same scenarios get other names."""
    world = World()
    world.install(only=[DESTRUCTION, SAFE])
    world.submit()
    await _finish(world)
    for scenario_id, e in world.entries().items():
        declared, _prompt = _declared(scenario_id)
        assert e["namespaces"]
        assert not set(e["namespaces"]) & declared, e["namespaces"]


async def test_the_prompt_reaches_the_agent_as_declared() -> None:
    world, _targets = _world()
    world.submit()
    await _finish(world)
    assert sorted(r.prompt for r in world.agent.requests) == sorted(
        _declared(i)[1] for i in (DESTRUCTION, SAFE)
    )


async def test_a_target_that_cannot_be_had_is_a_provider_failure_and_stops_the_run() -> None:
    world, targets = _world(fail=True)
    world.submit()
    await _finish(world)
    status = world.status()
    assert status.get("verdict") != "PASS"
    assert targets.leased == []
    assert "no target control plane" in str(status) or reasons.FAULT_TARGET in str(status)


@pytest.mark.parametrize("fail_at", [1, 2])
async def test_a_lost_lease_in_a_scenario_is_its_provider_failure_with_the_reason(fail_at: int) -> None:
    world, targets = _world()

    original = targets.lease

    async def lease(owner: str) -> ScenarioCluster:
        if len(targets.leased) == fail_at:
            raise TargetUnavailable("the target's etcd exited")
        return await original(owner)

    targets.lease = lease  # type: ignore[method-assign]
    world.submit(parallelism=1)
    await _finish(world)
    entries = world.entries()
    failed = [e for e in entries.values() if e.get("verdict") == "PROVIDER_FAILURE"]
    assert len(failed) == 1, entries
    assert failed[0]["reason"].startswith(reasons.FAULT_TARGET), failed[0]
    assert world.status()["verdict"] != "PASS"


def test_every_si_prompt_is_kept_byte_for_byte_under_declared_names() -> None:
    """All 50 SI scenarios: under their declared names the prompt is the declared one and nothing is
    rewritten; suffixed, the prompts that name a namespace change (conformance audit, gap 8)."""
    rewritten = 0
    scenarios = [parse_scenario(dict(m["spec"]))[0] for m in si_manifests()[1:]]
    assert len(scenarios) == 50
    for scenario in scenarios:
        owner = owner_value("uid", scenario.id)
        exact = build_plan(scenario, Naming(owner=owner))
        assert exact.prompt == operator_prompt(scenario), scenario.id
        assert exact.prompt_rewrites == (), scenario.id
        suffixed = build_plan(scenario, Naming.suffixed(suffix_for(owner), owner))
        rewritten += suffixed.prompt != operator_prompt(scenario)
    assert rewritten == 8
