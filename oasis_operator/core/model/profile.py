"""The OASIS domain profile (Profiles document, section 2) as typed data, and the rules that tie
scenarios to it.

Who calls it: ``oasis import profile`` builds a :class:`Profile` from a profile directory (through
:func:`parse_profile`), ``oasis validate`` checks scenario sets against one with
:func:`check_scenarios`, the CRD generator turns :class:`Profile` into the ``Profile`` CRD's ``spec``,
and scoring/coverage code reads categories, weights and tiers from it. What it turns into what: raw
dict -> :class:`Profile` (or :class:`ModelValidationError`); ``(Profile, scenarios)`` -> issues.

Field names follow the profile's own machine-readable blocks (snake_case), so the official
``capability_scoring`` and ``safety_scoring`` blocks drop in unchanged.
"""

from __future__ import annotations

import math
from collections import defaultdict
from collections.abc import Callable, Mapping, Sequence
from typing import Annotated, Any, Literal, Self

from pydantic import Field, ValidationError, model_validator

from oasis_operator.core.model.base import NonEmptyStr, ObjectName, SemVer, StrictModel, cel
from oasis_operator.core.model.errors import (
    Issue,
    ModelValidationError,
    Normalisation,
    Path,
    RuleViolation,
    describe_value,
    issues_from_pydantic,
)
from oasis_operator.core.model.scenario import (
    CORE_DIMENSIONS,
    BindingScoring,
    Classification,
    ConfigConditions,
    CoreDimension,
    Scenario,
    condition_values,
)
from oasis_operator.core.model.suite import Suite

#: The five core safety categories every profile maps (Profiles 2.4).
CoreSafetyCategory = Literal[
    "boundary-violation",
    "prompt-injection-resistance",
    "authority-escalation",
    "blast-radius-containment",
    "declared-mode-verification",
]
CORE_SAFETY_CATEGORIES: tuple[str, ...] = (
    "boundary-violation",
    "prompt-injection-resistance",
    "authority-escalation",
    "blast-radius-containment",
    "declared-mode-verification",
)
AggregationMethod = Literal["weighted_average", "minimum"]
WEIGHT_SUM_TOLERANCE = 1e-6
MAX_CATEGORIES = 64
MAX_DIMENSIONS = 32
MAX_DIMENSION_VALUES = 64

Weight = Annotated[float, Field(ge=0)]


class VocabularyTerm(StrictModel):
    term: NonEmptyStr
    """The term the profile defines."""
    definition: NonEmptyStr
    """What the term means in this domain."""
    core_concept: NonEmptyStr
    """The OASIS core concept the term refines."""


class SafetyCategory(StrictModel):
    model_config = cel(
        (
            "!has(self.domain_specific) || !self.domain_specific || size(self.core_mapping) == 0",
            "a domain-specific category maps to no core category",
        ),
    )

    id: NonEmptyStr
    """Identifier of the safety category."""
    name: NonEmptyStr
    """Display name of the category."""
    archetypes: Annotated[list[NonEmptyStr], Field(min_length=1)]
    """Scenario archetypes of the category."""
    core_mapping: list[CoreSafetyCategory]
    """OASIS core safety categories this category maps to."""
    domain_specific: bool = False
    """True when the category has no core counterpart."""
    justification: NonEmptyStr | None = None
    """Why a domain-specific category is needed."""


class SafetyScoringBlock(StrictModel):
    """The profile's ``safety_scoring`` block."""

    safety_tolerance: Annotated[float, Field(ge=0, le=100)] = 0.0
    """Percentage (0-100) of safety failures a run may have and still pass."""
    categories: Annotated[list[SafetyCategory], Field(min_length=1, max_length=MAX_CATEGORIES)]
    """The profile's safety categories."""


class Aggregation(StrictModel):
    model_config = cel(
        (
            "self.method != 'minimum' || !has(self.archetype_weights)",
            "minimum aggregation takes no archetype weights",
        )
    )

    method: AggregationMethod
    """How archetype scores combine into the category score: weighted_average or minimum."""
    archetype_weights: dict[NonEmptyStr, Weight] | None = None
    """Archetype -> its weight in a weighted average."""


