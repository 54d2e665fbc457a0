"""The ``EvaluationRun`` spec: what to evaluate, against which agent, how hard and how fast.

Who calls it: ``oasis validate`` (via :func:`parse_run_spec`), the CRD generator (this model is the
``EvaluationRun`` CRD's ``spec``), and the run workflow, which reads an :class:`EvaluationRunSpec`
from the custom resource. Raw dict -> :class:`EvaluationRunSpec` or :class:`ModelValidationError`.

Unlike ``Scenario`` and ``Profile`` (OASIS documents, snake_case as the spec writes them) this is our
own Kubernetes API, so its fields are camelCase as Kubernetes conventions ask.
"""

from __future__ import annotations

import re
from typing import Annotated, Any, Literal, Self

from pydantic import ConfigDict, Field, ValidationError, model_validator
from pydantic.alias_generators import to_camel

from oasis_operator.core.model.base import NonEmptyStr, ObjectName, StrictModel, cel
from oasis_operator.core.model.endpoint import url_problem
from oasis_operator.core.model.errors import (
    Issue,
    ModelValidationError,
    describe_value,
    fail,
    issues_from_pydantic,
)

#: A Go-style duration as Kubernetes APIs write them: ``90s``, ``10m``, ``1h30m``.
DURATION_PATTERN = r"^([0-9]+(\.[0-9]+)?(ms|s|m|h))+$"
Duration = Annotated[str, Field(pattern=DURATION_PATTERN, max_length=32)]
_DURATION_UNITS = {"ms": 0.001, "s": 1.0, "m": 60.0, "h": 3600.0}


def parse_duration(text: str | None, default: float) -> float:
    """Seconds of a :data:`Duration` (``1h30m`` is 5400.0); ``default`` for none, or for zero."""
    if not text:
        return default
    total = sum(
        float(value) * _DURATION_UNITS[unit]
        for value, unit in re.findall(r"([0-9]+(?:\.[0-9]+)?)(ms|s|m|h)", str(text))
    )
    return total or default


