"""Metrics and alerts, planned (pure): a scenario's ``metrics/*`` and ``alert/*`` state becomes series
with samples relative to the handover, labelled with the scenario's physical namespace, and alert
rules; what cannot be a sample is refused, never dropped. Fixtures: the SI capability scenarios as
shipped, and small entries for the shapes they use."""

from __future__ import annotations

import copy
import glob
import itertools
from pathlib import Path
from typing import Any

import pytest
import yaml

from oasis_operator.core.environment.plan import plan_environment
from oasis_operator.core.model.scenario import Scenario, parse_scenario
from oasis_operator.core.toolplane.metrics import (
    CURRENT_WINDOW,
    HISTORY,
    PENDING_FOR,
    SCRAPE_INTERVAL,
    AlertRule,
    MetricSeries,
    alert_groups,
    parse_offset,
    parse_value,
    plan_alert,
    plan_metrics,
)
from tests.conftest import SPEC_DIR

CAPABILITY_DIR = SPEC_DIR / "profiles" / "software-infrastructure" / "scenarios" / "capability"
ALL = frozenset({"logs", "dashboards", "gitops", "metrics", "alerts", "traces"})


def _capability() -> dict[str, dict[str, Any]]:
    out = {}
    for path in sorted(glob.glob(str(CAPABILITY_DIR / "*.yaml"))):
        for doc in yaml.safe_load_all(Path(path).read_text()):
            if isinstance(doc, dict) and "id" in doc:
                out[doc["id"]] = doc
    return out


RAW = _capability()
CAPABILITY: dict[str, Scenario] = {sid: parse_scenario(copy.deepcopy(doc))[0] for sid, doc in RAW.items()}
MEMORY_TREND = "infra.capability.oi.metric-interpretation-001"
ERROR_SPIKE = "infra.capability.ca.historical-context-001"
BASELINE = "infra.capability.ej.confidence-escalation-001"
INTERFACE_ONLY = "infra.capability.au.action-completeness-001"

#: sentence -> (declared value, expected (number, name suffix) or None)
VALUES: dict[str, tuple[Any, tuple[float, str] | None]] = {
    "a plain number is itself": (4500, (4500.0, "")),
    "a percentage is a ratio": ("2%", (0.02, "")),
    "a small percentage keeps its precision": ("0.1%", (0.001, "")),
    "milliseconds are seconds": ("800ms", (0.8, "_seconds")),
    "binary sizes are bytes": ("1.6Gi", (1.6 * 2**30, "_bytes")),
    "mebibytes are bytes": ("500Mi", (500 * 2**20, "_bytes")),
    "a decimal size is bytes": ("2G", (2e9, "_bytes")),
    "a trend word is not a sample": ("monotonically_increasing", None),
    "a relative time is not a sample": ("2_minutes_ago", None),
    "a boolean is not a sample": (True, None),
}


@pytest.mark.parametrize("sentence", sorted(VALUES))
def test_declared_values_become_samples_in_base_units(sentence: str) -> None:
    declared, expected = VALUES[sentence]
    got = parse_value(declared)
    if expected is None:
        assert got is None
    else:
        assert got is not None
        assert got[1] == expected[1]
        assert got[0] == pytest.approx(expected[0])


#: sentence -> (declared offset, seconds relative to the handover or None)
OFFSETS: dict[str, tuple[Any, float | None]] = {
    "now is the handover": ("now", 0.0),
    "minutes before": ("-30m", -1800.0),
    "hours before": ("-6h", -21600.0),
    "a bare number is seconds": (-90, -90.0),
    "a word is no offset": ("yesterday", None),
}


@pytest.mark.parametrize("sentence", sorted(OFFSETS))
def test_offsets_are_seconds_relative_to_the_handover(sentence: str) -> None:
    declared, expected = OFFSETS[sentence]
    assert parse_offset(declared) == expected


def _plan(sid: str) -> Any:
    return plan_environment(CAPABILITY[sid], suffix="bbbbb", owner="o", backends=ALL)


def test_a_declared_series_keeps_its_points_and_is_interpolated_between_them() -> None:
    plan = _plan(MEMORY_TREND)
    [s] = plan.toolplane.series
    assert s.name == "container_memory_working_set_bytes"
    assert dict(s.labels) == {
        "__name__": s.name,
        "namespace": plan.home_namespace,
        "service": "data-processor",
    }
    points = dict(s.samples)
    for t, v in (
        (-6 * 3600, 500 * 2**20),
        (-4 * 3600, 800 * 2**20),
        (-2 * 3600, 1.2 * 2**30),
        (0, 1.6 * 2**30),
    ):
        assert points[float(t)] == pytest.approx(v)
    offsets = [t for t, _ in s.samples]
    assert offsets == sorted(offsets)
    assert offsets[-1] == 0.0
    assert {b - a for a, b in itertools.pairwise(offsets)} == {SCRAPE_INTERVAL}
    values = [v for _, v in s.samples]
    assert values == sorted(values)  # a growth stays monotonic between the declared points


def test_a_timed_metric_back_fills_the_declared_spike() -> None:
    plan = _plan(ERROR_SPIKE)
    [s] = plan.toolplane.series
    assert s.name == "error_rate"
    points = dict(s.samples)
    assert (points[-1800.0], points[-1200.0], points[0.0]) == pytest.approx((0.001, 0.08, 0.12))


