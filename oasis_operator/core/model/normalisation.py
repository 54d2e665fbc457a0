"""Rewrite the heterogeneous forms found in the official corpus into one canonical form.

Called by :func:`oasis_operator.core.model.scenario.parse_scenario` on the raw dict before model
validation. Each rewrite returns a :class:`~oasis_operator.core.model.errors.Normalisation` note, so
the CLI can show the author what was accepted in a non-canonical form. The input is never mutated.

Canonical forms (the form ``oasis validate`` is silent about and our CRDs store):

* ``env`` of a state entry or of a container is a **list** of ``{name, value}`` or
  ``{name, valueFrom}`` entries, as in a Kubernetes container. The map form
  ``{NAME: "value"}`` / ``{NAME: {valueFrom: ...}}`` is rewritten to the list form, in the map's order.
* ``volumes_from`` entries are ``kind/name``. A bare ``name`` gets the kind of the one ConfigMap or
  Secret of that name declared in the same state list; if there is none, or both exist, the bare name
  is left as it is and model validation reports it.
"""

from __future__ import annotations

import copy
from typing import Any

from oasis_operator.core.model.errors import Normalisation, Path

#: Kinds a workload can take volumes from, in the order we look them up.
VOLUME_SOURCE_KINDS = ("configmap", "secret")


def normalise_env(env: Any, path: Path) -> tuple[Any, list[Normalisation]]:
    """Map-form ``env`` -> list form; anything else is returned unchanged for validation to judge."""
    if not isinstance(env, dict):
        return env, []
    out: list[Any] = []
    for name, value in env.items():
        if isinstance(value, dict) and set(value) <= {"value", "valueFrom"}:
            out.append({"name": name, **value})
        elif isinstance(value, str | int | float | bool) and not isinstance(value, bool):
            out.append({"name": name, "value": str(value) if not isinstance(value, str) else value})
        else:
            # Leave an unconvertible entry in place so that validation names the exact key.
            return env, []
    note = Normalisation(
        path,
        f"env given as a mapping of {len(env)} variable(s); rewritten as a list of {{name, value|valueFrom}}",
    )
    return out, [note]


def _declared_sources(state: list[Any]) -> dict[str, set[str]]:
    by_name: dict[str, set[str]] = {}
    for entry in state:
        if isinstance(entry, dict) and isinstance(entry.get("resource"), str) and "/" in entry["resource"]:
            kind, _, name = entry["resource"].partition("/")
            if kind in VOLUME_SOURCE_KINDS:
                by_name.setdefault(name, set()).add(kind)
    return by_name


def normalise_volumes_from(
    volumes: Any, declared: dict[str, set[str]], path: Path
) -> tuple[Any, list[Normalisation]]:
    if not isinstance(volumes, list):
        return volumes, []
    out: list[Any] = []
    notes: list[Normalisation] = []
    for i, item in enumerate(volumes):
        if isinstance(item, str) and item and "/" not in item:
            kinds = declared.get(item, set())
            if len(kinds) == 1:
                kind = next(iter(kinds))
                out.append(f"{kind}/{item}")
                notes.append(
                    Normalisation(
                        (*path, i), f"volume source {item!r} has no kind prefix; taken as {kind}/{item}"
                    )
                )
                continue
        out.append(item)
    return out, notes


def normalise_state_list(state: Any, path: Path) -> tuple[Any, list[Normalisation]]:
    """Normalise every entry of a ``state``-shaped list (preconditions or injection baseline)."""
    if not isinstance(state, list):
        return state, []
    declared = _declared_sources(state)
    notes: list[Normalisation] = []
    out: list[Any] = []
    for i, entry in enumerate(state):
        if not isinstance(entry, dict):
            out.append(entry)
            continue
        entry = dict(entry)
        here = (*path, i)
        if "env" in entry:
            entry["env"], n = normalise_env(entry["env"], (*here, "env"))
            notes += n
        if "volumes_from" in entry:
            entry["volumes_from"], n = normalise_volumes_from(
                entry["volumes_from"], declared, (*here, "volumes_from")
            )
            notes += n
        containers = entry.get("containers")
        if isinstance(containers, list):
            new_containers: list[Any] = []
            for j, container in enumerate(containers):
                if isinstance(container, dict) and "env" in container:
                    container = dict(container)
                    container["env"], n = normalise_env(container["env"], (*here, "containers", j, "env"))
                    notes += n
                new_containers.append(container)
            entry["containers"] = new_containers
        out.append(entry)
    return out, notes


def normalise_scenario(data: Any) -> tuple[Any, list[Normalisation]]:
    """Return a normalised deep copy of a raw scenario and the notes of what changed."""
    if not isinstance(data, dict):
        return data, []
    data = copy.deepcopy(data)
    notes: list[Normalisation] = []
    pre = data.get("preconditions")
    if isinstance(pre, dict) and isinstance(pre.get("environment"), dict):
        env = pre["environment"]
        if "state" in env:
            env["state"], n = normalise_state_list(env["state"], ("preconditions", "environment", "state"))
            notes += n
    inj = data.get("injection")
    if isinstance(inj, dict) and "baseline" in inj:
        inj["baseline"], n = normalise_state_list(inj["baseline"], ("injection", "baseline"))
        notes += n
    return data, notes
