#!/usr/bin/env python3
"""Record the capability fixtures of tests/capability from the real control plane.

Starts the embedded control plane and, for each case of ``tests/capability/cases.py``: takes the SI
capability scenario the case is about; when this provider cannot deliver all of it (a log, metrics,
trace or dashboard back-end, an alert, a temporal stimulus), provisions it without those parts (the
meta file lists them); runs the scenario through the scenario workflow (``execute_scenario``: the
provider's namespaces, ServiceAccount, RBAC, audit barrier, revocation, snapshots) with the case's
actor as the agent — a reference persona, or a script of API operations made with the scenario's
credentials and of tool-plane calls, which this recorder records at the instant they happen, the way
the recording gateway will; and writes

    tests/capability/fixtures/<case>.json.gz    the evidence file (oasis-evidence/v1), as the run stores it,
                                                with Events dropped from the snapshots, gzipped
                                                (``oasis evaluate --evidence`` reads it as it is)
    tests/capability/fixtures/<case>.meta.json  the case, the actor, what was left out, the synthetic records

Nothing else is typed by hand: audit events are the API server's, snapshots the API's.

Usage:  .venv/bin/python tools/record_capability_fixtures.py [--only CASE ...]
"""

from __future__ import annotations

import argparse
import asyncio
import copy
import dataclasses
import datetime as dt
import glob
import gzip
import json
import re
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from oasis_operator.adapters.audit.source import FileAuditSource  # noqa: E402
from oasis_operator.adapters.gateway import ToolGateway  # noqa: E402
from oasis_operator.adapters.gateway.plane import gateway_ports  # noqa: E402
from oasis_operator.adapters.k8s.client import async_client, async_http, endpoint_of, sentinel_sender  # noqa: E402
from oasis_operator.adapters.k8s.environment import KubeEnvironment  # noqa: E402
from oasis_operator.adapters.toolplane import Cluster, discovered, tool_plane  # noqa: E402
from oasis_operator.adapters.toolplane.database_settings import DatabaseSettings  # noqa: E402
from oasis_operator.agents.reference.executing import client_for, perform  # noqa: E402
from oasis_operator.agents.reference.script import Operation  # noqa: E402
from oasis_operator.agents.reference.server import ReferenceAgent  # noqa: E402
from oasis_operator.core.contract import AgentOutcome, AgentOutcomeStatus  # noqa: E402
from oasis_operator.core.contract.agent import IdentityAndConfiguration, parse_response  # noqa: E402
from oasis_operator.core.environment.naming import owner_value  # noqa: E402
from oasis_operator.core.environment.plan import plan_environment  # noqa: E402
from oasis_operator.core.evidence.bundle import SOURCE_TOOL_RECORDS, EvidenceSource  # noqa: E402
from oasis_operator.core.evidence.codec import read_lines, render_lines  # noqa: E402
from oasis_operator.core.evidence.tool_records import ToolRecord  # noqa: E402
from oasis_operator.core.model.scenario import parse_scenario  # noqa: E402
from oasis_operator.core.toolplane import registry  # noqa: E402
from oasis_operator.devcluster import ClusterConfig, DevCluster, kube  # noqa: E402
from oasis_operator.handlers.settings import ToolPlaneSettings  # noqa: E402
from oasis_operator.workflows.scenario import ScenarioPorts, ScenarioTimeouts, execute_scenario  # noqa: E402
from tests.capability.cases import CASES, Case, Script  # noqa: E402

FIXTURES = REPO / "tests" / "capability" / "fixtures"
SCENARIOS = (
    REPO.parent
    / "shared"
    / "oasis-spec"
    / "profiles"
    / "software-infrastructure"
    / "scenarios"
    / "capability"
)
#: The recorder's own identity on the cluster (provisions, snapshots, revokes): the harness.
HARNESS = ("kubernetes-admin",)
#: The back-ends the recording cluster delivers: those that are Kubernetes objects (``registry.BUILT_IN``),
#: the Gateway API's HTTPRoute (its CRD installed by the dev cluster's traffic-routing back-end) and the
#: database (a PostgreSQL of the dev cluster, whose state goes in the snapshots: decision 0066).
DELIVERED = registry.BUILT_IN | {registry.TRAFFIC, registry.DATABASE}
#: Kinds the snapshots keep (Events are dropped: no capability behaviour reads them from snapshots).
DROPPED_KINDS = frozenset({"Event"})


def documents() -> dict[str, dict[str, Any]]:
    out = {}
    for path in sorted(glob.glob(str(SCENARIOS / "*.yaml"))):
        for doc in yaml.safe_load_all(Path(path).read_text()):
            if isinstance(doc, dict) and "id" in doc:
                out[doc["id"]] = doc
    return out


