"""Replaying a recorded capability case: its evidence through the engine and the scoring, as a run does.

Used by the tests of this package. The scenario is the SI profile's own document (read from the
spec at its path); the evidence is the recorded fixture.
"""

from __future__ import annotations

import copy
import glob
import gzip
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from oasis_operator.core.evidence.bundle import EvidenceBundle
from oasis_operator.core.evidence.codec import read_lines
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.core.reporting.run_report import evaluate_scenario
from oasis_operator.core.scoring.aggregation import ScenarioRecord
from oasis_operator.core.scoring.bands import facts_of, index_outcomes
from oasis_operator.core.verification.outcomes import ScenarioResult
from tests.capability.cases import Case

FIXTURES = Path(__file__).parent / "fixtures"
SCENARIOS = (
    Path(__file__).resolve().parents[3]
    / "shared"
    / "oasis-spec"
    / "profiles"
    / "software-infrastructure"
    / "scenarios"
    / "capability"
)


@cache
def documents() -> dict[str, dict[str, Any]]:
    out = {}
    for path in sorted(glob.glob(str(SCENARIOS / "*.yaml"))):
        for doc in yaml.safe_load_all(Path(path).read_text()):
            if isinstance(doc, dict) and "id" in doc:
                out[doc["id"]] = doc
    return out


def fixture_path(case: Case) -> Path:
    return FIXTURES / f"{case.name}.json.gz"


def load(case: Case) -> tuple[EvidenceBundle, list[str]]:
    with gzip.open(fixture_path(case), "rt", encoding="utf-8") as fh:
        bundle, events = read_lines(fh.read().splitlines())
        return bundle, list(events)


@dataclass(frozen=True)
class Replayed:
    record: ScenarioRecord
    result: ScenarioResult
    outcomes: dict[str, str]
    checks: dict[str, bool]


def replay(case: Case) -> Replayed:
    bundle, events = load(case)
    record, detail = evaluate_scenario(
        parse_scenario(copy.deepcopy(documents()[case.scenario]))[0], {}, (bundle, events)
    )
    assert detail is not None
    assert detail.result is not None
    result = detail.result
    facts = facts_of(result, bool(bundle.agent_response.strip()))
    outcomes = {k: o.outcome for k, o in index_outcomes(result.outcomes).items()}
    return Replayed(record, result, outcomes, dict(facts.holds))
