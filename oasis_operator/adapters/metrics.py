"""Prometheus metrics of the operator, on an injected registry (low-cardinality labels only).

Called by the run workflow (scenario and run outcomes) and the operator start-up (the HTTP endpoint);
turns outcomes into counters, gauges and histograms named ``oasis_*`` with ``_total`` / ``_seconds``.

Per-agent and per-profile series (``oasis_agent_*``) carry names users and agents choose, so their
label sets are bounded (decision 0107): each value is cut to 63 characters of a safe alphabet, and at
most :data:`MAX_AGENT_PAIRS` (agent, profile) pairs get series of their own; later pairs are counted
under ``agent="other", profile="other"``. Per-run detail belongs to kube-state-metrics, which reads
the EvaluationRun objects themselves (the chart's CustomResourceState config).
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

from oasis_operator import __version__

#: (agent, profile) pairs with series of their own; every later pair shares the ``other`` series.
MAX_AGENT_PAIRS = 100
#: Longest label value kept (a Kubernetes label value's limit).
LABEL_VALUE_LIMIT = 63
OTHER = "other"
UNKNOWN = "unknown"
_UNSAFE = re.compile(r"[^A-Za-z0-9_.:/@+-]")


def label_value(text: str) -> str:
    """A name as a bounded label value: unsafe characters replaced, cut to :data:`LABEL_VALUE_LIMIT`;
    ``unknown`` for none."""
    return _UNSAFE.sub("_", text.strip())[:LABEL_VALUE_LIMIT] or UNKNOWN


class BoundedPairs:
    """Admits at most ``limit`` distinct (agent, profile) label pairs; any later pair becomes
    (``other``, ``other``). Pairs already admitted keep their series."""

    def __init__(self, limit: int = MAX_AGENT_PAIRS) -> None:
        self.limit = limit
        self._seen: set[tuple[str, str]] = set()

    def admit(self, agent: str, profile: str) -> tuple[str, str]:
        pair = (label_value(agent), label_value(profile))
        if pair in self._seen:
            return pair
        if len(self._seen) < self.limit:
            self._seen.add(pair)
            return pair
        return (OTHER, OTHER)


class Metrics:
    """``verdicts`` and ``fault_reasons`` are the label values known in advance: their series exist
    (at 0) from the start, so dashboards and alerts see the metric before the first occurrence."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        verdicts: Sequence[str] = (),
        fault_reasons: Sequence[str] = (),
        agent_pairs: int = MAX_AGENT_PAIRS,
    ) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self._pairs = BoundedPairs(agent_pairs)
        self._verdicts = frozenset(verdicts)
        self.agent_runs = Counter(
            "oasis_agent_runs_total",
            "Finished evaluation runs by agent (its declared name), profile and verdict",
            ["agent", "profile", "verdict"],
            registry=r,
        )
        self.agent_incomplete_runs = Counter(
            "oasis_agent_incomplete_runs_total",
            "Finished runs whose evidence was incomplete (aborted or timed out), by agent and profile",
            ["agent", "profile"],
            registry=r,
        )
        self.agent_last_run = Gauge(
            "oasis_agent_last_run_timestamp_seconds",
            "When a run of the agent against the profile last finished (Unix time)",
            ["agent", "profile"],
            registry=r,
        )
        self.runs = Counter(
            "oasis_runs_total", "Finished evaluation runs by verdict", ["verdict"], registry=r
        )
        self.scenarios = Counter(
            "oasis_scenarios_total",
            "Finished scenarios by category and verdict",
            ["category", "verdict"],
            registry=r,
        )
        self.duration = Histogram(
            "oasis_scenario_duration_seconds",
            "Wall time of one scenario",
            registry=r,
            buckets=(0.25, 0.5, 1, 2, 5, 10, 30, 60, 120, 300, 600),
        )
        self.provider_failures = Counter(
            "oasis_provider_failures_total", "Provider faults by reason", ["reason"], registry=r
        )
        self.active_runs = Gauge(
            "oasis_active_runs", "Runs not finished (running or waiting), suspended ones excepted", registry=r
        )
        self.namespaces = Gauge(
            "oasis_scenario_namespaces", "Scenario namespaces alive (a leak detector)", registry=r
        )
        self.audit_events = Counter(
            "oasis_audit_events_ingested_total", "Audit events read from the source", registry=r
        )
        self.barrier = Histogram(
            "oasis_audit_barrier_seconds",
            "Time for the audit barrier to pass",
            registry=r,
            buckets=(0.01, 0.05, 0.1, 0.25, 0.5, 1, 2, 5, 15),
        )
        self.audit_last_event = Gauge(
            "oasis_audit_last_event_timestamp_seconds",
            "When the audit source last delivered an event (Unix time; 0: never)",
            registry=r,
        )
        self.build_info = Info("oasis_build", "The operator's version", registry=r)
        self.build_info.info({"version": __version__})
        for verdict in verdicts:
            self.runs.labels(verdict=verdict)
        for reason in fault_reasons:
            self.provider_failures.labels(reason=reason)

    def scenario_finished(
        self, category: str, verdict: str, timings: Mapping[str, float], fault: str | None
    ) -> None:
        self.scenarios.labels(category=category or "unknown", verdict=verdict).inc()
        if "total" in timings:
            self.duration.observe(timings["total"])
        if "barrier" in timings:
            self.barrier.observe(timings["barrier"])
        if fault:
            self.provider_failures.labels(reason=fault).inc()

    def run_finished(
        self, verdict: str, *, agent: str = "", profile: str = "", incomplete: bool = False
    ) -> None:
        self.runs.labels(verdict=verdict).inc()
        name, prof = self._pairs.admit(agent, profile)
        known = verdict if not self._verdicts or verdict in self._verdicts else OTHER
        self.agent_runs.labels(agent=name, profile=prof, verdict=known).inc()
        # The pair's incomplete series exists (at 0) from its first run, so increase() sees the first one.
        self.agent_incomplete_runs.labels(agent=name, profile=prof).inc(1 if incomplete else 0)
        self.agent_last_run.labels(agent=name, profile=prof).set_to_current_time()
