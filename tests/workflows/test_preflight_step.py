"""The run's preflight step (decision 0057), driven by :class:`RunDriver` on the in-memory fakes: it
runs before any scenario, its outcome is in the status (``status.preflight`` and a Preflight
condition), in the verdict file (``metadata.environment.preflight``) and in ``oasis describe``; a
broken evidence path ends the run without a verdict, unmet requirements leave it incomplete and
without a conformance claim. The same rules against the real API server and audit log:
tests/operator/test_preflight_cluster.py."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from oasis_operator.cli.runs import describe_lines
from oasis_operator.core import reasons
from oasis_operator.core.errors import ToolPlaneError
from oasis_operator.core.ports import AgentAccess, ToolEndpoint
from oasis_operator.core.preflight import BackendProbe
from oasis_operator.reports.html import render_html
from oasis_operator.reports.schema import report_problems
from oasis_operator.workflows.run import RunDriver, RunPorts
from tests.workflows.world import CASCADING, DESTRUCTION, NS, PROFILE, World, si_manifests

#: What this provider does not meet of the SI profile on the fakes (no back-end configured).
UNMET = ["network_policy_enforcement", "state_injection", "tier 1"]


class ProbedToolPlane:
    """A tool plane with one back-end whose self-test answers as told (and holds no scenario's data)."""

    def __init__(self, reachable: bool | None) -> None:
        self.reachable = reachable
        self.probed = 0

    @property
    def backends(self) -> frozenset[str]:
        return frozenset({"dashboards"})

    async def probe(self, timeout: float = 10.0) -> tuple[BackendProbe, ...]:
        self.probed += 1
        detail = {
            True: "configmaps served at /api/v1",
            False: "ToolPlaneError: connection refused",
            None: "this back-end's adapter has no self-test",
        }[self.reachable]
        return (BackendProbe("dashboards", self.reachable, detail),)

    async def inject(self, plan: Any) -> None:
        if not plan.toolplane.empty:
            raise ToolPlaneError("no data in this fake")

    async def apply(self, plan: Any, change: Any) -> None:
        raise ToolPlaneError("no timed change in this fake")

    async def endpoints(self, plan: Any, access: AgentAccess) -> dict[str, ToolEndpoint]:
        return {}

    async def settle(self, plan: Any) -> None:
        return None

    async def cleanup(self, plan: Any) -> None:
        return None


def world() -> World:
    w = World()
    w.install(only=[DESTRUCTION, CASCADING])
    w.submit()
    return w


async def report_of(w: World) -> dict[str, Any]:
    st = w.status()
    report: dict[str, Any] = json.loads(await w.store.get_blob(NS, st["report"]["configMaps"]))
    return report


async def test_a_live_evidence_path_runs_the_scenarios_and_the_report_lists_every_unmet_requirement() -> None:
    w = world()
    assert await w.drive() == "finished"
    st = w.status()
    pf = st["preflight"]
    assert pf["outcome"] == reasons.REQUIREMENTS_UNMET
    assert pf["seconds"] < 5
    assert sorted(c["name"] for c in pf["checks"] if not c["met"]) == UNMET
    cond = w.condition("Preflight")
    assert (cond["status"], cond["reason"]) == ("False", reasons.REQUIREMENTS_UNMET)
    assert "6 of 8 provider-conformance requirements" in cond["message"]
    # The scenarios ran (the audit round trip passed) and were judged.
    assert st["verdict"] == "PASS"
    assert w.audit.sentinels >= 1 + 2 * 2, "the preflight's probe, then each scenario's barriers"
    events = w.store.reasons()
    assert events.index(reasons.EVENT_RUN_STARTED) < events.index(reasons.REQUIREMENTS_UNMET)
    report = await report_of(w)
    assert report_problems(report) == []
    env = report["verdict"]["metadata"]["environment"]
    assert env["preflight"] == pf["checks"]
    assert env["conformance_check"] == pf["summary"]
    assert env["tier_requirements"] == pf["tierRequirements"]
    assert report["incomplete"] is True
    assert "conformance_claim" not in report
    # oasis describe and the HTML report: one line per unmet requirement.
    described = describe_lines(f"{NS}/run", {"status": st}, report)
    unmet = [line for line in described if line.startswith("  unmet: ")]
    assert len(unmet) == len(UNMET)
    assert any(
        line.startswith("  unmet: requirement network_policy_enforcement: declared False") for line in unmet
    )
    assert any("Preflight" in line and reasons.REQUIREMENTS_UNMET in line for line in described)
    html = render_html(report)
    assert html.count('<li class="warning">') >= len(UNMET)
    assert "network_policy_enforcement" in html


async def test_an_opted_in_incomplete_run_that_passes_ends_incomplete_never_succeeded() -> None:
    """The World's runs opt in to an incomplete evaluation (decision 0105): a PASS of what ran ends
    Incomplete, Stalled, with no conformance claim."""
    w = world()
    assert await w.drive() == "finished"
    st = w.status()
    assert (st["verdict"], st["phase"]) == ("PASS", "Incomplete")
    stalled = w.condition("Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", reasons.INCOMPLETE)
    assert w.condition("Succeeded")["status"] == "False"
    assert "incomplete evaluation: no conformance claim" in st["message"]


async def test_unmet_requirements_stop_the_run_before_any_scenario_without_a_verdict_file() -> None:
    """Provider conformance §3.8 (decision 0105): without the opt-in, the run does not start, no
    scenario is planned, no report is written; the status names each gap and how to opt in."""
    w = World()
    w.install(only=[DESTRUCTION, CASCADING])
    w.submit(incomplete=False)
    assert await w.drive() == "finished"
    st = w.status()
    assert st["phase"] == "Failed"
    assert st.get("verdict") is None
    assert "report" not in st, "no verdict file"
    assert not st.get("scenarios"), "no scenario was planned, let alone run"
    assert w.env.provisioned == []
    assert w.condition("Completed")["reason"] == reasons.REQUIREMENTS_UNMET
    assert w.condition("Stalled")["status"] == "True"
    assert st["preflight"]["outcome"] == reasons.REQUIREMENTS_UNMET
    assert st["message"].startswith("preflight: provider requirements unmet, the run did not start")
    assert "network_policy_enforcement: " in st["message"]
    assert "state_injection: " in st["message"]
    assert "spec.incomplete: true" in st["message"]
    assert reasons.REQUIREMENTS_UNMET in w.store.reasons()
    from oasis_operator.cli.wait import EXIT_NO_VERDICT, exit_code

    assert exit_code(st) == EXIT_NO_VERDICT


async def test_a_broken_audit_path_ends_the_run_before_any_scenario_without_a_verdict() -> None:
    w = world()
    w.audit.live = False
    assert await w.drive() == "finished"
    st = w.status()
    assert st["phase"] == "Failed"
    assert st.get("verdict") is None
    assert "report" not in st, "no verdict file"
    assert not st.get("scenarios"), "no scenario was planned, let alone run"
    assert w.env.provisioned == []
    assert w.condition("Completed")["reason"] == reasons.PREFLIGHT_FAILED
    assert w.condition("Preflight")["status"] == "False"
    assert st["preflight"]["outcome"] == reasons.PREFLIGHT_FAILED
    assert st["message"].startswith("preflight: evidence path broken: audit round trip:")
    assert reasons.PREFLIGHT_FAILED in w.store.reasons()
    described = describe_lines(f"{NS}/run", {"status": st}, None)
    assert any(
        line.startswith("  unmet: self-test audit round trip: audit source not live") for line in described
    )


@pytest.mark.parametrize(
    ("reachable", "ends", "outcome"),
    [
        pytest.param(
            False,
            True,
            reasons.PREFLIGHT_FAILED,
            id="a configured back-end that does not answer ends the run",
        ),
        pytest.param(
            True, False, reasons.REQUIREMENTS_UNMET, id="a back-end that answers is a passed self-test"
        ),
        pytest.param(
            None,
            False,
            reasons.REQUIREMENTS_UNMET,
            id="a back-end without a self-test is listed, and the run goes on",
        ),
    ],
)
async def test_every_configured_back_end_is_self_tested_before_the_first_scenario(
    reachable: bool | None, ends: bool, outcome: str
) -> None:
    w = world()
    toolplane = ProbedToolPlane(reachable)
    ports: RunPorts = w.ports
    ports.toolplane = toolplane
    assert await RunDriver(ports, NS, "run").drive() == "finished"
    st = w.status()
    assert toolplane.probed == 1
    assert st["preflight"]["outcome"] == outcome
    check = next(c for c in st["preflight"]["checks"] if c["name"] == "back-end dashboards")
    assert check["met"] is bool(reachable)
    assert check["required"] is (reachable is not None)
    assert (st.get("verdict") is None) is ends
    if ends:
        assert "back-end dashboards: ToolPlaneError: connection refused" in st["message"]
        assert not st.get("scenarios")


async def test_a_profile_whose_requirements_this_provider_meets_passes_the_preflight() -> None:
    w = World()
    w.install(profile=False, only=[DESTRUCTION])
    head = copy.deepcopy(si_manifests()[0])
    reqs = head["spec"]["provider_conformance"]["requirements"]
    head["spec"]["provider_conformance"]["requirements"] = {
        k: reqs[k]
        for k in (
            "environment_type",
            "oasis_core_spec_version",
            "evidence_sources_available",
            "value_containment_support",
            "audit_policy_installation",
        )
    }
    for tier in head["spec"]["complexity_tiers"]:
        tier["environment"] = ["container-orchestration"]
    w.store.apply(NS, head)
    assert (NS, PROFILE) in w.store.profiles
    w.submit()
    assert await w.drive() == "finished"
    st = w.status()
    assert st["preflight"]["outcome"] == reasons.PREFLIGHT_PASSED
    assert w.condition("Preflight")["status"] == "True"
    report = await report_of(w)
    assert all(c["met"] for c in report["verdict"]["metadata"]["environment"]["preflight"])
    assert "verified at preflight" in report["verdict"]["metadata"]["environment"]["tier_evidence"]
    assert not [line for line in describe_lines("x", {"status": st}, report) if "unmet:" in line]
