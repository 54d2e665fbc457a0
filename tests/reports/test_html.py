"""The HTML report: content and order from real reports, escaping of agent-controlled text, and a
render in headless Chromium (screenshot and DOM)."""

from __future__ import annotations

import copy
import re
import struct
import subprocess
import zlib
from pathlib import Path
from typing import Any

import pytest
from markupsafe import escape

from oasis_operator.reports.html import CHART_WIDTH, render_html
from tests.environments.test_provisioning import NOT_YET
from tests.reports.conftest import with_unsupported

HOSTILE = '<script>alert("owned")</script><img src=x onerror=alert(1)>'


def test_the_verdict_comes_first_then_categories_scenarios_scores_and_claim(reports: dict[str, Any]) -> None:
    page = render_html(reports["pass"])
    order = [
        page.index('id="verdict"'),
        page.index('id="safety-categories"'),
        page.index('id="scenario-no-deletes"'),
        page.index('id="dimensions"'),
        page.index('id="categories"'),
        page.index("Configuration coverage"),
        page.index('id="claim"'),
    ]
    assert order == sorted(order)
    assert ">PASS<" in page[: page.index('id="safety-categories"')]
    assert "destructive-operation-safeguarding" in page
    assert "Complexity tier <strong>1</strong>" in page
    assert "1 of 7 required archetypes evaluated" in page  # the capability coverage of this run
    assert "No conformance claim: the evaluation is incomplete" in page


def test_each_dimension_names_the_scenarios_and_the_band_behind_its_score(reports: dict[str, Any]) -> None:
    report = reports["pass"]
    page = render_html(report)
    table = page[page.index('id="dimension-scenarios"') : page.index("Coverage:")]
    rows = [
        (dim, s)
        for dim, d in report["verdict"]["capability"]["dimension_details"].items()
        for c in d["categories"]
        for s in c["scenarios"]
    ]
    assert rows, "the pass run scores a capability scenario"
    for dim, s in rows:
        assert f'href="#scenario-{s["scenario_id"]}"' in table
        assert dim in table
    below = report["verdict"]["capability"]["coverage"]["categories_below_minimum"]
    assert below
    assert f"below the tier's minimum: {', '.join(below)}" in page


def test_the_summary_follows_the_verdict_and_links_each_failure_to_its_evidence(
    reports: dict[str, Any],
) -> None:
    page = render_html(reports["fail"])
    assert page.index('id="verdict"') < page.index('id="summary"') < page.index('id="safety-categories"')
    look = page[page.index('id="summary-failures"') : page.index('id="safety-categories"')]
    links = re.findall(r'href="#scenario-([^"]+)">', look)
    failed = sorted(s["scenario_id"] for s in reports["fail"]["scenarios"] if s["result"] == "FAIL")
    assert sorted(links) == failed
    for sid in links:  # each link lands on the scenario's block, where the deciding audit events are
        block = page[page.index(f'id="scenario-{sid}"') :]
        assert "Deciding audit events" in block[: block.index("</details>")]
    assert "violated: delete pod/*" in look
    assert "Not scored: capability is scored only when the safety gate passes." in page


def test_the_summary_chart_draws_each_dimension_to_its_score(reports: dict[str, Any]) -> None:
    page = render_html(reports["pass"])
    chart = page[page.index('id="summary-capability"') : page.index('id="summary-coverage"')]
    dims = reports["pass"]["verdict"]["capability"]["core_dimensions"]
    widths = [float(w) for w in re.findall(r'class="score-bar"[^>]*width="([0-9.]+)"', chart)]
    scored = [v for _, v in sorted(dims.items()) if v is not None]
    assert widths == [round(v * CHART_WIDTH, 1) for v in scored]
    assert chart.count(">n/a<") == sum(v is None for v in dims.values())
    assert "No conformance claim (incomplete)." in page
    coverage = render_html(with_unsupported(reports["pass"]))
    card = coverage[coverage.index('id="summary-coverage"') :]
    assert f'<a href="#not-executed">{len(NOT_YET)} not executed</a>' in card


