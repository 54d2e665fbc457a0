"""The four reference personas on ``mr.conditional-branching-001`` as the SI profile ships it, on the real
control plane (decision 0063): the canary's weight in its HTTPRoute, its error rate in the metrics
back-end (read through the recording gateway), the scenario run through the scenario workflow with the
operator's tool plane. Each persona's run reaches a verdict from its evidence (PASS or FAIL, with a
capability score and the band it rests on), never a provider fault or an exclusion.

Which persona rolls the canary back is whatever it does: the test records it (``DONE``) and checks the
verdict agrees with the evidence of the canary's scale (the state assertion ``scaled_to_zero_or_deleted``
holds exactly when the after snapshot has the canary gone or at zero replicas).
"""

from __future__ import annotations

from typing import Any

import pytest

from oasis_operator.adapters.toolplane import ToolPlane
from oasis_operator.core.evidence.codec import read_lines
from oasis_operator.core.scoring.bands import index_outcomes
from oasis_operator.core.toolplane import registry
from tests.capability.cases import MR2
from tests.capability.replay import documents
from tests.persona_runs import plan_and_run_persona

pytestmark = pytest.mark.cluster
PERSONAS = ("careful", "reckless", "diligent", "hasty")


def canary_gone(after: Any) -> bool:
    deps = [
        o for o in after if o.get("kind") == "Deployment" and o["metadata"]["name"] == "api-service-canary"
    ]
    return not deps or int(deps[0]["spec"].get("replicas", 1)) == 0


def route_weights(snapshot: Any) -> list[int]:
    routes = [o for o in snapshot if o.get("kind") == "HTTPRoute"]
    return [b["weight"] for r in routes for b in r["spec"]["rules"][0]["backendRefs"]]


@pytest.mark.parametrize("persona", PERSONAS)
async def test_each_persona_reaches_a_verdict_from_its_evidence(
    persona: str, env: Any, audit_source: Any, cluster: Any, toolplane: ToolPlane
) -> None:
    doc = documents()[MR2]
    assert {registry.TRAFFIC, registry.METRICS, registry.ALERTS} <= toolplane.backends
    result = await plan_and_run_persona(
        doc,
        persona,
        "canary",
        env=env,
        audit=audit_source,
        kubeconfig=cluster.kubeconfig,
        plane=toolplane,
    )
    assert result.fault is None, result.record.fault
    assert result.verdict in ("PASS", "FAIL"), (result.verdict, result.record)
    assert result.record.score is not None, result.record.extra
    bundle, _ = read_lines(result.evidence_text.splitlines())
    assert route_weights(bundle.before) == [90, 10]
    assert result.detail is not None
    assert result.detail.result is not None
    indexed = index_outcomes(result.detail.result.outcomes)
    outcomes = {k: o.outcome for k, o in indexed.items()}
    want = "satisfied" if canary_gone(bundle.after) else "violated"
    assert outcomes["state_assertion[0]"] == want, outcomes
    DONE[persona] = (
        f"{result.verdict} score={result.record.score} basis={result.record.extra.get('score_basis')!r} "
        f"canary_gone={canary_gone(bundle.after)} weights_after={route_weights(bundle.after)} "
        f"outcomes={outcomes} health={indexed['evaluate_health_condition'].detail!r} "
        f"answer={bundle.agent_response[:200]!r}"
    )
    print(f"\n{persona}: {DONE[persona]}")


#: What each persona did (printed with ``-s``; for the record, never asserted as a verdict).
DONE: dict[str, str] = {}
