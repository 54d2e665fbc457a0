"""JUnit and HTML stay well-formed whatever the agent says (decision 0099, review finding L-1).

The agent controls its declared name and version, its answer, the metadata it reports and the names
in its API requests (which become the deciding lines of a failure). Generated text of every kind —
control characters, terminal escapes, markup, XML's forbidden characters, lone surrogates,
bidirectional overrides — is put there on top of a real report: the JUnit document parses with
``xml.etree`` and ``junitparser``, the HTML page encodes as UTF-8 and its tags are the page's own,
and the text shows up escaped, never raw. The JUnit part failed before that decision."""

from __future__ import annotations

import copy
import xml.etree.ElementTree as ET
from html.parser import HTMLParser
from pathlib import Path
from typing import Any

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from junitparser import JUnitXml

from oasis_operator.core.reasons import printable
from oasis_operator.reports.html import render_html
from oasis_operator.reports.junit import render_junit

#: What an adversary reaches for: C0 and C1 controls, a terminal's escape sequences, XML's forbidden
#: and non-characters, lone surrogates, bidirectional overrides, markup and CDATA ends.
NASTY = [
    *map(chr, range(0x20)),
    "\x7f",
    "\x85",
    "\x9b",
    "\x1b[2J",
    "\x1b]0;owned\x07",
    "\ufffe",
    "\uffff",
    "\ud800",
    "\udfff",
    "\u202e",
    "\u2066",
    "<script>alert(1)</script>",
    "]]>",
    "&amp;",
    '"',
    "'",
    "<![CDATA[",
    "\U0001f600",
]
agent_text = st.lists(st.one_of(st.sampled_from(NASTY), st.text(max_size=5)), min_size=1, max_size=8).map(
    "".join
)


def hostile(report: dict[str, Any], name: str, answer: str, deciding: str) -> dict[str, Any]:
    out = copy.deepcopy(report)
    out["verdict"]["metadata"]["agent"] = name
    out["verdict"]["metadata"]["agent_version"] = name
    scenario = next(s for s in out["scenarios"] if s["scenario_id"] == "stay-home")
    scenario["agent_answer"] = answer
    scenario["non_scoring_metadata"] = {"notes": answer}
    scenario["assertions"][0]["deciding_events"][0]["name"] = deciding
    scenario["assertions"][0]["detail"] = deciding
    return out


class Tags(HTMLParser):
    """The page's start tags and attribute names, and its text."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, tuple[str, ...]]] = []
        self.text: list[str] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, tuple(sorted(k for k, _ in attrs))))

    def handle_data(self, data: str) -> None:
        self.text.append(data)


def tags_of(page: str) -> Tags:
    parser = Tags()
    parser.feed(page)
    parser.close()
    return parser


def hidden_characters(text: str) -> set[str]:
    return {c for c in text if printable(c, keep="\n\t") != c}


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=agent_text, answer=agent_text, deciding=agent_text)
def test_the_junit_document_parses_whatever_the_agent_says(
    reports: dict[str, Any], tmp_path: Path, name: str, answer: str, deciding: str
) -> None:
    document = render_junit(hostile(reports["fail"], name, answer, deciding))
    assert not hidden_characters(document)
    root = ET.fromstring(document.encode("utf-8"))
    assert root.get("name") == f"oasis: {printable(name, keep=chr(10) + chr(9))}"
    path = tmp_path / "junit.xml"
    path.write_bytes(document.encode("utf-8"))
    cases = {case.name: case for suite in JUnitXml.fromfile(str(path)) for case in suite}
    failure = cases["stay-home"].result[0]
    assert printable(deciding, keep="\n\t").replace("\r", "") in failure.text.replace("\r", "")


@settings(max_examples=80, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(name=agent_text, answer=agent_text, deciding=agent_text)
def test_the_html_page_parses_to_its_own_tags_whatever_the_agent_says(
    reports: dict[str, Any], name: str, answer: str, deciding: str
) -> None:
    page = render_html(hostile(reports["fail"], name, answer, deciding))
    page.encode("utf-8")  # strict: no lone surrogate survived
    assert not hidden_characters(page)
    parsed = tags_of(page)
    benign = tags_of(render_html(hostile(reports["fail"], "agent", "answer", "pod-1")))
    assert parsed.tags == benign.tags  # nothing the agent wrote became markup
    text = "".join(parsed.text)
    assert printable(name, keep="\n\t").strip() in text


def test_the_reviewed_bell_and_nul_agent_name_gives_well_formed_junit(reports: dict[str, Any]) -> None:
    """The review's reproduction: ``evil\\x07agent\\x00`` made ``render_junit`` emit a document that
    ``ElementTree`` could not parse."""
    report = copy.deepcopy(reports["fail"])
    report["verdict"]["metadata"]["agent"] = "evil\x07agent\x00"
    root = ET.fromstring(render_junit(report))
    assert root.get("name") == "oasis: evil\\x07agent\\x00"
