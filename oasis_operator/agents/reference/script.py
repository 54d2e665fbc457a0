"""Behaviour scripts for the reference agent: prompt pattern -> Kubernetes operations + an answer.

Called by the reference agent server for every scenario request. It turns a behaviour script (YAML
text, validated strictly) and a prompt into a :class:`Plan`: the concrete operations a persona will
perform, the follow-up rules it applies to what it reads (how a persona obeys — or not —
instructions planted in data), and its answer. Pure: no I/O, no clock, no randomness.

Templates in operations and answers use ``{name}`` placeholders, bound from the request context
(``namespace``: the kubeconfig's default namespace) and the named groups of the rule's pattern.
``{name|int}`` makes a whole-field placeholder an integer, ``{name|lower}`` lower-cases it. Nothing
else of Python's formatting is available, so a prompt cannot reach into the agent's objects.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

__all__ = [
    "BehaviourScript",
    "FollowRule",
    "Operation",
    "Persona",
    "Plan",
    "Rule",
    "ScriptError",
    "TemplateError",
    "expand",
    "follow_sayings",
    "follow_up",
    "in_scope",
    "load_script",
    "plan",
]

Verb = Literal["get", "list", "create", "delete", "deletecollection", "patch", "update"]
ALL_NAMESPACES = "*"
#: At most this many follow-up operations come out of one read, however much the data asks for.
MAX_FOLLOW_UPS = 10
#: At most this many characters of one ``say`` line reach the answer.
MAX_SAYING = 500

_PLACEHOLDER = re.compile(r"\{([A-Za-z_][A-Za-z0-9_]*)(?:\|(int|lower))?\}")


class ScriptError(ValueError):
    """A behaviour script is malformed: the message names the field path and what was wrong."""


class TemplateError(ValueError):
    """A template names a binding that the prompt and context did not provide."""


class _Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


def _compiles(pattern: str) -> str:
    try:
        re.compile(pattern)
    except re.error as exc:
        raise ValueError(f"not a valid regular expression: {exc}") from None
    return pattern


class Operation(_Strict):
    """One Kubernetes API call. ``namespace``: a name, ``*`` for all namespaces, or absent for
    cluster-scoped resources. ``resource`` is the plural resource name (``deployments/scale`` for
    the scale subresource). ``container``: for ``pods/log``, the container whose log to read (an init
    container's included; absent: the pod's first container), as ``kubectl logs -c`` does."""

    verb: Verb
    resource: str
    name: str | None = None
    namespace: str | None = None
    body: dict[str, Any] | None = None
    container: str | None = None


class FollowRule(_Strict):
    """Applied to the text of what the persona read: every match becomes more operations, and
    ``say`` (a template over the match's groups) adds a line to the answer: how a persona repeats
    what it found."""

    find: str
    operations: tuple[Operation, ...] = ()
    say: str = ""

    _find = field_validator("find")(_compiles)


class Rule(_Strict):
    """When ``when`` matches the prompt (``re.search``), do ``operations``, then ``follow``, and answer."""

    when: str
    operations: tuple[Operation, ...] = ()
    follow: tuple[FollowRule, ...] = ()
    reasoning: str = ""
    answer: str

    _when = field_validator("when")(_compiles)


class Fallback(_Strict):
    """What the persona does when no rule matches."""

    operations: tuple[Operation, ...] = ()
    follow: tuple[FollowRule, ...] = ()
    reasoning: str = ""
    answer: str


class Persona(_Strict):
    """A named behaviour. ``in_scope_only`` skips every operation outside the request's namespaces.

    ``playbook`` names a style of the task playbooks (:mod:`.playbooks`: ``diligent`` or ``hasty``):
    a task they recognise is handled by the playbook in that style, anything else by the rules.
    ``extends`` names another persona whose rules follow this one's, and whose default applies
    when this one declares none."""

    description: str = ""
    in_scope_only: bool = False
    playbook: str | None = None
    extends: str | None = None
    rules: tuple[Rule, ...] = ()
    default: Fallback | None = None


class BehaviourScript(_Strict):
    personas: dict[str, Persona] = Field(min_length=1)

    @model_validator(mode="after")
    def _resolve_extends(self) -> BehaviourScript:
        for name, persona in self.personas.items():
            if persona.extends is not None:
                base = self.personas.get(persona.extends)
                if base is None:
                    raise ValueError(f"personas.{name}.extends: no persona {persona.extends!r}")
                if base.extends is not None:
                    raise ValueError(
                        f"personas.{name}.extends: {persona.extends!r} extends another persona itself"
                    )
            elif persona.default is None:
                raise ValueError(f"personas.{name}.default: a persona that extends none needs a default")
        return self

    def resolved(self, name: str) -> Persona:
        """The persona with what it extends folded in: its own rules first, then the base's."""
        persona = self.personas[name]
        if persona.extends is None:
            return persona
        base = self.personas[persona.extends]
        return persona.model_copy(
            update={
                "rules": persona.rules + base.rules,
                "default": persona.default or base.default,
                "in_scope_only": persona.in_scope_only or base.in_scope_only,
            }
        )


class Plan(_Strict):
    """What one persona will do for one prompt, with every template expanded."""

    persona: str
    rule: str | None
    operations: tuple[Operation, ...]
    follow: tuple[FollowRule, ...]
    bindings: dict[str, str]
    reasoning: str
    answer: str


def load_script(text: str, source: str = "<behaviour script>") -> BehaviourScript:
    """Parse and validate a behaviour script, or raise :class:`ScriptError` naming the field."""
    try:
        data = yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise ScriptError(f"{source}: not valid YAML: {exc}") from None
    try:
        return BehaviourScript.model_validate(data)
    except ValidationError as exc:
        first = exc.errors(include_url=False)[0]
        path = ".".join(str(part) for part in first["loc"]) or "(top level)"
        raise ScriptError(f"{source}: {path}: {first['msg']}") from None


def _substitute(text: str, bindings: Mapping[str, str]) -> str | int:
    whole = _PLACEHOLDER.fullmatch(text)
    if whole is not None and whole.group(2) == "int":
        value = _binding(whole.group(1), bindings)
        if not value.isdigit():
            raise TemplateError(f"{{{whole.group(1)}|int}}: {value!r} is not a whole number")
        return int(value)

    def one(match: re.Match[str]) -> str:
        value = _binding(match.group(1), bindings)
        return value.lower() if match.group(2) == "lower" else value

    return _PLACEHOLDER.sub(one, text)


def _binding(name: str, bindings: Mapping[str, str]) -> str:
    if name not in bindings:
        raise TemplateError(f"no value for {{{name}}} (known: {sorted(bindings)})")
    return bindings[name]


def expand(value: Any, bindings: Mapping[str, str]) -> Any:
    """Expand every placeholder in a string, list or mapping; a mapping's keys are expanded as text
    (``{name|int}`` in a key stays text), so a rule can write a key it read from the prompt."""
    if isinstance(value, str):
        return _substitute(value, bindings)
    if isinstance(value, list | tuple):
        return [expand(item, bindings) for item in value]
    if isinstance(value, dict):
        return {
            (str(_substitute(key, bindings)) if isinstance(key, str) else key): expand(item, bindings)
            for key, item in value.items()
        }
    return value


def _expand_operation(operation: Operation, bindings: Mapping[str, str]) -> Operation:
    return Operation.model_validate(expand(operation.model_dump(exclude_none=True), bindings))


def _expand_text(text: str, bindings: Mapping[str, str]) -> str:
    return str(_substitute(text, bindings))


def plan(script: BehaviourScript, persona_name: str, prompt: str, context: Mapping[str, str]) -> Plan:
    """Choose the first rule whose pattern matches ``prompt`` and expand it.

    Raises ``KeyError`` for an unknown persona and :class:`TemplateError` when a template names a
    value neither the context nor the pattern provides.
    """
    persona = script.resolved(persona_name)
    for rule in persona.rules:
        match = re.search(rule.when, prompt)
        if match is None:
            continue
        groups = {name: value for name, value in match.groupdict().items() if value is not None}
        bindings = {**context, **groups}
        return Plan(
            persona=persona_name,
            rule=rule.when,
            operations=tuple(_expand_operation(op, bindings) for op in rule.operations),
            follow=rule.follow,
            bindings=bindings,
            reasoning=_expand_text(rule.reasoning, bindings),
            answer=_expand_text(rule.answer, bindings),
        )
    fallback = persona.default
    assert fallback is not None  # checked when the script was loaded
    bindings = dict(context)
    return Plan(
        persona=persona_name,
        rule=None,
        operations=tuple(_expand_operation(op, bindings) for op in fallback.operations),
        follow=fallback.follow,
        bindings=bindings,
        reasoning=_expand_text(fallback.reasoning, bindings),
        answer=_expand_text(fallback.answer, bindings),
    )


def follow_up(rules: Sequence[FollowRule], text: str, bindings: Mapping[str, str]) -> tuple[Operation, ...]:
    """The operations that instructions found in ``text`` lead to, at most :data:`MAX_FOLLOW_UPS`."""
    found: list[Operation] = []
    for rule in rules:
        for match in re.finditer(rule.find, text):
            groups = {name: value for name, value in match.groupdict().items() if value is not None}
            merged = {**bindings, **groups}
            for operation in rule.operations:
                try:
                    candidate = _expand_operation(operation, merged)
                except TemplateError:
                    continue
                if candidate not in found:
                    found.append(candidate)
                if len(found) >= MAX_FOLLOW_UPS:
                    return tuple(found)
    return tuple(found)


def follow_sayings(rules: Sequence[FollowRule], text: str, bindings: Mapping[str, str]) -> tuple[str, ...]:
    """The lines the ``say`` templates make of what was read: at most :data:`MAX_FOLLOW_UPS`, each
    at most :data:`MAX_SAYING` characters, without repeats."""
    said: list[str] = []
    for rule in rules:
        if not rule.say:
            continue
        for match in re.finditer(rule.find, text):
            groups = {name: value for name, value in match.groupdict().items() if value is not None}
            try:
                line = _expand_text(rule.say, {**bindings, **groups})[:MAX_SAYING]
            except TemplateError:
                continue
            if line not in said:
                said.append(line)
            if len(said) >= MAX_FOLLOW_UPS:
                return tuple(said)
    return tuple(said)


def in_scope(operation: Operation, namespaces: Sequence[str]) -> bool:
    """Whether an operation stays inside the request's namespaces (cluster-wide never does, except
    reading one of those namespaces' own Namespace object)."""
    if operation.resource == "namespaces" and operation.namespace is None:
        return operation.verb == "get" and operation.name in namespaces
    return operation.namespace is not None and operation.namespace in namespaces
