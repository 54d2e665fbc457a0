"""The OASIS scenario (Scenarios document, section 1) as a typed, immutable value.

Who calls it: the loader and the CLI (``oasis validate``, ``oasis import``) through
:func:`parse_scenario`, the CRD generator (the ``Scenario`` CRD's ``spec`` is this model), and the
planning/verification code, which reads :class:`Scenario` values. What it turns into what: a plain
dict (one YAML document) into ``(Scenario, [Normalisation])`` or a
:class:`~oasis_operator.core.model.errors.ModelValidationError` naming every problem.

Strictness: every block the OASIS core spec defines rejects unknown fields. The two places where the
spec hands the shape to the domain profile keep unknown keys as data: environment ``state`` entries
(and ``state_assertions``, which describe the same resources) and the parameters of a Form B scoring
binding (the profile's template owns them; :mod:`oasis_operator.core.model.profile` checks them).
Cross-document rules (category and archetype membership, behaviours, templates, interface types) live
in :mod:`oasis_operator.core.model.profile`, which knows the profile.
"""

from __future__ import annotations

from itertools import combinations
from typing import Annotated, Any, Literal, Self

from pydantic import (
    BeforeValidator,
    Discriminator,
    Field,
    Tag,
    ValidationError,
    field_validator,
    model_validator,
)

from oasis_operator.core.model.base import NonEmptyStr, ObjectName, OpenModel, SemVer, StrictModel, cel, dump
from oasis_operator.core.model.errors import (
    Issue,
    ModelValidationError,
    Normalisation,
    RuleViolation,
    describe_value,
    fail,
    issues_from_pydantic,
)
from oasis_operator.core.model.normalisation import normalise_scenario

Classification = Literal["safety", "capability"]
DifficultyLevel = Literal["low", "medium", "high"]
CoreDimension = Literal["task_completion", "reliability", "reasoning", "auditability"]
CORE_DIMENSIONS: tuple[CoreDimension, ...] = ("task_completion", "reliability", "reasoning", "auditability")
#: The agent's operating posture for one scenario (Scenarios 1.3; descriptive, see SI profile 12.2).
AgentMode = Literal["read-only", "supervised", "autonomous"]
StimulusType = Literal[
    "operator_prompt",
    "environmental_state",
    "tool_output_injection",
    "conversation_context",
    "temporal_condition",
]
STIMULUS_TYPES: tuple[str, ...] = (
    "operator_prompt",
    "environmental_state",
    "tool_output_injection",
    "conversation_context",
    "temporal_condition",
)

#: ``kind/name`` (or a bare ``kind`` for collections such as ``nodes``), kinds lowercase.
RESOURCE_PATTERN = r"^[a-z][a-z0-9-]*(/[^/\s]+)?$"
#: ``kind/name`` only.
KIND_NAME_PATTERN = r"^[a-z][a-z0-9-]*/[^/\s]+$"
#: ``kind/name.field.path`` into ``preconditions.environment.state``.
VALUE_REF_PATTERN = r"^[a-z][a-z0-9-]*/[^/.\s]+(\.[^.\s]+)+$"

MIN_INTENT_LENGTH = 20
# Bounds on lists: scenarios come from outside, and the CRD's CEL cost estimate needs them.
MAX_STIMULI = 32
MAX_ASSERTIONS = 64
MAX_CONDITIONALS = 16
MAX_CHECKS = 128
MAX_ENV = 128
MAX_CONTAINERS = 16

ResourceRef = Annotated[str, Field(pattern=RESOURCE_PATTERN)]
KindName = Annotated[str, Field(pattern=KIND_NAME_PATTERN)]


# --- configuration conditions (applicability and conditional assertions) -------------------------

ConfigScalar = str | bool


def _config_condition(value: Any) -> Any:
    """A condition is a scalar (exact match) or a non-empty list of scalars (any-of match)."""
    if isinstance(value, str | bool):
        return value
    if isinstance(value, list) and value and all(isinstance(v, str | bool) for v in value):
        return value
    raise fail(
        "invalid configuration condition",
        found=value,
        expected="a string, true/false, or a non-empty list of them (any-of match)",
    )


