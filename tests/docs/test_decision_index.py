"""The decision index (docs/decisions/README.md) lists every record once, with its number, its title
as the record states it and a one-line summary, and names no file that is not there. A record added
without its line, a record renamed or retitled, or a line left behind fails here."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
DECISIONS = REPO / "docs" / "decisions"
INDEX = DECISIONS / "README.md"
#: `- [0021](0021-action-matching-and-attribution.md) **Title.** One-line summary.`
ENTRY = re.compile(
    r"^- \[(?P<number>\d{4})\]\((?P<file>[^)\s]+)\) \*\*(?P<title>.+?)\.\*\* (?P<summary>\S.*)$"
)
#: The opening line of a record: `# 0021 — Title`.
HEADING = re.compile(r"^# (?P<number>\d{4}) — (?P<title>.+)$")


def records() -> dict[str, Path]:
    """File name -> path of every decision record."""
    return {p.name: p for p in sorted(DECISIONS.glob("[0-9][0-9][0-9][0-9]-*.md"))}


def entries() -> list[re.Match[str]]:
    return [m for line in INDEX.read_text().splitlines() if (m := ENTRY.match(line))]


def test_the_index_and_the_records_are_found() -> None:
    assert len(records()) >= 50
    assert len(entries()) >= 50


def test_every_record_is_in_the_index_once() -> None:
    counts = Counter(m["file"] for m in entries())
    missing = sorted(set(records()) - set(counts))
    twice = sorted(name for name, n in counts.items() if n > 1)
    assert missing == [], f"docs/decisions/README.md does not list {missing}"
    assert twice == [], f"docs/decisions/README.md lists more than once {twice}"


def test_every_line_of_the_index_names_a_record_that_exists() -> None:
    known = records()
    stale = [m["file"] for m in entries() if m["file"] not in known]
    assert stale == [], f"docs/decisions/README.md names missing files {stale}"
    # A line that looks like an entry but does not parse would escape both checks above.
    loose = [
        line for line in INDEX.read_text().splitlines() if line.startswith("- [") and not ENTRY.match(line)
    ]
    assert loose == [], f"lines of docs/decisions/README.md not in the entry form: {loose}"


def test_each_line_carries_its_records_number_and_title_and_a_summary() -> None:
    known = records()
    wrong = []
    for m in entries():
        if m["file"] not in known:
            continue
        heading = HEADING.match(known[m["file"]].read_text().splitlines()[0])
        if heading is None:
            wrong.append(f"{m['file']}: the record does not open with '# NNNN — Title'")
            continue
        if not m["file"].startswith(m["number"]) or heading["number"] != m["number"]:
            wrong.append(f"{m['file']}: listed as {m['number']}, the record says {heading['number']}")
        if heading["title"].rstrip(".") != m["title"]:
            wrong.append(f"{m['file']}: listed as {m['title']!r}, the record's title is {heading['title']!r}")
        if len(m["summary"].split()) < 5:
            wrong.append(f"{m['file']}: its summary {m['summary']!r} says too little")
    assert wrong == []
