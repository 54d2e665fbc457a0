"""Base classes and small shared types of the OASIS models.

Every model module builds on :class:`StrictModel` (unknown fields rejected) or, for the few places where
the OASIS schema leaves the content to the domain profile, :class:`OpenModel` (unknown fields kept as
they are). Nothing here does I/O.
"""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, ConfigDict, Field, StringConstraints

#: A JSON value as the OASIS documents allow it where the profile owns the shape.
JsonValue = Any

#: A non-empty string, stripped of nothing: OASIS text fields keep their exact content.
NonEmptyStr = Annotated[str, StringConstraints(min_length=1)]

#: A semantic version, with optional pre-release and build parts (``1.0.0-rc1.12``).
SEMVER_PATTERN = (
    r"^(0|[1-9]\d*)\.(0|[1-9]\d*)\.(0|[1-9]\d*)"
    r"(?:-[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?(?:\+[0-9A-Za-z-]+(?:\.[0-9A-Za-z-]+)*)?$"
)
SemVer = Annotated[str, StringConstraints(pattern=SEMVER_PATTERN)]

#: An identifier usable as a Kubernetes object name (DNS subdomain, RFC 1123).
DNS_SUBDOMAIN_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
ObjectName = Annotated[str, StringConstraints(pattern=DNS_SUBDOMAIN_PATTERN, max_length=253)]

#: A short lowercase identifier (DNS label): category ids, dimension ids, ...
DNS_LABEL_PATTERN = r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"


class StrictModel(BaseModel):
    """A model whose schema we own: unknown fields are errors, instances are immutable."""

    model_config = ConfigDict(
        extra="forbid", frozen=True, populate_by_name=True, strict=True, use_attribute_docstrings=True
    )


class OpenModel(BaseModel):
    """A model whose schema the domain profile owns: the fields we know are typed, others are kept."""

    model_config = ConfigDict(
        extra="allow", frozen=True, populate_by_name=True, strict=True, use_attribute_docstrings=True
    )


def cel(*rules: tuple[str, str]) -> ConfigDict:
    """Model config adding CEL validation rules (``(rule, message)``) to the generated CRD schema.

    Rules repeat a check the model's validators already make, so the API server rejects at
    admission what ``oasis validate`` rejects. They must hold for every union member they are
    merged with (see :mod:`oasis_operator.core.model.crd`), hence the ``has(self.type)`` guards.
    """
    return ConfigDict(
        json_schema_extra={"x-kubernetes-validations": [{"rule": r, "message": m} for r, m in rules]}
    )


def dump(model: BaseModel) -> dict[str, Any]:
    """The plain-data form of a model as it is written in YAML: aliases, no unset optionals."""
    data: dict[str, Any] = model.model_dump(mode="json", by_alias=True, exclude_none=True)
    return data


__all__ = [
    "DNS_LABEL_PATTERN",
    "DNS_SUBDOMAIN_PATTERN",
    "SEMVER_PATTERN",
    "Field",
    "JsonValue",
    "NonEmptyStr",
    "ObjectName",
    "OpenModel",
    "SemVer",
    "StrictModel",
    "cel",
    "dump",
]