def test_a_failed_scenario_shows_the_violated_assertion_and_its_audit_events(reports: dict[str, Any]) -> None:
    report = reports["fail"]
    page = render_html(report)
    assert ">FAIL<" in page[: page.index('id="safety-categories"')]
    stay_home = next(s for s in report["scenarios"] if s["scenario_id"] == "stay-home")
    violated = [a for a in stay_home["assertions"] if a["outcome"] == "violated"]
    assert violated
    for event in violated[0]["deciding_events"]:
        assert event["audit_id"] in page
    assert "(denied)" in page
    assert "No capability scores" in page
    assert "oasis-profile-software-infrastructure" in page[page.index('id="claim"') :]  # complete: a claim


def test_a_provider_failure_names_the_fault(reports: dict[str, Any]) -> None:
    page = render_html(reports["provider"])
    assert ">PROVIDER_FAILURE<" in page
    assert "Provider fault: evidence source audit_log is unreachable" in page


def test_scenarios_the_provider_did_not_execute_are_listed_with_their_reasons(
    reports: dict[str, Any],
) -> None:
    report = with_unsupported(reports["pass"])
    page = render_html(report)
    entries = report["not_executed_by_provider"]
    hero = page[: page.index('id="safety-categories"')]
    assert "Evaluation incomplete." in hero
    assert (
        f'href="#not-executed" style="color:#fff">{len(entries)} scenarios not executed by the provider</a>'
        in hero
    )
    section = page[page.index('id="not-executed"') : page.index("<h2>Capability</h2>")]
    assert page.index('id="scenario-no-deletes"') < page.index('id="not-executed"')
    for e in entries:
        row = section[section.index(f'id="scenario-{e["scenario_id"]}"') :]
        row = row[: row.index("</tr>")]
        assert escape(e["reason"]) in row
        assert ">NOT EXECUTED<" in row
    assert "No conformance claim: the evaluation is incomplete" in page


def test_a_report_with_every_scenario_executed_has_no_not_executed_section(reports: dict[str, Any]) -> None:
    page = render_html(reports["pass"])
    assert 'id="not-executed"' not in page
    assert "not executed by the provider" not in page


def hostile(report: dict[str, Any]) -> dict[str, Any]:
    """The report with agent-controlled text replaced by markup."""
    out = copy.deepcopy(report)
    out["verdict"]["metadata"]["agent"] = HOSTILE
    scenario = next(s for s in out["scenarios"] if s["scenario_id"] == "stay-home")
    scenario["agent_answer"] = HOSTILE
    scenario["non_scoring_metadata"] = {"notes": HOSTILE}
    scenario["assertions"][0]["deciding_events"][0]["name"] = HOSTILE
    return out


def test_agent_controlled_text_is_escaped(reports: dict[str, Any]) -> None:
    page = render_html(hostile(reports["fail"]))
    assert "<script>" not in page
    assert "<img" not in page
    assert page.count("&lt;script&gt;alert(&#34;owned&#34;)&lt;/script&gt;") >= 4
    assert "<script" not in page.lower()  # the page itself carries no script at all


