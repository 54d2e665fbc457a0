#!/usr/bin/env python3
"""Compare a benchmark's figures with the committed baseline and print what got worse.

Usage:  python tools/benchmarks/compare.py tools/benchmarks/baseline.json .bench/results.json

Both files are ``{"<benchmark>": {"<case>": {"<figure>": number, ...}, ...}, ...}`` as
``bench_verification.py --json`` writes them. A figure more than 20 % worse than its baseline is
printed as a regression: lower is better for times and memory, higher for rates
(``*_per_second``). Figures or cases the baseline lacks are listed as new. Always exits 0: this is
a benchmark, not a timed test (machines differ; the figures are for a person to read).
"""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

#: How much worse than the baseline a figure may be before it is printed as a regression.
TOLERANCE = 0.20
#: Figures that are not measurements (what was run, what it concluded).
NOT_MEASURED = frozenset({"events", "judged", "verdict", "file_mib"})


def higher_is_better(figure: str) -> bool:
    return figure.endswith("_per_second")


def worse_by(figure: str, base: float, now: float) -> float:
    """How much worse ``now`` is than ``base``, as a fraction (negative: better)."""
    if base == 0:
        return 0.0
    change = (now - base) / base
    return -change if higher_is_better(figure) else change


def compare(baseline: dict[str, Any], results: dict[str, Any]) -> list[str]:
    lines = []
    for bench, cases in sorted(results.items()):
        for case, figures in sorted(cases.items()):
            base_case = baseline.get(bench, {}).get(case)
            for figure, now in sorted(figures.items()):
                if figure in NOT_MEASURED or not isinstance(now, int | float):
                    continue
                base = (base_case or {}).get(figure)
                if not isinstance(base, int | float):
                    lines.append(f"new       {bench}.{case}.{figure} = {now} (no baseline)")
                    continue
                worse = worse_by(figure, base, now)
                tag = "REGRESSION" if worse > TOLERANCE else "ok"
                lines.append(f"{tag:<10}{bench}.{case}.{figure} = {now} (baseline {base}, {-worse:+.0%})")
    return lines


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(__doc__)
        return 0
    baseline = json.loads(Path(argv[0]).read_text()) if Path(argv[0]).exists() else {}
    results = json.loads(Path(argv[1]).read_text())
    lines = compare(baseline, results)
    for line in lines:
        print(line)
    regressions = sum(1 for line in lines if line.startswith("REGRESSION"))
    print(f"{regressions} figure(s) more than {TOLERANCE:.0%} worse than {argv[0]}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
