"""``oasis evaluate``: replay stored evidence through the verification engine, offline.

Two forms:

- ``oasis evaluate --scenario FILE [--id ID] --evidence FILE [--config KEY=VALUE ...]`` prints one
  scenario's verdict as JSON: the verdict, every assertion's outcome with the audit events that
  decided it, vacuity notes, and how many audit events were judged as the agent's. Exit status 0 for
  PASS, 1 for FAIL, 3 for PROVIDER_FAILURE, 4 for UNEVALUABLE (the evidence records an agent failure
  and shows no safety violation, or the scenario is a capability scenario, which a failure report
  removes from scoring; decisions 0030, 0104) (2 is a usage or input error).
- An evidence file is our stored form or evidence in the spec's shape as other OASIS tools write it
  (an object with the §1.1 ``observations``; see ``oasis_operator/core/evidence/interchange.py``).
- ``oasis evaluate --run-dir DIR`` recomputes a run's report from ``DIR/run.json``, the scenario files
  it names and the ``evidence-<id>.json`` files, and compares it byte for byte with
  ``DIR/report.json``: exit 0 when equal, 1 when different (the first difference is printed).
  ``--write`` stores the recomputed ``report.json`` and ``report.yaml`` instead. A report that would
  break the verdict-file schema (a ``run.json`` without the metadata it needs) is an input error;
  a ``run.json`` without the run's ``duration`` or ``environment`` is replayed with them unknown.
- A Form B scenario this implementation cannot score (an unregistered band template, a missing role, a
  channel beyond the template's, a factor naming no deviation) is an input error naming the file,
  the document and the field (:func:`oasis_operator.core.scoring.templates.binding_problems`).

This module does the file I/O; everything it computes comes from ``oasis_operator.core``.
"""

from __future__ import annotations

import argparse
import gzip
import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import yaml

from oasis_operator.cli.main import CliError
from oasis_operator.core.contract.outcome import UNEVALUABLE, settle_verdict
from oasis_operator.core.evidence.bundle import BundleError, EvidenceBundle
from oasis_operator.core.evidence.codec import read_lines
from oasis_operator.core.evidence.interchange import bundle_from_spec_evidence, is_spec_shaped
from oasis_operator.core.judging.engine import evaluate
from oasis_operator.core.judging.plan import PlanError, compile_plan
from oasis_operator.core.model.errors import ModelValidationError
from oasis_operator.core.model.profile import parse_capability_scoring
from oasis_operator.core.model.scenario import Scenario, parse_scenario
from oasis_operator.core.reporting.run_report import evaluate_scenario, run_report
from oasis_operator.core.reporting.verdict_object import evidence_file_name, render_json, render_yaml
from oasis_operator.core.scoring.capability import ScoringError
from oasis_operator.core.scoring.templates import binding_problems
from oasis_operator.core.verdicts import Verdict
from oasis_operator.reports.schema import report_problems

EXIT_CODES = {Verdict.PASS: 0, Verdict.FAIL: 1, Verdict.PROVIDER_FAILURE: 3}
EXIT_UNEVALUABLE = 4


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "evaluate",
        help="recompute verdicts from stored evidence (offline replay)",
        description=__doc__.split("\n\n")[1] if __doc__ else None,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("--scenario", type=Path, help="scenario YAML file (one or several documents)")
    parser.add_argument("--id", dest="scenario_id", help="scenario id, when the file holds several")
    parser.add_argument(
        "--evidence", type=Path, help="evidence bundle file (evidence-<id>.json, or .json.gz)"
    )
    parser.add_argument(
        "--config", action="append", default=[], metavar="KEY=VALUE", help="agent configuration dimension"
    )
    parser.add_argument("--run-dir", type=Path, help="a run directory: recompute and compare its report")
    parser.add_argument("--write", action="store_true", help="with --run-dir: store the recomputed report")
    parser.set_defaults(func=run)


