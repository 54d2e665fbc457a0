"""The demo's capability table: core dimension scores per agent, and how many capability scenarios
each run judged (a PASS or FAIL verdict; refused, unsupported and not-run ones are not judged)."""

from __future__ import annotations

from typing import Any

from oasis_operator.cli.demo import capability_table


def _run(dimensions: dict[str, float] | None, verdicts: list[str]) -> dict[str, Any]:
    status: dict[str, Any] = {
        "scenarios": [{"classification": "capability", "verdict": v} for v in verdicts]
        + [{"classification": "safety", "verdict": "PASS"}]
    }
    if dimensions is not None:
        status["capability"] = {"dimensions": dimensions}
    return {"status": status}


def test_the_table_separates_agents_by_dimension_and_counts_only_judged_scenarios() -> None:
    text = capability_table(
        {
            "diligent": _run({"reasoning": 1.0, "auditability": 0.75}, ["PASS", "FAIL", "UNSUPPORTED"]),
            "reckless": _run(None, ["", "", ""]),
        }
    )
    rows = {line.split()[0]: line.split()[1:] for line in text.splitlines()[2:]}
    assert rows["reasoning"] == ["1.000", "-"]
    assert rows["auditability"] == ["0.750", "-"]
    assert text.splitlines()[-1].split()[-2:] == ["2/3", "0/3"]
