"""Validation problems and normalisation notes, as values a person can act on.

The ``parse_*`` functions of the model modules raise :class:`ModelValidationError` holding
:class:`Issue` values (field path, what was found, what was expected) and return
:class:`Normalisation` notes for accepted-but-rewritten input. The loader adds the file, document
index and line; the CLI prints them. Pydantic's own errors are translated here, so no caller ever
sees a ``pydantic.ValidationError``.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass, field
from typing import Any

from pydantic import BaseModel, ValidationError
from pydantic_core import PydanticCustomError

#: One step of a field path: a mapping key or a list index.
PathPart = str | int
Path = tuple[PathPart, ...]

#: The error type of our own validators (see :func:`fail`).
OASIS_ERROR_TYPE = "oasis"


def format_path(path: Sequence[PathPart]) -> str:
    """``("stimuli", 0, "value")`` -> ``stimuli[0].value``; the empty path is ``<document>``."""
    out = ""
    for part in path:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else part
    return out or "<document>"


def describe_value(value: Any, limit: int = 60) -> str:
    """A short, type-revealing rendering of an input value for messages."""
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        text = value if len(value) <= limit else value[: limit - 3] + "..."
        return repr(text)
    if isinstance(value, int | float):
        return repr(value)
    if isinstance(value, dict):
        keys = ", ".join(str(k) for k in list(value)[:6])
        return f"a mapping with keys {{{keys}{', ...' if len(value) > 6 else ''}}}"
    if isinstance(value, list):
        return f"a list of {len(value)} item{'s' if len(value) != 1 else ''}"
    return type(value).__name__


@dataclass(frozen=True)
class Issue:
    """One validation problem at one field path."""

    path: Path
    message: str
    found: str | None = None
    expected: str | None = None

    def render(self) -> str:
        text = f"{format_path(self.path)}: {self.message}"
        details = []
        if self.found is not None:
            details.append(f"found {self.found}")
        if self.expected is not None:
            details.append(f"expected {self.expected}")
        if details:
            text += f" ({'; '.join(details)})"
        return text

    def under(self, prefix: Sequence[PathPart]) -> Issue:
        return Issue(tuple(prefix) + self.path, self.message, self.found, self.expected)


@dataclass(frozen=True)
class Normalisation:
    """Input that was accepted in a non-canonical form and rewritten; reported as a warning."""

    path: Path
    message: str

    def render(self) -> str:
        return f"{format_path(self.path)}: {self.message}"

    def under(self, prefix: Sequence[PathPart]) -> Normalisation:
        return Normalisation(tuple(prefix) + self.path, self.message)


@dataclass
class ModelValidationError(Exception):
    """A document did not validate; ``issues`` says where and why (at least one)."""

    issues: list[Issue] = field(default_factory=list)

    def __post_init__(self) -> None:
        super().__init__(self.__str__())

    def __str__(self) -> str:
        return "; ".join(issue.render() for issue in self.issues)


class RuleViolation(ValueError):
    """Carries several cross-field issues out of a model validator (paths relative to that model)."""

    def __init__(self, issues: list[Issue]) -> None:
        super().__init__("; ".join(i.render() for i in issues))
        self.issues = issues


def fail(
    message: str, *, found: Any = None, expected: str | None = None, found_text: str | None = None
) -> PydanticCustomError:
    """An error for our own validators to ``raise``; keeps found/expected for :class:`Issue`."""
    ctx: dict[str, Any] = {}
    if found_text is not None:
        ctx["found"] = found_text
    elif found is not None:
        ctx["found"] = describe_value(found)
    if expected is not None:
        ctx["expected"] = expected
    # Braces in messages would be taken for placeholders by pydantic-core.
    safe = message.replace("{", "(").replace("}", ")")
    return PydanticCustomError(OASIS_ERROR_TYPE, safe, ctx)


#: Location segments pydantic inserts for tagged unions; they are not field names of the document.
_UNION_TAG_SEGMENTS = frozenset(
    {
        "operator_prompt",
        "environmental_state",
        "tool_output_injection",
        "conversation_context",
        "temporal_condition",
        "binary",
        "weighted",
        "binding",
    }
)
#: Segments pydantic inserts for validator wrappers and constrained types.
_INTERNAL_SEGMENT_PREFIXES = ("function-", "constrained-", "lax-", "strict-", "json-or-python")

_TYPE_NAMES = {
    "string_type": "a string",
    "int_type": "an integer",
    "int_parsing": "an integer",
    "int_from_float": "an integer",
    "float_type": "a number",
    "float_parsing": "a number",
    "bool_type": "true or false",
    "bool_parsing": "true or false",
    "list_type": "a list",
    "dict_type": "a mapping",
    "model_type": "a mapping",
    "model_attributes_type": "a mapping",
}


def _clean_loc(loc: Iterable[PathPart]) -> Path:
    parts: list[PathPart] = []
    for part in loc:
        if isinstance(part, str):
            if (
                part in _UNION_TAG_SEGMENTS
                and parts
                and (isinstance(parts[-1], int) or parts[-1] == "scoring")
            ):
                continue
            if (
                part.startswith(_INTERNAL_SEGMENT_PREFIXES)
                or part.startswith("dict[")
                or part.startswith("list[")
            ):
                continue
        parts.append(part)
    return tuple(parts)


def _allowed_fields(root: type[BaseModel] | None, path: Path) -> list[str] | None:
    """The field names of the model at ``path`` (the parent of an unknown field), if resolvable."""
    if root is None:
        return None
    from typing import get_args

    current: Any = root
    for part in path:
        if isinstance(part, int):
            continue
        if isinstance(current, list):  # a union of models: the tag segment picks the member
            current = _union_member(current, part)
            continue
        if not (isinstance(current, type) and issubclass(current, BaseModel)):
            return None
        info = None
        for name, f in current.model_fields.items():
            if (f.alias or name) == part:
                info = f
                break
        if info is None:
            return None
        current = _model_in(info.annotation, get_args)
        if current is None:
            return None
    if isinstance(current, type) and issubclass(current, BaseModel):
        return sorted(f.alias or n for n, f in current.model_fields.items())
    return None


def _union_member(models: list[type[BaseModel]], tag: PathPart) -> type[BaseModel] | None:
    from typing import get_args

    for model in models:
        type_field = model.model_fields.get("type")
        if type_field is not None and get_args(type_field.annotation) == (tag,):
            return model
        if tag == "binding" and "archetype_template" in model.model_fields:
            return model
    return None


def _model_in(annotation: Any, get_args: Any) -> type[BaseModel] | list[type[BaseModel]] | None:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return annotation
    models = []
    stack = [annotation]
    while stack:
        item = stack.pop()
        if isinstance(item, type) and issubclass(item, BaseModel):
            models.append(item)
        else:
            stack.extend(get_args(item))
    if not models:
        return None
    return models[0] if len(models) == 1 else models


def issues_from_pydantic(exc: ValidationError, root: type[BaseModel] | None = None) -> list[Issue]:
    """Translate a pydantic error into our issues (one per problem, sorted by path, deduplicated)."""
    issues: list[Issue] = []
    for err in exc.errors(include_url=False):
        issues += _issues_of(_Error.of(err), root)
    return dedupe(issues)


@dataclass(frozen=True)
class _Error:
    """One pydantic error, read: where (``raw_loc`` as pydantic says it, ``path`` as we do), its type,
    its context, the value it refused, its message, and whether it is about a mapping's key."""

    raw_loc: tuple[Any, ...]
    path: Path
    kind: str
    ctx: dict[str, Any]
    value: Any
    msg: str
    key_error: bool

    @classmethod
    def of(cls, err: Any) -> _Error:
        raw_loc = tuple(err["loc"])
        key_error = bool(raw_loc) and raw_loc[-1] == "[key]"
        return cls(
            raw_loc=raw_loc,
            path=_clean_loc(raw_loc[:-1] if key_error else raw_loc),
            kind=err["type"],
            ctx=err.get("ctx") or {},
            value=err.get("input"),
            msg=err["msg"],
            key_error=key_error,
        )

    @property
    def found(self) -> str:
        return describe_value(self.value)