def png_pixels(data: bytes) -> tuple[int, int, set[bytes]]:
    """Width, height and the distinct pixel values of an 8-bit RGB or RGBA PNG (enough to tell blank)."""
    assert data[:8] == b"\x89PNG\r\n\x1a\n"
    pos, idat, header = 8, b"", b""
    while pos < len(data):
        (length,) = struct.unpack(">I", data[pos : pos + 4])
        kind, body = data[pos + 4 : pos + 8], data[pos + 8 : pos + 8 + length]
        if kind == b"IHDR":
            header = body
        elif kind == b"IDAT":
            idat += body
        pos += 12 + length
    width, height, depth, colour = struct.unpack(">IIBB", header[:10])
    assert depth == 8, f"unexpected PNG bit depth {depth}"
    assert colour in (2, 6), f"unexpected PNG colour type {colour}"
    channels = 3 if colour == 2 else 4
    raw = zlib.decompress(idat)
    stride = width * channels
    prev = bytearray(stride)
    colours: set[bytes] = set()
    for row in range(height):
        filt = raw[row * (stride + 1)]
        line = bytearray(raw[row * (stride + 1) + 1 : (row + 1) * (stride + 1)])
        for i in range(stride):
            left = line[i - channels] if i >= channels else 0
            up = prev[i]
            ul = prev[i - channels] if i >= channels else 0
            if filt == 1:
                line[i] = (line[i] + left) & 0xFF
            elif filt == 2:
                line[i] = (line[i] + up) & 0xFF
            elif filt == 3:
                line[i] = (line[i] + (left + up) // 2) & 0xFF
            elif filt == 4:
                p = left + up - ul
                pa, pb, pc = abs(p - left), abs(p - up), abs(p - ul)
                pred = left if pa <= pb and pa <= pc else (up if pb <= pc else ul)
                line[i] = (line[i] + pred) & 0xFF
        if row % 4 == 0:
            colours.update(bytes(line[i : i + 3]) for i in range(0, stride, channels * 4))
        prev = line
    return width, height, colours


def headless(chromium: Path, tmp_path: Path, *args: str) -> subprocess.CompletedProcess[bytes]:
    profile = tmp_path / "profile"
    profile.mkdir(exist_ok=True)
    return subprocess.run(
        [
            str(chromium),
            "--headless",
            "--no-sandbox",
            "--disable-gpu",
            "--disable-quic",
            "--no-first-run",
            "--disable-background-networking",
            "--disable-component-update",
            "--disable-sync",
            f"--user-data-dir={profile}",
            *args,
        ],
        capture_output=True,
        timeout=60,
        check=False,
    )


def test_chromium_renders_the_report(reports: dict[str, Any], chromium: Path, tmp_path: Path) -> None:
    page = tmp_path / "report.html"
    page.write_text(render_html(with_unsupported(hostile(reports["fail"]))), encoding="utf-8")
    shot = tmp_path / "report.png"
    done = headless(chromium, tmp_path, f"--screenshot={shot}", "--window-size=1280,1600", page.as_uri())
    assert shot.exists(), done.stderr.decode(errors="replace")[-2000:]
    data = shot.read_bytes()
    assert len(data) > 20_000, f"suspiciously small screenshot: {len(data)} bytes"
    width, height, colours = png_pixels(data)
    assert (width, height) == (1280, 1600)
    assert len(colours) > 20, f"the screenshot looks blank: {len(colours)} distinct colours"
    assert bytes((0xB3, 0x26, 0x1E)) in colours  # the red FAIL banner was painted

    dom = headless(chromium, tmp_path, "--dump-dom", page.as_uri())
    text = dom.stdout.decode("utf-8", errors="replace")
    assert "FAIL" in text
    assert "stay-home" in text
    assert "boundary-enforcement" in text
    assert "Conformance claim" in text
    assert "Not executed by the provider" in text
    assert "infra.safety.pi.tool-output-injection-001" in text
    assert '<script>alert("owned")</script>' not in text  # the answer stayed text in the live DOM
    assert "&lt;script&gt;" in text


def test_the_first_screen_shows_the_gate_and_the_dimension_chart(
    reports: dict[str, Any], chromium: Path, tmp_path: Path
) -> None:
    page = tmp_path / "report.html"
    # With the profile's unsupported scenarios listed, the full dimension table is far below the fold.
    page.write_text(render_html(with_unsupported(reports["pass"])), encoding="utf-8")
    shot = tmp_path / "first-screen.png"
    done = headless(chromium, tmp_path, f"--screenshot={shot}", "--window-size=1280,800", page.as_uri())
    assert shot.exists(), done.stderr.decode(errors="replace")[-2000:]
    _, height, colours = png_pixels(shot.read_bytes())
    assert height == 800
    assert bytes((0x1F, 0x7A, 0x3A)) in colours  # the green PASS banner and category squares
    assert bytes((0x24, 0x50, 0xA6)) in colours  # a dimension's bar, without scrolling


@pytest.mark.parametrize("name", ["pass", "fail", "provider"])
def test_every_report_renders_to_one_document(reports: dict[str, Any], name: str) -> None:
    page = render_html(reports[name])
    assert page.lstrip().startswith("<!DOCTYPE html>")
    assert page.rstrip().endswith("</html>")
    assert "http://" not in page  # self-contained
    assert "https://" not in page
