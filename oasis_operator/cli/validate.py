"""``oasis validate PATH...``: check scenarios, suites, profiles and runs; say exactly what is wrong.

Calls :func:`oasis_operator.loading.documents.validate_paths`, prints one line per finding
(``FILE:LINE: document N: FIELD.PATH: message (found ...; expected ...)``) to stderr and a summary
to stdout. Exit code 0 when there is no error (warnings allowed), 1 otherwise.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from oasis_operator.cli.main import CliError
from oasis_operator.core.model.profile import Profile
from oasis_operator.loading.documents import load_paths, validate_paths


def _profile_from(path: Path) -> Profile:
    result = load_paths([path])
    if result.errors:
        raise CliError(
            f"--profile {path}: not a valid profile:\n  " + "\n  ".join(f.render() for f in result.errors)
        )
    profiles = result.of_kind("profile")
    if len(profiles) != 1:
        raise CliError(f"--profile {path}: expected exactly one profile document, found {len(profiles)}")
    model: Profile = profiles[0].model
    return model


def run(args: argparse.Namespace) -> int:
    profile = _profile_from(args.profile) if args.profile else None
    result = validate_paths(args.paths, profile)
    for finding in result.findings:
        if finding.severity == "error" or not args.no_warnings:
            print(finding.render(), file=sys.stderr)
    kinds: dict[str, int] = {}
    for loaded in result.loaded:
        kinds[loaded.kind] = kinds.get(loaded.kind, 0) + 1
    summary = ", ".join(f"{n} {k}{'s' if n != 1 else ''}" for k, n in sorted(kinds.items())) or "no documents"
    errors, warnings = len(result.errors), len(result.warnings)
    print(f"{'FAILED' if errors else 'OK'}: read {summary}; {errors} error(s), {warnings} warning(s)")
    return 1 if errors else 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser(
        "validate",
        help="validate OASIS scenarios, suites, profiles and EvaluationRuns",
        description="Validate YAML files and directories (searched recursively) of OASIS documents and "
        "oasis.dev manifests. Every error names the file, the document index, the field path, what was "
        "found and what was expected.",
    )
    parser.add_argument("paths", nargs="+", type=Path, metavar="PATH")
    parser.add_argument(
        "--profile", type=Path, help="a profile (manifest or OASIS document) to check the scenarios against"
    )
    parser.add_argument("--no-warnings", action="store_true", help="print errors only")
    parser.set_defaults(func=run)