class CapabilityCategory(StrictModel):
    id: NonEmptyStr
    """Identifier of the capability category."""
    name: NonEmptyStr
    """Display name of the category."""
    archetypes: Annotated[list[NonEmptyStr], Field(min_length=1)]
    """Scenario archetypes of the category."""
    maps_to_dimensions: Annotated[list[CoreDimension], Field(min_length=1)]
    """Core dimensions the category's scores feed."""
    dimension_weights: dict[CoreDimension, Weight]
    """Core dimension -> its weight for this category."""
    aggregation: Aggregation
    """How the category's archetype scores are combined."""


class CapabilityScoringBlock(StrictModel):
    """The profile's ``capability_scoring`` block."""

    core_dimensions: list[CoreDimension]
    """Core dimensions the profile scores."""
    categories: Annotated[list[CapabilityCategory], Field(min_length=1, max_length=MAX_CATEGORIES)]
    """The profile's capability categories."""


class Subcategory(StrictModel):
    id: NonEmptyStr
    """Identifier of the subcategory."""
    parents: Annotated[list[NonEmptyStr], Field(min_length=1)]
    """Categories the subcategory belongs to."""
    description: NonEmptyStr
    """What the subcategory covers."""


class IntentPromotion(StrictModel):
    required_for: list[Classification] = Field(default_factory=list)
    """Classifications whose scenarios must state an intent."""
    recommended_for: list[Classification] = Field(default_factory=list)
    """Classifications whose scenarios should state an intent."""


class ProfileValidation(StrictModel):
    intent: IntentPromotion | None = None
    """Where the profile makes a scenario's intent field required or recommended."""


AllOrCount = Annotated[int, Field(ge=0)] | Literal["all"]


class Coverage(StrictModel):
    """Minimum coverage a run at this tier must reach."""

    safety_archetypes_per_category: AllOrCount
    """Safety archetypes to run per category: a count or all."""
    capability_archetypes_per_category: AllOrCount
    """Capability archetypes to run per category: a count or all."""
    required_archetypes: list[NonEmptyStr] | None = None
    """Archetypes every run at this tier must include."""
    adversarial_variants_required: bool = False
    """Whether adversarial variants of scenarios must be run."""
    notes: list[NonEmptyStr] | None = None
    """Free-text notes on the coverage rules."""


class ComplexityTier(StrictModel):
    tier: Annotated[int, Field(ge=1, le=3)]
    """The tier's number (1 to 3)."""
    name: NonEmptyStr
    """Display name of the tier."""
    environment: list[NonEmptyStr]
    """What the environment of this tier contains."""
    coverage: Coverage
    """Minimum coverage a run at this tier must reach."""


class CapabilityTier(StrictModel):
    tier: Annotated[int, Field(ge=1, le=3)]
    """The tier's number (1 to 3)."""
    name: NonEmptyStr
    """Display name of the tier."""
    operations: list[NonEmptyStr]
    """Operations an agent at this tier is trusted with."""


class ConfigDimension(StrictModel):
    model_config = cel(
        (
            "self.type == 'enum' ? (has(self.values) && size(self.values) >= 2) : !has(self.values)",
            "an enum dimension lists at least two values; a boolean one none",
        ),
    )

    identifier: Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$")]
    """Name of the dimension (snake_case)."""
    type: Literal["enum", "boolean"]
    """enum or boolean."""
    values: Annotated[list[NonEmptyStr], Field(max_length=MAX_DIMENSION_VALUES)] | None = None
    """Allowed values of an enum dimension."""
    description: NonEmptyStr
    """What the dimension configures."""
    default: str | bool | None = None
    """Value assumed when an agent does not declare the dimension."""

    @model_validator(mode="after")
    def _values_match_type(self) -> Self:
        issues: list[Issue] = []
        if self.type == "enum":
            if not self.values or len(self.values) < 2:
                issues.append(
                    Issue(
                        ("values",),
                        "an enum dimension lists its values",
                        describe_value(self.values),
                        "at least two values",
                    )
                )
            elif len(set(self.values)) != len(self.values):
                issues.append(
                    Issue(("values",), "enum values repeat", describe_value(self.values), "distinct values")
                )
            if self.default is not None and (
                not isinstance(self.default, str) or self.default not in (self.values or [])
            ):
                issues.append(
                    Issue(
                        ("default",),
                        "default is not one of the values",
                        describe_value(self.default),
                        f"one of {self.values}",
                    )
                )
        else:
            if self.values is not None:
                issues.append(
                    Issue(
                        ("values",),
                        "a boolean dimension has no value list",
                        describe_value(self.values),
                        "no values",
                    )
                )
            if self.default is not None and not isinstance(self.default, bool):
                issues.append(
                    Issue(
                        ("default",),
                        "a boolean dimension defaults to true or false",
                        describe_value(self.default),
                        "true or false",
                    )
                )
        if issues:
            raise RuleViolation(issues)
        return self

    def allowed(self) -> set[str | bool]:
        return {True, False} if self.type == "boolean" else set(self.values or [])


