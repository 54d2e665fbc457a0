"""An agent that produces nothing earns no capability point anywhere (issue 32, decision 0113): a reading
that rests on an absence of agent output never scores. Replayed on every SI capability scenario, with
the loaders the recorded-case replays use: the recorded evidence of each scenario as a silent agent
would have left it (it answered, but said nothing, called nothing and changed nothing; the harness's
own audit entries and snapshots kept).
"""

from __future__ import annotations

import dataclasses
import json
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from oasis_operator.core.contract.outcome import AgentOutcomeStatus, RecordedOutcome
from oasis_operator.core.evidence.bundle import EvidenceBundle
from oasis_operator.core.model.scenario import Scenario
from oasis_operator.core.reporting.run_report import evaluate_scenario
from oasis_operator.core.reporting.verdict_object import build_report
from tests.capability.cases import CASES
from tests.capability.replay import fixture_path, load
from tests.capability.test_agent_failure_replay import RUN, capability_scenarios, safety_passes, si

ANSWERED = RecordedOutcome(AgentOutcomeStatus.ANSWERED)
#: What a silent agent may still say: nothing, or only blanks.
BLANK = st.sampled_from(["", " ", "\n", "\t \n"])


def _user(line: str) -> str:
    event: dict[str, Any] = json.loads(line)
    return str((event.get("user") or {}).get("username", ""))


def silent(scenario_id: str, answer: str = "", reasoning: str = "") -> tuple[EvidenceBundle, list[str]]:
    """A recorded case of the scenario with everything the agent did taken out."""
    case = next(c for c in CASES if c.scenario == scenario_id and fixture_path(c).exists())
    bundle, events = load(case)
    agent = set(bundle.agent_principals)
    quiet = dataclasses.replace(
        bundle,
        agent_response=answer,
        reasoning_trace=reasoning,
        tool_calls=(),
        tool_records=(),
        after=bundle.before,
        agent_outcome=ANSWERED,
        temporal_applied=(),
    )
    return quiet, [e for e in events if _user(e) not in agent]


def test_every_si_capability_scenario_has_a_recorded_case_to_silence() -> None:
    assert len(capability_scenarios()) == 29
    for scenario in capability_scenarios():
        assert any(c.scenario == scenario.id and fixture_path(c).exists() for c in CASES), scenario.id


@settings(max_examples=60, deadline=None)
@given(
    scenario=st.sampled_from(capability_scenarios()),
    answer=BLANK,
    reasoning=BLANK,
)
def test_a_silent_agent_scores_no_capability_point_on_any_si_scenario(
    scenario: Scenario, answer: str, reasoning: str
) -> None:
    record, _ = evaluate_scenario(scenario, {}, silent(scenario.id, answer, reasoning))
    assert not record.score, (scenario.id, record.score, record.extra.get("score_basis"))


def test_a_silent_agent_scores_zero_in_every_category_and_dimension() -> None:
    profile, _ = si()
    records = [evaluate_scenario(s, {}, silent(s.id))[0] for s in capability_scenarios()]
    assert {s.scenario_id: s.score for s in records if s.score} == {}
    report = build_report(
        RUN,
        [*safety_passes(), *records],
        {},
        profile.capability_scoring,
        sorted({s.category for s in si()[1] if s.classification == "safety"}),
    )
    capability = report["verdict"]["capability"]
    assert all(not v["score"] for v in capability["domain_categories"].values())
    assert all(not (v["score"] if isinstance(v, dict) else v) for v in capability["core_dimensions"].values())


def test_the_tamper_resistance_reading_needs_an_operation_of_the_agents_own() -> None:
    """C-AU-005 follows the profile: immutability is checked after the agent performed an operation, so a
    silent agent does not exhibit it (it once scored 1.0, at weight 2.0 in its category)."""
    scenario = next(s for s in capability_scenarios() if s.archetype == "C-AU-005")
    record, detail = evaluate_scenario(scenario, {}, silent(scenario.id, "Done."))
    assert detail is not None
    assert detail.result is not None
    (immutable,) = [o for o in detail.result.outcomes if "audit_trail_is_immutable" in o.text]
    assert immutable.outcome != "satisfied"
    assert "no operation of its own" in immutable.detail
    assert record.score == 0.0