ReportFormat = Literal["json", "yaml", "html", "junit"]
MAX_PARALLELISM = 64
LABEL_KEY_PATTERN = r"^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$"
LabelKey = Annotated[str, Field(pattern=LABEL_KEY_PATTERN, max_length=317)]
LabelValue = Annotated[str, Field(pattern=r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$", max_length=63)]


class CamelModel(StrictModel):
    model_config = ConfigDict(
        alias_generator=to_camel, populate_by_name=True, extra="forbid", frozen=True, strict=True
    )


class ProfileRef(CamelModel):
    """The ``Profile`` object, in the run's namespace, whose scenarios are evaluated."""

    name: ObjectName
    """Name of the Profile object in the run's namespace."""


class LabelSelectorRequirement(CamelModel):
    model_config = cel(
        (
            "self.operator in ['In', 'NotIn'] ? (has(self.values) && size(self.values) > 0) : (!has(self.values) || size(self.values) == 0)",
            "In and NotIn need values; Exists and DoesNotExist take none",
        )
    )

    key: LabelKey
    """The label key the requirement applies to."""
    operator: Literal["In", "NotIn", "Exists", "DoesNotExist"]
    """How the key's value is compared: In, NotIn, Exists or DoesNotExist."""
    values: list[LabelValue] | None = None
    """Label values for In and NotIn; empty for Exists and DoesNotExist."""

    @model_validator(mode="after")
    def _values_match_operator(self) -> Self:
        if self.operator in ("In", "NotIn") and not self.values:
            raise fail(
                f"operator {self.operator} needs values",
                found_text="no values",
                expected="a non-empty values list",
            )
        if self.operator in ("Exists", "DoesNotExist") and self.values:
            raise fail(f"operator {self.operator} takes no values", found=self.values, expected="no values")
        return self


class LabelSelector(CamelModel):
    match_labels: dict[LabelKey, LabelValue] | None = None
    """Labels a Scenario must carry, each with exactly this value."""
    match_expressions: Annotated[list[LabelSelectorRequirement], Field(max_length=32)] | None = None
    """Label requirements a Scenario must meet, all of them (AND)."""


class ScenarioSelection(CamelModel):
    """Which ``Scenario`` objects of the profile run: a label selector, a suite of the profile, or both
    (both: the suite's scenarios that also match the selector, in suite order)."""

    model_config = cel(("has(self.selector) || has(self.suite)", "select scenarios by selector and/or suite"))

    selector: LabelSelector | None = None
    """Selects the profile's Scenario objects by their labels."""
    suite: ObjectName | None = None
    """Name of a suite of the referenced profile (Profile spec.suites); its scenarios run in suite
    order."""

    @model_validator(mode="after")
    def _something_selected(self) -> Self:
        if self.selector is None and self.suite is None:
            raise fail(
                "no scenario selection",
                found_text="neither selector nor suite",
                expected="selector and/or suite",
            )
        return self


class SecretKeyRef(CamelModel):
    name: ObjectName
    """Name of the Secret in the run's namespace."""
    key: NonEmptyStr | None = None
    """Key within the Secret; the whole Secret when omitted."""


class AgentSpec(CamelModel):
    """How to reach the agent under test. ``http`` adapters need an ``endpoint``."""

    model_config = cel(
        ("self.adapter != 'http' || has(self.endpoint)", "the http adapter needs endpoint"),
        ("self.adapter != 'subprocess' || has(self.command)", "the subprocess adapter needs command"),
        ("self.adapter != 'job' || has(self.image)", "the job adapter needs image"),
    )

    adapter: Literal["http", "subprocess", "job"]
    """How the operator talks to the agent: http (a running service), subprocess (a command in the
    operator's pod, when the operator allows it) or job (a container image run as a Job)."""
    endpoint: Annotated[str, Field(pattern=r"^https?://[^\s]+$", max_length=2048)] | None = None
    """Base URL of the agent's HTTP interface; required by the http adapter."""
    command: list[NonEmptyStr] | None = None
    """Command line that starts the agent; required by the subprocess adapter."""
    image: NonEmptyStr | None = None
    """Container image of the agent; required by the job adapter."""
    credentials_ref: SecretKeyRef | None = None
    """Secret with the credentials the adapter hands to the agent. The run's creator must be allowed to
    read it: the operator checks, as that user, before it reads the Secret."""

    @model_validator(mode="after")
    def _adapter_needs(self) -> Self:
        needs = {
            "http": ("endpoint", self.endpoint),
            "subprocess": ("command", self.command),
            "job": ("image", self.image),
        }
        field, value = needs[self.adapter]
        if not value:
            raise fail(f"the {self.adapter} adapter needs {field}", found_text=f"no {field}", expected=field)
        # Loopback is the operator's policy (a local operator's agents live there); the rest never is.
        if self.endpoint is not None and (why := url_problem(self.endpoint, allow_loopback=True)):
            raise fail(
                f"agent.endpoint: {why}",
                found=self.endpoint,
                expected="an http(s) base URL of the agent, not an address inside the operator (decision 0099)",
            )
        return self


class Timeouts(CamelModel):
    scenario: Duration | None = None
    """Longest time one scenario may take, as a duration such as 10m; the operator's default when
    omitted."""
    agent_response: Duration | None = None
    """Longest time to wait for one agent response, as a duration such as 90s."""
    run: Duration | None = None
    """Longest time the whole run may take, as a duration such as 1h30m; a run past it ends with
    incomplete evidence."""


def _default_formats() -> list[ReportFormat]:
    return ["json"]


class ReportOptions(CamelModel):
    formats: Annotated[list[ReportFormat], Field(min_length=1, max_length=4)] = Field(
        default_factory=_default_formats
    )
    """Formats the report is stored in: json, yaml, html and/or junit (default json)."""
    include_evidence: bool = False
    """Keep the raw evidence (ConfigMaps owned by the run) for replays and audits; by default only the
    report, with its deciding events, is kept."""


class EvaluationRunSpec(CamelModel):
    profile_ref: ProfileRef
    """The Profile whose scenarios are evaluated. Immutable."""
    scenarios: ScenarioSelection
    """Which of the profile's Scenarios run: a label selector, a suite, or both. Immutable."""
    agent: AgentSpec
    """The agent under test and how to reach it. Immutable."""
    tier: Annotated[int, Field(ge=1, le=3)]
    """Complexity tier of the evaluation (1 to 3), as the profile defines its tiers. Immutable."""
    parallelism: Annotated[int, Field(ge=1, le=MAX_PARALLELISM)] = 1
    """How many scenarios may run at the same time (default 1)."""
    timeouts: Timeouts | None = None
    """Time limits for the run, each scenario and each agent response."""
    suspend: bool = False
    """When true, no new scenario starts until it is set back to false."""
    shutdown: Literal["Graceful", "Immediate"] | None = None
    """Cancels the run. Graceful lets running scenarios finish and starts no new ones; Immediate tears
    running scenarios down at once. Once set it can only be escalated, never withdrawn."""
    report: ReportOptions | None = None
    """Which report formats are stored and whether evidence is kept."""
    incomplete: bool = False
    """Opt in to an incomplete evaluation (decision 0105). By default a run whose preflight finds a
    provider-conformance requirement of its profile unmet does not start: no scenario and no verdict file.
    When true it runs anyway; its result is labelled incomplete everywhere, makes no conformance claim and
    never opens a gate that a complete PASS opens."""
    ttl_seconds_after_finished: Annotated[int, Field(ge=0)] | None = None
    """When set, the finished run and its children are deleted this many seconds after completion."""


def parse_run_spec(data: Any) -> EvaluationRunSpec:
    if not isinstance(data, dict):
        raise ModelValidationError(
            [Issue((), "an EvaluationRun spec is a mapping", describe_value(data), "a mapping")]
        )
    try:
        return EvaluationRunSpec.model_validate(data)
    except ValidationError as exc:
        raise ModelValidationError(issues_from_pydantic(exc, EvaluationRunSpec)) from None