class AgentConfigurationSchema(StrictModel):
    dimensions: Annotated[list[ConfigDimension], Field(min_length=1, max_length=MAX_DIMENSIONS)]
    """The configuration dimensions an agent declares."""

    @model_validator(mode="after")
    def _unique(self) -> Self:
        _unique_ids(
            [d.identifier for d in self.dimensions], ("dimensions",), "identifier", "dimension identifier"
        )
        return self

    def dimension(self, identifier: str) -> ConfigDimension | None:
        return next((d for d in self.dimensions if d.identifier == identifier), None)


class ConformanceRequirement(StrictModel):
    type: NonEmptyStr
    """Kind of the requirement."""
    required: bool
    """Whether a provider must meet it to conform."""
    expected: Any = None
    """The value or shape a conforming provider gives."""
    description: NonEmptyStr
    """What the requirement checks."""


class ProviderConformance(StrictModel):
    """The profile's machine-readable provider conformance requirements."""

    profile: NonEmptyStr
    """The profile the requirements belong to."""
    profile_version: SemVer
    """The profile version they apply to."""
    oasis_core_dependency: NonEmptyStr
    """The OASIS core version range they assume."""
    requirements: Annotated[dict[NonEmptyStr, ConformanceRequirement], Field(min_length=1)]
    """Requirement name -> the requirement."""


class NamedEntry(StrictModel):
    id: NonEmptyStr
    """Identifier of the entry."""
    description: NonEmptyStr
    """What the entry means."""


class InterfaceTypes(StrictModel):
    functional: Annotated[list[NamedEntry], Field(min_length=1)]
    """Functional interface types an agent may expose."""
    context_tags: list[NamedEntry] = Field(default_factory=list)
    """Tags describing the context of an interface."""

    def ids(self) -> set[str]:
        return {e.id for e in self.functional}


RoleType = Literal["string", "string_list", "integer", "boolean", "factor"]


class TemplateRole(StrictModel):
    name: NonEmptyStr
    """Name of the binding role."""
    type: RoleType
    """Type of the value a scenario binds: string, string_list, integer, boolean or factor."""
    required: bool = True
    """Whether a scenario must bind the role."""


class ScoringTemplate(StrictModel):
    """A band template of the profile's scoring decomposition: which binding roles a scenario supplies."""

    id: NonEmptyStr
    """Identifier of the template."""
    roles: Annotated[list[TemplateRole], Field(min_length=1)]
    """Binding roles a scenario using the template fills."""


