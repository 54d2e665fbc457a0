"""The red-team persona's HTTP server: the agent contract, answered by an adversary.

Started by the adversarial suite (``python -m oasis_operator.agents.reference.redteam --port N
--journal FILE``) and called by the operator's HTTP agent adapter. The endpoint's path is the plan:
``/plan/<technique>.<v|b>,<technique>.<v|b>,...`` lists the rows (violating ``v`` or benign twin ``b``)
this endpoint plays; for each scenario request the server picks the row whose scenario's prompt the
request carries, performs it with the kubeconfig the request hands over, and answers as the row
decides (or fails to answer, for the agent-failure rows). Delayed actors run after the answer. Every
request, and every delayed actor, appends one JSON line to the journal: what the persona did, so a
test can tell a technique that ran from one that could not.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from aiohttp import web

from oasis_operator.agents.reference.redteam.kube import Journal, Kube
from oasis_operator.agents.reference.redteam.scenes import Ctx, scene_for
from oasis_operator.agents.reference.redteam.techniques import HANG_SECONDS, Item, by_id

__all__ = ["RedTeam", "main", "make_app", "parse_plan", "plan_path"]

NAME = "red-team-agent"
VERSION = "0.1.0"
MAX_REQUEST_BYTES = 4 * 1024 * 1024


def plan_path(items: Sequence[Item]) -> str:
    """The endpoint path that plays ``items``."""
    return "/plan/" + ",".join(i.key for i in items)


def parse_plan(path: str) -> list[Item]:
    """The rows an endpoint path names; raises ``KeyError``/``ValueError`` for an unknown one."""
    rest = path.strip("/").removeprefix("plan/").removesuffix("/identity-and-configuration")
    out = []
    for key in filter(None, rest.split(",")):
        tid, _, variant = key.rpartition(".")
        if variant not in ("v", "b"):
            raise ValueError(f"{key}: expected <technique>.v or <technique>.b")
        out.append(Item(by_id(tid), variant == "v"))
    return out


def _tools(environment: Any) -> dict[str, tuple[str, str]]:
    """The request's tool endpoints, interface -> (URL, token): those that are well formed."""
    given = environment.get("tool_endpoints") if isinstance(environment, dict) else None
    return {
        str(name): (value["url"], value["token"])
        for name, value in (given.items() if isinstance(given, dict) else ())
        if isinstance(value, dict)
        and isinstance(value.get("url"), str)
        and isinstance(value.get("token"), str)
    }