def run(args: argparse.Namespace) -> int:
    if args.run_dir is not None:
        if args.scenario or args.evidence:
            raise CliError("--run-dir cannot be combined with --scenario/--evidence")
        return _run_dir(args.run_dir, write=args.write)
    if args.scenario is None or args.evidence is None:
        raise CliError("give --scenario FILE and --evidence FILE, or --run-dir DIR")
    config = _parse_config(args.config)
    scenario = _pick(load_scenarios(args.scenario), args.scenario_id, args.scenario)
    try:
        plan = compile_plan(scenario, config)
    except PlanError as exc:
        raise CliError(f"{args.scenario}: {exc}") from None
    bundle, streamed = _open_evidence(args.evidence)
    events = list(streamed)
    if bundle.scenario_id != plan.scenario_id:
        raise CliError(
            f"{args.evidence}: evidence of scenario {bundle.scenario_id!r}, not of {plan.scenario_id!r}"
        )
    try:
        result = evaluate(plan, bundle, events)
    except BundleError as exc:
        raise CliError(f"{args.evidence}: {exc}") from None
    out = result.to_dict()
    if scenario.classification == "capability":
        # The scenario's capability score from the same evidence, as the run computes it.
        try:
            record, _ = evaluate_scenario(scenario, config, (bundle, events))
        except ScoringError as exc:
            raise CliError(f"{args.scenario}: scoring: {exc}") from None
        out["score"] = record.score
        out["score_basis"] = str(record.extra.get("score_basis", ""))
    outcome = bundle.agent_outcome
    if outcome is not None:
        out["agent_outcome"] = outcome.to_dict()
        if settle_verdict(result.verdict, outcome, classification=scenario.classification) == UNEVALUABLE:
            out["evidence_verdict"], out["verdict"] = out["verdict"], UNEVALUABLE
            print(json.dumps(out, sort_keys=True, indent=2, ensure_ascii=False))
            return EXIT_UNEVALUABLE
    print(json.dumps(out, sort_keys=True, indent=2, ensure_ascii=False))
    return EXIT_CODES[result.verdict]


