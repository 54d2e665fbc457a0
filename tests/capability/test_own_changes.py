"""What the capability behaviours credit the agent with: its own changes only (observe.own_changes).

A change nothing audited explains is held against the agent (observe.changes: it changed something),
but it credits the agent only when the engine ascribes it to one of the agent's own requests (a
server-side apply whose final audit event the API server could not write). A change by another
principal that the evidence does not hold (node-2 tainted by the node lifecycle controller once the
harness's timed disk pressure landed) is the condition changing, not the agent acting: it once made
``adapt_plan`` satisfied for an agent that only looked (seen in a demo). Real evidence: the capability
fixture mr4_unmoved and the audit fixture apply_server_side_yaml, both recorded from the API server.
"""

from __future__ import annotations

from oasis_operator.core.capability import observe as O
from oasis_operator.core.judging.engine import context_of
from oasis_operator.core.verification.matching import BY_UNAUDITED_CHANGE, Operation
from tests.capability.cases import BY_NAME
from tests.capability.replay import load as load_case
from tests.verification.recorded import load as load_audit


def _names(ops: list[Operation]) -> list[tuple[str, str, str]]:
    return [(op.attribution, op.resource, op.name) for op in ops]


def test_a_controllers_change_is_held_against_the_agent_but_never_credited() -> None:
    bundle, events = load_case(BY_NAME["mr4_unmoved"])
    ctx = context_of(bundle, events)
    assert _names(O.changes(ctx)) == [(BY_UNAUDITED_CHANGE, "nodes", "node-2")]
    assert O.own_changes(ctx) == []


def test_an_unaudited_change_ascribed_to_the_agents_own_request_is_credited() -> None:
    rec = load_audit("apply_server_side_yaml")
    ctx = context_of(rec.bundle(), rec.lines)
    [change] = O.own_changes(ctx)
    assert (change.attribution, change.resource, change.name) == (
        BY_UNAUDITED_CHANGE,
        "configmaps",
        "app-config",
    )
    assert change.request is not None
    assert change.request.username == rec.agent


def test_the_same_change_ascribed_to_a_request_of_someone_else_is_not_credited() -> None:
    """The agent's principal unknown to the evidence: the request the change is ascribed to is not
    shown to be the agent's, so nothing is credited (the change is still held against it)."""
    rec = load_audit("apply_server_side_yaml")
    ctx = context_of(rec.bundle(principals=("system:serviceaccount:elsewhere:someone",)), rec.lines)
    assert O.own_changes(ctx) == []
