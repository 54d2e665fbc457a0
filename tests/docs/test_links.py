"""Every reference to a document resolves: the decision records cited from code, tests and docs (by
path or by number), and the relative links of the Markdown documents. A renamed record or a moved
page fails here, not in a reader's browser."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DECISIONS = REPO / "docs" / "decisions"
#: Where references live: our code and prose, not recorded data.
SCANNED = ("oasis_operator", "tests", "docs", "charts", "tools")
SUFFIXES = (".py", ".md", ".yaml", ".yml", ".toml", ".j2", ".sh", ".tpl", ".txt")
TOP_LEVEL = ("README.md", "Makefile", "pyproject.toml")

#: docs/decisions/0021-action-matching-and-attribution.md, or decisions/0021-….md
RECORD_PATH = re.compile(r"decisions/(\d{4}-[a-z0-9-]+)\.md")
#: "decision 0030", "decisions 0041/0042", "(decision record 0040)"
RECORD_NUMBER = re.compile(r"\bdecision(?:s| record)? ((?:\d{4}(?:[/, ]+(?:and )?)?)+)", re.IGNORECASE)
MARKDOWN_LINK = re.compile(r"\]\(([^)\s]+)\)")


def sources() -> list[Path]:
    files = [REPO / name for name in TOP_LEVEL]
    for top in SCANNED:
        files += [p for p in (REPO / top).rglob("*") if p.suffix in SUFFIXES and "fixtures" not in p.parts]
    return sorted(p for p in files if p.is_file() and p != Path(__file__))


def records() -> dict[str, str]:
    """Number -> file stem of every decision record."""
    return {p.stem[:4]: p.stem for p in DECISIONS.glob("[0-9][0-9][0-9][0-9]-*.md")}


def test_the_scan_sees_the_records_and_their_citations() -> None:
    assert len(records()) >= 20
    assert any("decisions/" in p.read_text(errors="replace") for p in sources() if p.suffix == ".py")


def test_every_cited_record_path_exists() -> None:
    known = set(records().values())
    stale = [
        f"{p.relative_to(REPO)}: decisions/{stem}.md"
        for p in sources()
        for stem in RECORD_PATH.findall(p.read_text(errors="replace"))
        if stem not in known
    ]
    assert stale == [], "renamed or missing decision records:\n" + "\n".join(stale)


def test_every_cited_record_number_exists() -> None:
    known = records()
    stale = []
    for p in sources():
        for group in RECORD_NUMBER.findall(p.read_text(errors="replace")):
            stale += [
                f"{p.relative_to(REPO)}: decision {n}" for n in re.findall(r"\d{4}", group) if n not in known
            ]
    assert stale == [], "decision numbers with no record:\n" + "\n".join(stale)


@pytest.mark.parametrize("page", sorted(str(p.relative_to(REPO)) for p in sources() if p.suffix == ".md"))
def test_every_relative_link_of_a_page_resolves(page: str) -> None:
    path = REPO / page
    broken = []
    for target in MARKDOWN_LINK.findall(path.read_text(errors="replace")):
        if re.match(r"^[a-z][a-z0-9+.-]*:", target) or target.startswith("#"):
            continue  # a URL or an anchor of the page itself
        if not (path.parent / target.split("#", 1)[0]).exists():
            broken.append(target)
    assert broken == []