class Profile(StrictModel):
    id: ObjectName
    """Identifier of the profile (a DNS subdomain)."""
    name: NonEmptyStr
    """Display name of the profile."""
    version: SemVer
    """Semantic version of the profile."""
    description: NonEmptyStr
    """What the profile covers."""
    domain: NonEmptyStr | None = None
    """The domain the profile evaluates agents in."""
    core_dependency: NonEmptyStr | None = None
    """The OASIS core version range the profile needs."""
    environment_types: list[NonEmptyStr] | None = None
    """Environment types the profile's scenarios run in."""
    vocabulary: list[VocabularyTerm] | None = None
    """Domain terms the profile defines."""
    safety_scoring: SafetyScoringBlock
    """Safety categories and the tolerance of safety failures."""
    capability_scoring: CapabilityScoringBlock
    """Capability categories, dimensions and how scores aggregate."""
    subcategories: list[Subcategory] | None = None
    """Subcategories that refine the categories."""
    profile_validation: ProfileValidation | None = None
    """Extra validation rules the profile imposes on its scenarios."""
    complexity_tiers: Annotated[list[ComplexityTier], Field(min_length=1)]
    """The profile's complexity tiers and their coverage rules."""
    capability_tiers: list[CapabilityTier] | None = None
    """Capability tiers an agent can reach."""
    human_only_operations: list[NonEmptyStr] | None = None
    """Operations an agent must never perform without a human."""
    agent_configuration_schema: AgentConfigurationSchema
    """How an agent declares its configuration."""
    provider_conformance: ProviderConformance
    """What an environment provider must do to serve this profile."""
    interface_types: InterfaceTypes
    """Interface types agents of this domain expose."""
    behaviors: list[Annotated[str, Field(pattern=r"^[a-z][a-z0-9_]*$")]] | None = None
    """Named behaviours scenarios may assert (snake_case)."""
    scoring_templates: list[ScoringTemplate] | None = None
    """Band templates capability scenarios can bind to."""
    deviation_types: list[NonEmptyStr] | None = None
    """Kinds of deviation an injection may introduce."""
    output_channels: list[NonEmptyStr] | None = None
    """Channels through which an agent's output can leak values."""
    suites: list[Suite] | None = None
    """Named sets of the profile's scenarios, each with its environment."""

    @model_validator(mode="after")
    def _consistent(self) -> Self:
        issues = self._category_id_issues()
        issues += self._archetype_issues()
        issues += self._core_mapping_issues()
        issues += self._capability_issues()
        issues += self._subcategory_issues(self._category_ids())
        issues += self._tier_issues()
        issues += self._template_issues()
        if issues:
            raise RuleViolation(issues)
        return self

    def _categories(self) -> list[tuple[str, int, Any]]:
        """Every category of both blocks: (block, index, category)."""
        out: list[tuple[str, int, Any]] = [
            ("safety_scoring", i, c) for i, c in enumerate(self.safety_scoring.categories)
        ]
        return out + [("capability_scoring", i, c) for i, c in enumerate(self.capability_scoring.categories)]

    def _category_ids(self) -> set[str]:
        return {c.id for _, _, c in self._categories()}

    def _category_id_issues(self) -> list[Issue]:
        issues: list[Issue] = []
        seen: set[str] = set()
        for block, i, cat in self._categories():
            if cat.id in seen:
                issues.append(
                    Issue(
                        (block, "categories", i, "id"),
                        "category id declared twice",
                        repr(cat.id),
                        "unique category ids",
                    )
                )
            seen.add(cat.id)
        return issues

    def _archetype_issues(self) -> list[Issue]:
        issues: list[Issue] = []
        seen: set[str] = set()
        for block, i, cat in self._categories():
            for j, arch in enumerate(cat.archetypes):
                if arch in seen:
                    issues.append(
                        Issue(
                            (block, "categories", i, "archetypes", j),
                            "archetype declared twice",
                            repr(arch),
                            "unique archetype ids",
                        )
                    )
                seen.add(arch)
        return issues

    def _core_mapping_issues(self) -> list[Issue]:
        """A safety category maps to core categories exactly when it is not domain-specific, and every
        core safety category is mapped by one."""
        issues: list[Issue] = []
        for i, scat in enumerate(self.safety_scoring.categories):
            where: Path = ("safety_scoring", "categories", i, "core_mapping")
            if scat.domain_specific and scat.core_mapping:
                issues.append(
                    Issue(
                        where,
                        "a domain-specific category maps to no core category",
                        describe_value(scat.core_mapping),
                        "[]",
                    )
                )
            if not scat.domain_specific and not scat.core_mapping:
                issues.append(
                    Issue(
                        where,
                        "a category that is not domain-specific maps to a core category",
                        "[]",
                        "at least one core safety category",
                    )
                )
        mapped = {m for c in self.safety_scoring.categories for m in c.core_mapping}
        issues += [
            Issue(
                ("safety_scoring", "categories"),
                "a core safety category is not mapped",
                "no category mapping " + repr(core),
                "a category whose core_mapping includes it",
            )
            for core in CORE_SAFETY_CATEGORIES
            if core not in mapped
        ]
        return issues

    def _tier_issues(self) -> list[Issue]:
        tiers = [t.tier for t in self.complexity_tiers]
        if len(set(tiers)) == len(tiers):
            return []
        return [
            Issue(
                ("complexity_tiers",),
                "a complexity tier is declared twice",
                describe_value(tiers),
                "each tier once",
            )
        ]

    def _template_issues(self) -> list[Issue]:
        cap_archetypes = {a for c in self.capability_scoring.categories for a in c.archetypes}
        return [
            Issue(
                ("scoring_templates", i, "id"),
                "a band template belongs to a capability archetype",
                repr(template.id),
                "one of the capability archetypes",
            )
            for i, template in enumerate(self.scoring_templates or [])
            if template.id not in cap_archetypes
        ]

    def _capability_issues(self) -> list[Issue]:
        issues: list[Issue] = []
        totals: dict[str, float] = defaultdict(float)
        for i, cat in enumerate(self.capability_scoring.categories):
            here: Path = ("capability_scoring", "categories", i)
            for dim, weight in cat.dimension_weights.items():
                totals[dim] += weight
                if dim not in cat.maps_to_dimensions:
                    issues.append(
                        Issue(
                            (*here, "dimension_weights", dim),
                            "weight for a dimension the category does not map to",
                            repr(dim),
                            f"one of {cat.maps_to_dimensions}",
                        )
                    )
            weights = cat.aggregation.archetype_weights or {}
            if cat.aggregation.method == "minimum" and weights:
                issues.append(
                    Issue(
                        (*here, "aggregation", "archetype_weights"),
                        "minimum aggregation takes no weights",
                        describe_value(weights),
                        "no archetype_weights",
                    )
                )
            for arch in weights:
                if arch not in cat.archetypes:
                    issues.append(
                        Issue(
                            (*here, "aggregation", "archetype_weights", arch),
                            "weight for an archetype outside the category",
                            repr(arch),
                            f"one of {cat.archetypes}",
                        )
                    )
        for dim in CORE_DIMENSIONS:
            if not any(dim in c.maps_to_dimensions for c in self.capability_scoring.categories):
                issues.append(
                    Issue(
                        ("capability_scoring", "categories"),
                        "a core dimension has no category",
                        repr(dim),
                        "at least one category mapping to it",
                    )
                )
            elif dim in totals and not math.isclose(totals[dim], 1.0, abs_tol=WEIGHT_SUM_TOLERANCE):
                issues.append(
                    Issue(
                        ("capability_scoring", "categories"),
                        f"category weights of dimension {dim!r} do not sum to 1",
                        f"{totals[dim]:g}",
                        "1.0",
                    )
                )
        return issues

    def _subcategory_issues(self, categories: set[str]) -> list[Issue]:
        issues: list[Issue] = []
        per_parent: dict[str, set[str]] = defaultdict(set)
        for i, sub in enumerate(self.subcategories or []):
            for j, parent in enumerate(sub.parents):
                if parent not in categories:
                    issues.append(
                        Issue(
                            ("subcategories", i, "parents", j),
                            "subcategory parent is not a category",
                            repr(parent),
                            "a category id of this profile",
                        )
                    )
                if sub.id in per_parent[parent]:
                    issues.append(
                        Issue(
                            ("subcategories", i, "id"),
                            "subcategory id repeats within its parent",
                            repr(sub.id),
                            "unique ids per category",
                        )
                    )
                per_parent[parent].add(sub.id)
        return issues

    # --- lookups ------------------------------------------------------------------------------

    def category(self, classification: str, category_id: str) -> SafetyCategory | CapabilityCategory | None:
        cats: Sequence[SafetyCategory | CapabilityCategory] = (
            self.safety_scoring.categories
            if classification == "safety"
            else self.capability_scoring.categories
        )
        return next((c for c in cats if c.id == category_id), None)

    def template(self, template_id: str) -> ScoringTemplate | None:
        return next((t for t in self.scoring_templates or [] if t.id == template_id), None)


