"""Entry point of the ``oasis`` command.

Each sub-command lives in its own module of this package and exposes ``register(subparsers)``, which
adds its parser and sets ``func`` (taking the parsed namespace, returning an exit code). Errors meant
for people are raised as :class:`CliError` and printed without a traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys
from collections.abc import Sequence

from oasis_operator import __version__

# Modules of this package that contribute sub-commands, in help order.
COMMAND_MODULES: tuple[str, ...] = ("demo", "dev_cluster", "operator", "check", "runs", "wait", "validate", "import_cmd",
                                    "evaluate", "report", "evidence")


class CliError(Exception):
    """An error caused by the user's input or environment; printed as one message, exit code 2."""


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="oasis",
        description="Evaluate AI agents that act on Kubernetes clusters (OASIS standard).",
    )
    parser.add_argument("--version", action="version", version=f"oasis {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    sub.required = True
    for name in COMMAND_MODULES:
        importlib.import_module(f"oasis_operator.cli.{name}").register(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = args.func(args)
    except CliError as exc:
        print(f"oasis: error: {exc}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        return 130
    return int(code or 0)


if __name__ == "__main__":  # pragma: no cover
    # Re-enter through the package so CliError is the same class sub-commands raise.
    from oasis_operator.cli.main import main as _main

    sys.exit(_main())
