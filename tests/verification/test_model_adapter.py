"""The engine consumes the issue-3 scenario model: a validated model compiles to the same plan as
the document it came from."""

from __future__ import annotations

from typing import Any

import pytest

from oasis_operator.core.judging.plan import PlanError, compile_plan, scenario_model
from oasis_operator.core.model.scenario import Scenario, parse_scenario
from tests.verification.test_checks import corpus


def plan_or_issues(scenario: Any) -> Any:
    try:
        model = scenario if isinstance(scenario, Scenario) else scenario_model(scenario)
        return [(c.source, c.text) for c in compile_plan(model).checks]
    except PlanError as exc:
        return [(i.path, i.reason) for i in exc.issues]


@pytest.mark.parametrize("doc", corpus(), ids=lambda d: d["id"])
def test_a_validated_model_compiles_like_its_document(doc: dict[str, Any]) -> None:
    model, _ = parse_scenario(doc)
    assert plan_or_issues(model) == plan_or_issues(doc)