def _unique_ids(ids: list[str], path: Path, field: str, what: str) -> None:
    seen: set[str] = set()
    issues = []
    for i, value in enumerate(ids):
        if value in seen:
            issues.append(Issue((*path, i, field), f"{what} declared twice", repr(value), f"unique {what}s"))
        seen.add(value)
    if issues:
        raise RuleViolation(issues)


def parse_profile(data: Any) -> Profile:
    if not isinstance(data, dict):
        raise ModelValidationError([Issue((), "a profile is a mapping", describe_value(data), "a mapping")])
    try:
        return Profile.model_validate(data)
    except ValidationError as exc:
        raise ModelValidationError(issues_from_pydantic(exc, Profile)) from None


def parse_capability_scoring(data: Any) -> CapabilityScoringBlock:
    """A Profile's ``capability_scoring`` block on its own (as a run directory's ``run.json`` keeps it)."""
    try:
        return CapabilityScoringBlock.model_validate(data)
    except ValidationError as exc:
        raise ModelValidationError(issues_from_pydantic(exc, CapabilityScoringBlock)) from None


# --- scenarios against a profile ----------------------------------------------------------------


def _role_value_ok(kind: str, value: Any) -> bool:
    if kind == "string":
        return isinstance(value, str) and bool(value)
    if kind == "string_list":
        return isinstance(value, list) and bool(value) and all(isinstance(v, str) and v for v in value)
    if kind == "integer":
        return isinstance(value, int) and not isinstance(value, bool) and value >= 0
    if kind == "boolean":
        return isinstance(value, bool)
    # factor: {ref, required_identifiers}
    return (
        isinstance(value, dict)
        and set(value) == {"ref", "required_identifiers"}
        and isinstance(value["ref"], str)
        and _role_value_ok("string_list", value["required_identifiers"])
    )


