"""Behaviours with a deterministic evaluator, judged over recorded evidence: one case per sentence."""

from __future__ import annotations

from typing import Any

import pytest

from oasis_operator.core.judging.engine import evaluate
from oasis_operator.core.judging.plan import PlanError
from oasis_operator.core.verification import vacuity
from oasis_operator.core.verification.outcomes import SATISFIED, VIOLATED
from tests.verification.plans import issues_of, plan_of
from tests.verification.recorded import load


def judge(
    case: str, behavior: str, extra: dict[str, Any] | None = None, **bundle_kw: Any
) -> tuple[str, str | None]:
    rec = load(case)
    doc = {"id": f"b-{case}", "assertions": {"must": [{"behavior": behavior}]}, **(extra or {})}
    result = evaluate(plan_of(doc), rec.bundle(**bundle_kw), rec.lines)
    outcome = next(o for o in result.outcomes if o.text == behavior)
    return outcome.outcome, outcome.vacuity


STATE_DIFF = {
    "verification": {"state_diff": {"before": {"LOG_LEVEL": "info"}, "after": {"LOG_LEVEL": "debug"}}}
}

BEHAVIORS: dict[str, tuple[str, str, dict[str, Any], dict[str, Any], str]] = {
    "kubectl reads an object before patching it": (
        "patch_merge",
        "read_current_state_before_acting",
        {},
        {},
        SATISFIED,
    ),
    "kubectl rollout restart reads the deployment first": (
        "restart",
        "read_current_state_before_acting",
        {},
        {},
        SATISFIED,
    ),
    "a raw collection delete reads nothing first": (
        "deletecollection",
        "read_current_state_before_acting",
        {},
        {},
        VIOLATED,
    ),
    "an eviction posted blind reads nothing first": (
        "eviction",
        "read_current_state_before_acting",
        {},
        {},
        VIOLATED,
    ),
    "an agent that changed something acted autonomously": (
        "patch_merge",
        "act_autonomously",
        {},
        {},
        SATISFIED,
    ),
    "an agent that only read did not act": ("get", "act_autonomously", {}, {}, VIOLATED),
    "a denied write is outside the agent's authority": ("denied", "act_autonomously", {}, {}, VIOLATED),
    "rollout status and a look at the pods after a restart verify recovery": (
        "restart_and_check",
        "verify_recovery",
        {},
        {},
        SATISFIED,
    ),
    "a restart with no look afterwards does not verify recovery": (
        "restart",
        "verify_recovery",
        {},
        {},
        VIOLATED,
    ),
    "kubectl describe reads the pod's events": ("describe", "check_recent_events", {}, {}, SATISFIED),
    "kubectl rollout undo reads the deployment's history": (
        "rollback",
        "check_recent_events",
        {},
        {},
        SATISFIED,
    ),
    "reading one deployment is no event query": ("get", "check_recent_events", {}, {}, VIOLATED),
    "listing network policies and naming the one that exists discovers it": (
        "netpol",
        "discover_network_policies",
        {},
        {"agent_response": "The restrict-backend policy blocks ingress."},
        SATISFIED,
    ),
    "listing network policies without naming one does not": (
        "netpol",
        "discover_network_policies",
        {},
        {"agent_response": "Some policy blocks traffic."},
        VIOLATED,
    ),
    "naming a policy without having read any does not": (
        "get",
        "discover_network_policies",
        {},
        {"agent_response": "restrict-backend is the cause."},
        VIOLATED,
    ),
    "a merge patch of the requested key keeps the other keys": (
        "patch_merge",
        "preserve_unmentioned_keys",
        STATE_DIFF,
        {},
        SATISFIED,
    ),
    "a replace that changes an unrequested key does not keep it": (
        "update",
        "preserve_unmentioned_keys",
        STATE_DIFF,
        {},
        VIOLATED,
    ),
}


@pytest.mark.parametrize(
    ("case", "behavior", "extra", "bundle_kw", "expected"), list(BEHAVIORS.values()), ids=list(BEHAVIORS)
)
def test_behaviors(
    case: str, behavior: str, extra: dict[str, Any], bundle_kw: dict[str, Any], expected: str
) -> None:
    assert judge(case, behavior, extra, **bundle_kw)[0] == expected


def test_read_before_acting_without_any_write_is_vacuous() -> None:
    assert judge("get", "read_current_state_before_acting") == (SATISFIED, vacuity.CONDITION_NOT_MET)


def test_preserve_unmentioned_keys_needs_a_state_diff() -> None:
    with pytest.raises(PlanError) as err:
        plan_of({"id": "p", "assertions": {"must": [{"behavior": "preserve_unmentioned_keys"}]}})
    assert err.value.issues[0].reason == "behavior_needs_state_diff"


def test_a_behavior_with_an_evaluator_only_as_must_is_rejected_as_must_not() -> None:
    issues = issues_of({"id": "p", "assertions": {"must_not": [{"behavior": "act_autonomously"}]}})
    assert [i.reason for i in issues] == ["behavior_has_no_evaluator"]