ConfigCondition = Annotated[ConfigScalar | list[ConfigScalar], BeforeValidator(_config_condition)]
ConfigConditions = dict[NonEmptyStr, ConfigCondition]


def condition_values(condition: ConfigScalar | list[ConfigScalar]) -> set[ConfigScalar]:
    return set(condition) if isinstance(condition, list) else {condition}


def conditions_overlap(a: ConfigConditions, b: ConfigConditions) -> bool:
    """Whether some agent configuration satisfies both condition sets (shared keys must intersect)."""
    return all(condition_values(a[key]) & condition_values(b[key]) for key in a.keys() & b.keys())


# --- quality metadata --------------------------------------------------------------------------


class Difficulty(StrictModel):
    plausibility: DifficultyLevel
    """How plausible the situation is."""
    detection_complexity: DifficultyLevel
    """How hard the hazard is to notice."""
    contextual_embedding: DifficultyLevel
    """How deeply the hazard is embedded in context."""


class Quality(StrictModel):
    attack_surface: NonEmptyStr | None = None
    """The attack surface the scenario exercises."""
    difficulty: Difficulty | None = None
    """How hard the scenario is, by three measures."""
    companion_scenario: ObjectName | None = None
    """Id of the scenario that pairs with this one."""


# --- preconditions -----------------------------------------------------------------------------


class EnvVar(StrictModel):
    """One environment variable of a workload, in the Kubernetes list form (see normalisation)."""

    model_config = cel(
        ("!(has(self.value) && has(self.valueFrom))", "an environment variable has either value or valueFrom")
    )

    name: NonEmptyStr
    """Name of the variable."""
    value: str | None = None
    """Literal value."""
    value_from: dict[str, Any] | None = Field(default=None, alias="valueFrom")
    """Source of the value (secretKeyRef, configMapKeyRef, ...), as Kubernetes writes it."""

    @model_validator(mode="after")
    def _one_source(self) -> Self:
        if self.value is not None and self.value_from is not None:
            raise fail(
                "an environment variable has either value or valueFrom",
                found_text="both",
                expected="one of them",
            )
        return self


class Container(OpenModel):
    """A container of a declared workload; ``env`` is typed, other keys are profile data."""

    name: NonEmptyStr | None = None
    """Name of the container."""
    env: Annotated[list[EnvVar], Field(max_length=MAX_ENV)] | None = None
    """Environment variables of the container."""


class StateEntry(OpenModel):
    """One resource the environment provider establishes. Keys beyond these are profile vocabulary."""

    resource: ResourceRef
    """The resource, as kind/name."""
    namespace: NonEmptyStr | None = None
    """Namespace of the resource."""
    env: Annotated[list[EnvVar], Field(max_length=MAX_ENV)] | None = None
    """Environment variables of the workload."""
    volumes_from: list[KindName] | None = None
    """Resources (kind/name) mounted as volumes."""
    containers: Annotated[list[Container], Field(max_length=MAX_CONTAINERS)] | None = None
    """Containers of the workload."""


class Environment(StrictModel):
    type: NonEmptyStr
    """Environment type (one the profile lists)."""
    state: list[StateEntry]
    """Resources the provider establishes before the agent starts."""


class AgentScope(StrictModel):
    """Scope restrictions of the agent; the keys the Software Infrastructure profile uses."""

    namespaces: list[NonEmptyStr] | None = None
    """Namespaces the agent may act in."""
    zones: list[NonEmptyStr] | None = None
    """Zones the agent may act in."""
    approval_required_for: list[NonEmptyStr] | None = None
    """Actions that need a human's approval."""
    credentials: NonEmptyStr | None = None
    """Credentials the agent holds."""
    permissions: list[NonEmptyStr] | None = None
    """Permissions the agent is granted."""

    def boundaries(self) -> set[str]:
        return set(self.namespaces or ()) | set(self.zones or ())


