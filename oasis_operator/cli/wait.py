"""``oasis wait RUN``: block until an EvaluationRun is Completed, then exit with a code per outcome, for
CI pipelines (also as ``kubectl oasis wait``).

Called by :mod:`oasis_operator.cli.main`; reads the run the way ``oasis get``/``describe`` do
(:mod:`oasis_operator.cli.runs`), polls its ``Completed`` condition, prints one line (verdict and
counts) and maps the finished status to an exit code with :func:`exit_code`, which is pure.

A PASS exits 0 only when the run is complete (phase Succeeded and ``status.report.incomplete`` false):
an incomplete PASS (decision 0105: an opted-in incomplete evaluation, an unbacked tier, scenarios not
executed) makes no conformance claim and exits 3, never 0. Every outcome has its own code, none of them
2, which argparse and :class:`~oasis_operator.cli.main.CliError` use for a usage error (:data:`EXIT_CODES`,
docs/usage.md).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Mapping
from typing import Any, Final

import httpx2

from oasis_operator.cli import kubeaccess
from oasis_operator.cli.main import CliError
from oasis_operator.core.model.run import parse_duration
from oasis_operator.core.verdicts import FAIL, PASS, PROVIDER_FAILURE, UNEVALUABLE

EXIT_PASS: Final = 0
EXIT_FAIL: Final = 1
#: 2 is a usage error (argparse, CliError), for every command: never an outcome.
EXIT_USAGE: Final = 2
EXIT_INCOMPLETE: Final = 3
EXIT_TIMEOUT: Final = 4
EXIT_UNREADABLE: Final = 5
EXIT_PROVIDER_FAILURE: Final = 6
EXIT_UNEVALUABLE: Final = 7
EXIT_NO_VERDICT: Final = 8

#: code -> what it means (the help's table, docs/usage.md's, and the tests', from one place).
EXIT_CODES: Final[dict[int, str]] = {
    EXIT_PASS: "PASS of a complete evaluation (a conformance claim): the only code a gate opens on",
    EXIT_FAIL: "FAIL (a safety scenario failed; complete or not)",
    EXIT_USAGE: "usage error (bad arguments, a bad --timeout), as for every oasis command",
    EXIT_INCOMPLETE: "incomplete PASS: what ran passed, but the evaluation is incomplete "
    "(spec.incomplete, an unbacked tier, scenarios not executed): no conformance claim",
    EXIT_TIMEOUT: "--timeout passed before the run was Completed",
    EXIT_UNREADABLE: "the run does not exist (without --for-creation) or cannot be read "
    "(no kubeconfig, API error)",
    EXIT_PROVIDER_FAILURE: "PROVIDER_FAILURE (the harness could not vouch for the evidence)",
    EXIT_UNEVALUABLE: "UNEVALUABLE (the agent failed where the evidence showed no violation): no claim",
    EXIT_NO_VERDICT: "finished without a verdict: the run did not start (provider requirements "
    "unmet, a broken evidence path, an invalid spec, a refused adapter), was cancelled or gave up",
}

EPILOG = (
    "exit codes:\n"
    + "\n".join(f"  {code}  {text}" for code, text in EXIT_CODES.items())
    + """

examples:
  oasis wait my-run -n evals --timeout 30m
  kubectl oasis wait my-run --for-creation --timeout 1h
"""
)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    wait = sub.add_parser(
        "wait",
        help="wait for an EvaluationRun to complete; exit code per verdict (CI)",
        epilog=EPILOG,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    wait.add_argument("run")
    kubeaccess.add_flags(wait)
    wait.add_argument("--timeout", default="30m", help="a duration such as 90s, 10m, 1h (default 30m)")
    wait.add_argument(
        "--for-creation",
        action="store_true",
        help="a run that does not exist yet is waited for instead of exit 5",
    )
    wait.set_defaults(func=cmd_wait)


def is_completed(status: Mapping[str, Any]) -> bool:
    return any(
        c.get("type") == "Completed" and c.get("status") == "True" for c in status.get("conditions") or []
    )


def exit_code(status: Mapping[str, Any]) -> int | None:
    """The exit code for a run's status; None while it is not Completed. Never 0 without an explicit
    complete report (``report.incomplete`` false) beside a PASS on a Succeeded run."""
    if not is_completed(status):
        return None
    verdict = status.get("verdict")
    if verdict == FAIL:
        return EXIT_FAIL
    if verdict == PROVIDER_FAILURE:
        return EXIT_PROVIDER_FAILURE
    if verdict == UNEVALUABLE:
        return EXIT_UNEVALUABLE
    if verdict != PASS:
        return EXIT_NO_VERDICT
    report = status.get("report") or {}
    if status.get("phase") == "Succeeded" and report.get("incomplete") is False:
        return EXIT_PASS
    return EXIT_INCOMPLETE


def outcome_line(name: str, status: Mapping[str, Any], code: int) -> str:
    """The one line ``oasis wait`` prints for a Completed run."""
    s = status.get("summary") or {}
    verdict = str(status.get("verdict") or "no verdict")
    if code == EXIT_INCOMPLETE:
        verdict += " (incomplete evaluation: no conformance claim)"
    elif code in (EXIT_UNEVALUABLE, EXIT_NO_VERDICT):
        verdict += " (no conformance claim)"
    counts = (
        f"{s.get('passed', 0)} passed, {s.get('failed', 0)} failed, "
        f"{s.get('providerFailures', 0)} provider failures, {s.get('unevaluable', 0)} unevaluable, "
        f"{s.get('excluded', 0)} excluded of {s.get('total', 0)}"
    )
    return f"{name}: {verdict}: {counts} (exit {code})"


def cmd_wait(args: argparse.Namespace) -> int:
    name = f"{args.namespace or '(the context namespace)'}/{args.run}"
    timeout = parse_duration(args.timeout, 0.0)
    if timeout <= 0:
        raise CliError(f"--timeout {args.timeout!r}: expected a duration such as 90s, 10m or 1h")
    try:
        with kubeaccess.connect(args) as access:
            args.namespace = access.namespace
            name = f"{access.namespace}/{args.run}"
            return _poll(access.http, args, name, time.monotonic() + timeout)
    except CliError as exc:
        print(f"oasis: {exc}", file=sys.stderr)
    except (httpx2.HTTPError, OSError, ValueError) as exc:  # unreachable server, TLS files, bad kubeconfig
        print(f"oasis: reading EvaluationRun {name}: {exc}", file=sys.stderr)
    return EXIT_UNREADABLE


def _poll(http: httpx2.Client, args: argparse.Namespace, name: str, deadline: float) -> int:
    phase = "not created"
    while True:
        r = http.get(f"{kubeaccess.RUNS.format(ns=args.namespace)}/{args.run}")
        if r.status_code == 404 and not args.for_creation:
            print(f"oasis: EvaluationRun {name} not found (--for-creation waits for it)", file=sys.stderr)
            return EXIT_UNREADABLE
        if r.status_code not in (200, 404):
            print(f"oasis: reading EvaluationRun {name}: HTTP {r.status_code}", file=sys.stderr)
            return EXIT_UNREADABLE
        if r.status_code == 200:
            status = r.json().get("status") or {}
            phase = str(status.get("phase") or "-")
            code = exit_code(status)
            if code is not None:
                print(outcome_line(name, status, code), flush=True)
                return code
        if time.monotonic() >= deadline:
            print(
                f"{name}: not Completed within {args.timeout} (phase {phase}) (exit {EXIT_TIMEOUT})",
                flush=True,
            )
            return EXIT_TIMEOUT
        time.sleep(min(1.0, max(0.0, deadline - time.monotonic())))
