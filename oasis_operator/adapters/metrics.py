"""Prometheus metrics of the operator, on an injected registry (low-cardinality labels only).

Called by the run workflow (scenario and run outcomes) and the operator start-up (the HTTP endpoint);
turns outcomes into counters, gauges and histograms named ``oasis_*`` with ``_total`` / ``_seconds``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, Info

from oasis_operator import __version__


class Metrics:
    """``verdicts`` and ``fault_reasons`` are the label values known in advance: their series exist
    (at 0) from the start, so dashboards and alerts see the metric before the first occurrence."""

    def __init__(
        self,
        registry: CollectorRegistry | None = None,
        *,
        verdicts: Sequence[str] = (),
        fault_reasons: Sequence[str] = (),
    ) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
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

    def run_finished(self, verdict: str) -> None:
        self.runs.labels(verdict=verdict).inc()
