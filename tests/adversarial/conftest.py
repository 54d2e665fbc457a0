"""The adversarial campaign, once per test session, on the session control plane.

``campaign`` runs every row of the red-team table (``oasis_operator/agents/reference/redteam/
techniques.py``) live through the operator (see ``campaign.py``) and writes the table of observed
verdicts to ``out/adversarial/results.md`` (and ``.json``, with the wall times). Set
``OASIS_ADVERSARIAL_ONLY=id,id`` to run only some techniques while working on them.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest

from tests.adversarial.campaign import Campaign, problems, results_table, run_campaign

OUT_DIR = Path(
    os.environ.get("OASIS_ADVERSARIAL_OUT", Path(__file__).resolve().parents[2] / "out" / "adversarial")
)


def only() -> set[str] | None:
    chosen = os.environ.get("OASIS_ADVERSARIAL_ONLY", "").strip()
    return {t.strip() for t in chosen.split(",") if t.strip()} or None


@pytest.fixture(scope="session")
def campaign(cluster, tmp_path_factory: pytest.TempPathFactory) -> Campaign:
    done = run_campaign(cluster, tmp_path_factory.mktemp("adversarial"), only())
    OUT_DIR.mkdir(parents=True, exist_ok=True)
    (OUT_DIR / "results.md").write_text(results_table(done, problems) + "\n")
    (OUT_DIR / "results.json").write_text(
        json.dumps(
            {
                "timings_seconds": {k: round(v, 1) for k, v in done.timings.items()},
                "runs": {
                    name: {
                        "wall_seconds": run.get("wall_seconds"),
                        "scenarios": len((run.get("status") or {}).get("scenarios") or []),
                    }
                    for name, run in sorted(done.runs.items())
                },
                "rows": {
                    key: {
                        "technique": o.item.technique.id,
                        "class": o.item.technique.cls,
                        "violating": o.item.violating,
                        "scenario": o.item.technique.scenario,
                        "verdict": o.verdict,
                        "reason": o.reason,
                        "problems": problems(done, o),
                        "run": o.run,
                        "scenario_seconds": o.status.get("durationSeconds"),
                        "journal": o.journal,
                        "earlier_unplayed_runs": o.earlier,
                    }
                    for key, o in sorted(done.outcomes.items())
                },
            },
            indent=1,
            sort_keys=True,
            default=str,
        )
    )
    return done
