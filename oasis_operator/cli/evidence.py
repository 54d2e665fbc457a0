"""``oasis evidence export RUN -n NS -o DIR``: a finished run's directory, for replay and audit.

Writes what ``oasis evaluate --run-dir DIR`` reads, exactly as the run stored it: ``run.json`` (the
run description the report was computed from), ``scenarios.yaml`` (the scenario documents),
``evidence-<scenario-id>.json`` for every executed scenario (Reporting §1.2), and the stored
``report.json``; with ``--spec-shaped``, also ``spec-shaped/evidence-<id>.json``, the same evidence in
the spec's shape (Reporting §1.1 observations) for other OASIS tools. ``oasis evaluate --run-dir DIR``
then recomputes the report and compares it byte for
byte. The run must have kept its evidence (``spec.report.includeEvidence: true``); a run that did not
is refused with that reason, and nothing is written. Exit status 0 when written, 2 when the run
cannot be exported.

This module does the cluster and file I/O; what it writes are the stored bytes, unchanged.
"""

from __future__ import annotations

import argparse
from pathlib import Path
from typing import Any

from oasis_operator.cli import kubeaccess
from oasis_operator.cli.main import CliError
from oasis_operator.cli.report import read_parts
from oasis_operator.core.reporting.verdict_object import evidence_file_name

RUN_FILE = "run.json"
SCENARIOS_FILE = "scenarios.yaml"
REPORT_FILE = "report.json"


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "evidence",
        help="export a finished run's evidence as a run directory (for oasis evaluate --run-dir)",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    export = actions.add_parser("export", help="write the run directory of a finished EvaluationRun")
    export.add_argument("run", metavar="RUN", help="the EvaluationRun")
    export.add_argument(
        "-o", "--output", type=Path, required=True, metavar="DIR", help="the run directory to write"
    )
    kubeaccess.add_flags(export)  # --kubeconfig, --context, -n as kubectl reads them
    export.add_argument(
        "--spec-shaped",
        action="store_true",
        help="also write each evidence file in the spec's shape (observations) under spec-shaped/",
    )
    export.set_defaults(func=run)


def _blob(http: Any, namespace: str, names: list[str], what: str) -> bytes:
    return read_parts(http, namespace, names, what)


def run_directory(http: Any, namespace: str, name: str) -> dict[str, bytes]:
    """File name -> bytes of the run directory of ``namespace/name``; a :class:`CliError` saying
    why when the run cannot be exported."""
    got = http.get(f"/apis/oasis.dev/v1alpha1/namespaces/{namespace}/evaluationruns/{name}")
    if got.status_code == 404:
        raise CliError(f"EvaluationRun {namespace}/{name} not found")
    if got.status_code != 200:
        raise CliError(f"reading EvaluationRun {namespace}/{name}: HTTP {got.status_code}")
    status = got.json().get("status") or {}
    report = status.get("report") or {}
    where = f"EvaluationRun {namespace}/{name}"
    if not report.get("configMaps"):
        raise CliError(f"{where} has no report yet (phase {status.get('phase')})")
    if not report.get("evidenceKept"):
        raise CliError(
            f"{where} did not keep its evidence (set spec.report.includeEvidence: true and run it again)"
        )
    if not report.get("runDescription") or not report.get("scenarioDocuments"):
        raise CliError(f"{where}: its report was stored without the run description (an older operator)")
    files = {
        RUN_FILE: _blob(http, namespace, report["runDescription"], f"{where}: {RUN_FILE}"),
        SCENARIOS_FILE: _blob(http, namespace, report["scenarioDocuments"], f"{where}: {SCENARIOS_FILE}"),
        REPORT_FILE: _blob(http, namespace, report["configMaps"], f"{where}: {REPORT_FILE}"),
    }
    for entry in status.get("scenarios") or []:
        if entry.get("evidence"):
            file = evidence_file_name(str(entry.get("id")))
            files[file] = _blob(http, namespace, list(entry["evidence"]), f"{where}: {file}")
    return files


def _write_spec_shaped(out: Path, files: dict[str, bytes], namespace: str, run_name: str) -> None:
    """``spec-shaped/evidence-<id>.json``: each evidence file as other OASIS tools read evidence."""
    import json

    from oasis_operator.core.evidence.codec import read_lines
    from oasis_operator.core.evidence.interchange import spec_evidence_from_bundle

    target = out / "spec-shaped"
    target.mkdir()
    for file, data in sorted(files.items()):
        if not file.startswith("evidence-"):
            continue
        bundle, events = read_lines(data.decode().splitlines())
        doc = spec_evidence_from_bundle(
            bundle,
            [json.loads(e) for e in events],
            environment_id=f"{namespace}/{run_name}/{bundle.scenario_id}",
        )
        (target / file).write_text(json.dumps(doc, sort_keys=True, indent=2, ensure_ascii=False) + "\n")


def run(args: argparse.Namespace) -> int:
    with kubeaccess.connect(args, timeout=60.0) as access:
        namespace = access.namespace
        files = run_directory(access.http, namespace, args.run)
    out: Path = args.output
    if out.exists() and any(out.iterdir()):
        raise CliError(f"{out}: not empty (a run directory is written into an empty or new directory)")
    try:
        out.mkdir(parents=True, exist_ok=True)
        for file, data in sorted(files.items()):
            (out / file).write_bytes(data)
    except OSError as exc:
        raise CliError(f"{out}: cannot write the run directory: {exc}") from None
    if args.spec_shaped:
        _write_spec_shaped(out, files, namespace, args.run)
    evidence = sum(1 for f in files if f.startswith("evidence-"))
    print(f"wrote {out}: {RUN_FILE}, {SCENARIOS_FILE}, {REPORT_FILE} and {evidence} evidence file(s)")
    return 0