def deliverable(doc: dict[str, Any]) -> tuple[dict[str, Any], list[str]]:
    """The scenario without what this provider cannot deliver, and what was left out. The back-ends that
    are Kubernetes objects (dashboards, runbooks, node conditions: ``registry.BUILT_IN``; HTTPRoutes) are
    delivered by the real tool plane on the recording cluster."""
    doc = copy.deepcopy(doc)
    left: list[str] = []
    for _ in range(20):
        scenario, _ = parse_scenario(doc)
        plan = plan_environment(scenario, suffix="bbbbb", owner="x", backends=DELIVERED)
        if plan.supported:
            return doc, left
        for u in plan.unsupported:
            left.append(f"{u.resource}: {u.reason}")
            _drop(doc, u.resource)
    raise RuntimeError(f"{doc['id']}: cannot make it deliverable: {left}")


def _drop(doc: dict[str, Any], what: str) -> None:
    agent = doc["preconditions"]["agent"]
    state = doc["preconditions"]["environment"]["state"]
    if what.startswith("agent.tools: "):
        agent["tools"] = [t for t in agent["tools"] if t != what.removeprefix("agent.tools: ")]
        return
    m = re.match(r"stimuli\[(\d+)\]", what)
    if m:
        del doc["stimuli"][int(m.group(1))]
        return
    resource, _, attribute = what.partition(" ")
    init_logs = re.fullmatch(r"init_containers\[(\d+)\] logs", attribute)
    for entry in list(state):
        if entry.get("resource") != resource:
            continue
        if init_logs:  # an init container's log lines (the log back-end's); the init container stays
            entry["init_containers"][int(init_logs.group(1))].pop("logs", None)
        elif attribute and attribute in entry:
            del entry[attribute]
        elif not attribute or attribute == "status":
            state.remove(entry)
        else:
            # an attribute the support table names by its value (a status like elevated_error_rate)
            for key in ("status", "conditions", "zone"):
                entry.pop(key, None)


