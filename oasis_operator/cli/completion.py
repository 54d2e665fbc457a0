"""``oasis completion SHELL``: a shell completion script for every command and flag.

Called by :mod:`oasis_operator.cli.main`. The script is generated from the same argparse parser the
command runs with (by ``shtab``), so it never lists a command or flag that does not exist.
"""

from __future__ import annotations

import argparse
import sys

SHELLS = ("bash", "zsh", "tcsh")
EPILOG = """\
examples:
  source <(oasis completion bash)                         this shell only
  oasis completion bash > /etc/bash_completion.d/oasis    every bash
  oasis completion zsh > "${fpath[1]}/_oasis"             zsh (then restart it)
"""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "completion",
        help="print a shell completion script (bash, zsh, tcsh)",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    parser.add_argument("shell", choices=SHELLS)
    parser.set_defaults(func=cmd_completion)


def cmd_completion(args: argparse.Namespace) -> int:
    import shtab

    from oasis_operator.cli.main import build_parser

    sys.stdout.write(shtab.complete(build_parser(), shell=args.shell))
    return 0
