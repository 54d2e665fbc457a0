"""The red-team table itself, without a cluster: it covers every class with enough distinct
techniques, every row's scenario exists and the persona recognises its prompt, the suite's own
scenarios are valid OASIS scenarios (except the two malformed on purpose), and a plan survives the
trip through an endpoint path."""

from __future__ import annotations

import functools
from collections import Counter
from pathlib import Path

import pytest
import yaml

from oasis_operator.agents.reference.redteam.scenes import SCENES, scene_for
from oasis_operator.agents.reference.redteam.server import parse_plan, plan_path
from oasis_operator.agents.reference.redteam.techniques import (
    AGENT_FAILURE_REASONS,
    INVALID,
    RESIDUAL,
    TECHNIQUES,
    items,
)
from oasis_operator.core.environment.plan import operator_prompt, plan_environment, rewrite_prompt
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.loading.documents import validate_paths
from tests.adversarial.campaign import own_scenario_files, waves

SI_SAFETY = (
    Path(__file__).resolve().parents[2].parent
    / "shared"
    / "oasis-spec"
    / "profiles"
    / "software-infrastructure"
    / "scenarios"
    / "safety"
)


def _si_scenarios() -> dict[str, dict]:
    out = {}
    for path in sorted(SI_SAFETY.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and "id" in doc:
                out[doc["id"]] = doc
    return out


@functools.cache
def _all_scenarios() -> dict[str, dict]:
    docs = _si_scenarios()
    for sid, path in own_scenario_files().items():
        docs[sid] = yaml.safe_load(path.read_text())
    return docs


def test_the_table_has_at_least_40_distinct_techniques_covering_all_13_classes():
    ids = [t.id for t in TECHNIQUES]
    assert len(ids) == len(set(ids))
    assert len(ids) >= 40
    assert set(Counter(t.cls for t in TECHNIQUES)) == set(range(1, 14))


def test_every_row_has_a_benign_twin_and_a_named_expectation():
    for t in TECHNIQUES:
        assert t.violating, t.id
        assert t.benign, t.id
        assert t.expect_benign, t.id
        if t.expect_violating and INVALID not in t.expect_violating:
            assert t.evidence, f"{t.id}: a FAIL must say what its deciding evidence names"


@pytest.mark.parametrize("scenario", sorted({t.scenario for t in TECHNIQUES}))
def test_the_persona_recognises_the_prompt_of_every_scenario_it_attacks(scenario):
    doc = _all_scenarios()[scenario]
    model, _ = parse_scenario(doc)
    plan = plan_environment(model, suffix="x7kqz", owner="o")
    prompt, _ = rewrite_prompt(operator_prompt(model), plan.namespaces)
    found = scene_for(prompt, sorted(SCENES))
    assert found is not None, prompt
    assert found[0].scenario == scenario


def test_the_own_scenarios_are_valid_oasis_scenarios_except_the_malformed_ones():
    malformed = {t.scenario for t in TECHNIQUES if INVALID in t.expect_violating}
    for sid, path in own_scenario_files().items():
        if sid in malformed:
            continue
        result = validate_paths([path], None)
        assert not result.errors, [f.render() for f in result.errors]


def test_a_plan_survives_its_endpoint_path_and_waves_never_repeat_a_scenario():
    everything = items()
    assert parse_plan(plan_path(everything)) == everything
    for _, members in waves(everything):
        scenarios = [m.technique.scenario for m in members]
        assert len(scenarios) == len(set(scenarios))
    assert sum(len(m) for _, m in waves(everything)) == len(everything)


def test_the_readme_lists_every_technique():
    text = (Path(__file__).parent / "README.md").read_text()
    missing = [t.id for t in TECHNIQUES if f"`{t.id}`" not in text]
    assert not missing, f"tests/adversarial/README.md does not list {missing}"


def test_the_agent_failure_reasons_the_rows_expect_are_the_operators():
    from oasis_operator.core.contract.outcome import AGENT_FAILURE_REASONS as OPERATOR_REASONS

    assert set(AGENT_FAILURE_REASONS.values()) <= set(OPERATOR_REASONS)
    assert {t.benign_reason for t in TECHNIQUES if t.cls == 8} == set(AGENT_FAILURE_REASONS.values())


DECISION_0044 = (
    Path(__file__).resolve().parents[2]
    / "docs"
    / "decisions"
    / "0044-what-the-agent-can-see-of-the-harness.md"
)


def test_every_residual_row_is_a_residual_decision_0044_documents():
    text = DECISION_0044.read_text()
    residuals = text.split("## What still reveals the harness", 1)[1]
    rows = [t for t in TECHNIQUES if RESIDUAL in t.expect_violating]
    assert {t.id for t in rows} == {"harness-in-discovery", "harness-in-namespace-names"}
    for t in rows:
        assert t.residual, t.id
        assert t.residual_record, t.id
        assert f"**{t.residual_record}.**" in residuals, (
            f"{t.id}: 0044 lists no residual {t.residual_record!r}"
        )
        assert t.id in residuals, f"{t.id}: 0044 does not name the row that asserts its residual"


def test_the_readme_shows_residual_rows_as_residuals():
    text = (Path(__file__).parent / "README.md").read_text()
    for t in TECHNIQUES:
        row = next(line for line in text.splitlines() if line.startswith(f"| {t.cls} | `{t.id}` |"))
        assert row.rstrip(" |").endswith("RESIDUAL / PASS") == (RESIDUAL in t.expect_violating), row
