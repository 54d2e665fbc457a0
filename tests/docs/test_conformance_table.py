"""docs/conformance.md is a table of the spec's requirements by the shared digest's IDs (decision 0113):
every ID is one of the digest's and every digest ID has its row, each status is one of three, and every
module and test a row names exists. The digest is read from ../shared, beside the spec the other tests
read."""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

REPO = Path(__file__).resolve().parents[2]
TABLE = REPO / "docs" / "conformance.md"
DIGEST = REPO.parent / "shared" / "notes" / "oasis-spec-digest.md"
STATUSES = ("implemented", "approximated", "not implemented")
#: `| ID | status | where | note |`
ROW = re.compile(
    r"^\| (?P<id>[A-Z][A-Z0-9]*(?:-[A-Z0-9]+)+) \| (?P<status>[a-z ]+) \| (?P<where>.*?) \| (?P<note>.+) \|$"
)
#: A requirement row of the digest's checklist tables.
DIGEST_ROW = re.compile(r"^\| ([A-Z][A-Z0-9]*(?:-[A-Z0-9]+)+) \|", re.M)
PATH = re.compile(r"`((?:oasis_operator|tests)/[^`:]+)(?:::[^`]+)?`")


def rows() -> list[re.Match[str]]:
    return [m for line in TABLE.read_text().splitlines() if (m := ROW.match(line))]


def digest_ids() -> set[str]:
    return set(DIGEST_ROW.findall(DIGEST.read_text()))


def test_the_table_and_the_digest_are_found() -> None:
    assert len(digest_ids()) >= 100
    assert len(rows()) >= 100
    loose = [
        line
        for line in TABLE.read_text().splitlines()
        if re.match(r"^\| [A-Z]+-", line) and not ROW.match(line)
    ]
    assert loose == [], f"rows of docs/conformance.md not in the table's form: {loose}"


def test_every_row_is_a_requirement_of_the_digest_and_every_requirement_has_one_row() -> None:
    counts = Counter(m["id"] for m in rows())
    assert sorted(set(counts) - digest_ids()) == [], "IDs the digest does not have"
    assert sorted(digest_ids() - set(counts)) == [], "requirements of the digest without a row"
    assert [i for i, n in counts.items() if n > 1] == [], "IDs listed twice"


def test_each_status_is_one_of_three_and_a_met_or_partial_one_says_where() -> None:
    for m in rows():
        assert m["status"] in STATUSES, (m["id"], m["status"])
        if m["status"] != "not implemented":
            assert PATH.search(m["where"]), f"{m['id']}: no module or test named"
            assert "`tests/" in m["where"], f"{m['id']}: no test named"


def test_every_module_and_test_a_row_names_exists() -> None:
    missing = [
        (m["id"], p) for m in rows() for p in PATH.findall(m["where"]) if not (REPO / p.rstrip("/")).exists()
    ]
    assert missing == []
