"""The complexity budget's rules (tools/complexity.py): what it refuses, keyed by sentence."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
_spec = importlib.util.spec_from_file_location("complexity", REPO / "tools" / "complexity.py")
assert _spec is not None
assert _spec.loader is not None
complexity = importlib.util.module_from_spec(_spec)
sys.modules["complexity"] = complexity
_spec.loader.exec_module(complexity)

STRICT = ["pkg/core/"]

CASES = {
    "a function within the limit passes": ({"pkg/a.py::f": 20}, {}, []),
    "a function above the limit and not listed is refused": ({"pkg/a.py::f": 21}, {}, ["pkg/a.py::f"]),
    "a listed function at its listed figure passes": ({"pkg/a.py::f": 25}, {"pkg/a.py::f": 25}, []),
    "a listed function that grew is refused": ({"pkg/a.py::f": 26}, {"pkg/a.py::f": 25}, ["pkg/a.py::f"]),
    "a listed function that shrank must lower its entry": (
        {"pkg/a.py::f": 23},
        {"pkg/a.py::f": 25},
        ["pkg/a.py::f"],
    ),
    "a listed function within the limit must leave the list": (
        {"pkg/a.py::f": 9},
        {"pkg/a.py::f": 25},
        ["pkg/a.py::f"],
    ),
    "a listed function that is gone must leave the list": ({}, {"pkg/a.py::f": 25}, ["pkg/a.py::f"]),
    "a strict path refuses any function above the limit": (
        {"pkg/core/m.py::f": 21},
        {},
        ["pkg/core/m.py::f"],
    ),
    "a strict path refuses an allow-list entry": (
        {"pkg/core/m.py::f": 21},
        {"pkg/core/m.py::f": 21},
        ["pkg/core/m.py::f", "pkg/core/m.py::f"],
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_budget(case: str) -> None:
    measured, allow, refused = CASES[case]
    problems = complexity.problems_of(measured, 20, allow, STRICT)
    assert [p.split(": ", 1)[0] for p in problems] == refused


def test_radon_counts_boolean_operators_that_mccabe_does_not(tmp_path: Path) -> None:
    code = "def f(a, b, c, d):\n    if a and b and c and d:\n        return 1\n    return 0\n"
    blocks = complexity.cc_visit(code)
    assert [b.complexity for b in blocks] == [5]
