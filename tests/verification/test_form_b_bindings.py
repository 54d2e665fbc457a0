"""Form B bindings the scorer cannot score are refused before any evidence is judged (issue 32's
replay findings): an unregistered band template, a missing role, a channel beyond the template's, a
factor naming no deviation. The SI profile's own C-DA-001 binding passes; each broken copy of it is
refused by ``oasis evaluate`` (exit 2, the documented input-error code) naming the file and field,
never with a traceback."""

from __future__ import annotations

import copy
import gzip
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import yaml

from oasis_operator.cli.main import main
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.core.scoring.primitives import TEMPLATES
from oasis_operator.core.scoring.templates import SHAPES, binding_problems
from oasis_operator.core.toolplane import registry
from oasis_operator.core.triage import triage
from oasis_operator.core.verdicts import Exclusion
from tests.capability.cases import CASES, DA1
from tests.capability.replay import documents, fixture_path

ALL_BACKENDS = frozenset(registry.DESCRIPTIONS)

#: sentence -> how the SI binding is broken -> the field path the error names.
BROKEN: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "an unregistered band template": (
        lambda s: s.update(archetype_template="C-DA-009"),
        "scoring.archetype_template: no band template is registered under this id (found 'C-DA-009'",
    ),
    "a missing role": (
        lambda s: s.pop("step_budget"),
        "scoring.step_budget: template 'C-DA-001' needs this role",
    ),
    "a channel other than agent_response": (
        lambda s: s.update(channels=["agent_response", "reasoning_trace"]),
        "scoring.channels.1: a binding must not widen the template's channels (§2.5) (found 'reasoning_trace'",
    ),
    "a factor.ref naming no deviation": (
        lambda s: s["factor"].update(ref="nope"),
        "scoring.factor.ref: the factor names no injection deviation (found 'nope'; expected one of ['f1'])",
    ),
}


def si_binding() -> dict[str, Any]:
    return copy.deepcopy(documents()[DA1])


def test_every_registered_template_has_its_shape() -> None:
    assert set(SHAPES) == set(TEMPLATES)


def test_the_si_binding_and_every_si_scenario_are_scorable() -> None:
    assert len(documents()) == 29
    for doc in documents().values():
        scenario, _ = parse_scenario(copy.deepcopy(doc))
        assert binding_problems(scenario) == [], scenario.id


@pytest.mark.parametrize("sentence", sorted(BROKEN))
def test_a_broken_binding_is_refused_naming_the_file_and_field(
    sentence: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    breaking, named = BROKEN[sentence]
    doc = si_binding()
    breaking(doc["scoring"])
    scenario_file = tmp_path / "scenario.yaml"
    scenario_file.write_text(yaml.safe_dump(doc))
    case = next(c for c in CASES if c.scenario == DA1)
    evidence = tmp_path / "evidence.json"
    with gzip.open(fixture_path(case), "rt", encoding="utf-8") as fh:
        evidence.write_text(fh.read())
    code = main(["evaluate", "--scenario", str(scenario_file), "--evidence", str(evidence)])
    err = capsys.readouterr().err
    assert code == 2, err
    assert str(scenario_file) in err
    assert named in err
    assert "Traceback" not in err


def test_a_run_directory_with_an_unregistered_template_is_an_input_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    doc = si_binding()
    doc["scoring"]["archetype_template"] = "C-DA-009"
    (tmp_path / "scenarios.yaml").write_text(yaml.safe_dump(doc))
    (tmp_path / "run.json").write_text(json.dumps({"scenario_files": ["scenarios.yaml"]}))
    assert main(["evaluate", "--run-dir", str(tmp_path)]) == 2
    err = capsys.readouterr().err
    assert "scenarios.yaml" in err
    assert "scoring.archetype_template" in err


def test_a_run_never_starts_a_scenario_it_could_not_score() -> None:
    """The operator's triage: the SI binding runs; a broken copy is INVALID with the field named."""
    scenario, _ = parse_scenario(si_binding())
    assert triage(scenario, {}, backends=ALL_BACKENDS).exclusion is None
    doc = si_binding()
    doc["scoring"].pop("step_budget")
    broken, _ = parse_scenario(doc)
    decided = triage(broken, {}, backends=ALL_BACKENDS)
    assert decided.exclusion == Exclusion.INVALID
    assert "scoring.step_budget" in decided.reason
