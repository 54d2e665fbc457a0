#!/usr/bin/env python3
"""Run reference personas on SI capability scenarios, as a run does, and print what the judge found.

Starts the embedded control plane with the log, metrics, alerting, tracing, resource-usage and
traffic-routing back-ends; for each persona and scenario (the SI profile's own document, read from the
spec next to this repository), provisions the scenario, runs the persona as its agent through the
scenario workflow with the operator's tool plane and recording gateway, and prints the verdict, the
score and the band it rests on, each assertion's outcome with its checks, the agent's reasoning and its
answer. The code run is this checkout's (or whatever tree ``PYTHONPATH`` puts first: a way to compare
two commits). With ``--keep``, each run's evidence file is kept in the cluster's work directory.

Usage:  .venv/bin/python tools/persona_on_scenarios.py diligent[,hasty...] SCENARIO_ID... [--keep]
"""

from __future__ import annotations

import argparse
import asyncio
import sys
import tempfile
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.append(str(REPO))

import oasis_operator  # noqa: E402
from oasis_operator.adapters.audit.source import FileAuditSource  # noqa: E402
from oasis_operator.adapters.k8s.client import async_client, endpoint_of  # noqa: E402
from oasis_operator.adapters.k8s.environment import KubeEnvironment  # noqa: E402
from oasis_operator.adapters.toolplane import Cluster, ToolPlane, discovered, tool_plane  # noqa: E402
from oasis_operator.core.evidence.codec import read_lines  # noqa: E402
from oasis_operator.core.scoring.bands import index_outcomes  # noqa: E402
from oasis_operator.devcluster import ClusterConfig, DevCluster  # noqa: E402
from oasis_operator.handlers.settings import ClusterAccess, ToolPlaneSettings  # noqa: E402
from tests.persona_runs import plan_for, run_persona  # noqa: E402

SCENARIOS = (
    REPO.parent
    / "shared"
    / "oasis-spec"
    / "profiles"
    / "software-infrastructure"
    / "scenarios"
    / "capability"
)
BACKENDS = ("logs", "metrics", "alerts", "traces", "resource-metrics", "traffic-routing")


def documents() -> dict[str, dict[str, Any]]:
    out = {}
    for path in sorted(SCENARIOS.glob("*.yaml")):
        for doc in yaml.safe_load_all(path.read_text()):
            if isinstance(doc, dict) and "id" in doc:
                out[doc["id"]] = doc
    return out


async def run_one(
    doc: dict[str, Any],
    persona: str,
    dev: DevCluster,
    env: KubeEnvironment,
    source: FileAuditSource,
    plane: ToolPlane,
    keep: Path | None,
) -> None:
    plan = plan_for(doc, plane, "persona", f"{doc['id']}/{persona}")
    if not plan.supported:
        print(
            f"\n===== {doc['id']} [{persona}]: not supported here: {[u.resource for u in plan.unsupported]}",
            flush=True,
        )
        return
    result = await run_persona(
        doc, plan, persona, env=env, audit=source, kubeconfig=dev.kubeconfig, plane=plane
    )
    print(
        f"\n===== {doc['id']} [{persona}]: verdict={result.verdict} score={result.record.score} "
        f"basis={result.record.extra.get('score_basis')!r} fault={result.fault}",
        flush=True,
    )
    if result.detail is None or result.detail.result is None:
        return
    bundle, _ = read_lines(result.evidence_text.splitlines())
    for key, o in index_outcomes(result.detail.result.outcomes).items():
        print(f"  {key}: {o.outcome} | {o.detail} | checks={o.checks} tally={o.tally}")
    print("  reasoning:", bundle.reasoning_trace)
    print("  answer:\n    " + bundle.agent_response.replace("\n", "\n    "), flush=True)
    if keep is not None:
        (keep / f"{doc['id']}.{persona}.evidence.jsonl").write_text(result.evidence_text)


async def main_async(personas: list[str], ids: list[str], keep: bool) -> int:
    docs = documents()
    unknown = [i for i in ids if i not in docs]
    if unknown:
        print(f"unknown scenario(s): {unknown}", file=sys.stderr)
        return 2
    print("code:", Path(oasis_operator.__file__).parent, flush=True)
    workdir = Path(tempfile.mkdtemp(prefix="persona-on-scenarios-"))
    dev = DevCluster(ClusterConfig(workdir=workdir, backends=BACKENDS))
    dev.start()
    try:
        client = async_client(dev.kubeconfig)
        ep = endpoint_of(dev.kubeconfig)
        env = KubeEnvironment(client, server=ep.server, ca_data=ep.ca_data)
        source = FileAuditSource(dev.audit_log)
        await source.start()
        http = ClusterAccess.discover(str(dev.kubeconfig), Path("/nonexistent"), {}).http()
        settings = ToolPlaneSettings.load(dev.toolplane_file)
        on = Cluster(http, dev.server)
        plane = tool_plane(on, {**settings.backends, **await discovered(on)})
        try:
            for persona in personas:
                for sid in ids:
                    await run_one(docs[sid], persona, dev, env, source, plane, workdir if keep else None)
        finally:
            await plane.aclose()
            await http.aclose()
            await source.stop()
            await client.close()
    finally:
        dev.stop()
        if keep:
            print("evidence kept in", workdir)
    return 0


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("personas", help="comma-separated reference personas, e.g. diligent,hasty")
    parser.add_argument("scenarios", nargs="+", help="SI capability scenario ids")
    parser.add_argument("--keep", action="store_true", help="keep each run's evidence file")
    args = parser.parse_args()
    return asyncio.run(main_async(args.personas.split(","), args.scenarios, args.keep))


if __name__ == "__main__":
    sys.exit(main())