def _issues_of(e: _Error, root: type[BaseModel] | None) -> list[Issue]:
    """A rule's own issues, where it reported them; else one issue for the error's type."""
    violation = e.ctx.get("error")
    if isinstance(violation, RuleViolation):
        return [issue.under(e.path) for issue in violation.issues]
    if e.kind == "extra_forbidden":
        return [_unknown_field(e, root)]
    if e.key_error and e.kind not in (OASIS_ERROR_TYPE, "missing"):
        return [_bad_key(e)]
    return [_BY_TYPE.get(e.kind, _as_reported)(e)]


def _unknown_field(e: _Error, root: type[BaseModel] | None) -> Issue:
    allowed = _allowed_fields(root, e.raw_loc[:-1])
    expected = "one of " + ", ".join(allowed) if allowed else "no such field"
    return Issue(e.path, f"unknown field {e.path[-1]!r}", e.found, expected)


def _bad_key(e: _Error) -> Issue:
    expected = (
        str(e.ctx.get("expected")) if e.kind == "literal_error" else _TYPE_NAMES.get(e.kind, "a valid key")
    )
    return Issue(e.path, f"key {e.found} not allowed", e.found, expected)


def _as_reported(e: _Error) -> Issue:
    return Issue(e.path, e.msg, e.found, None)


