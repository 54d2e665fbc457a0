"""Whether a scenario's temporal condition is delivered is decided before it runs, on the SI corpus: with
the operator's tool plane (its node-conditions back-end) a node condition during a rollout is delivered,
and with its alerting back-end a declared pending alert that fires; an alert without the alerting
back-end, a timing that cannot be placed, or a caller without a tool plane are refused, each naming why. Nothing is run with a change the provider would have to make up."""

from __future__ import annotations

import copy

import pytest

from oasis_operator.core.environment.plan import plan_environment
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.core.toolplane import registry
from tests.environments.test_support import CORPUS

#: What the operator's tool plane has (dashboards and node conditions always; logs and GitOps as the demo).
OPERATOR = frozenset({registry.DASHBOARDS, registry.NODE_CONDITIONS, registry.LOGS, registry.GITOPS})
ROLLOUT = "infra.capability.mr.interruption-recovery-001"
ALERT = "infra.capability.au.provenance-tracking-001"


def temporal_reasons(doc: dict, backends: frozenset[str]) -> list[str]:
    scenario, _ = parse_scenario(doc)
    plan = plan_environment(scenario, suffix="ccccc", owner="o", backends=backends)
    return [u.reason for u in plan.unsupported if "temporal_condition" in u.resource]


def with_timing(doc: dict, timing: str) -> dict:
    doc = copy.deepcopy(doc)
    next(s for s in doc["stimuli"] if s["type"] == "temporal_condition")["timing"] = timing
    return doc


def test_a_node_condition_during_a_rollout_is_delivered_by_the_operators_tool_plane():
    assert temporal_reasons(CORPUS[ROLLOUT], OPERATOR) == []
    scenario, _ = parse_scenario(CORPUS[ROLLOUT])
    plan = plan_environment(scenario, suffix="ccccc", owner="o", backends=OPERATOR)
    # What still keeps this scenario from running is the metrics back-end, not its stimulus.
    assert [u.resource for u in plan.unsupported] == ["agent.tools: observability-metrics"]


REFUSED = {
    "a caller without a tool plane (the local runner)": (
        ROLLOUT,
        None,
        frozenset(),
        "needs the operator's tool plane",
    ),
    "an alert that fires, without the alerting back-end": (
        ALERT,
        None,
        OPERATOR,
        "alerting back-end (vmalert) is not configured",
    ),
    "a timing that counts queries": (ROLLOUT, "on_second_query", OPERATOR, "can place in time"),
}


@pytest.mark.parametrize(("sid", "timing", "backends", "words"), REFUSED.values(), ids=REFUSED.keys())
def test_a_temporal_condition_that_cannot_be_delivered_is_refused_naming_why(sid, timing, backends, words):
    doc = with_timing(CORPUS[sid], timing) if timing else CORPUS[sid]
    reasons = temporal_reasons(doc, backends)
    assert len(reasons) == 1
    assert words in reasons[0]


def test_a_declared_pending_alert_that_fires_is_delivered_by_the_alerting_back_end():
    with_alerts = OPERATOR | {registry.METRICS, registry.ALERTS}
    assert temporal_reasons(CORPUS[ALERT], with_alerts) == []
    scenario, _ = parse_scenario(CORPUS[ALERT])
    assert plan_environment(scenario, suffix="ccccc", owner="o", backends=with_alerts).supported