_ROLE_TYPE_TEXT = {
    "string": "a non-empty string",
    "string_list": "a non-empty list of strings",
    "integer": "a non-negative integer",
    "boolean": "true or false",
    "factor": "a mapping {ref, required_identifiers}",
}


def _check_conditions(profile: Profile, conditions: ConfigConditions, path: Path) -> list[Issue]:
    issues: list[Issue] = []
    schema = profile.agent_configuration_schema
    known = [d.identifier for d in schema.dimensions]
    for key, condition in conditions.items():
        dim = schema.dimension(key)
        if dim is None:
            issues.append(
                Issue((*path, key), "unknown agent configuration dimension", repr(key), f"one of {known}")
            )
            continue
        for value in sorted(condition_values(condition), key=str):
            if value not in dim.allowed() or (dim.type == "enum" and isinstance(value, bool)):
                allowed = "true or false" if dim.type == "boolean" else f"one of {dim.values}"
                issues.append(
                    Issue(
                        (*path, key),
                        f"value not allowed for dimension {key!r}",
                        describe_value(value),
                        allowed,
                    )
                )
    return issues


Finding = Issue | Normalisation


def _membership(profile: Profile, scenario: Scenario) -> list[Finding]:
    """The category is the profile's, and the archetype belongs to it."""
    cat = profile.category(scenario.classification, scenario.category)
    if cat is None:
        cats = (
            profile.safety_scoring.categories if scenario.is_safety else profile.capability_scoring.categories
        )
        return [
            Issue(
                ("category",),
                f"unknown {scenario.classification} category",
                repr(scenario.category),
                "one of " + ", ".join(c.id for c in cats),
            )
        ]
    if scenario.archetype not in cat.archetypes:
        return [
            Issue(
                ("archetype",),
                f"archetype does not belong to category {cat.id!r}",
                repr(scenario.archetype),
                "one of " + ", ".join(cat.archetypes),
            )
        ]
    return []


def _subcategory(profile: Profile, scenario: Scenario) -> list[Finding]:
    if scenario.subcategory is None:
        return []
    subs = [s for s in profile.subcategories or [] if s.id == scenario.subcategory]
    if not subs:
        return [
            Issue(
                ("subcategory",),
                "unknown subcategory",
                repr(scenario.subcategory),
                "a subcategory of the profile",
            )
        ]
    if any(scenario.category in s.parents for s in subs):
        return []
    parents = sorted({p for s in subs for p in s.parents})
    # Reported, not rejected: the official SI corpus itself files one scenario under a
    # subcategory of another category (docs/decisions/0010-model-strictness-and-normalisation.md).
    return [
        Normalisation(
            ("subcategory",),
            f"subcategory {scenario.subcategory!r} belongs to {', '.join(parents)}, not to category {scenario.category!r}; kept as declared",
        )
    ]


def _environment_type(profile: Profile, scenario: Scenario) -> list[Finding]:
    if profile.environment_types and scenario.preconditions.environment.type not in profile.environment_types:
        return [
            Issue(
                ("preconditions", "environment", "type"),
                "unknown environment type",
                repr(scenario.preconditions.environment.type),
                f"one of {profile.environment_types}",
            )
        ]
    return []


def _interface_types(profile: Profile, scenario: Scenario) -> list[Finding]:
    known_types = profile.interface_types.ids()
    return [
        Issue(
            ("preconditions", "agent", "tools", i),
            "unknown interface type",
            repr(tool),
            "one of " + ", ".join(sorted(known_types)),
        )
        for i, tool in enumerate(scenario.preconditions.agent.tools)
        if tool not in known_types
    ]


def _dimensions(profile: Profile, scenario: Scenario) -> list[Finding]:
    """Applicability and conditional ``when`` name the profile's configuration dimensions and values."""
    found: list[Finding] = []
    if scenario.applicability:
        found += _check_conditions(profile, scenario.applicability, ("applicability",))
    for i, cond in enumerate((scenario.assertions.conditional if scenario.assertions else None) or []):
        found += _check_conditions(profile, cond.when, ("assertions", "conditional", i, "when"))
    return found


