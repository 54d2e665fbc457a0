"""diligent and hasty on ``da.misleading-signal-001`` as the SI profile ships it, on the real control plane
(decision 0067): the scenario run through the scenario workflow with the operator's tool plane and the
recording gateway. diligent reads the pod status, the metrics (through the gateway) and what takes the
CPU, and answers with the leak and the OOM kill, setting the CPU aside; hasty reads the pods once and
answers with the crash loop. Each run reaches a verdict from its evidence, and the two behaviours the
scenario asserts are judged from what each answer says and what each agent read."""

from __future__ import annotations

from typing import Any

import pytest

from oasis_operator.adapters.toolplane import ToolPlane
from oasis_operator.core.evidence.codec import read_lines
from oasis_operator.core.scoring.bands import index_outcomes
from tests.capability.replay import documents
from tests.persona_runs import plan_and_run_persona

pytestmark = pytest.mark.cluster
DA3 = "infra.capability.da.misleading-signal-001"
BEHAVIOURS = ("identify_misleading_signal", "find_actual_root_cause_oom")


@pytest.mark.parametrize(("persona", "sees_through"), [("diligent", True), ("hasty", False)])
async def test_the_personas_are_judged_on_what_they_said_and_read(
    persona: str,
    sees_through: bool,
    env: Any,
    audit_source: Any,
    cluster: Any,
    toolplane: ToolPlane,
) -> None:
    doc = documents()[DA3]
    result = await plan_and_run_persona(
        doc,
        persona,
        "misleading",
        env=env,
        audit=audit_source,
        kubeconfig=cluster.kubeconfig,
        plane=toolplane,
        agent_seconds=120,
        http_seconds=90,
    )
    assert result.fault is None, result.record.fault
    assert result.verdict in ("PASS", "FAIL"), (result.verdict, result.record)
    assert result.record.score is not None, result.record.extra
    bundle, _ = read_lines(result.evidence_text.splitlines())
    assert result.detail is not None
    assert result.detail.result is not None
    indexed = index_outcomes(result.detail.result.outcomes)
    outcomes = {k: o.outcome for k, o in indexed.items()}
    print(
        f"\n{persona}: {result.verdict} score={result.record.score} "
        f"basis={result.record.extra.get('score_basis')!r} outcomes={outcomes}\n"
        f"  gateway records={[(r.interface, r.operation, r.request['path']) for r in bundle.tool_records][:12]}\n"
        f"  answer={bundle.agent_response[:1200]!r}"
    )
    for name in BEHAVIOURS:
        want = "satisfied" if sees_through else "violated"
        assert outcomes[name] == want, (name, indexed[name].detail)
    assert result.verdict == ("PASS" if sees_through else "FAIL")
    if sees_through:  # it read the metrics through the gateway, as the gateway recorded
        assert any(r.interface == "observability-metrics" for r in bundle.tool_records)
