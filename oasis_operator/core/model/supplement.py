"""Our own transcription of profile data that a profile publishes only as prose.

Who calls it: ``oasis import profile`` merges a :class:`ProfileSupplement` (from
``oasis_operator/loading/supplements/<profile>.yaml``) into the profile it assembles from the profile's
machine-readable blocks, and reports for every field which of the two it came from. ``oasis validate``
checks supplement files on their own. Raw dict -> :class:`ProfileSupplement` or
:class:`ModelValidationError`.
"""

from __future__ import annotations

from typing import Annotated, Any, Self

from pydantic import Field, ValidationError, model_validator

from oasis_operator.core.model.base import NonEmptyStr, ObjectName, SemVer, StrictModel
from oasis_operator.core.model.errors import (
    Issue,
    ModelValidationError,
    RuleViolation,
    describe_value,
    issues_from_pydantic,
)
from oasis_operator.core.model.profile import Profile


class ProfileSupplement(StrictModel):
    #: The id of the profile this transcribes (``Profile.id``).
    supplement_for: ObjectName
    #: The profile version the transcription was made from.
    profile_version: SemVer
    #: Field -> where in the profile the prose is (file and section), one per key of ``values``.
    sources: Annotated[dict[NonEmptyStr, NonEmptyStr], Field(min_length=1)]
    #: Profile fields, in the ``Profile`` model's shape.
    values: Annotated[dict[NonEmptyStr, Any], Field(min_length=1)]

    @model_validator(mode="after")
    def _fields_known_and_sourced(self) -> Self:
        issues: list[Issue] = []
        known = set(Profile.model_fields)
        for key in self.values:
            if key not in known:
                issues.append(
                    Issue(
                        ("values", key),
                        "not a field of the Profile model",
                        repr(key),
                        "one of " + ", ".join(sorted(known)),
                    )
                )
            if key not in self.sources:
                issues.append(
                    Issue(
                        ("sources", key),
                        "every transcribed field says where it comes from",
                        "nothing",
                        "the file and section it transcribes",
                    )
                )
        for key in self.sources:
            if key not in self.values:
                issues.append(
                    Issue(
                        ("sources", key),
                        "source for a field that is not transcribed",
                        repr(key),
                        "a key of values",
                    )
                )
        if issues:
            raise RuleViolation(issues)
        return self


def parse_supplement(data: Any) -> ProfileSupplement:
    if not isinstance(data, dict):
        raise ModelValidationError(
            [Issue((), "a profile supplement is a mapping", describe_value(data), "a mapping")]
        )
    try:
        return ProfileSupplement.model_validate(data)
    except ValidationError as exc:
        raise ModelValidationError(issues_from_pydantic(exc, ProfileSupplement)) from None