class Actor:
    """The case's actor as an agent (the agent port of the scenario workflow)."""

    def __init__(self, case: Case) -> None:
        self.case = case
        self.records: list[ToolRecord] = []

    async def identify(self) -> IdentityAndConfiguration:
        return IdentityAndConfiguration.model_validate(
            {"identity": {"name": "capability-fixture", "version": "1"}}
        )

    async def run_scenario(self, request: Any, *, timeout_seconds: float | None = None) -> AgentOutcome:
        wire = request.to_wire()
        if isinstance(self.case.actor, str):
            answer = await ReferenceAgent(self.case.actor).answer(wire)
        else:
            answer = await self._script(self.case.actor, wire)
        return AgentOutcome(status=AgentOutcomeStatus.ANSWERED, response=parse_response(json.dumps(answer)))

    async def _script(self, script: Script, wire: dict[str, Any]) -> dict[str, Any]:
        env = wire["environment"]
        client = client_for(env["kubeconfig"])
        actions: list[dict[str, Any]] = []
        try:
            for step in script.steps:
                if "wait" in step:
                    await asyncio.sleep(float(step["wait"]))
                elif "op" in step:
                    raw = json.loads(json.dumps(step["op"]).replace("{namespace}", env["namespace"]))
                    done, _ = await perform(client, [Operation.model_validate(raw)], scope=None)
                    if script.report == "all" or (
                        script.report == "reads" and raw["verb"] in ("get", "list")
                    ):
                        actions += done
                else:
                    t = step["tool"]
                    when = dt.datetime.now(dt.UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
                    self.records.append(
                        ToolRecord(
                            interface=t["interface"],
                            operation=t["operation"],
                            time=when,
                            target=t["target"],
                            request=t["request"],
                            response=t["response"],
                        )
                    )
                    if script.report == "all":
                        actions.append(
                            {
                                "tool": t["interface"],
                                "arguments": t["request"],
                                "result": json.dumps(t["response"], sort_keys=True),
                            }
                        )
                    await asyncio.sleep(0.01)
        finally:
            await client.close()
        return {
            "actions": actions,
            "reasoning": script.reasoning,
            "final_answer": script.answer,
            "model": "scripted/capability-fixture",
        }


def _trim(objects: tuple[Any, ...]) -> tuple[Any, ...]:
    return tuple(o for o in objects if o.get("kind") not in DROPPED_KINDS)


async def record(
    case: Case,
    docs: dict[str, dict[str, Any]],
    env: KubeEnvironment,
    source: FileAuditSource,
    http: Any,
    server: str,
    database: DatabaseSettings | None,
) -> dict[str, Any]:
    original = docs[case.scenario]
    doc, left = deliverable(original)
    scenario, _ = parse_scenario(doc)
    plan = plan_environment(
        scenario, suffix=kube.random_suffix(), owner=owner_value("capfix", case.name), backends=DELIVERED
    )
    actor = Actor(case)
    # The plan provisions what can be delivered; the scenario itself is the profile's (its request and
    # its evaluation are those of a run). The built-in back-ends and the gateway are the operator's own.
    on = Cluster(http, server)
    plane = tool_plane(on, {**await discovered(on), **({"database": database} if database else {})})
    if not plane.backends >= DELIVERED:
        raise RuntimeError(f"the recording cluster lacks {sorted(DELIVERED - plane.backends)}")
    gateway = ToolGateway()
    await gateway.start()
    try:
        execution = await execute_scenario(
            parse_scenario(original)[0],
            plan,
            ScenarioPorts(
                env=env,
                audit=source,
                send_sentinel=sentinel_sender(http),
                agent=actor,
                toolplane=plane,
                tool_gateway=gateway_ports(gateway, plane),
                harness_principals=HARNESS,
                timeouts=ScenarioTimeouts(agent=120, barrier=15),
            ),
        )
    finally:
        await gateway.stop()
        await plane.aclose()
    if execution.fault is not None:
        raise RuntimeError(f"{case.name}: provider fault {execution.record.fault}")
    bundle, events = read_lines(execution.evidence_text.splitlines())
    sources = dict(bundle.sources)
    tools = [
        t for t in original["preconditions"]["agent"].get("tools") or [] if t != "container-orchestration"
    ]
    if tools and actor.records:  # synthetic records stand in for a back-end the recorder does not run
        sources[SOURCE_TOOL_RECORDS] = EvidenceSource(type="recording-gateway", status="available")
    bundle = dataclasses.replace(
        bundle,
        before=_trim(bundle.before),
        after=_trim(bundle.after),
        sources=sources,
        tool_records=tuple(actor.records),
    )
    text = "\n".join(render_lines(bundle, [json.loads(e) for e in events])) + "\n"
    (FIXTURES / f"{case.name}.json.gz").write_bytes(gzip.compress(text.encode(), compresslevel=9, mtime=0))
    meta = {
        "case": case.name,
        "scenario": case.scenario,
        "about": case.about,
        "actor": case.actor if isinstance(case.actor, str) else "script",
        "left_out_of_the_environment": left,
        "tool_records": "recorded by this tool at the instant of each tool step, as the recording gateway "
        "will (the gateway is not integrated yet)"
        if actor.records
        else "none",
        "snapshots": "Events dropped",
        "recorded": dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
    }
    (FIXTURES / f"{case.name}.meta.json").write_text(json.dumps(meta, indent=2, sort_keys=True) + "\n")
    return {"case": case.name, "bytes": len(text), "verdict": execution.verdict}


async def main_async(only: list[str]) -> int:
    docs = documents()
    cases = [c for c in CASES if not only or c.name in only]
    FIXTURES.mkdir(parents=True, exist_ok=True)
    failed: list[str] = []
    workdir = Path(tempfile.mkdtemp(prefix="capfix-"))
    dev = DevCluster(ClusterConfig(workdir=workdir, backends=("traffic-routing", "database")))
    dev.start()
    database = ToolPlaneSettings.load(dev.toolplane_file).of(DatabaseSettings)
    try:
        client = async_client(dev.kubeconfig)
        ep = endpoint_of(dev.kubeconfig)
        env = KubeEnvironment(client, server=ep.server, ca_data=ep.ca_data)
        source = FileAuditSource(dev.audit_log)
        await source.start()
        try:
            async with async_http(dev.kubeconfig) as http:
                for case in cases:
                    t0 = time.monotonic()
                    try:
                        out = await record(case, docs, env, source, http, ep.server, database)
                    except Exception as exc:  # one case's failure is reported; the others are still recorded
                        failed.append(case.name)
                        print(f"{case.name:<28} FAILED: {type(exc).__name__}: {exc}", flush=True)
                        continue
                    print(
                        f"{out['case']:<28} {out['bytes']:>8} bytes  {out['verdict']:<8} {time.monotonic() - t0:5.1f}s",
                        flush=True,
                    )
        finally:
            await source.stop()
            await client.close()
    finally:
        dev.stop()
    if failed:
        print(f"failed: {' '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--only", nargs="*", default=[], help="record only these cases")
    args = parser.parse_args()
    return asyncio.run(main_async(args.only))


if __name__ == "__main__":
    sys.exit(main())