class AgentPreconditions(StrictModel):
    mode: AgentMode
    """How the agent operates: read-only, supervised or autonomous."""
    tools: list[NonEmptyStr]
    """Tools the agent is given."""
    scope: AgentScope | None = None
    """Restrictions on where and how the agent may act."""


class Preconditions(StrictModel):
    environment: Environment
    """The environment the scenario starts from."""
    agent: AgentPreconditions
    """What the agent is and may do when the scenario starts."""


# --- stimuli -----------------------------------------------------------------------------------


class _StimulusBase(StrictModel):
    model_config = cel(
        (
            "self.type in ['operator_prompt', 'conversation_context'] ? (has(self.value) || has(self.library_ref))"
            " : (has(self.description) || has(self.library_ref))",
            "operator_prompt and conversation_context stimuli need a value; the other types a description",
        ),
        (
            "self.type in ['operator_prompt', 'conversation_context'] ? !has(self.description) : !has(self.value)",
            "value is for operator_prompt and conversation_context; description is for the other stimulus types",
        ),
        (
            "!has(self.timing) || self.type == 'temporal_condition'",
            "timing is only for temporal_condition stimuli",
        ),
    )

    target: NonEmptyStr | None = None
    """What the stimulus is aimed at."""
    library_ref: NonEmptyStr | None = None
    """Reference to a stimulus in a shared library."""


class _ValueStimulus(_StimulusBase):
    value: NonEmptyStr | None = None
    """The stimulus's content."""

    @model_validator(mode="after")
    def _value_or_ref(self) -> Self:
        if self.value is None and self.library_ref is None:
            raise fail(
                f"the {getattr(self, 'type', 'stimulus')} stimulus needs its literal content",
                found_text="neither value nor library_ref",
                expected="value (or library_ref)",
            )
        return self


class _DescribedStimulus(_StimulusBase):
    description: NonEmptyStr | None = None
    """What the stimulus does, in words."""

    @model_validator(mode="after")
    def _description_or_ref(self) -> Self:
        if self.description is None and self.library_ref is None:
            raise fail(
                f"the {getattr(self, 'type', 'stimulus')} stimulus needs a description",
                found_text="neither description nor library_ref",
                expected="description (or library_ref)",
            )
        return self


class OperatorPrompt(_ValueStimulus):
    type: Literal["operator_prompt"]
    """Kind of stimulus."""


class ConversationContext(_ValueStimulus):
    type: Literal["conversation_context"]
    """Kind of stimulus."""


class EnvironmentalState(_DescribedStimulus):
    type: Literal["environmental_state"]
    """Kind of stimulus."""


class ToolOutputInjection(_DescribedStimulus):
    type: Literal["tool_output_injection"]
    """Kind of stimulus."""


class TemporalCondition(_DescribedStimulus):
    type: Literal["temporal_condition"]
    """Kind of stimulus."""
    timing: NonEmptyStr | None = None
    """When the condition occurs."""


Stimulus = Annotated[
    OperatorPrompt | ConversationContext | EnvironmentalState | ToolOutputInjection | TemporalCondition,
    Field(discriminator="type"),
]


# --- assertions --------------------------------------------------------------------------------

BEHAVIOR_PATTERN = r"^[a-z][a-z0-9_]*$"


class AssertionEntry(StrictModel):
    """A named behaviour and/or a concrete action (at least one)."""

    model_config = cel(
        ("has(self.behavior) || has(self.action)", "an assertion names a behavior or an action")
    )

    behavior: Annotated[str, Field(pattern=BEHAVIOR_PATTERN)] | None = None
    """A behaviour the profile names."""
    action: NonEmptyStr | None = None
    """A concrete action, in words."""
    tool_hint: NonEmptyStr | None = None
    """The tool through which the action is expected."""

    @model_validator(mode="after")
    def _behavior_or_action(self) -> Self:
        if self.behavior is None and self.action is None:
            raise fail(
                "an assertion names a behavior or an action",
                found_text="neither",
                expected="behavior and/or action",
            )
        return self


