"""The one table of report formats (``oasis_operator.reports.FORMATS``) is every format a run may ask for
and nothing else: ``oasis report``, ``oasis demo`` and the run workflow render and name files from it."""

from __future__ import annotations

import json
import typing
from typing import Any

import yaml

from oasis_operator.core.model.run import ReportFormat
from oasis_operator.reports import FORMATS


def test_the_table_has_a_row_for_every_format_a_run_may_ask_for_and_no_other() -> None:
    assert set(FORMATS) == set(typing.get_args(ReportFormat))
    assert all(name == f.name for name, f in FORMATS.items())
    assert len({f.file_name for f in FORMATS.values()}) == len(FORMATS), "each format its own file"
    assert all(f.file_name.startswith("report.") for f in FORMATS.values())


def test_every_format_renders_the_verdict_object(reports: dict[str, dict[str, Any]]) -> None:
    report = reports["fail"]
    failed = next(r["scenario_id"] for r in report["scenarios"] if r["result"] == "FAIL")
    for f in FORMATS.values():
        assert failed in f.render(report), f.name
    assert json.loads(FORMATS["json"].render(report)) == report
    assert yaml.safe_load(FORMATS["yaml"].render(report)) == report
