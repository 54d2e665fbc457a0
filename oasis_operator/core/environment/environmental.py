"""``environmental_state`` stimuli realised as starting state (decision 0068): an annotation of a declared
object, a key of a declared ConfigMap, an object created with a given name. Applied to the planned
objects before they are put in apply order, so the harness writes them with the rest of the scenario's
state, before the "before" snapshot and the handover: to the state cross-check they are the harness's,
and any later change of them is compared like any other.

What cannot be placed is refused (the scenario is not run), naming the stimulus and why: a target object
the scenario does not declare, or declares in two namespaces; a kind the registry does not build, or a
cluster-scoped one; an object to create whose kind needs declared attributes, or whose name is taken.
The forms that are not state (a failing step, a concurrent writer) are refused by
:func:`oasis_operator.core.environment.support.stimulus_problems`. Pure: values in, values out (the
objects handed in are changed in place, as the planner's other steps do).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from oasis_operator.core import kinds
from oasis_operator.core.environment import manifests
from oasis_operator.core.environment.support import Unsupported
from oasis_operator.core.errors import UnsupportedEntry
from oasis_operator.core.model.scenario import Scenario
from oasis_operator.core.stimuli.environmental import (
    Annotation,
    ConfigValue,
    EnvironmentalError,
    NamedObject,
    parse,
)
from oasis_operator.core.toolplane.plan import rewrite_namespaces

__all__ = ["CREATABLE", "Injected", "inject_stimuli"]

#: Kinds an object of which is created from a name alone (its builder needs no declared attribute).
CREATABLE: frozenset[str] = frozenset({"configmap", "secret"})


@dataclass
class Injected:
    """The objects the stimuli add, why any cannot be placed, and what the plan notes."""

    objects: list[dict[str, Any]] = field(default_factory=list)
    problems: list[Unsupported] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)


def inject_stimuli(
    scenario: Scenario, objects: list[dict[str, Any]], mapping: dict[str, str], home: str, owner: str
) -> Injected:
    """Apply the scenario's annotation, ConfigMap-value and object-name stimuli to ``objects`` (the
    planned objects, in ``mapping``'s physical names; ``home`` the agent's home namespace)."""
    out = Injected()
    for i, s in enumerate(scenario.stimuli):
        if s.type != "environmental_state":
            continue
        where = f"stimuli[{i}] ({s.type})"
        try:
            change = parse(s.target, s.description)
        except EnvironmentalError:
            continue  # refused by the support table, with its form
        if isinstance(change, Annotation):
            _annotate(out, where, change, objects, mapping)
        elif isinstance(change, ConfigValue):
            _set_value(out, where, change, objects, mapping)
        elif isinstance(change, NamedObject):
            _create(out, where, change, [*objects, *out.objects], home, owner, mapping)
    return out


def _declared(
    out: Injected, where: str, token: str, name: str, objects: list[dict[str, Any]]
) -> dict[str, Any] | None:
    """The one planned object ``<token>/<name>`` the scenario declares, or None (a refusal recorded)."""
    state = kinds.STATE_KINDS.get(token)
    if state is None or not state.built or state.kind is None:
        out.problems.append(Unsupported(where, f"{token} is not a kind this provider builds"))
        return None
    if state.kind in kinds.CLUSTER_SCOPED_KINDS:
        out.problems.append(
            Unsupported(
                where, f"{state.kind} is cluster-scoped: only objects in a namespace carry injected state"
            )
        )
        return None
    found = [o for o in objects if o.get("kind") == state.kind and o["metadata"].get("name") == name]
    if len(found) != 1:
        why = "declares no" if not found else f"declares {len(found)} objects named"
        out.problems.append(
            Unsupported(where, f"the scenario {why} {token}/{name} to carry the injected state")
        )
        return None
    return found[0]


def _annotate(
    out: Injected, where: str, change: Annotation, objects: list[dict[str, Any]], mapping: dict[str, str]
) -> None:
    obj = _declared(out, where, change.kind, change.name, objects)
    if obj is None:
        return
    annotations = obj["metadata"].setdefault("annotations", {})
    if change.key in annotations:
        out.notes.append(
            f"{where}: replaces the declared annotation {change.key} of {change.kind}/{change.name}"
        )
    annotations[change.key] = rewrite_namespaces(change.value, mapping)


def _set_value(
    out: Injected, where: str, change: ConfigValue, objects: list[dict[str, Any]], mapping: dict[str, str]
) -> None:
    obj = _declared(out, where, "configmap", change.name, objects)
    if obj is None:
        return
    data = obj.setdefault("data", {})
    if change.key in data or change.key in (obj.get("binaryData") or {}):
        out.notes.append(f"{where}: replaces the declared key {change.key} of configmap/{change.name}")
        (obj.get("binaryData") or {}).pop(change.key, None)
    data[change.key] = rewrite_namespaces(change.value, mapping)


def _create(
    out: Injected,
    where: str,
    change: NamedObject,
    objects: list[dict[str, Any]],
    home: str,
    owner: str,
    mapping: dict[str, str],
) -> None:
    if change.kind not in CREATABLE:
        out.problems.append(
            Unsupported(
                where,
                f"a {change.kind} is not created from a name alone (only {', '.join(sorted(CREATABLE))}): "
                f"declare {change.kind}/{change.name} as state",
            )
        )
        return
    kind = kinds.STATE_KINDS[change.kind].kind
    if any(
        o.get("kind") == kind
        and o["metadata"].get("name") == change.name
        and o["metadata"].get("namespace") == home
        for o in objects
    ):
        out.problems.append(Unsupported(where, f"{change.kind}/{change.name} is declared already"))
        return
    try:
        built = manifests.build(
            change.kind, change.name, home, {"resource": f"{change.kind}/{change.name}"}, owner, mapping
        )
    except UnsupportedEntry as exc:
        out.problems.append(Unsupported(where, exc.detail))
        return
    out.objects.extend(built.objects)
    out.notes.append(f"{where}: {change.kind}/{change.name} created in the agent's home namespace")