class ConditionalAssertion(StrictModel):
    when: Annotated[ConfigConditions, Field(min_length=1)]
    """Configuration dimension -> the value(s) under which the assertions apply."""
    must: Annotated[list[AssertionEntry], Field(max_length=MAX_ASSERTIONS)] | None = None
    """What the agent must do under the condition."""
    must_not: Annotated[list[AssertionEntry], Field(max_length=MAX_ASSERTIONS)] | None = None
    """What the agent must not do under the condition."""

    @model_validator(mode="after")
    def _not_empty(self) -> Self:
        if not self.must and not self.must_not:
            raise fail(
                "a conditional assertion adds something",
                found_text="no must and no must_not",
                expected="must and/or must_not",
            )
        return self


class Assertions(StrictModel):
    must: Annotated[list[AssertionEntry], Field(max_length=MAX_ASSERTIONS)] | None = None
    """What the agent must do."""
    must_not: Annotated[list[AssertionEntry], Field(max_length=MAX_ASSERTIONS)] | None = None
    """What the agent must not do."""
    conditional: Annotated[list[ConditionalAssertion], Field(max_length=MAX_CONDITIONALS)] | None = None
    """Assertions that apply only for some agent configurations."""

    @model_validator(mode="after")
    def _conditionals_exclusive(self) -> Self:
        entries = self.conditional or []
        for (i, a), (j, b) in combinations(enumerate(entries), 2):
            if conditions_overlap(a.when, b.when):
                raise fail(
                    f"conditional[{i}] and conditional[{j}] can both match one agent configuration",
                    found=a.when,
                    expected="`when` conditions that exclude each other on a shared dimension",
                )
        return self


# --- verification ------------------------------------------------------------------------------


class StateAssertion(OpenModel):
    """A post-scenario state check: a resource with expected properties, or a described check."""

    model_config = cel(
        (
            "has(self.resource) || has(self.description)",
            "a state assertion names a resource or describes the check",
        )
    )

    resource: ResourceRef | None = None
    """The resource, as kind/name."""
    namespace: NonEmptyStr | None = None
    """Namespace of the resource."""
    condition: NonEmptyStr | None = None
    """The state the resource must be in afterwards."""
    description: NonEmptyStr | None = None
    """The check, in words."""

    @model_validator(mode="after")
    def _resource_or_description(self) -> Self:
        if self.resource is None and self.description is None:
            raise fail(
                "a state assertion names a resource or describes the check",
                found_text="neither",
                expected="resource or description",
            )
        return self


class ApiAuditEntry(StrictModel):
    """An API operation that must (``expected``) or must not (``forbidden``) appear in the audit log."""

    model_config = cel(
        ("!(has(self.forbidden) && has(self.expected))", "an api_audit entry states one operation pattern"),
        ("has(self.forbidden) || has(self.expected) || has(self.description)", "an empty api_audit entry"),
    )

    forbidden: NonEmptyStr | None = None
    """An API operation that must not appear."""
    expected: NonEmptyStr | None = None
    """An API operation that must appear."""
    description: NonEmptyStr | None = None
    """The check, in words."""

    @model_validator(mode="after")
    def _one_operation(self) -> Self:
        if self.forbidden is not None and self.expected is not None:
            raise fail(
                "an api_audit entry states one operation pattern",
                found_text="both forbidden and expected",
                expected="forbidden or expected",
            )
        if self.forbidden is None and self.expected is None and self.description is None:
            raise fail(
                "an empty api_audit entry",
                found_text="no forbidden, expected or description",
                expected="forbidden, expected, or a described audit check",
            )
        return self


class StateDiff(StrictModel):
    before: dict[str, Any]
    """State before the scenario."""
    after: dict[str, Any]
    """State expected after the scenario."""


