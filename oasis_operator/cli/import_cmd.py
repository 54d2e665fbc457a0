"""``oasis import profile SOURCE``: turn a profile into ``Profile`` and ``Scenario`` manifests.

SOURCE is a profile directory, a local archive or a Git URL (with ``--ref`` and ``--path``), read by
:mod:`oasis_operator.loading.profile_source`. Calls :func:`oasis_operator.loading.profile_dir.import_profile`, prints findings and the provenance
of every profile field (read from the profile, or from our transcription, package data in
``oasis_operator/loading/supplements/``) to stderr, and writes the manifests to stdout (one YAML stream) or, with ``--output DIR``, to
``DIR/<profile-id>.profile.yaml`` and ``DIR/scenarios/<scenario-id>.yaml``. Nothing is written when
there is any error. Exit code 0 on success, 1 on validation errors.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
from pathlib import Path
from typing import Any

from oasis_operator.cli.main import CliError
from oasis_operator.core import yaml_text
from oasis_operator.loading.profile_dir import import_profile, manifests
from oasis_operator.loading.profile_source import ProfileSourceError, materialize


def _dump(docs: list[dict[str, Any]]) -> str:
    return yaml_text.dump_all(docs, sort_keys=False, width=120)


def run(args: argparse.Namespace) -> int:
    with tempfile.TemporaryDirectory(prefix="oasis-profile-") as work:
        try:
            directory = materialize(args.source, Path(work), ref=args.ref, path=args.path)
        except ProfileSourceError as exc:
            raise CliError(str(exc)) from exc
        return _import(directory, args)


def _import(directory: Path, args: argparse.Namespace) -> int:
    imported = import_profile(directory, args.supplement)
    for finding in imported.findings:
        print(finding.render(), file=sys.stderr)
    if imported.errors or imported.profile is None:
        print(f"FAILED: {len(imported.errors)} error(s); nothing written", file=sys.stderr)
        return 1
    for key in sorted(imported.provenance):
        print(f"{key}: from {imported.provenance[key]}", file=sys.stderr)
    docs = manifests(imported, args.namespace)
    if args.output is None:
        sys.stdout.write(_dump(docs))
    else:
        out: Path = args.output
        (out / "scenarios").mkdir(parents=True, exist_ok=True)
        (out / f"{imported.profile.id}.profile.yaml").write_text(_dump(docs[:1]))
        for doc in docs[1:]:
            (out / "scenarios" / f"{doc['metadata']['name']}.yaml").write_text(_dump([doc]))
    print(
        f"OK: profile {imported.profile.id} {imported.profile.version} and {len(docs) - 1} scenarios",
        file=sys.stderr,
    )
    return 0


def register(subparsers: Any) -> None:
    parser = subparsers.add_parser("import", help="import OASIS documents as oasis.dev manifests")
    sub = parser.add_subparsers(dest="what", metavar="WHAT")
    sub.required = True
    prof = sub.add_parser(
        "profile",
        help="import a profile (a directory, an archive or a Git repository laid out as the OASIS spec's)",
        description="Write Profile and Scenario manifests for a profile laid out as the OASIS spec's "
        "(profile.md, scenarios/, provider-conformance-requirements.yaml): a directory, a local archive "
        "(.tar.gz, .tgz, .tar, .zip, ...) or a Git repository at a ref. Profile data given only as prose "
        "comes from our transcription, shipped with oasis-operator; the importer says which value came from where.",
    )
    prof.add_argument("source", metavar="SOURCE", help="a profile directory, an archive, or a Git URL")
    prof.add_argument("--ref", help="with a Git URL: the branch, tag or commit (default: the remote's HEAD)")
    prof.add_argument(
        "--path",
        help="the profile directory inside the archive or repository "
        "(default: the only one there), e.g. profiles/software-infrastructure",
    )
    prof.add_argument(
        "--supplement",
        type=Path,
        help="our transcription of prose-only profile data (default: the one shipped with oasis-operator "
        "for a profile directory of that name, oasis_operator/loading/supplements/<DIR name>.yaml)",
    )
    prof.add_argument("-o", "--output", type=Path, help="write files into this directory instead of stdout")
    prof.add_argument("-n", "--namespace", help="set metadata.namespace on every manifest")
    prof.set_defaults(func=run)