class RedTeam:
    """The persona: plays the rows an endpoint names, and keeps the journal."""

    def __init__(self, journal: Path | None, kube_timeout_seconds: float = 10.0) -> None:
        self.journal_path = journal
        self.kube_timeout_seconds = kube_timeout_seconds
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task[None]] = set()

    async def record(self, entry: dict[str, Any]) -> None:
        if self.journal_path is None:
            return
        line = json.dumps(entry, sort_keys=True, default=str) + "\n"
        async with self._lock:
            with self.journal_path.open("a", encoding="utf-8") as out:
                out.write(line)

    async def answer(self, request: web.Request) -> web.StreamResponse:
        try:
            body = json.loads(await request.read())
            items = parse_plan(request.path)
        except (ValueError, KeyError) as exc:
            return web.json_response({"error": f"bad request: {exc}"}, status=400)
        prompt = str(body.get("prompt") or "")
        environment = body.get("environment") or {}
        scope = [n for n in ((body.get("scope") or {}).get("namespaces") or []) if isinstance(n, str)]
        found = scene_for(prompt, [i.technique.scenario for i in items])
        entry: dict[str, Any] = {
            "plan": request.path,
            "namespace": environment.get("namespace"),
            "time": time.time(),
        }
        if found is None:
            entry["error"] = f"no row of this plan matches the prompt {prompt[:80]!r}"
            await self.record(entry)
            return web.json_response(_failure(entry["error"]))
        scene, match = found
        item = next(i for i in items if i.technique.scenario == scene.scenario)
        entry.update(
            key=item.key, technique=item.technique.id, violating=item.violating, scenario=scene.scenario
        )
        journal = Journal()
        kube = Kube.from_kubeconfig(
            str(environment.get("kubeconfig") or ""), journal, self.kube_timeout_seconds
        )
        ctx = Ctx(
            kube=kube,
            prompt=prompt,
            namespace=str(environment.get("namespace") or ""),
            scope=scope,
            journal=journal,
            match=match,
            scene=scene,
            tool_endpoints=_endpoints(environment.get("tool_endpoints")),
            tools=_tools(environment),
        )
        try:
            await item.technique.act(ctx, item.violating)
        except Exception as exc:  # a broken technique is a suite bug: the journal says so
            entry["error"] = f"{type(exc).__name__}: {exc}"
        except BaseException as exc:  # cancelled mid-play (the caller went away): still journalled
            entry.update(error=f"interrupted: {type(exc).__name__}", steps=journal.steps, notes=journal.notes)
            await asyncio.shield(self.record(entry))
            raise
        finally:
            await kube.close()
        entry.update(steps=journal.steps, notes=journal.notes, failure=ctx.failure, delayed=len(ctx.later))
        await self.record(entry)
        for actor in ctx.later:
            self._start_later(item, actor)
        return await self._respond(request, ctx, journal)

    def _start_later(self, item: Item, actor: Any) -> None:
        async def run() -> None:
            journal = Journal()
            error = None
            try:
                await actor(journal)
            except Exception as exc:
                error = f"{type(exc).__name__}: {exc}"
            await self.record(
                {
                    "key": item.key,
                    "technique": item.technique.id,
                    "violating": item.violating,
                    "after_answer": True,
                    "steps": journal.steps,
                    "error": error,
                    "time": time.time(),
                }
            )

        task = asyncio.create_task(run())
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _respond(self, request: web.Request, ctx: Ctx, journal: Journal) -> web.StreamResponse:
        reply = {
            "actions": [
                {
                    "tool": "kubernetes",
                    "arguments": {"method": s["method"], "path": s["path"]},
                    "result": f"HTTP {s['status']}",
                }
                for s in journal.steps
                if s.get("who") == "agent" and s.get("method") == "GET"
            ]
            + list(ctx.cache.get("extra_actions") or []),
            "reasoning": "I looked at the current state before answering.",
            "final_answer": ctx.answer or "I looked at the current state and made no changes.",
            "model": "scripted/red-team",
        }
        if ctx.failure == "http500":
            return web.json_response({"error": "internal error"}, status=500)
        if ctx.failure == "hang":
            await asyncio.sleep(HANG_SECONDS)
        if ctx.failure == "abort":
            if request.transport is not None:
                request.transport.abort()
            raise ConnectionResetError("the red-team persona dropped the connection")
        if ctx.failure == "report":
            return web.json_response(_failure("the model provider is unavailable"))
        if ctx.failure == "malformed":
            return web.Response(text="<html><body>upstream error</body></html>", content_type="text/html")
        return web.json_response(reply)


def _endpoints(given: Any) -> dict[str, dict[str, str]]:
    """The well-formed tool endpoints of a request (interface -> url and token)."""
    out: dict[str, dict[str, str]] = {}
    for name, value in (given or {}).items() if isinstance(given, dict) else ():
        if (
            isinstance(value, dict)
            and isinstance(value.get("url"), str)
            and isinstance(value.get("token"), str)
        ):
            out[str(name)] = {"url": value["url"], "token": value["token"]}
    return out


def _failure(cause: str) -> dict[str, Any]:
    return {"actions": [], "reasoning": "", "final_answer": "", "agent_failure": {"cause": cause}}


def make_app(agent: RedTeam) -> web.Application:
    async def identity(request: web.Request) -> web.Response:
        return web.json_response(
            {
                "identity": {
                    "name": NAME,
                    "version": VERSION,
                    "description": "scripted adversary",
                    "declared_model": "scripted/red-team",
                },
                "configuration": {},
            }
        )

    async def execute(request: web.Request) -> web.StreamResponse:
        return await agent.answer(request)

    app = web.Application(client_max_size=MAX_REQUEST_BYTES)
    app.router.add_get("/identity-and-configuration", identity)
    app.router.add_get("/{plan:.*}/identity-and-configuration", identity)
    app.router.add_post("/{plan:.*}", execute)
    return app


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="red-team-agent", description=__doc__.splitlines()[0])
    parser.add_argument("--host", default="127.0.0.1")
    parser.add_argument("--port", type=int, default=8092)
    parser.add_argument("--journal", type=Path, help="append one JSON line per request here")
    args = parser.parse_args(argv)
    web.run_app(make_app(RedTeam(args.journal)), host=args.host, port=args.port, print=None)
    return 0


if __name__ == "__main__":
    sys.exit(main())
