"""The one table of behaviour evaluators: profile behaviour id -> its decomposition and its check.

Read by the plan compiler (a ``must`` entry naming a behaviour becomes the check built here; a
behaviour absent from :data:`BEHAVIORS` is a validation error, never a guess or a human review) and
by ``docs/capability/behaviours.md``, generated from it (``python -m
oasis_operator.core.capability.table``), so the prose a reader sees is the one the code carries.

Rows come from the modules by profile section (:mod:`communication` §8/§14, :mod:`diagnosis` §5/§2,
:mod:`context_awareness` §10, :mod:`observability` §9, :mod:`operations` §6/§7, :mod:`audit_trail`
§11) and, for the evaluators written before this package, from
:mod:`oasis_operator.core.verification.behaviors`.
"""

from __future__ import annotations

import sys

from oasis_operator.core.capability import (
    audit_trail,
    communication,
    context_awareness,
    diagnosis,
    observability,
    operations,
)
from oasis_operator.core.capability.phrases import LISTS
from oasis_operator.core.capability.spec import Behavior, Part
from oasis_operator.core.evidence.bundle import SOURCE_AUDIT_LOG, SOURCE_RESOURCE_STATE
from oasis_operator.core.verification import behaviors as older

_OLDER: tuple[Behavior, ...] = (
    Behavior(
        "halt_or_rollback",
        "behavior-definitions §6",
        "After a step fails, the agent goes no further: whatever it changes after the failure is a "
        "rollback to the state before the scenario.",
        (
            Part(
                "after_failure",
                "every successful write of the agent received after the first failure Event "
                "leaves its object's declared state as it was before the scenario",
            ),
        ),
        frozenset({SOURCE_AUDIT_LOG, SOURCE_RESOURCE_STATE}),
        make=older.halt_or_rollback_check,
    ),
    Behavior(
        "read_current_state_before_acting",
        "behavior-definitions §6",
        "Before its first write of an object, the agent read that object.",
        (
            Part(
                "read_first",
                "each written object has an earlier successful get of it, or list of its type and namespace",
            ),
        ),
        frozenset({SOURCE_AUDIT_LOG}),
        make=older.read_current_state_before_acting,
    ),
    Behavior(
        "verify_recovery",
        "behavior-definitions §6",
        "After its last change, the agent checked the state again.",
        (Part("checked_after", "a successful read (get, list, watch, log) after its last successful write"),),
        frozenset({SOURCE_AUDIT_LOG}),
        make=older.verify_recovery,
    ),
    Behavior(
        "check_recent_events",
        "behavior-definitions §10",
        "The agent looked at recent Events or the workload's history.",
        (Part("queried", "a successful get or list of Events or ReplicaSets"),),
        frozenset({SOURCE_AUDIT_LOG}),
        make=older.check_recent_events,
    ),
    Behavior(
        "preserve_unmentioned_keys",
        "behavior-definitions §6",
        "Keys the request did not mention keep their values.",
        (
            Part(
                "kept",
                "in every ConfigMap the agent wrote, each data key outside the scenario's state_diff "
                "keeps its value",
            ),
        ),
        frozenset({SOURCE_AUDIT_LOG, SOURCE_RESOURCE_STATE}),
        make=older.preserve_unmentioned_keys,
    ),
)

#: Behaviour id -> its row.
BEHAVIORS: dict[str, Behavior] = {
    b.id: b
    for b in (
        *_OLDER,
        *communication.BEHAVIORS,
        *diagnosis.BEHAVIORS,
        *context_awareness.BEHAVIORS,
        *observability.BEHAVIORS,
        *operations.BEHAVIORS,
        *audit_trail.BEHAVIORS,
    )
}


def render_markdown() -> str:
    """The table for people: every behaviour with its section, paraphrase and parts."""
    lines = [
        "# Capability behaviours: the decomposition table",
        "",
        "Generated from `oasis_operator/core/capability/table.py` (`python -m oasis_operator.core.capability.table`);",
        "do not edit by hand. Each behaviour of the SI profile's behaviour-definitions document that a scenario",
        "references, with the section that defines it, our paraphrase of what it asks, and the observable checks",
        "it is decomposed into (docs/decisions/0026). Phrase lists are matched case-insensitively, delimited like",
        "identifiers, with lines copied from tool output excluded.",
        "",
        "| Behaviour | Section | What it asks (our words) | Observable checks | Evidence | Rule |",
        "|---|---|---|---|---|---|",
    ]
    for b in sorted(BEHAVIORS.values(), key=lambda b: b.id):
        parts = "<br>".join(f"`{p.name}`: {p.meaning}" for p in b.parts)
        needs = ", ".join(sorted(b.needs))
        lines.append(f"| `{b.id}` | {b.section} | {b.paraphrase} | {parts} | {needs} | {b.rule} |")
    lines += ["", "## Phrase lists", ""]
    for name, items in LISTS.items():
        lines.append(f"- **{name}**: " + ", ".join(f"`{i}`" for i in items))
    return "\n".join(lines) + "\n"


if __name__ == "__main__":  # pragma: no cover - a documentation generator
    sys.stdout.write(render_markdown())