def _too_short(e: _Error) -> Issue:
    limit = e.ctx.get("min_length")
    what = "characters" if e.kind == "string_too_short" else "items"
    return Issue(e.path, "too short", e.found, f"at least {limit} {what if limit != 1 else what[:-1]}")


def _too_long(e: _Error) -> Issue:
    what = "characters" if e.kind == "string_too_long" else "items"
    return Issue(e.path, "too long", e.found, f"at most {e.ctx.get('max_length')} {what}")


_COMPARISONS = {"greater_than_equal": ">=", "greater_than": ">", "less_than_equal": "<=", "less_than": "<"}


def _out_of_range(e: _Error) -> Issue:
    bound = next(iter(e.ctx.values())) if e.ctx else "?"
    if isinstance(bound, float) and bound.is_integer():
        bound = int(bound)
    return Issue(e.path, "out of range", e.found, f"a number {_COMPARISONS[e.kind]} {bound}")


def _union_tag(e: _Error) -> Path:
    return (*e.path, str(e.ctx.get("discriminator", "")).strip("'"))


#: pydantic's error type -> our issue for it.
_BY_TYPE: dict[str, Callable[[_Error], Issue]] = {
    OASIS_ERROR_TYPE: lambda e: Issue(e.path, e.msg, e.ctx.get("found"), e.ctx.get("expected")),
    "missing": lambda e: Issue(e.path, "required field is missing", "nothing", "a value"),
    "literal_error": lambda e: Issue(e.path, "value not allowed", e.found, str(e.ctx.get("expected"))),
    **{kind: (lambda e: Issue(e.path, "wrong type", e.found, _TYPE_NAMES[e.kind])) for kind in _TYPE_NAMES},
    "string_pattern_mismatch": lambda e: Issue(
        e.path, "malformed value", e.found, f"a string matching {e.ctx.get('pattern')}"
    ),
    "string_too_short": _too_short,
    "too_short": _too_short,
    "string_too_long": _too_long,
    "too_long": _too_long,
    **dict.fromkeys(_COMPARISONS, _out_of_range),
    "union_tag_invalid": lambda e: Issue(
        _union_tag(e), "unknown type", repr(e.ctx.get("tag")), f"one of {e.ctx.get('expected_tags')}"
    ),
    "union_tag_not_found": lambda e: Issue(_union_tag(e), "required field is missing", "nothing", "a value"),
}


def dedupe(issues: Iterable[Issue]) -> list[Issue]:
    seen: set[tuple[str, str, str | None, str | None]] = set()
    out: list[Issue] = []
    for issue in issues:
        key = (format_path(issue.path), issue.message, issue.found, issue.expected)
        if key not in seen:
            seen.add(key)
            out.append(issue)
    return out
