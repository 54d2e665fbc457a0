"""Write the generated CustomResourceDefinitions to ``crds/`` (or check that they are current).

Usage: ``python -m oasis_operator.crdgen [--check] [DIR]`` (DIR: the checkout's ``crds/``; from an
installed package, which generates the same files, DIR must be given). The CRDs come from
:mod:`oasis_operator.core.model.crd`; this module only renders them as YAML and does the file I/O.
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path
from typing import Any

from oasis_operator.core import yaml_text
from oasis_operator.core.model.crd import all_crds

HEADER = "# GENERATED from oasis_operator/core/model by `python -m oasis_operator.crdgen`. Do not edit.\n"
DEFAULT_DIR = Path(__file__).resolve().parents[1] / "crds"


def render(crd: dict[str, Any]) -> str:
    return HEADER + yaml_text.dump(crd, sort_keys=False, width=120)


def rendered() -> dict[str, str]:
    """File name -> file content, for every CRD."""
    return {name: render(crd) for name, crd in all_crds().items()}


def stale_files(directory: Path) -> list[str]:
    """Names of CRD files in ``directory`` that are missing, different, or no longer generated."""
    expected = rendered()
    stale = [
        n
        for n, text in expected.items()
        if not (directory / n).is_file() or (directory / n).read_text() != text
    ]
    extra = [p.name for p in directory.glob("*.yaml") if p.name not in expected] if directory.is_dir() else []
    return sorted(stale + extra)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m oasis_operator.crdgen", description=__doc__)
    parser.add_argument(
        "--check", action="store_true", help="exit 1 if the files are not current; write nothing"
    )
    parser.add_argument(
        "directory", nargs="?", type=Path, help="where the CRD files are (default: crds/ of the checkout)"
    )
    args = parser.parse_args(argv)
    if args.directory is None:
        if not (DEFAULT_DIR.parent / "pyproject.toml").is_file():  # an installed package: no checkout
            parser.error("give the DIRECTORY to write the CRDs to (this is no checkout with a crds/)")
        args.directory = DEFAULT_DIR
    if args.check:
        stale = stale_files(args.directory)
        for name in stale:
            print(f"stale: {args.directory / name}", file=sys.stderr)
        return 1 if stale else 0
    args.directory.mkdir(parents=True, exist_ok=True)
    for name, text in rendered().items():
        (args.directory / name).write_text(text)
        print(args.directory / name)
    return 0


if __name__ == "__main__":
    sys.exit(main())
