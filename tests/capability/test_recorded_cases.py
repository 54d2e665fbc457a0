"""The recorded capability cases (cases.py): each fixture, recorded from the real control plane by
tools/record_capability_fixtures.py, replayed through the engine and the scoring as a run does."""

from __future__ import annotations

import json
from collections import defaultdict

import pytest

from oasis_operator.cli.main import main
from oasis_operator.core.scoring.bands import TABLES
from tests.capability.cases import CASES, Case
from tests.capability.replay import SCENARIOS, documents, fixture_path, replay

RECORDED = [c for c in CASES if fixture_path(c).exists()]


def _behaviours(scenario_id: str) -> list[str]:
    must = (documents()[scenario_id].get("assertions") or {}).get("must") or []
    return [m["behavior"] for m in must if isinstance(m, dict) and "behavior" in m]


def test_every_case_has_its_recorded_fixture() -> None:
    missing = [c.name for c in CASES if not fixture_path(c).exists()]
    assert missing == []


@pytest.mark.parametrize("case", RECORDED, ids=lambda c: c.name)
def test_a_recorded_case_reaches_the_outcomes_band_and_score_it_was_recorded_for(case: Case) -> None:
    got = replay(case)
    for key, want in case.expect.items():
        assert got.outcomes.get(key) == want, f"{case.about}: {key} {got.outcomes.get(key)!r}, want {want!r}"
    basis = str(got.record.extra.get("score_basis", ""))
    if case.band:  # a band-table row ("band <name>: ...") or a Form B template row ("<name>")
        assert basis.startswith((f"band {case.band}:", case.band)), f"{case.about}: {basis!r}"
    if case.score is None:
        assert got.record.score is None or not case.band
    else:
        assert got.record.score == pytest.approx(case.score, abs=1e-6), f"{case.about}: {basis!r}"


def test_each_behaviour_of_a_recorded_scenario_has_an_exhibiting_and_a_non_exhibiting_case() -> None:
    seen: dict[str, set[str]] = defaultdict(set)
    for case in RECORDED:
        outcomes = replay(case).outcomes
        for behaviour in _behaviours(case.scenario):
            if behaviour in outcomes:
                seen[behaviour].add(outcomes[behaviour])
    scenarios = {c.scenario for c in RECORDED}
    wanted = {b for s in scenarios for b in _behaviours(s)}
    lacking = sorted(b for b in wanted if not {"satisfied", "violated"} <= seen[b])
    assert lacking == []


def test_every_scenario_of_the_profile_has_recorded_cases() -> None:
    assert {c.scenario for c in RECORDED} == set(documents())
    assert len(documents()) == 29


def test_every_band_of_a_band_table_is_reached_by_a_recorded_case() -> None:
    reached: dict[str, set[str]] = defaultdict(set)
    for case in RECORDED:
        basis = str(replay(case).record.extra.get("score_basis", ""))
        if basis.startswith("band "):
            reached[case.scenario].add(basis.removeprefix("band ").partition(":")[0])
    unreached = sorted(
        f"{sid}: {row.band}"
        for sid, table in TABLES.items()
        for row in table.rows
        if row.band not in reached[sid]
    )
    assert unreached == [], "\n".join(unreached)


@pytest.mark.parametrize("case", RECORDED[:: max(1, len(RECORDED) // 12)], ids=lambda c: c.name)
def test_the_same_evidence_gives_byte_identical_scores(case: Case) -> None:
    first, second = replay(case), replay(case)
    render = [
        json.dumps(
            {"record": repr(r.record), "score": r.record.score, "result": r.result.to_dict()}, sort_keys=True
        )
        for r in (first, second)
    ]
    assert render[0] == render[1]


def _evaluate(case: Case, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    path = next(p for p in sorted(SCENARIOS.glob("*.yaml")) if f"id: {case.scenario}" in p.read_text())
    code = main(
        ["evaluate", "--scenario", str(path), "--id", case.scenario, "--evidence", str(fixture_path(case))]
    )
    return code, capsys.readouterr().out


@pytest.mark.parametrize("case", [c for c in RECORDED if c.score is not None][::7], ids=lambda c: c.name)
def test_oasis_evaluate_replays_a_recorded_case_to_its_score_byte_for_byte(
    case: Case, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out = _evaluate(case, capsys)
    again = _evaluate(case, capsys)
    assert (code, out) == again
    printed = json.loads(out)
    assert printed["score"] == pytest.approx(case.score, abs=1e-6)
    assert printed["score_basis"].startswith((f"band {case.band}:", case.band))
