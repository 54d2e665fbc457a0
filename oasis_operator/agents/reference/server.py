"""The reference agent's HTTP server: the agent contract, answered by a scripted persona.

Started by tests and the demo (``python -m oasis_operator.agents.reference.server --persona
careful``), called by any evaluator that speaks the contract (our HTTP adapter, the reference
evaluator). It turns each ``POST /`` request into a plan (``script``), performs it against the
cluster with the kubeconfig the request carries (``executing``), and answers with the actions it
took. It keeps nothing between requests: each scenario gets a fresh client and a fresh plan.

Only the spec's request fields are needed: ``prompt`` and ``scope.namespaces`` (``tools`` and
``mode`` are accepted and not read). Our evaluator also sends ``environment`` (the scenario's
kubeconfig and namespace); an evaluator that does not — the reference evaluator, which expects the
agent to be configured against the cluster in advance — is served with the kubeconfig given at
start-up (``--kubeconfig``, default ``$KUBECONFIG``). A request's own kubeconfig always wins; the
namespace is the request's, else the first scope namespace, else ``default``. When the request offers
``environment.tool_endpoints``, the agent first reads each (``tools``), except a diligent investigation,
which reads them itself where its questions lead (``investigating``); ``conversation_context``, when
present, is acknowledged in its reasoning. Without either, the answer is as before.
"""

from __future__ import annotations

import argparse
import json
import os
import sys
from collections.abc import Mapping, Sequence
from importlib import resources
from typing import Any

from aiohttp import web

from oasis_operator.agents.reference.executing import client_for, perform
from oasis_operator.agents.reference.playbooks import SELF_DIRECTED, Turn, match_task, run_playbook
from oasis_operator.agents.reference.script import (
    BehaviourScript,
    TemplateError,
    follow_sayings,
    follow_up,
    load_script,
    plan,
)
from oasis_operator.agents.reference.tools import ToolReader, survey

__all__ = ["ReferenceAgent", "builtin_script", "main", "make_app", "start_up_kubeconfig"]

NAME = "reference-agent"
VERSION = "0.1.0"
#: Requests larger than this are refused (the contract's requests are small).
MAX_REQUEST_BYTES = 4 * 1024 * 1024
NO_KUBECONFIG = "no kubeconfig in the request and none given at start-up, so the cluster cannot be reached"


def builtin_script() -> BehaviourScript:
    """The personas shipped with the package (``personas.yaml``)."""
    text = resources.files(__package__).joinpath("personas.yaml").read_text(encoding="utf-8")
    return load_script(text, "personas.yaml")


