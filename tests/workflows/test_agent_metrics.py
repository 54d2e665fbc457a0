"""Per-agent and per-profile run metrics (adapters/metrics.py) and their label bounds (decision 0107)."""

from __future__ import annotations

import dataclasses

from prometheus_client import CollectorRegistry
from prometheus_client.exposition import generate_latest
from prometheus_client.parser import text_string_to_metric_families

from oasis_operator.adapters.metrics import LABEL_VALUE_LIMIT, BoundedPairs, Metrics, label_value
from oasis_operator.core.verdicts import Verdict
from oasis_operator.workflows.run import RunDriver
from tests.workflows.world import NS, PROFILE, World


def _samples(registry: CollectorRegistry, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    text = generate_latest(registry).decode()
    return {
        tuple(sorted(s.labels.items())): s.value
        for family in text_string_to_metric_families(text)
        for s in family.samples
        if s.name == name
    }


def test_a_finished_run_is_counted_per_agent_profile_and_verdict() -> None:
    metrics = Metrics(verdicts=tuple(Verdict))
    metrics.run_finished("PASS", agent="ref-agent", profile="si", incomplete=False)
    metrics.run_finished("FAIL", agent="ref-agent", profile="si", incomplete=False)
    metrics.run_finished("PROVIDER_FAILURE", agent="ref-agent", profile="si", incomplete=True)
    runs = _samples(metrics.registry, "oasis_agent_runs_total")
    key = (("agent", "ref-agent"), ("profile", "si"))
    assert runs[(*key, ("verdict", "PASS"))] == 1
    assert runs[(*key, ("verdict", "FAIL"))] == 1
    assert runs[(*key, ("verdict", "PROVIDER_FAILURE"))] == 1
    assert _samples(metrics.registry, "oasis_agent_incomplete_runs_total") == {key: 1}
    metrics.run_finished("PASS", agent="other-agent", profile="si")
    incomplete = _samples(metrics.registry, "oasis_agent_incomplete_runs_total")
    assert incomplete[(("agent", "other-agent"), ("profile", "si"))] == 0  # there, at 0
    assert _samples(metrics.registry, "oasis_agent_last_run_timestamp_seconds")[key] > 1.7e9
    # The run-wide counter is unchanged in meaning.
    assert _samples(metrics.registry, "oasis_runs_total")[(("verdict", "PASS"),)] == 2


def test_label_values_are_cut_and_cleaned() -> None:
    assert label_value("ref-agent v1.2 (beta)") == "ref-agent_v1.2__beta_"
    assert label_value("") == "unknown"
    assert label_value('x"\n' * 100) == ("x__" * 100)[:LABEL_VALUE_LIMIT]
    assert len(label_value("a" * 500)) == LABEL_VALUE_LIMIT


def test_pairs_beyond_the_bound_share_the_other_series() -> None:
    pairs = BoundedPairs(limit=2)
    assert pairs.admit("a", "p") == ("a", "p")
    assert pairs.admit("b", "p") == ("b", "p")
    assert pairs.admit("c", "p") == ("other", "other")
    assert pairs.admit("a", "p") == ("a", "p")  # admitted pairs keep their series


def test_an_agent_choosing_new_names_cannot_grow_the_series_without_bound() -> None:
    metrics = Metrics(verdicts=tuple(Verdict), agent_pairs=5)
    for i in range(200):
        metrics.run_finished("FAIL", agent=f"agent-{i}", profile="si")
    metrics.run_finished("SOMETHING-NEW", agent="agent-0", profile="si")
    runs = _samples(metrics.registry, "oasis_agent_runs_total")
    agents = {dict(k)["agent"] for k in runs}
    assert agents == {"agent-0", "agent-1", "agent-2", "agent-3", "agent-4", "other"}
    assert runs[(("agent", "other"), ("profile", "other"), ("verdict", "FAIL"))] == 195
    # A verdict outside the known set is not a new label value either.
    assert runs[(("agent", "agent-0"), ("profile", "si"), ("verdict", "other"))] == 1


async def test_the_run_workflow_counts_a_finished_run_under_its_agent_and_profile() -> None:
    w = World()
    w.install()
    w.submit()
    metrics = Metrics(verdicts=tuple(Verdict))
    assert await RunDriver(dataclasses.replace(w.ports, metrics=metrics), NS, "run").drive() == "finished"
    status = w.status()
    agent = status["agent"]["name"]
    assert agent
    runs = _samples(metrics.registry, "oasis_agent_runs_total")
    assert runs == {(("agent", label_value(agent)), ("profile", PROFILE), ("verdict", status["verdict"])): 1}