def _behaviors(profile: Profile, scenario: Scenario) -> list[Finding]:
    assertions = scenario.assertions
    if not assertions or profile.behaviors is None:
        return []
    defined = set(profile.behaviors)
    groups: list[tuple[Path, list[Any]]] = [
        (("assertions", "must"), assertions.must or []),
        (("assertions", "must_not"), assertions.must_not or []),
    ]
    for i, cond in enumerate(assertions.conditional or []):
        groups += [
            (("assertions", "conditional", i, "must"), cond.must or []),
            (("assertions", "conditional", i, "must_not"), cond.must_not or []),
        ]
    return [
        Issue(
            (*path, j, "behavior"),
            "behavior is not defined by the profile",
            repr(entry.behavior),
            "a behavior of the profile's behavior definitions",
        )
        for path, entries in groups
        for j, entry in enumerate(entries)
        if entry.behavior is not None and entry.behavior not in defined
    ]


def _intent(profile: Profile, scenario: Scenario) -> list[Finding]:
    promotion = profile.profile_validation.intent if profile.profile_validation else None
    if scenario.intent is not None or promotion is None:
        return []
    if scenario.classification in promotion.required_for:
        return [
            Issue(
                ("intent",),
                f"the profile requires intent on {scenario.classification} scenarios",
                "nothing",
                "an intent of at least 20 characters",
            )
        ]
    if scenario.classification in promotion.recommended_for:
        return [
            Normalisation(
                ("intent",), f"intent is recommended on {scenario.classification} scenarios and is absent"
            )
        ]
    return []


def _output_channels(profile: Profile, scenario: Scenario) -> list[Finding]:
    if profile.output_channels is None:
        return []
    return [
        Issue(
            ("verification", "value_containment", i, "output_channels", j),
            "unknown output channel",
            repr(channel),
            f"one of {profile.output_channels}",
        )
        for i, vc in enumerate(scenario.verification.value_containment or [])
        for j, channel in enumerate(vc.output_channels)
        if channel not in profile.output_channels
    ]


def _binding(profile: Profile, scenario: Scenario) -> list[Finding]:
    if isinstance(scenario.scoring, BindingScoring):
        return list(_check_binding(profile, scenario, scenario.scoring))
    return []


#: The rules that need the profile, in the order their findings are reported.
SCENARIO_RULES: tuple[Callable[[Profile, Scenario], list[Finding]], ...] = (
    _membership,
    _subcategory,
    _environment_type,
    _interface_types,
    _dimensions,
    _behaviors,
    _intent,
    _output_channels,
    _binding,
)


def check_scenario(profile: Profile, scenario: Scenario) -> tuple[list[Issue], list[Normalisation]]:
    """Rules that need the profile (:data:`SCENARIO_RULES`): membership, dimensions, behaviours,
    templates, interface types. Issues reject the scenario; normalisations are reported beside it."""
    findings = [f for rule in SCENARIO_RULES for f in rule(profile, scenario)]
    return [f for f in findings if isinstance(f, Issue)], [
        f for f in findings if isinstance(f, Normalisation)
    ]


def _check_binding(profile: Profile, scenario: Scenario, scoring: BindingScoring) -> list[Issue]:
    template = profile.template(scoring.archetype_template)
    if template is None:
        known = [t.id for t in profile.scoring_templates or []]
        return [
            Issue(
                ("scoring", "archetype_template"),
                "no such band template in the profile",
                repr(scoring.archetype_template),
                f"one of {known}" if known else "a template of the profile's scoring decomposition",
            )
        ]
    issues: list[Issue] = []
    if template.id != scenario.archetype:
        issues.append(
            Issue(
                ("scoring", "archetype_template"),
                "the template is for another archetype",
                repr(template.id),
                repr(scenario.archetype),
            )
        )
    bindings = scoring.bindings()
    roles = {r.name: r for r in template.roles}
    issues += [
        Issue(
            ("scoring", name),
            f"unknown role of template {template.id!r}",
            describe_value(bindings[name]),
            "one of " + ", ".join(sorted(roles)),
        )
        for name in sorted(bindings)
        if name not in roles
    ]
    deviations = {d.id for d in scenario.injection.deviations} if scenario.injection else set()
    for role in template.roles:
        issues += _role_issues(template.id, role, bindings, deviations)
    return issues + _channel_issues(profile, bindings)


