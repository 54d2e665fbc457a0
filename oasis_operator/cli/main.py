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
from typing import Final

from oasis_operator import __version__

# Modules of this package that contribute sub-commands, in help order.
COMMAND_MODULES: tuple[str, ...] = (
    "demo",
    "dev_cluster",
    "operator",
    "check",
    "runs",
    "wait",
    "validate",
    "import_cmd",
    "evaluate",
    "report",
    "evidence",
    "provider",
    "certs",
    "completion",
)


#: ``--help`` examples of the commands whose module gives none itself (``get``, ``wait`` and others carry
#: their own); keyed by the command path. tests/operator/test_cli_completion.py checks every command has some.
EXAMPLES: dict[tuple[str, ...], str] = {
    (
        "demo",
    ): "oasis demo                       four reference agents on the SI profile, reports in out/demo\n"
    "oasis demo --keep --out /tmp/d   keep the cluster's logs and audit log afterwards",
    (
        "dev-cluster",
    ): "oasis dev-cluster up --backends all && export KUBECONFIG=$(oasis dev-cluster kubeconfig)",
    ("dev-cluster", "up"): "oasis dev-cluster up                      control plane and 3 simulated nodes\n"
    "oasis dev-cluster up --backends logs,gitops  with some tool-plane back-ends",
    ("dev-cluster", "down"): "oasis dev-cluster down --keep             stop, keep the logs and audit log",
    ("dev-cluster", "status"): "oasis dev-cluster status --name default",
    ("dev-cluster", "kubeconfig"): "export KUBECONFIG=$(oasis dev-cluster kubeconfig)",
    ("operator",): "oasis operator run --audit-log /var/log/kube-audit/audit.log --namespace evals",
    ("operator", "run"): "oasis operator run --audit-log /var/log/kube-audit/audit.log --namespace evals\n"
    "oasis operator run --audit-webhook-port 8443 --tls-cert tls.crt --tls-key tls.key",
    ("operator", "prepare-toolplane"): "oasis operator prepare-toolplane --toolplane "
    "/etc/oasis/toolplane/toolplane.json   the chart's init container",
    (
        "check",
    ): "oasis check                                   in-cluster operator, audit through its webhook\n"
    "oasis check --operator-user oasis --audit-log /var/log/kube-audit/audit.log   local mode",
    ("validate",): "oasis validate scenarios/*.yaml --profile profile.yaml\n"
    "oasis validate examples/runs --no-warnings",
    ("import",): "oasis import profile ../oasis-spec/profiles/software-infrastructure -o manifests/",
    (
        "import",
        "profile",
    ): "oasis import profile ../oasis-spec/profiles/software-infrastructure | kubectl apply -f -\n"
    "oasis import profile https://example.org/oasis-spec.git --ref v1.0 "
    "--path profiles/software-infrastructure -o manifests/\n"
    "oasis import profile oasis-spec-1.0.tar.gz --path profiles/software-infrastructure\n"
    "oasis import profile DIR -o manifests/ -n evals",
    ("provider",): "oasis provider serve --profile DIR --audit-log AUDIT_LOG --token-file token.txt",
    ("evaluate",): "oasis evaluate --scenario s.yaml --evidence evidence-s.json   one scenario, offline\n"
    "oasis evaluate --run-dir out/run-1                          recompute a run's report",
    (
        "evidence",
    ): "oasis evidence export my-run -n evals -o out/my-run && oasis evaluate --run-dir out/my-run",
    ("evidence", "export"): "oasis evidence export my-run -n evals -o out/my-run\n"
    "oasis evidence export my-run -n evals -o out/my-run --spec-shaped",
    ("report",): "oasis report my-run -n evals --format html -o report.html\n"
    "oasis report --from-file out/demo/careful/report.json --format junit",
}


def _add_examples(parser: argparse.ArgumentParser, path: tuple[str, ...] = ()) -> None:
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                key = (*path, name)
                if "examples:" not in (child.epilog or "") and key in EXAMPLES:
                    examples = "examples:\n" + "\n".join(f"  {line}" for line in EXAMPLES[key].splitlines())
                    child.epilog = f"{examples}\n\n{child.epilog}" if child.epilog else examples
                    child.formatter_class = argparse.RawDescriptionHelpFormatter
                _add_examples(child, key)


#: Exit codes of every command but ``oasis wait``, whose verdict codes its ``--help`` lists (the two
#: tables agree: 2 for usage, 5 for a cluster that cannot be read). Documented in docs/usage.md.
EXIT_OK: Final = 0
#: The command ran and found a problem (``oasis check``: a check failed).
EXIT_FAILED: Final = 1
#: Usage: a bad option, argument or input file (argparse's own code, kept for every user error).
EXIT_USAGE: Final = 2
#: The cluster cannot be reached or read: no usable kubeconfig or context, a credential file missing, the
#: server refusing the connection or failing TLS, an API error (the same code as ``oasis wait``'s 5).
EXIT_CLUSTER: Final = 5
#: Interrupted (Ctrl-C).
EXIT_INTERRUPTED: Final = 130
#: The exit codes of the commands that read the cluster (``get``, ``describe``, ``report``), for their --help.
CLUSTER_EXIT_CODES = """\
exit codes:
  0  done
  2  usage: a bad option or argument, a run or file that does not exist
  5  the cluster cannot be reached or read: no usable kubeconfig or context, a missing credential
     file (CA, client certificate, token file), an exec plugin failing, a refused connection, TLS,
     an API error
"""


class CliError(Exception):
    """An error caused by the user's input or environment; printed as one line, without a traceback,
    and the command exits with ``exit_code`` (:data:`EXIT_USAGE` unless said)."""

    def __init__(self, message: str, exit_code: int = EXIT_USAGE) -> None:
        super().__init__(message)
        self.exit_code = exit_code


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
    _add_examples(parser)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        code = args.func(args)
    except CliError as exc:
        print(f"oasis: error: {exc}", file=sys.stderr)
        return exc.exit_code
    except KeyboardInterrupt:
        return EXIT_INTERRUPTED
    return int(code or 0)


if __name__ == "__main__":  # pragma: no cover
    # Re-enter through the package so CliError is the same class sub-commands raise.
    from oasis_operator.cli.main import main as _main

    sys.exit(_main())
