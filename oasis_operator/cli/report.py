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
from pathlib import Path
from typing import Any

import yaml

from oasis_operator.cli import kubeaccess
from oasis_operator.cli.main import CLUSTER_EXIT_CODES, EXIT_CLUSTER, CliError
from oasis_operator.core import stored_parts
from oasis_operator.reports import FORMATS


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "report",
        help="render a run's report as JSON, YAML, HTML or JUnit XML",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
        epilog=CLUSTER_EXIT_CODES,
    )
    parser.add_argument(
        "run", nargs="?", metavar="RUN", help="an EvaluationRun in the cluster (its stored report)"
    )
    kubeaccess.add_flags(parser)
    parser.add_argument(
        "--from-file",
        type=Path,
        metavar="FILE",
        help="a stored report (report.json or .yaml) instead of a RUN",
    )
    parser.add_argument("--format", choices=sorted(FORMATS), default="json", help="output format")
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


def read_parts(http: Any, namespace: str, names: list[str], what: str) -> bytes:
    """The file stored in the ConfigMaps ``names`` (plain ``data`` or gzipped ``binaryData`` parts:
    :mod:`~oasis_operator.core.stored_parts`); a :class:`CliError` naming ``what`` when unreadable."""
    parts = []
    for cm in names:
        got = http.get(f"/api/v1/namespaces/{namespace}/configmaps/{cm}")
        if got.status_code != 200:
            raise CliError(f"{what}: part {namespace}/{cm}: HTTP {got.status_code}", EXIT_CLUSTER)
        parts.append(got.json())
    try:
        return stored_parts.read(parts)
    except stored_parts.UnreadablePart as exc:
        raise CliError(f"{what}: ConfigMaps {', '.join(names)}: {exc}") from None


def read_run_report(http: Any, namespace: str, run: dict[str, Any]) -> dict[str, Any] | None:
    """The report a run's status points at (ConfigMaps owned by the run); None before the run has one."""
    names = ((run.get("status") or {}).get("report") or {}).get("configMaps") or []
    where = f"EvaluationRun {namespace}/{run['metadata']['name']}"
    if not names:
        return None
    try:
        doc = json.loads(read_parts(http, namespace, names, f"{where}: the stored report"))
    except json.JSONDecodeError as exc:
        raise CliError(f"{where}: the stored report is not JSON: {exc}") from None
    if not isinstance(doc, dict):
        raise CliError(f"{where}: the stored report is not a mapping")
    return doc


def load_run_report(args: argparse.Namespace) -> dict[str, Any]:
    """The stored report of the EvaluationRun ``args.run`` in the cluster (kubeconfig, context and
    namespace as kubectl picks them)."""
    with kubeaccess.connect(args) as access:
        namespace, name = access.namespace, args.run
        r = access.http.get(f"/apis/oasis.dev/v1alpha1/namespaces/{namespace}/evaluationruns/{name}")
        if r.status_code == 404:
            raise CliError(f"EvaluationRun {namespace}/{name} not found")
        if r.status_code != 200:
            raise CliError(f"reading EvaluationRun {namespace}/{name}: HTTP {r.status_code}", EXIT_CLUSTER)
        run_obj = r.json()
        doc = read_run_report(access.http, namespace, run_obj)
    if doc is None:
        phase = (run_obj.get("status") or {}).get("phase")
        raise CliError(f"EvaluationRun {namespace}/{name} has no report yet (phase {phase})")
    return doc


def run(args: argparse.Namespace) -> int:
    if (args.run is None) == (args.from_file is None):
        raise CliError("name a RUN in the cluster or give --from-file FILE (one of the two)")
    doc = load_report(args.from_file) if args.from_file else load_run_report(args)
    text = FORMATS[args.format].render(doc)
    if args.output is None:
        sys.stdout.write(text)
        return 0
    try:
        args.output.write_text(text, encoding="utf-8")
    except OSError as exc:
        raise CliError(f"{args.output}: cannot write the report: {exc}") from None
    print(f"wrote {args.output} ({args.format})", file=sys.stderr)
    return 0
