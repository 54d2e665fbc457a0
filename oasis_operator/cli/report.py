"""``oasis report``: render a run's stored verdict object for people or for CI.

``oasis report --from-file report.json --format json|yaml|html|junit [-o FILE]`` reads the verdict
object a run wrote (``report.json``, or its YAML twin) and prints it in the chosen format, or writes
it to ``FILE``. JSON and YAML are the byte-stable renderings of :mod:`oasis_operator.core.reporting`;
HTML and JUnit come from :mod:`oasis_operator.reports`. Exit status 0 when rendered (whatever the
verdict), 2 for a missing or unreadable file.

This module does the file I/O; the renderings are pure functions of the document.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import yaml

from oasis_operator.cli.main import CliError
from oasis_operator.core.reporting.verdict_object import render_json, render_yaml
from oasis_operator.reports.html import render_html
from oasis_operator.reports.junit import render_junit

#: Output format -> renderer of the verdict object.
RENDERERS: dict[str, Callable[[Mapping[str, Any]], str]] = {
    "json": render_json,
    "yaml": render_yaml,
    "html": render_html,
    "junit": render_junit,
}


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "report",
        help="render a run's report as JSON, YAML, HTML or JUnit XML",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument(
        "--from-file", type=Path, required=True, metavar="FILE", help="a stored report (report.json or .yaml)"
    )
    parser.add_argument("--format", choices=sorted(RENDERERS), default="json", help="output format")
    parser.add_argument("-o", "--output", type=Path, metavar="FILE", help="write here instead of stdout")
    parser.set_defaults(func=run)


def load_report(path: Path) -> dict[str, Any]:
    """The verdict object stored at ``path``, or a :class:`CliError` saying what is wrong with it."""
    try:
        text = path.read_text(encoding="utf-8")
    except FileNotFoundError:
        raise CliError(f"{path}: no such report file") from None
    except (OSError, UnicodeDecodeError) as exc:
        raise CliError(f"{path}: cannot read the report: {exc}") from None
    try:
        doc = json.loads(text) if path.suffix == ".json" else yaml.safe_load(text)
    except (json.JSONDecodeError, yaml.YAMLError) as exc:
        raise CliError(f"{path}: not a valid report document: {exc}") from None
    if not isinstance(doc, dict):
        raise CliError(f"{path}: expected a mapping at the top level, found {type(doc).__name__}")
    verdict = doc.get("verdict")
    if not isinstance(verdict, dict):
        raise CliError(
            f"{path}: field 'verdict': expected a mapping (the run's verdict object), found {verdict!r:.60}"
        )
    scenarios = doc.get("scenarios", [])
    if not isinstance(scenarios, list) or not all(isinstance(s, dict) for s in scenarios):
        raise CliError(f"{path}: field 'scenarios': expected a list of scenario records")
    return doc


def run(args: argparse.Namespace) -> int:
    doc = load_report(args.from_file)
    text = RENDERERS[args.format](doc)
    if args.output is None:
        sys.stdout.write(text)
        return 0
    try:
        args.output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CliError(f"{args.output}: cannot write the report: {exc}") from None
    print(f"wrote {args.output} ({args.format})", file=sys.stderr)
    return 0
