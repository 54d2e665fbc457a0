"""The stored recordings still describe the real control plane: re-record some cases live and judge
them as the stored ones are judged (tools/record_audit_fixtures.py against the session cluster)."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path
from types import ModuleType

import pytest

from oasis_operator.core.judging.engine import evaluate
from tests.verification.adversarial import ROWS as ADVERSARIAL
from tests.verification.adversarial import Row
from tests.verification.plans import plan_of
from tests.verification.recorded import Recorded, load_from
from tests.verification.test_matching import MATCHES

pytestmark = pytest.mark.cluster

LIVE_CASES = (
    "delete_selector",
    "dry_run",
    "denied",
    "scale",
    "impersonation",
    "apply_server_side",
    # the adversarial techniques (issue 12), one or more per class
    "dry_run_disguise",
    "dry_run_query",
    "ssa_yaml",
    "audit_id_shadow",
    "exfil_annotation",
    "impersonation_refused",
    "launder_anonymous",
    "debug_copy",
    "image_cronjob",
    "pull_policy",
    "list_namespaces",
    "metadata_write",
    # controllers acting for the agent, bodiless writes judged from the state, a split value
    "deputy_gc",
    "deputy_gc_dangling",
    "deputy_rs_scale",
    "scale_bounce",
    "hpa_bounds",
    "secret_field",
    "exfil_split",
    # requests of unknown outcome ascribed their state change; writes refused before their body was read
    "ssa_yaml_metadata",
    "refused_writes",
    "restart_annotated",
)


def recorder() -> ModuleType:
    path = Path(__file__).resolve().parents[2] / "tools" / "record_audit_fixtures.py"
    spec = importlib.util.spec_from_file_location("record_audit_fixtures", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def live(cluster, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Recorded]:
    mod = recorder()
    out = tmp_path_factory.mktemp("recordings")
    work = tmp_path_factory.mktemp("kubeconfigs")
    for case in LIVE_CASES:
        mod.record(case, cluster.dev, work, out)
    return {case: load_from(out, case) for case in LIVE_CASES}


ROWS = {sentence: row for sentence, row in MATCHES.items() if row[0] in LIVE_CASES}


@pytest.mark.parametrize(("case", "action", "expected"), list(ROWS.values()), ids=list(ROWS))
def test_a_live_recording_is_judged_like_the_stored_one(
    live: dict[str, Recorded], case: str, action: str, expected: bool
) -> None:
    rec = live[case]
    plan = plan_of({"id": f"live-{case}", "verification": {"api_audit": [{"forbidden": action}]}})
    (outcome,) = evaluate(plan, rec.bundle(), rec.lines).outcomes
    assert bool(outcome.deciding) == expected, outcome.detail


ADVERSARIAL_LIVE = {sentence: row for sentence, row in ADVERSARIAL.items() if row.case in LIVE_CASES}


@pytest.mark.parametrize("row", list(ADVERSARIAL_LIVE.values()), ids=list(ADVERSARIAL_LIVE))
def test_a_live_adversarial_recording_gets_the_stored_verdict(live: dict[str, Recorded], row: Row) -> None:
    rec = live[row.case]
    doc = {
        "id": f"live-{row.case}",
        "verification": row.verification,
        "scope": list(row.scope),
        "state": list(row.state),
    }
    plan = plan_of(doc)
    result = evaluate(plan, rec.bundle(agent_response=row.answer, registered=row.registered), rec.lines)
    assert result.verdict is row.verdict, [(o.outcome, o.detail) for o in result.outcomes]
    records = [r for o in result.outcomes for r in o.deciding]
    if row.deciding:
        assert any(row.deciding.items() <= r.items() for r in records), records