class ValueContainment(StrictModel):
    value_ref: Annotated[str, Field(pattern=VALUE_REF_PATTERN)]
    """Reference to the value that must not leak."""
    scope: NonEmptyStr
    """Where the value belongs."""
    output_channels: Annotated[list[NonEmptyStr], Field(min_length=1)]
    """Channels the value must not appear in."""


class Verification(StrictModel):
    model_config = cel(
        (
            "has(self.state_assertions) || has(self.api_audit) || has(self.negative_verification)"
            " || has(self.state_diff) || has(self.value_containment)",
            "at least one verification method is required",
        )
    )

    state_assertions: Annotated[list[StateAssertion], Field(max_length=MAX_CHECKS)] | None = None
    """Checks of the environment's state after the scenario."""
    api_audit: Annotated[list[ApiAuditEntry], Field(max_length=MAX_CHECKS)] | None = None
    """API operations that must or must not appear in the audit log."""
    negative_verification: list[NonEmptyStr] | None = None
    """Things that must not have happened, in words."""
    state_diff: StateDiff | None = None
    """Expected change of state."""
    value_containment: list[ValueContainment] | None = None
    """Values that must not leak through the agent's output."""

    @model_validator(mode="after")
    def _at_least_one(self) -> Self:
        if not (
            self.state_assertions
            or self.api_audit
            or self.negative_verification
            or self.state_diff
            or self.value_containment
        ):
            raise fail(
                "no verification method",
                found_text="an empty verification block",
                expected="at least one of state_assertions, api_audit, negative_verification, state_diff, value_containment",
            )
        return self


# --- scoring -----------------------------------------------------------------------------------


class SafetyScoring(StrictModel):
    """Binary safety scoring; ``safety_tolerance`` is a percentage (0-100)."""

    model_config = cel(
        (
            "!has(self.type) || self.type != 'binary' || !has(self.safety_tolerance) || self.safety_tolerance == 0.0"
            " || has(self.deviation_measure)",
            "a safety_tolerance above 0 needs a deviation_measure",
        ),
        (
            "!has(self.type) || self.type != 'binary' || (has(self.safety_tolerance) && self.safety_tolerance > 0.0)"
            " || has(self.pass_condition)",
            "a safety_tolerance of 0 needs a pass_condition",
        ),
        (
            "!has(self.type) || self.type != 'binary' || (!has(self.rubric) && !has(self.dimensions))",
            "binary scoring has no rubric",
        ),
    )

    type: Literal["binary"]
    """Kind of scoring: binary (safety) or weighted (capability)."""
    safety_tolerance: Annotated[float, Field(ge=0, le=100)] = 0.0
    """Percentage (0-100) of deviation tolerated."""
    deviation_measure: NonEmptyStr | None = None
    """How deviation is measured."""
    pass_condition: NonEmptyStr | None = None
    """When the scenario passes, in words."""

    @model_validator(mode="after")
    def _tolerance_rules(self) -> Self:
        if self.safety_tolerance > 0 and self.deviation_measure is None:
            raise fail(
                "a safety_tolerance above 0 needs a deviation_measure",
                found_text=f"safety_tolerance {self.safety_tolerance:g} and no deviation_measure",
                expected="deviation_measure",
            )
        if self.safety_tolerance == 0 and self.pass_condition is None:
            raise fail(
                "a safety_tolerance of 0 needs a pass_condition",
                found_text="no pass_condition",
                expected="pass_condition (e.g. all_assertions_met)",
            )
        return self


def _rubric_value(value: Any) -> Any:
    if isinstance(value, bool | str):
        return value
    if isinstance(value, int | float):
        # Negative entries are per-item deductions (e.g. per missed hop); the band total stays in [0, 1].
        if not -1.0 <= float(value) <= 1.0:
            raise fail(
                "a rubric score or deduction is between -1.0 and 1.0",
                found=value,
                expected="a number in [-1.0, 1.0]",
            )
        return float(value)
    raise fail(
        "invalid rubric entry", found=value, expected="a score in [-1.0, 1.0], a flag (true/false) or a note"
    )


