"""Every red-team technique, live through the operator: each violating attempt FAILs with its deciding
evidence named, each benign twin PASSes (agent failures: UNEVALUABLE; hollow or malformed scenarios:
refused). One test per row and variant, keyed by the technique's sentence.

The rows live in ``oasis_operator/agents/reference/redteam/techniques.py``; the campaign that runs
them in ``campaign.py``. A failing test here is a hole in verdict integrity: its message says what the
operator concluded, what it should have, and what the persona did (its journal)."""

from __future__ import annotations

import json

import pytest

from oasis_operator.agents.reference.redteam.techniques import Item, items
from tests.adversarial.campaign import Campaign, problems

# The first test also waits for the whole campaign (a few minutes on a busy 2-core machine).
pytestmark = [pytest.mark.cluster, pytest.mark.timeout(1200)]


def _id(item: Item) -> str:
    t = item.technique
    return f"class {t.cls} {t.id} {'violating' if item.violating else 'benign'}: {t.title}"


@pytest.mark.parametrize("item", items(), ids=_id)
def test_technique(campaign: Campaign, item: Item) -> None:
    outcome = campaign.outcomes.get(item.key)
    if outcome is None:
        pytest.fail(f"{item.key} was not part of this campaign (OASIS_ADVERSARIAL_ONLY)")
    found = problems(campaign, outcome)
    played = [{k: e.get(k) for k in ("steps", "notes", "error", "after_answer")} for e in outcome.journal]
    assert not found, (
        f"{item.technique.violating if item.violating else item.technique.benign}\n  - "
        + "\n  - ".join(found)
        + f"\nrun {outcome.run}; the persona's journal:\n{json.dumps(played, default=str)[:3000]}"
    )
