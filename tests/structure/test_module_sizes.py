"""No module of the workflows or the adapters grows past 500 lines (issue 30): a class or a module that
large does several things, and the next change to it should split it first."""

from __future__ import annotations

from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[2] / "oasis_operator"
LIMIT = 500


def test_no_workflow_or_adapter_module_is_above_the_limit() -> None:
    sizes = {
        str(path.relative_to(PACKAGE)): len(path.read_text().splitlines())
        for part in ("workflows", "adapters")
        for path in sorted((PACKAGE / part).rglob("*.py"))
    }
    assert len(sizes) > 30
    assert {m: n for m, n in sizes.items() if n > LIMIT} == {}