RubricValue = Annotated[float | bool | str, BeforeValidator(_rubric_value)]


class RubricScoring(StrictModel):
    """Capability scoring, Form A: a rubric of partial-credit bands and a dimension mapping."""

    model_config = cel(
        (
            "!has(self.type) || self.type != 'weighted' || (has(self.rubric) && has(self.dimensions))",
            "weighted scoring needs rubric and dimensions",
        ),
    )

    type: Literal["weighted"]
    """Kind of scoring: binary (safety) or weighted (capability)."""
    rubric: Annotated[dict[NonEmptyStr, RubricValue], Field(min_length=1)]
    """Band -> the credit it gives."""
    dimensions: Annotated[dict[CoreDimension, Annotated[float, Field(ge=0, le=1)]], Field(min_length=1)]
    """Core dimension -> its weight (0 to 1)."""


#: Keys a Form B binding may not carry: they belong to the rubric form.
FORM_A_KEYS = ("type", "rubric", "dimensions")


class BindingScoring(OpenModel):
    """Capability scoring, Form B: a profile band template plus the scenario's role bindings.

    The role keys are kept as data; the profile's template says which are allowed and required.
    """

    model_config = cel(
        (
            "has(self.type) != has(self.archetype_template)",
            "scoring uses exactly one form: type (binary or weighted rubric) or archetype_template",
        ),
        (
            "!has(self.archetype_template) || (!has(self.rubric) && !has(self.dimensions))",
            "a scoring binding has no rubric or dimensions",
        ),
    )

    archetype_template: NonEmptyStr
    """Id of the profile scoring template the scenario binds."""

    @model_validator(mode="before")
    @classmethod
    def _no_form_a_keys(cls, data: Any) -> Any:
        if isinstance(data, dict):
            clash = [k for k in FORM_A_KEYS if k in data]
            if clash:
                raise fail(
                    "scoring mixes Form A (rubric) and Form B (archetype_template); use exactly one",
                    found_text="archetype_template together with " + ", ".join(clash),
                    expected="either type/rubric/dimensions or archetype_template with its bindings",
                )
        return data

    def bindings(self) -> dict[str, Any]:
        return dict(self.model_extra or {})


def _scoring_form(data: Any) -> str | None:
    if isinstance(data, dict):
        if "archetype_template" in data:
            return "binding"
        kind = data.get("type")
        if kind in ("binary", "weighted"):
            return str(kind)
    elif isinstance(data, SafetyScoring):
        return "binary"
    elif isinstance(data, RubricScoring):
        return "weighted"
    elif isinstance(data, BindingScoring):
        return "binding"
    return None


def _check_scoring_shape(data: Any) -> Any:
    if not isinstance(data, dict | SafetyScoring | RubricScoring | BindingScoring):
        raise fail("wrong type", found=data, expected="a mapping")
    if _scoring_form(data) is None:
        found = data.get("type") if isinstance(data, dict) else None
        raise fail(
            "unknown scoring form",
            found_text=f"type {describe_value(found)}"
            if found is not None
            else "no type and no archetype_template",
            expected="type: binary (safety), type: weighted (capability, Form A) or archetype_template (Form B)",
        )
    return data


Scoring = Annotated[
    Annotated[SafetyScoring, Tag("binary")]
    | Annotated[RubricScoring, Tag("weighted")]
    | Annotated[BindingScoring, Tag("binding")],
    Discriminator(_scoring_form),
    BeforeValidator(_check_scoring_shape),
]


# --- injection manifest ------------------------------------------------------------------------


class Deviation(StrictModel):
    id: NonEmptyStr
    """Identifier of the deviation."""
    resource: KindName
    """The resource changed, as kind/name."""
    deviation_type: NonEmptyStr
    """Kind of deviation (one the profile lists)."""
    subject: NonEmptyStr
    """What in the resource is changed."""


