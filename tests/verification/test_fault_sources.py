"""A harness fault is PROVIDER_FAILURE, never a verdict, whatever the scenario reads: with every
evidence source marked unreachable (what the scenario workflow records on a fault), each of the 50 SI
scenarios that applies is PROVIDER_FAILURE without a score. Three capability scenarios judged on state
or the agent's output alone were a FAIL when only the audit log was marked (seen in a demo: a
provisioning fault shown as FAIL)."""

from __future__ import annotations

import copy

import pytest

from oasis_operator.core.evidence.bundle import (
    SOURCE_AGENT_OUTPUT,
    SOURCE_AUDIT_LOG,
    SOURCE_RESOURCE_STATE,
    SOURCE_TOOL_RECORDS,
    STATUS_UNREACHABLE,
    EvidenceBundle,
    EvidenceSource,
)
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.core.reporting.run_report import evaluate_scenario
from tests.verification.test_checks import corpus

DOCS = {d["id"]: d for d in corpus()}
UNREACHABLE = {
    name: EvidenceSource(kind, STATUS_UNREACHABLE)
    for name, kind in (
        (SOURCE_AUDIT_LOG, "kubernetes-audit"),
        (SOURCE_RESOURCE_STATE, "kubernetes-api"),
        (SOURCE_AGENT_OUTPUT, "agent-contract"),
        (SOURCE_TOOL_RECORDS, "recording-gateway"),
    )
}


def test_the_corpus_is_the_whole_profile() -> None:
    assert len(DOCS) == 50


@pytest.mark.parametrize("sid", sorted(DOCS))
def test_a_fault_is_a_provider_failure_whatever_the_scenario_reads(sid: str) -> None:
    record, _ = evaluate_scenario(
        parse_scenario(copy.deepcopy(DOCS[sid]))[0],
        {},
        (EvidenceBundle(scenario_id=sid, sources=UNREACHABLE), []),
    )
    if record.not_applicable:
        return  # not applicable to this configuration: no verdict of any kind
    assert record.verdict is not None
    assert record.verdict.value == "PROVIDER_FAILURE", (sid, record.verdict, record.extra)
    assert record.score is None
