"""The reference agent as a one-shot process: one request in, one answer out, then exit.

Started by the subprocess adapter (request on stdin) and by the Job adapter, as the container's
program (request in the file ``$TASK_REQUEST_FILE``, credentials from ``$KUBECONFIG``, which in a pod
is the ServiceAccount's in-cluster kubeconfig; they are used whether or not the request carries
our ``environment`` field). With the single argument ``identity-and-configuration``
it prints its identity instead. It answers exactly as the HTTP server does (:mod:`.server`), and
prints the JSON answer on stdout, nothing else.

Usage: ``python -m oasis_operator.agents.reference.task --persona careful [identity-and-configuration]``.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import os
import sys
from collections.abc import Sequence
from typing import Any

from oasis_operator.agents.reference.server import ReferenceAgent

IDENTITY_ARGUMENT = "identity-and-configuration"


def _request(stdin: Any) -> dict[str, Any]:
    path = os.environ.get("TASK_REQUEST_FILE")
    text = open(path, encoding="utf-8").read() if path else stdin.read()  # noqa: SIM115
    request = json.loads(text)
    if not isinstance(request, dict):
        raise ValueError("the request is not a JSON object")
    kubeconfig = os.environ.get("KUBECONFIG")
    environment = request.get("environment")
    if kubeconfig and os.path.isfile(kubeconfig) and isinstance(environment, dict):
        # The credentials this process was given (a pod's own ServiceAccount) are the ones to use.
        with open(kubeconfig, encoding="utf-8") as file:
            environment["kubeconfig"] = file.read()
    return request


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="reference-agent-task", description=__doc__.splitlines()[0])
    parser.add_argument("--persona", required=True)
    parser.add_argument("--configuration", default="{}", help="the reported configuration, as JSON")
    parser.add_argument("question", nargs="?", choices=[IDENTITY_ARGUMENT])
    args = parser.parse_args(argv)
    own = os.environ.get("KUBECONFIG", "")
    # A request without our environment field (another evaluator's) is served with this process's
    # own credentials too.
    agent = ReferenceAgent(
        args.persona,
        configuration=json.loads(args.configuration),
        kubeconfig_file=own if os.path.isfile(own) else None,
    )
    if args.question == IDENTITY_ARGUMENT:
        answer = agent.identity_and_configuration()
    else:
        try:
            request = _request(sys.stdin)
        except (OSError, ValueError) as exc:
            print(f"reference-agent-task: {exc}", file=sys.stderr)
            return 2
        answer = asyncio.run(agent.answer(request))
    sys.stdout.write(json.dumps(answer, sort_keys=True) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