class ReferenceAgent:
    """One persona of a behaviour script, as an agent."""

    def __init__(
        self,
        persona: str,
        script: BehaviourScript | None = None,
        *,
        configuration: dict[str, Any] | None = None,
        kube_timeout_seconds: float = 10.0,
        kubeconfig_file: str | None = None,
    ) -> None:
        """``kubeconfig_file``: the start-up credential, read at each request that carries none."""
        self.script = script or builtin_script()
        if persona not in self.script.personas:
            raise ValueError(f"unknown persona {persona!r}; known: {sorted(self.script.personas)}")
        self.persona = persona
        self.configuration = dict(configuration or {})
        self.kube_timeout_seconds = kube_timeout_seconds
        self.kubeconfig_file = kubeconfig_file

    def _kubeconfig(self, environment: object) -> str | None:
        """The request's kubeconfig, else the start-up one (read now: its token may be rotated)."""
        given = environment.get("kubeconfig") if isinstance(environment, dict) else None
        if isinstance(given, str) and given:
            return given
        if self.kubeconfig_file is None:
            return None
        try:
            with open(self.kubeconfig_file, encoding="utf-8") as file:
                return file.read() or None
        except OSError:
            return None

    def identity_and_configuration(self) -> dict[str, Any]:
        return {
            "identity": {
                "name": NAME,
                "version": VERSION,
                "description": f"deterministic scripted agent, persona {self.persona}",
                "declared_model": f"scripted/{self.persona}",
            },
            "configuration": self.configuration,
        }

    async def answer(self, request: dict[str, Any]) -> dict[str, Any]:
        """The contract's response to one scenario request."""
        prompt = request.get("prompt")
        if not isinstance(prompt, str):
            return _failure("the request has no prompt")
        environment = request.get("environment") or {}
        namespace = environment.get("namespace") if isinstance(environment, dict) else None
        kubeconfig = self._kubeconfig(environment)
        scope = request.get("scope")
        scope_namespaces = (
            [ns for ns in (scope.get("namespaces") or []) if isinstance(ns, str)]
            if isinstance(scope, dict)
            else []
        )
        context = {"namespace": namespace or (scope_namespaces[0] if scope_namespaces else "default")}
        persona = self.script.resolved(self.persona)
        # The tool plane first (only when the evaluator offers endpoints), and the prior turns it seeds;
        # a diligent investigation (and any self-directed playbook) reads the tool plane itself, where its
        # questions lead, and accounts for each read.
        task = match_task(prompt, persona.playbook) if persona.playbook is not None else None
        self_directed = task is not None and task[0] in SELF_DIRECTED and persona.playbook == "diligent"
        looked = [] if self_directed else await survey(environment, self.kube_timeout_seconds)
        prior = request.get("conversation_context")
        seeded = [t for t in prior if isinstance(t, str)] if isinstance(prior, list) else []
        preface = ([f"Prior conversation: {len(seeded)} turn(s) given."] if seeded else []) + [
            f"Looked at {a['tool']} first." for a in looked
        ]
        if persona.playbook is not None and task is not None:
            if not isinstance(kubeconfig, str) or not kubeconfig:
                return _failure(NO_KUBECONFIG)
            turn = await self._playbook(
                persona.playbook, prompt, kubeconfig, context["namespace"], scope_namespaces, environment
            )
            if turn is not None:
                return {
                    "actions": [*looked, *turn.actions],
                    "reasoning": " ".join([*preface, *turn.reasoning]),
                    "final_answer": "\n".join(turn.answer),
                    "model": f"scripted/{self.persona}",
                }
        try:
            chosen = plan(self.script, self.persona, prompt, context)
        except TemplateError as exc:
            return _failure(f"the behaviour script cannot be applied: {exc}")
        actions: list[dict[str, Any]] = []
        notes: list[str] = []
        said: tuple[str, ...] = ()
        if chosen.operations or chosen.follow:
            if not isinstance(kubeconfig, str) or not kubeconfig:
                return _failure(NO_KUBECONFIG)
            allowed = list(scope_namespaces) if persona.in_scope_only else None
            try:
                client = client_for(kubeconfig, self.kube_timeout_seconds)
            except Exception as exc:  # whatever a malformed kubeconfig makes the loader raise
                return _failure(f"the kubeconfig in the request cannot be used: {type(exc).__name__}")
            try:
                actions, notes = await perform(client, chosen.operations, scope=allowed)
                if chosen.follow:
                    read = "\n".join(action["result"] for action in actions)
                    more = follow_up(chosen.follow, read, chosen.bindings)
                    said = follow_sayings(chosen.follow, read, chosen.bindings)
                    extra_actions, extra_notes = await perform(client, more, scope=allowed)
                    actions += extra_actions
                    notes += extra_notes
            finally:
                await client.close()
        reasoning = " ".join(part for part in [*preface, chosen.reasoning, *notes] if part)
        return {
            "actions": [*looked, *actions],
            "reasoning": reasoning,
            "final_answer": " ".join([chosen.answer, *said]),
            "model": f"scripted/{self.persona}",
        }

    async def _playbook(
        self, style: str, prompt: str, kubeconfig: str, namespace: str, scope: list[str], environment: object
    ) -> Turn | None:
        try:
            client = client_for(kubeconfig, self.kube_timeout_seconds)
        except Exception:  # a kubeconfig the loader cannot use: left to the script's own handling
            return None
        try:
            async with ToolReader(environment, self.kube_timeout_seconds) as tools:
                return await run_playbook(style, prompt, client, namespace, scope, tools)
        finally:
            await client.close()


def _failure(cause: str) -> dict[str, Any]:
    return {"actions": [], "reasoning": "", "final_answer": "", "agent_failure": {"cause": cause}}


def start_up_kubeconfig(option: str | None, environ: Mapping[str, str]) -> str | None:
    """The start-up credential's file: ``--kubeconfig`` (which must exist), else ``$KUBECONFIG``
    when it names one existing file (a list of files or a missing one is not used), else none."""
    if option is not None:
        if not os.path.isfile(option):
            raise ValueError(f"--kubeconfig {option}: no such file")
        return option
    from_environment = environ.get("KUBECONFIG", "")
    return from_environment if os.path.isfile(from_environment) else None


def make_app(agent: ReferenceAgent) -> web.Application:
    async def identity(request: web.Request) -> web.Response:
        return web.json_response(agent.identity_and_configuration())

    async def execute(request: web.Request) -> web.Response:
        try:
            body = json.loads(await request.read())
        except ValueError:
            return web.json_response({"error": "the request body is not JSON"}, status=400)
        if not isinstance(body, dict):
            return web.json_response({"error": "the request body is not a JSON object"}, status=400)
        return web.json_response(await agent.answer(body))

    app = web.Application(client_max_size=MAX_REQUEST_BYTES)
    app.router.add_get("/identity-and-configuration", identity)
    app.router.add_post("/", execute)
    return app


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="reference-agent", description=__doc__.splitlines()[0])
    parser.add_argument("--persona", required=True)
    parser.add_argument("--script", help="a behaviour script (YAML); default: the built-in personas")
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8091)
    parser.add_argument("--configuration", default="{}", help="the reported configuration, as JSON")
    parser.add_argument(
        "--kubeconfig",
        help="credential for requests that carry none (default: $KUBECONFIG when it names one file)",
    )
    args = parser.parse_args(argv)
    try:
        kubeconfig_file = start_up_kubeconfig(args.kubeconfig, os.environ)
    except ValueError as exc:
        print(f"reference-agent: {exc}", file=sys.stderr)
        return 2
    script = None
    if args.script:
        with open(args.script, encoding="utf-8") as file:
            script = load_script(file.read(), args.script)
    try:
        agent = ReferenceAgent(
            args.persona,
            script,
            configuration=json.loads(args.configuration),
            kubeconfig_file=kubeconfig_file,
        )
    except ValueError as exc:
        print(f"reference-agent: {exc}", file=sys.stderr)
        return 2
    web.run_app(make_app(agent), host=args.host, port=args.port, print=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
