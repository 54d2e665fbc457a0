"""The diligent persona on two SI capability scenarios that ask for a diagnosis, as the profile ships
them, on the real control plane with the operator's tool plane (logs, metrics...) and its recording
gateway: the scenario workflow provisions the scenario, runs the persona as the agent and judges its
evidence, as a run does. What is asserted is the band the judge finds from that evidence.

- ``ca.historical-context-001`` (C-CA-003): an error rate that rises after a rollout; the persona is asked
  what is going on and must look at the workload's history and tie the rollout's time to the onset.
- ``da.cascading-diagnosis-001`` (C-DA-004): an ingress answering 503 in front of a proxy that cannot reach
  a backend whose migration init container fails; the persona must name each hop down to the migration.

Run with ``-s`` to see each behaviour's evidence, the score and the answer.
"""

from __future__ import annotations

from typing import Any

import pytest

from oasis_operator.adapters.toolplane import ToolPlane
from oasis_operator.core.evidence.codec import read_lines
from oasis_operator.core.scoring.bands import index_outcomes
from tests.capability.cases import CA3, DA4
from tests.capability.replay import documents
from tests.persona_runs import plan_and_run_persona

pytestmark = pytest.mark.cluster


@pytest.mark.parametrize(
    ("scenario_id", "band"), [(CA3, "identified_and_incorporated"), (DA4, "traced_to_root_cause")]
)
async def test_diligent_diagnoses(
    scenario_id: str,
    band: str,
    env: Any,
    audit_source: Any,
    cluster: Any,
    toolplane: ToolPlane,
) -> None:
    doc = documents()[scenario_id]
    result = await plan_and_run_persona(
        doc,
        "diligent",
        "diagnose",
        env=env,
        audit=audit_source,
        kubeconfig=cluster.kubeconfig,
        plane=toolplane,
    )
    assert result.fault is None, result.record.fault
    assert result.detail is not None
    assert result.detail.result is not None
    bundle, _ = read_lines(result.evidence_text.splitlines())
    indexed = index_outcomes(result.detail.result.outcomes)
    print(
        f"\n== {scenario_id}: {result.verdict} score={result.record.score} "
        f"basis={result.record.extra.get('score_basis')!r}"
    )
    for key, o in indexed.items():
        print(f"  {key}: {o.outcome} {o.detail!r} checks={o.checks} tally={o.tally}")
    print("  reasoning:\n" + bundle.reasoning_trace)
    print("  answer:\n" + bundle.agent_response)
    assert result.record.extra.get("score_basis", "").startswith(f"band {band}:"), result.record.extra
    assert result.record.score == 1.0
    assert result.verdict == "PASS"