def _parse_config(items: list[str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for item in items:
        key, eq, value = item.partition("=")
        if not eq or not key:
            raise CliError(f"--config {item!r}: expected KEY=VALUE")
        out[key] = {"true": True, "false": False}.get(value, value)
    return out


def load_scenarios(path: Path) -> list[Scenario]:
    """The scenarios of a YAML file (plain OASIS scenarios or ``Scenario`` manifests), each parsed by
    the scenario model (what the core reads)."""
    try:
        docs = list(yaml.safe_load_all(path.read_text()))
    except OSError as exc:
        raise CliError(f"{path}: cannot read: {exc.strerror}") from None
    except yaml.YAMLError as exc:
        raise CliError(f"{path}: not YAML: {exc}") from None
    out = []
    for i, doc in enumerate(docs):
        if doc is None:
            continue
        if not isinstance(doc, dict):
            raise CliError(f"{path}: document {i}: expected a mapping, found {type(doc).__name__}")
        if doc.get("kind") == "Scenario" and isinstance(doc.get("spec"), dict):
            doc = doc["spec"]
        if "id" in doc:
            try:
                model, _notes = parse_scenario(doc)
            except ModelValidationError as exc:
                raise CliError(f"{path}: document {i}: {exc}") from None
            # A Form B binding this implementation would score with silent defaults: refused here.
            problems = binding_problems(model)
            if problems:
                raise CliError(
                    f"{path}: document {i} ({model.id}): cannot be scored:\n  "
                    + "\n  ".join(p.render() for p in problems)
                )
            out.append(model)
    if not out:
        raise CliError(f"{path}: no scenario document (a mapping with an id)")
    return out


def _pick(scenarios: list[Scenario], sid: str | None, path: Path) -> Scenario:
    if sid is None:
        if len(scenarios) > 1:
            raise CliError(f"{path} holds {len(scenarios)} scenarios; choose one with --id")
        return scenarios[0]
    for s in scenarios:
        if s.id == sid:
            return s
    raise CliError(f"{path}: no scenario with id {sid!r}")


def _lines(path: Path) -> Iterator[str]:
    """The file's lines; an evidence file ending in ``.gz`` is read through gzip."""
    if path.suffix == ".gz":
        with gzip.open(path, "rt", encoding="utf-8") as fh:
            yield from fh
        return
    with path.open(encoding="utf-8") as fh:
        yield from fh


def _open_evidence(path: Path) -> tuple[EvidenceBundle, Iterator[Any]]:
    if not path.is_file():
        raise CliError(f"{path}: no such evidence file")
    first = next(_lines(path), "")
    if not first.startswith('{"bundle":'):
        return _open_spec_evidence(path)
    try:
        bundle, events = read_lines(_lines(path))
    except BundleError as exc:
        raise CliError(f"{path}: {exc}") from None
    return bundle, _guarded(path, events)


def _open_spec_evidence(path: Path) -> tuple[EvidenceBundle, Iterator[Any]]:
    """Evidence in the spec's shape (observations), as other OASIS tools write it."""
    try:
        doc = json.loads("".join(_lines(path)))
    except (json.JSONDecodeError, UnicodeDecodeError, OSError) as exc:
        raise CliError(f"{path}: neither our evidence form nor a JSON document: {exc}") from None
    if not is_spec_shaped(doc):
        raise CliError(f"{path}: not evidence: expected our stored form or an object with 'observations'")
    try:
        bundle, events = bundle_from_spec_evidence(doc)
    except BundleError as exc:
        raise CliError(f"{path}: {exc}") from None
    return bundle, iter(events)


def _guarded(path: Path, events: Iterator[str]) -> Iterator[str]:
    try:
        yield from events
    except BundleError as exc:
        raise CliError(f"{path}: {exc}") from None


def _run_dir(directory: Path, *, write: bool) -> int:
    run_file = directory / "run.json"
    try:
        run_doc = json.loads(run_file.read_text())
    except OSError:
        raise CliError(f"{run_file}: no run description") from None
    except json.JSONDecodeError as exc:
        raise CliError(f"{run_file}: not JSON: {exc.msg} at line {exc.lineno}") from None
    if not isinstance(run_doc, dict):
        raise CliError(f"{run_file}: expected a JSON object")
    scenarios: list[Scenario] = []
    for name in run_doc.get("scenario_files") or []:
        scenarios.extend(load_scenarios(directory / str(name)))

    def evidence(sid: str) -> tuple[EvidenceBundle, Iterator[str]] | None:
        path = directory / evidence_file_name(sid)
        return _open_evidence(path) if path.exists() else None

    scoring = run_doc.get("capability_scoring")
    try:
        capability_scoring = parse_capability_scoring(scoring) if scoring is not None else None
    except ModelValidationError as exc:
        raise CliError(f"{run_file}: capability_scoring: {exc}") from None
    try:
        report = run_report(
            run_doc, scenarios, evidence, capability_scoring, list(run_doc.get("safety_categories") or [])
        )
    except (PlanError, BundleError) as exc:
        raise CliError(str(exc)) from None
    except ScoringError as exc:
        raise CliError(f"{run_file}: scoring: {exc}") from None
    problems = report_problems(report)
    if problems:
        # The metadata comes from run.json: a description that lacks it cannot make a verdict file.
        raise CliError(
            f"{run_file}: the report computed from this run directory breaks the verdict-file schema:\n  "
            + "\n  ".join(problems[:20])
        )
    text = render_json(report)
    stored = directory / "report.json"
    if write:
        stored.write_text(text)
        (directory / "report.yaml").write_text(render_yaml(report))
        print(f"wrote {stored} (safety: {report['verdict']['safety']})")
        return 0
    if not stored.exists():
        raise CliError(f"{stored}: no stored report to compare with (use --write to create it)")
    old = stored.read_text()
    if old == text:
        print(
            f"report reproduced: safety {report['verdict']['safety']}, {len(report['scenarios'])} scenarios"
        )
        return 0
    where = _first_difference(json.loads(old), report)
    print(f"report differs from {stored}: first difference at {where}", file=sys.stderr)
    return 1


def _first_difference(a: Any, b: Any, path: str = "") -> str:
    if isinstance(a, dict) and isinstance(b, dict):
        for key in sorted(set(a) | set(b)):
            if key not in a or key not in b:
                return f"{path}.{key} (present in only one)"
            if a[key] != b[key]:
                return _first_difference(a[key], b[key], f"{path}.{key}")
    if isinstance(a, list) and isinstance(b, list):
        for i, (x, y) in enumerate(zip(a, b, strict=False)):
            if x != y:
                return _first_difference(x, y, f"{path}[{i}]")
        if len(a) != len(b):
            return f"{path} (lengths {len(a)} and {len(b)})"
    return path or "<document>"
