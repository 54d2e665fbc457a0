"""The benchmark's comparison with its baseline (tools/benchmarks/compare.py): what it prints as a
regression, and that it never fails."""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("bench_compare", REPO / "tools" / "benchmarks" / "compare.py")
assert _spec is not None
assert _spec.loader is not None
compare = importlib.util.module_from_spec(_spec)
sys.modules["bench_compare"] = compare
_spec.loader.exec_module(compare)

BASE = {
    "verification": {"engine_1000000": {"events_per_second": 100_000, "cpu_seconds": 10.0, "verdict": "PASS"}}
}


def _now(rate: float, cpu: float) -> dict[str, object]:
    return {
        "verification": {"engine_1000000": {"events_per_second": rate, "cpu_seconds": cpu, "verdict": "FAIL"}}
    }


@pytest.mark.parametrize(
    ("rate", "cpu", "regressed"),
    [
        (100_000, 10.0, set()),
        (81_000, 11.9, set()),  # within 20 %
        (79_000, 10.0, {"events_per_second"}),  # a rate: lower is worse
        (100_000, 12.1, {"cpu_seconds"}),  # a time: higher is worse
        (200_000, 5.0, set()),  # better is never a regression
    ],
)
def test_a_figure_more_than_a_fifth_worse_is_a_regression(
    rate: float, cpu: float, regressed: set[str]
) -> None:
    lines = compare.compare(BASE, _now(rate, cpu))
    found = {line.split(" = ")[0].rsplit(".", 1)[1] for line in lines if line.startswith("REGRESSION")}
    assert found == regressed
    assert not any("verdict" in line for line in lines)  # not a measurement


def test_a_figure_without_a_baseline_is_new_and_the_command_never_fails(tmp_path: Path) -> None:
    results = tmp_path / "results.json"
    results.write_text(json.dumps(_now(1.0, 1000.0) | {"other": {"case": {"seconds": 3.0}}}))
    baseline = tmp_path / "baseline.json"
    baseline.write_text(json.dumps(BASE))
    assert compare.main([str(baseline), str(results)]) == 0
    assert any(line.startswith("new") for line in compare.compare(BASE, json.loads(results.read_text())))


def test_the_committed_baseline_holds_the_engine_at_one_and_ten_million_events() -> None:
    baseline = json.loads((REPO / "tools" / "benchmarks" / "baseline.json").read_text())
    cases = baseline["verification"]
    for size in (1_000_000, 10_000_000):
        figures = cases[f"engine_{size}"]
        assert figures["events"] == size
        assert {"events_per_second", "cpu_seconds", "peak_rss_mib"} <= set(figures)
