"""The two layout maps stay true to the tree: the README's names every part of the package, and
CONTRIBUTING's every part, every child of the pure core and every adapter. A package added, renamed
or removed fails here rather than leaving a stale map for the next reader; the README stays short
enough to be read first."""

from __future__ import annotations

import re
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "oasis_operator"
README = REPO / "README.md"
CONTRIBUTING = REPO / "docs" / "CONTRIBUTING.md"
#: Where the README's sections went (docs/), so that it stays what a newcomer reads first.
README_MAX_LINES = 150


def layout_block(page: Path) -> str:
    """The first fenced block after the page's `## Layout` heading."""
    text = page.read_text()
    match = re.search(r"^## Layout\n.*?^```\n(?P<block>.*?)^```$", text, re.MULTILINE | re.DOTALL)
    assert match is not None, f"{page.relative_to(REPO)} has no fenced block under '## Layout'"
    return match["block"]


def children(directory: Path) -> list[str]:
    """The modules and packages directly under a package, as a map names them (`name/`, `name.py`)."""
    out = []
    for child in sorted(directory.iterdir()):
        if child.is_dir() and (child / "__init__.py").exists():
            out.append(f"{child.name}/")
        elif child.suffix == ".py" and child.name not in ("__init__.py", "__main__.py"):
            out.append(child.name)
    return out


def named(block: str, entry: str) -> bool:
    """Whether a map names a module or package: `core/`, `crdgen.py`, or the bare word."""
    word = entry.removesuffix("/").removesuffix(".py")
    return re.search(rf"(?<![\w.]){re.escape(word)}(?:/|\.py)?(?![\w])", block) is not None


def test_the_maps_are_found_and_the_tree_has_parts() -> None:
    assert "core/" in children(PACKAGE)
    assert len(children(PACKAGE / "core")) >= 20
    assert layout_block(README)
    assert layout_block(CONTRIBUTING)


def test_the_readme_map_names_every_part_of_the_package() -> None:
    block = layout_block(README)
    missing = [entry for entry in children(PACKAGE) if not named(block, entry)]
    assert missing == [], f"README.md's Layout does not name {missing}"


def test_the_contributing_map_names_every_part_every_core_child_and_every_adapter() -> None:
    block = layout_block(CONTRIBUTING)
    missing = [
        f"{where}{entry}"
        for where, directory in (
            ("", PACKAGE),
            ("core/", PACKAGE / "core"),
            ("adapters/", PACKAGE / "adapters"),
        )
        for entry in children(directory)
        if not named(block, entry)
    ]
    assert missing == [], f"docs/CONTRIBUTING.md's Layout does not name {missing}"


def test_the_maps_name_nothing_that_is_gone() -> None:
    """A top-level entry of either map (`name/` or `name.py` at the start of a line under the package)
    exists in the tree."""
    known = set(children(PACKAGE))
    for page in (README, CONTRIBUTING):
        listed = re.findall(r"^  (\w+/|\w+\.py)\s", layout_block(page), re.MULTILINE)
        gone = [entry for entry in listed if entry not in known]
        assert gone == [], f"{page.relative_to(REPO)}'s Layout names {gone}, which the tree lacks"


def test_the_readme_is_what_a_newcomer_reads_first() -> None:
    text = README.read_text()
    assert len(text.splitlines()) <= README_MAX_LINES
    # The two set-up commands, exactly as CI runs the second (.ci/run).
    assert "make demo" in text
    assert "make test" in text
    assert "make test" in (REPO / ".ci" / "run").read_text()
