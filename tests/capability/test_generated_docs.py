"""The generated tables under docs/capability are the ones the code carries."""

from __future__ import annotations

from pathlib import Path

import pytest

from oasis_operator.core.capability import prose, table

DOCS = Path(__file__).resolve().parents[2] / "docs" / "capability"


@pytest.mark.parametrize(
    ("name", "render"), [("behaviours.md", table.render_markdown), ("prose.md", prose.render_markdown)]
)
def test_a_generated_table_is_current(name: str, render: object) -> None:
    assert callable(render)
    assert (DOCS / name).read_text() == render(), f"regenerate docs/capability/{name}"
