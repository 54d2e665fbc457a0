"""The band templates this implementation registers, and what a Form B binding must supply to be
scored by one.

Called by ``oasis evaluate`` (a scenario file or a run directory, read without its profile) before
any evidence is judged, so that a binding the scorer would silently read with defaults (no step
budget, a widened channel list, a factor naming nothing) is refused with its field path instead.
With the profile at hand, :func:`oasis_operator.core.model.profile.check_scenario` checks the
binding against the profile's own template; this check is the scorer's side of the same contract
(scoring decomposition §1.4: an implementation implements the registry once; §2.5: diagnosis
bindings match ``agent_response`` only; §5.1: the roles of C-DA-001). Pure: takes a scenario,
returns the problems.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

from oasis_operator.core.model.scenario import BindingScoring, Scenario
from oasis_operator.core.scoring.primitives import TEMPLATES

__all__ = ["SHAPES", "BindingProblem", "TemplateShape", "binding_problems"]


@dataclass(frozen=True, slots=True)
class TemplateShape:
    """What a registered template reads from a binding."""

    #: Every role the binding must supply (the scorer has no meaningful default for any).
    roles: tuple[str, ...]
    #: The role holding the factor: a mapping whose ``ref`` names one of ``injection.deviations``.
    factor: str
    #: The output channels a binding may name; a binding MUST NOT widen them (§2.5).
    channels: tuple[str, ...]


#: One shape per template of :data:`~oasis_operator.core.scoring.primitives.TEMPLATES` (a test keeps
#: the two in step).
SHAPES: Final[Mapping[str, TemplateShape]] = {
    "C-DA-001": TemplateShape(
        roles=("factor", "subsystem_set", "channels", "step_budget", "exclude_tool_echo"),
        factor="factor",
        channels=("agent_response",),
    ),
}


@dataclass(frozen=True, slots=True)
class BindingProblem:
    path: tuple[str | int, ...]
    message: str
    found: str
    expected: str

    def render(self) -> str:
        field = ".".join(str(p) for p in self.path)
        return f"{field}: {self.message} (found {self.found}; expected {self.expected})"


def binding_problems(scenario: Scenario) -> list[BindingProblem]:
    """Why this implementation cannot score ``scenario``'s Form B binding; empty for Form A."""
    scoring = scenario.scoring
    if not isinstance(scoring, BindingScoring):
        return []
    shape = SHAPES.get(scoring.archetype_template)
    if shape is None or scoring.archetype_template not in TEMPLATES:
        return [
            BindingProblem(
                ("scoring", "archetype_template"),
                "no band template is registered under this id",
                repr(scoring.archetype_template),
                f"one of {sorted(TEMPLATES)}",
            )
        ]
    bindings = scoring.bindings()
    problems = [
        BindingProblem(
            ("scoring", role),
            f"template {scoring.archetype_template!r} needs this role",
            "nothing",
            "a value (scoring decomposition §5)",
        )
        for role in shape.roles
        if role not in bindings
    ]
    problems += _channel_problems(shape, bindings.get("channels"))
    deviations = {d.id for d in scenario.injection.deviations} if scenario.injection else set()
    problems += _factor_problems(shape, bindings.get(shape.factor), deviations)
    return problems


def _channel_problems(shape: TemplateShape, channels: Any) -> list[BindingProblem]:
    if channels is None:
        return []
    if not isinstance(channels, list) or not channels:
        return [
            BindingProblem(
                ("scoring", "channels"), "not a channel list", repr(channels), repr(list(shape.channels))
            )
        ]
    return [
        BindingProblem(
            ("scoring", "channels", i),
            "a binding must not widen the template's channels (§2.5)",
            repr(channel),
            f"one of {list(shape.channels)}",
        )
        for i, channel in enumerate(channels)
        if channel not in shape.channels
    ]


def _factor_problems(shape: TemplateShape, factor: Any, deviations: set[str]) -> list[BindingProblem]:
    if factor is None:
        return []
    ref = factor.get("ref") if isinstance(factor, Mapping) else None
    if ref in deviations:
        return []
    return [
        BindingProblem(
            ("scoring", shape.factor, "ref"),
            "the factor names no injection deviation",
            repr(ref),
            f"one of {sorted(deviations)}" if deviations else "an id of injection.deviations (none declared)",
        )
    ]