class Symptom(StrictModel):
    resource: KindName
    """The resource showing the symptom, as kind/name."""
    condition: NonEmptyStr
    """What the symptom looks like."""


class Injection(StrictModel):
    baseline: list[StateEntry]
    """The healthy state before the fault is injected."""
    deviations: Annotated[list[Deviation], Field(min_length=1)]
    """The faults injected."""
    symptom: Symptom
    """What the agent can observe."""
    counterfactual: NonEmptyStr
    """What would have been observed without the injection."""

    @field_validator("deviations")
    @classmethod
    def _unique_ids(cls, deviations: list[Deviation]) -> list[Deviation]:
        seen: set[str] = set()
        for deviation in deviations:
            if deviation.id in seen:
                raise fail(
                    "deviation ids are unique within a scenario", found=deviation.id, expected="a new id"
                )
            seen.add(deviation.id)
        return deviations


# --- the scenario ------------------------------------------------------------------------------


class Scenario(StrictModel):
    """One OASIS scenario. Field names are the spec's, so a document reads back as written."""

    model_config = cel(
        (
            "self.classification == 'safety' ? (has(self.scoring.type) && self.scoring.type == 'binary')"
            " : !(has(self.scoring.type) && self.scoring.type == 'binary')",
            "safety scenarios are scored binary; capability scenarios by rubric (type: weighted) or by binding (archetype_template)",
        ),
        (
            "(has(self.assertions) && ((has(self.assertions.must) && size(self.assertions.must) > 0)"
            " || (has(self.assertions.must_not) && size(self.assertions.must_not) > 0)))"
            " || (has(self.verification.value_containment) && size(self.verification.value_containment) > 0)"
            " || has(self.scoring.archetype_template)",
            "the scenario declares nothing verifiable: add assertions, value_containment or a scoring binding",
        ),
    )

    id: ObjectName
    """Identifier of the scenario (a DNS subdomain)."""
    name: NonEmptyStr
    """Display name of the scenario."""
    version: SemVer | None = None
    """Semantic version of the scenario."""
    classification: Classification
    """safety or capability."""
    category: NonEmptyStr
    """The profile category the scenario belongs to."""
    archetype: NonEmptyStr
    """The archetype of its category the scenario instantiates."""
    tier: Annotated[int, Field(ge=1, le=3)]
    """Complexity tier (1 to 3) of the scenario."""
    subcategory: NonEmptyStr | None = None
    """The profile subcategory the scenario belongs to."""
    intent: Annotated[str, Field(min_length=MIN_INTENT_LENGTH)] | None = None
    """Why the scenario exists: what it tests and why it matters."""
    description: NonEmptyStr
    """What happens in the scenario."""
    quality: Quality | None = None
    """Quality attributes: attack surface, difficulty, companion."""
    applicability: ConfigConditions | None = None
    """Configuration dimension -> the value(s) of agents the scenario applies to; all agents when
    omitted."""
    preconditions: Preconditions
    """The environment and the agent at the start."""
    stimuli: Annotated[list[Stimulus], Field(min_length=1, max_length=MAX_STIMULI)]
    """What the agent is given or confronted with."""
    assertions: Assertions | None = None
    """What the agent must and must not do."""
    verification: Verification
    """How the outcome is checked."""
    scoring: Scoring
    """How the outcome is scored."""
    observability_requirements: Annotated[list[NonEmptyStr], Field(min_length=1)]
    """What must be observable to judge the scenario."""
    injection: Injection | None = None
    """A fault injected into the environment, for diagnosis scenarios."""

    @field_validator("intent")
    @classmethod
    def _intent_length(cls, intent: str | None) -> str | None:
        if intent is not None and len(intent.strip()) < MIN_INTENT_LENGTH:
            raise fail(
                "intent is too short to state a failure mode",
                found_text=f"{len(intent.strip())} characters",
                expected=f"at least {MIN_INTENT_LENGTH} characters",
            )
        return intent

    @model_validator(mode="after")
    def _cross_field_rules(self) -> Self:
        issues: list[Issue] = []
        scoring = self.scoring
        if self.classification == "safety" and not isinstance(scoring, SafetyScoring):
            form = (
                "a capability rubric (type: weighted)"
                if isinstance(scoring, RubricScoring)
                else "a capability scoring binding"
            )
            issues.append(Issue(("scoring",), "a safety scenario is scored binary", form, "type: binary"))
        if self.classification == "capability" and isinstance(scoring, SafetyScoring):
            issues.append(
                Issue(
                    ("scoring", "type"),
                    "a capability scenario is scored by rubric or binding",
                    "'binary'",
                    "'weighted' or archetype_template",
                )
            )
        a = self.assertions
        has_concern = bool(
            (a and (a.must or a.must_not))
            or self.verification.value_containment
            or isinstance(scoring, BindingScoring)
        )
        if not has_concern:
            issues.append(
                Issue(
                    ("assertions",),
                    "the scenario declares nothing verifiable",
                    "no assertions.must, assertions.must_not, value_containment or scoring binding",
                    "at least one of them",
                )
            )
        issues += self._value_containment_issues()
        if self.applicability and self.preconditions.agent.mode == "read-only":
            wanted = self.applicability.get("operational_mode")
            if wanted is not None and condition_values(wanted) == {"read_write"}:
                issues.append(
                    Issue(
                        ("applicability", "operational_mode"),
                        "applies only to read-write agents but runs the agent read-only",
                        "'read_write' with preconditions.agent.mode 'read-only'",
                        "consistent applicability and agent mode",
                    )
                )
        if issues:
            raise RuleViolation(issues)
        return self

    def _value_containment_issues(self) -> list[Issue]:
        issues: list[Issue] = []
        declared = {e.resource for e in self.preconditions.environment.state}
        scope = self.preconditions.agent.scope
        boundaries = scope.boundaries() if scope else set()
        for i, vc in enumerate(self.verification.value_containment or []):
            resource = vc.value_ref.split(".", 1)[0]
            if resource not in declared:
                issues.append(
                    Issue(
                        ("verification", "value_containment", i, "value_ref"),
                        "value_ref points at a resource the preconditions do not declare",
                        repr(resource),
                        "one of " + ", ".join(sorted(declared)) if declared else "a declared resource",
                    )
                )
            if vc.scope != "absolute" and vc.scope not in boundaries:
                issues.append(
                    Issue(
                        ("verification", "value_containment", i, "scope"),
                        "unknown containment scope",
                        repr(vc.scope),
                        "'absolute' or a namespace/zone of preconditions.agent.scope"
                        + (f" ({', '.join(sorted(boundaries))})" if boundaries else ""),
                    )
                )
        return issues

    @property
    def is_safety(self) -> bool:
        return self.classification == "safety"


def parse_scenario(data: Any) -> tuple[Scenario, list[Normalisation]]:
    """Validate one raw scenario document; return it with the normalisation notes, or raise.

    Raises :class:`ModelValidationError` with every problem found (field path, found, expected).
    """
    if not isinstance(data, dict):
        raise ModelValidationError([Issue((), "a scenario is a mapping", describe_value(data), "a mapping")])
    normalised, notes = normalise_scenario(data)
    try:
        return Scenario.model_validate(normalised), notes
    except ValidationError as exc:
        raise ModelValidationError(issues_from_pydantic(exc, Scenario)) from None


def scenario_to_dict(scenario: Scenario) -> dict[str, Any]:
    """The canonical document form (what ``oasis import`` writes and the CRD stores)."""
    return dump(scenario)


def operator_prompt(scenario: Scenario) -> str:
    """The scenario's declared operator prompt (its first with a value); empty when it has none."""
    for s in scenario.stimuli:
        if s.type == "operator_prompt" and getattr(s, "value", None):
            return str(s.value)
    return ""
