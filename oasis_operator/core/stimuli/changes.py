"""The change a ``temporal_condition`` stimulus describes, read from its description.

A temporal condition says *when* (its ``timing``: :mod:`oasis_operator.core.stimuli.temporal`) and, in
prose, *what* changes. Only changes whose words leave no room for a guess are read:

- a node condition: ``<node> transitions to <Condition>=<True|False>`` (also "changes to", "goes to",
  "reports"), where ``<node>`` is a node the scenario declares as its own (``node/<name>``; the shared
  pool is never changed) and ``<Condition>`` one a kubelet reports (``DiskPressure``, ``MemoryPressure``,
  ``PIDPressure``). Applied by the node-conditions back-end of the tool plane.
- an alert that fires: ``<name> alert fires`` (or ``alert <name> fires``), where ``alert/<name>`` is an
  alert the scenario declares ``pending``: from then on it is firing. Applied by the alerting back-end.

Anything else is a :class:`ChangeError` whose message says what was expected, and the scenario is
unsupported rather than run with a change the provider made up. Called by the support check and by the
applier of timed stimuli. Pure.
"""

from __future__ import annotations

import re
from collections.abc import Collection
from dataclasses import dataclass

from oasis_operator.core.node_conditions import NODE_CONDITIONS

__all__ = ["AlertFires", "ChangeError", "NodeCondition", "declared_change"]

_NODE = re.compile(
    r"(?P<node>[a-z0-9](?:[a-z0-9.-]*[a-z0-9])?)\s+(?:transitions|changes|goes|switches)\s+to\s+"
    r"(?P<type>[A-Za-z]+)\s*=\s*(?P<status>true|false)\b",
    re.IGNORECASE,
)
_ALERT = re.compile(r"\balert\b.*\bfires?\b|\bfires?\b.*\balert\b", re.IGNORECASE | re.DOTALL)
_NAMED_ALERT = re.compile(
    r"\b(?P<before>[a-z0-9][a-z0-9_-]*)\s+alert\s+fires?\b|\balert\s+(?P<after>[a-z0-9][a-z0-9_-]*)\s+fires?\b",
    re.IGNORECASE,
)
EXPECTED = (
    'expected "<node> transitions to <Condition>=<True|False>" naming a node the scenario declares '
    f'(node/<name>) and one of {", ".join(sorted(NODE_CONDITIONS))}, or "<name> alert fires" naming an '
    "alert the scenario declares pending (alert/<name>)"
)


class ChangeError(ValueError):
    """A described change this provider cannot make; the message says what it can."""


@dataclass(frozen=True)
class NodeCondition:
    """A node's condition set to ``status``, with the reason and message a kubelet gives it."""

    node: str
    type: str
    status: str
    reason: str
    message: str


@dataclass(frozen=True)
class AlertFires:
    """The declared pending alert ``name`` starts firing."""

    name: str


def declared_change(
    description: str | None, nodes: Collection[str], pending_alerts: Collection[str] = ()
) -> NodeCondition | AlertFires:
    """The change ``description`` names; ``nodes``: the names of the nodes the scenario declares;
    ``pending_alerts``: the names of the alerts it declares pending."""
    text = " ".join(str(description or "").split())
    found = _NODE.search(text)
    if found is None:
        if _ALERT.search(text):
            return _alert_fires(text, pending_alerts)
        raise ChangeError(f"the described change is not one this provider can make ({EXPECTED})")
    node, ctype, status = found["node"], found["type"], found["status"].capitalize()
    known = {k.lower(): k for k in NODE_CONDITIONS}
    if ctype.lower() not in known:
        raise ChangeError(f"node condition {ctype!r} has no realisation ({EXPECTED})")
    if node not in nodes:
        raise ChangeError(
            f"node {node!r} is not a node the scenario declares (node/{node}); the shared nodes are "
            "never changed"
        )
    ctype = known[ctype.lower()]
    reason, message = NODE_CONDITIONS[ctype][0 if status == "True" else 1]
    return NodeCondition(node, ctype, status, reason, message)


def _alert_fires(text: str, pending_alerts: Collection[str]) -> AlertFires:
    named = _NAMED_ALERT.search(text)
    if named is None:
        raise ChangeError(f"the description says an alert fires but does not name it ({EXPECTED})")
    name = named["before"] or named["after"]
    if name not in pending_alerts:
        raise ChangeError(
            f"alert {name!r} is not an alert the scenario declares pending (alert/{name} with status "
            "pending); only a declared alert can start firing"
        )
    return AlertFires(name)
