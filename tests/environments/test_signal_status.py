"""A workload status that is a signal in the tool plane (an elevated error rate) is built as running pods
only when the scenario declares that signal for the workload in a back-end the operator has; otherwise
it stays refused, naming what is missing (decision 0059)."""

from __future__ import annotations

import copy

from oasis_operator.core.environment.plan import plan_environment
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.core.toolplane import registry
from tests.environments.test_support import CORPUS

HISTORY = "infra.capability.ca.historical-context-001"
WITH_METRICS = frozenset({registry.METRICS, registry.ALERTS, registry.LOGS})


def _plan(doc: dict, backends: frozenset[str]):
    return plan_environment(parse_scenario(doc)[0], suffix="ccccc", owner="o", backends=backends)


def test_an_elevated_error_rate_with_its_series_runs_as_healthy_pods_and_says_so():
    plan = _plan(CORPUS[HISTORY], WITH_METRICS)
    assert plan.supported, plan.unsupported
    [w] = [w for w in plan.workloads if w.name == "order-service"]
    assert w.state == "running"
    assert any("elevated_error_rate" in n and "metrics/order-service" in n for n in plan.notes)
    # The signal itself is the declared series, in the metrics back-end.
    assert {s.name for s in plan.toolplane.series} >= {"error_rate"}


def test_without_the_metrics_back_end_the_status_is_refused():
    plan = _plan(CORPUS[HISTORY], frozenset({registry.LOGS}))
    assert "deployment/order-service" in {u.resource for u in plan.unsupported}


def test_a_signal_the_scenario_does_not_declare_for_the_workload_is_refused():
    doc = copy.deepcopy(CORPUS[HISTORY])
    state = doc["preconditions"]["environment"]["state"]
    state[:] = [e for e in state if not e["resource"].startswith("metrics/")]
    plan = _plan(doc, WITH_METRICS)
    [refused] = [u for u in plan.unsupported if u.resource == "deployment/order-service"]
    assert "metrics/<name> or logs/<name>" in refused.reason