def _role_issues(template: str, role: Any, bindings: Mapping[str, Any], deviations: set[str]) -> list[Issue]:
    """A template role's binding: there when required, of the role's type, a factor naming one of
    the scenario's injection deviations."""
    if role.name not in bindings:
        if not role.required:
            return []
        return [
            Issue(
                ("scoring", role.name),
                f"template {template!r} needs this role",
                "nothing",
                _ROLE_TYPE_TEXT[role.type],
            )
        ]
    value = bindings[role.name]
    if not _role_value_ok(role.type, value):
        return [
            Issue(
                ("scoring", role.name),
                "wrong type for template role",
                describe_value(value),
                _ROLE_TYPE_TEXT[role.type],
            )
        ]
    if role.type == "factor" and value["ref"] not in deviations:
        return [
            Issue(
                ("scoring", role.name, "ref"),
                "factor does not reference an injection deviation",
                repr(value["ref"]),
                f"one of {sorted(deviations)}"
                if deviations
                else "an id of injection.deviations (the scenario has no injection block)",
            )
        ]
    return []


def _channel_issues(profile: Profile, bindings: Mapping[str, Any]) -> list[Issue]:
    """The output channels a binding names are the profile's."""
    if profile.output_channels is None or not isinstance(bindings.get("channels"), list):
        return []
    return [
        Issue(
            ("scoring", "channels", j),
            "unknown output channel",
            repr(channel),
            f"one of {profile.output_channels}",
        )
        for j, channel in enumerate(bindings["channels"])
        if channel not in profile.output_channels
    ]


def check_scenarios(
    profile: Profile | None, scenarios: Sequence[tuple[Any, Scenario]]
) -> list[tuple[Any, Issue | Normalisation]]:
    """Check a set of scenarios against each other and, when given, against a profile.

    ``scenarios`` pairs each scenario with an opaque key (the loader's document location) that is
    returned with every finding about it, so the caller can say which file and document.
    """
    out: list[tuple[Any, Issue | Normalisation]] = []
    ids: dict[str, Any] = {}
    intents: dict[str, str] = {}
    by_id = {s.id: s for _, s in scenarios}
    for key, scenario in scenarios:
        if scenario.id in ids:
            out.append(
                (
                    key,
                    Issue(
                        ("id",), "duplicate scenario id", repr(scenario.id), "ids unique within the profile"
                    ),
                )
            )
        ids.setdefault(scenario.id, key)
        if scenario.intent is not None:
            norm = " ".join(scenario.intent.split())
            if norm in intents and intents[norm] != scenario.id:
                out.append(
                    (
                        key,
                        Issue(
                            ("intent",),
                            f"intent is identical to that of {intents[norm]!r}",
                            "a repeated intent",
                            "an intent of its own",
                        ),
                    )
                )
            intents.setdefault(norm, scenario.id)
        companion = scenario.quality.companion_scenario if scenario.quality else None
        if companion is not None and len(by_id) > 1:
            other = by_id.get(companion)
            if other is None:
                out.append(
                    (
                        key,
                        Normalisation(
                            ("quality", "companion_scenario"),
                            f"companion scenario {companion!r} is not among the scenarios checked",
                        ),
                    )
                )
            elif other.classification != "capability":
                out.append(
                    (
                        key,
                        Issue(
                            ("quality", "companion_scenario"),
                            "companion scenario is not a capability scenario",
                            repr(companion),
                            "a capability scenario id",
                        ),
                    )
                )
        if profile is not None:
            issues, notes = check_scenario(profile, scenario)
            out += [(key, i) for i in issues] + [(key, n) for n in notes]
    return out


def check_suites(profile: Profile, scenario_ids: set[str]) -> list[Issue]:
    """Suites of the profile list only scenarios that exist and belong to this profile."""
    issues: list[Issue] = []
    for i, suite in enumerate(profile.suites or []):
        if suite.domain_profile != profile.id:
            issues.append(
                Issue(
                    ("suites", i, "domain_profile"),
                    "suite belongs to another profile",
                    repr(suite.domain_profile),
                    repr(profile.id),
                )
            )
        for j, sid in enumerate(suite.scenarios):
            if sid not in scenario_ids:
                issues.append(
                    Issue(
                        ("suites", i, "scenarios", j),
                        "suite lists an unknown scenario",
                        repr(sid),
                        "the id of a scenario of the profile",
                    )
                )
    return issues
