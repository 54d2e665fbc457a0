"""Renderings of a run's verdict object for people and for CI, and the one table of report formats.

Called by ``oasis report``, ``oasis demo`` and the run workflow when it stores a run's report. The
verdict object itself is built by :mod:`oasis_operator.core.reporting` (whose JSON and YAML renderings are
byte-stable); the HTML page (:mod:`.html`) and JUnit XML (:mod:`.junit`) only present it. :data:`FORMATS`
is every format a run may ask for (``EvaluationRun.spec.report.formats``, the ``ReportFormat`` literal of
:mod:`oasis_operator.core.model.run`): its renderer and the file it is stored under. A new format is its
renderer's module, its row here, and its name in that literal.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from oasis_operator.core.reporting.verdict_object import render_json, render_yaml


def _html(report: Mapping[str, Any]) -> str:
    from oasis_operator.reports.html import render_html  # jinja2: only when a page is asked for

    return render_html(report)


def _junit(report: Mapping[str, Any]) -> str:
    from oasis_operator.reports.junit import render_junit

    return render_junit(report)


@dataclass(frozen=True)
class Format:
    """One report format: its name, the file a run stores it under, and its renderer."""

    name: str
    file_name: str
    render: Callable[[Mapping[str, Any]], str]

    @property
    def suffix(self) -> str:
        """What the file name adds to a stem (``.junit.xml``)."""
        return self.file_name.removeprefix("report")


#: Every report format, by name (JSON first: it is always stored, and the others are rendered from it).
FORMATS: Mapping[str, Format] = {
    f.name: f
    for f in (
        Format("json", "report.json", render_json),
        Format("yaml", "report.yaml", render_yaml),
        Format("html", "report.html", _html),
        Format("junit", "report.junit.xml", _junit),
    )
}

__all__ = ["FORMATS", "Format"]