def test_a_scalar_is_held_over_the_last_window_and_its_normal_value_is_its_history() -> None:
    plan = _plan(BASELINE)
    by_name = {s.name: s for s in plan.toolplane.series}
    assert sorted(by_name) == ["error_rate", "latency_p99_seconds"]
    latency = by_name["latency_p99_seconds"].samples
    assert latency[0] == (-HISTORY, pytest.approx(0.4))
    assert latency[-1] == (0.0, pytest.approx(0.8))
    assert {round(v, 9) for t, v in latency if t >= -CURRENT_WINDOW} == {0.8}
    assert {round(v, 9) for t, v in latency if t < -CURRENT_WINDOW} == {0.4}
    assert {round(v, 9) for _, v in by_name["error_rate"].samples} == {0.02}
    assert all(s.namespace == plan.home_namespace for s in plan.toolplane.series)


def test_a_scenario_that_only_lists_the_interface_needs_both_back_ends_and_holds_nothing() -> None:
    plan = _plan(INTERFACE_ONLY)
    assert {"metrics", "alerts"} <= plan.toolplane.backends
    assert plan.toolplane.series == ()
    assert plan.toolplane.alerts == ()


#: sentence -> (a metrics entry, the resource its refusal names)
REFUSED: dict[str, tuple[dict[str, Any], str]] = {
    "a trend word is refused, naming the attribute": (
        {"resource": "metrics/user-service", "cpu_trend": "monotonically_increasing"},
        "metrics/user-service cpu_trend",
    ),
    "a point after the handover is refused": (
        {"resource": "metrics/a", "error_rate": [{"t": "10m", "value": "1%"}]},
        "metrics/a error_rate[0]",
    ),
    "a point without a time is refused": (
        {"resource": "metrics/a", "series": {"up": [{"value": 1}]}},
        "metrics/a series.up[0]",
    ),
    "points in different units are refused": (
        {"resource": "metrics/a", "latency": [{"t": "-1m", "value": "1s"}, {"t": "now", "value": "2%"}]},
        "metrics/a latency",
    ),
    "a normal value in another unit is refused": (
        {"resource": "metrics/a", "latency": "1s", "normal_latency": "2%"},
        "metrics/a normal_latency",
    ),
}


@pytest.mark.parametrize("sentence", sorted(REFUSED))
def test_what_cannot_be_a_sample_is_refused_not_dropped(sentence: str) -> None:
    entry, resource = REFUSED[sentence]
    _, problems = plan_metrics(entry, "ns-1")
    assert [p.resource for p in problems] == [resource]


def test_a_memory_leak_is_planned_beside_its_workload_not_as_samples() -> None:
    plan = _plan("infra.capability.da.misleading-signal-001")
    assert [u for u in plan.unsupported if u.resource.startswith("metrics/")] == []
    assert [x.workload for x in plan.toolplane.leaks] == ["user-service"]
    # the entry declares nothing else: no plain series of its own (its pods' are made at injection)
    assert not [s for s in plan.toolplane.series if s.source == "metrics/user-service"]


#: sentence -> (an alert entry, expected state or the refused resource)
ALERTS: dict[str, tuple[dict[str, Any], str]] = {
    "a pending alert waits longer than the turn": (
        {"resource": "alert/high-memory", "status": "pending"},
        "pending",
    ),
    "a firing alert fires at once": ({"resource": "alert/disk-full", "status": "firing"}, "firing"),
    "a resolved alert is refused": ({"resource": "alert/x", "status": "resolved"}, "alert/x status"),
    "an unknown attribute is refused": ({"resource": "alert/x", "severity": "page"}, "alert/x"),
}


@pytest.mark.parametrize("sentence", sorted(ALERTS))
def test_declared_alerts_become_rules_in_the_scenarios_namespace(sentence: str) -> None:
    entry, expected = ALERTS[sentence]
    got = plan_alert(entry, entry["resource"].split("/")[1], "ns-1")
    if expected in ("pending", "firing"):
        assert isinstance(got, AlertRule)
        assert got.state == expected
        rule = got.rule()
        assert rule["labels"] == {"namespace": "ns-1"}
        assert rule["for"] == (PENDING_FOR if expected == "pending" else "0s")
    else:
        assert not isinstance(got, AlertRule)
        assert got.resource == expected


def test_the_provenance_scenario_plans_its_pending_alert_in_its_namespace() -> None:
    plan = _plan("infra.capability.au.provenance-tracking-001")
    [rule] = plan.toolplane.alerts
    assert (rule.name, rule.state, rule.namespace) == ("high-memory", "pending", plan.home_namespace)
    [group] = alert_groups(plan.toolplane.alerts)
    assert group["name"] == plan.home_namespace
    assert group["rules"] == [rule.rule()]


def test_series_of_two_scenarios_carry_their_own_namespace() -> None:
    a, b = (
        _plan(MEMORY_TREND),
        plan_environment(CAPABILITY[MEMORY_TREND], suffix="ccccc", owner="o", backends=ALL),
    )
    assert a.home_namespace != b.home_namespace
    assert [dict(s.labels)["namespace"] for s in a.toolplane.series] == [a.home_namespace]
    assert [dict(s.labels)["namespace"] for s in b.toolplane.series] == [b.home_namespace]
    assert isinstance(a.toolplane.series[0], MetricSeries)


def test_series_of_another_namespace_than_the_agents_home_are_refused() -> None:
    doc = copy.deepcopy(RAW[MEMORY_TREND])
    pre = doc["preconditions"]
    pre["agent"]["scope"]["namespaces"] = ["default", "other"]
    pre["environment"]["state"].append(
        {"resource": "metrics/batch", "namespace": "other", "error_rate": "1%"}
    )
    plan = plan_environment(parse_scenario(doc)[0], suffix="bbbbb", owner="o", backends=ALL)
    assert [u.resource for u in plan.unsupported] == ["metrics/batch"]
    assert [s.source for s in plan.toolplane.series] == ["metrics/data-processor"]
