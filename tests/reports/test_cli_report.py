"""``oasis report --from-file``: every format from a stored report, and precise errors for bad files."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from oasis_operator.cli.main import main


def stored(tmp_path: Path, report: dict[str, Any]) -> Path:
    path = tmp_path / "report.json"
    path.write_text(json.dumps(report))
    return path


def test_json_and_yaml_carry_the_same_document(
    reports: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = stored(tmp_path, reports["fail"])
    assert main(["report", "--from-file", str(path), "--format", "json"]) == 0
    as_json = json.loads(capsys.readouterr().out)
    assert main(["report", "--from-file", str(path), "--format", "yaml"]) == 0
    as_yaml = yaml.safe_load(capsys.readouterr().out)
    assert as_json == as_yaml == reports["fail"]


@pytest.mark.parametrize(("fmt", "marker"), [("html", "<!DOCTYPE html>"), ("junit", "<testsuites")])
def test_html_and_junit_are_written_to_a_file(
    reports: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str], fmt: str, marker: str
) -> None:
    out = tmp_path / f"out.{fmt}"
    assert (
        main(
            ["report", "--from-file", str(stored(tmp_path, reports["pass"])), "--format", fmt, "-o", str(out)]
        )
        == 0
    )
    assert marker in out.read_text()
    assert f"wrote {out}" in capsys.readouterr().err


def test_a_yaml_report_is_read_too(
    reports: dict[str, Any], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    path = tmp_path / "report.yaml"
    path.write_text(yaml.safe_dump(reports["pass"]))
    assert main(["report", "--from-file", str(path), "--format", "junit"]) == 0
    assert 'name="no-deletes"' in capsys.readouterr().out


@pytest.mark.parametrize(
    ("content", "expected"),
    [
        (None, "no such report file"),
        ('{"verdict": ', "not a valid report document"),
        ("[1, 2]", "expected a mapping at the top level, found list"),
        ('{"scenarios": []}', "field 'verdict'"),
        ('{"verdict": {}, "scenarios": 3}', "field 'scenarios'"),
    ],
)
def test_a_bad_report_file_is_a_user_error(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], content: str | None, expected: str
) -> None:
    path = tmp_path / "report.json"
    if content is not None:
        path.write_text(content)
    assert main(["report", "--from-file", str(path), "--format", "html"]) == 2
    err = capsys.readouterr().err
    assert expected in err
    assert str(path) in err
    assert "Traceback" not in err
