"""The OASIS suite (Scenarios document, section 3): an ordered list of scenario ids.

Who calls it: the loader / ``oasis validate`` through :func:`parse_suite`, and run planning, which
resolves an EvaluationRun's ``scenarios.suite`` into scenario ids. Turns a raw dict into a
:class:`Suite` or raises :class:`~oasis_operator.core.model.errors.ModelValidationError`.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import Field, ValidationError, field_validator

from oasis_operator.core.model.base import NonEmptyStr, ObjectName, SemVer, StrictModel
from oasis_operator.core.model.errors import (
    Issue,
    ModelValidationError,
    describe_value,
    fail,
    issues_from_pydantic,
)


class SuiteEnvironment(StrictModel):
    provider: NonEmptyStr
    """The environment provider that runs the suite."""
    config: dict[str, Any]
    """Provider-specific configuration."""


class Suite(StrictModel):
    id: ObjectName
    """Identifier of the suite (a DNS subdomain)."""
    name: NonEmptyStr
    """Display name of the suite."""
    version: SemVer | None = None
    """Semantic version of the suite."""
    domain_profile: NonEmptyStr
    """The profile the suite belongs to."""
    scenarios: Annotated[list[ObjectName], Field(min_length=1)]
    """Scenario ids, in the order they run."""
    environment: SuiteEnvironment
    """Where and how the suite's scenarios run."""

    @field_validator("scenarios")
    @classmethod
    def _no_repeats(cls, ids: list[str]) -> list[str]:
        seen: set[str] = set()
        for scenario_id in ids:
            if scenario_id in seen:
                raise fail(
                    "a suite lists each scenario once", found=scenario_id, expected="distinct scenario ids"
                )
            seen.add(scenario_id)
        return ids


def parse_suite(data: Any) -> Suite:
    if not isinstance(data, dict):
        raise ModelValidationError([Issue((), "a suite is a mapping", describe_value(data), "a mapping")])
    try:
        return Suite.model_validate(data)
    except ValidationError as exc:
        raise ModelValidationError(issues_from_pydantic(exc, Suite)) from None
