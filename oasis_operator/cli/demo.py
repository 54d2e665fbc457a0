"""``oasis demo``: the main job on the embedded default, start to finish, in one command.

Called by :mod:`oasis_operator.cli.main` (and ``make demo``); turns nothing into a printed account of a
run: it starts the embedded control plane in a temporary directory, shows its simulated nodes, has a
scoped service account act on the cluster and shows how the audit log recorded each of its requests
(including a denied one), then stops everything. Later stages of the project grow this into a full
evaluation (operator, reference agents, EvaluationRuns, verdicts).
"""

from __future__ import annotations

import argparse
import shutil
import tempfile
import time
import uuid
from functools import partial
from pathlib import Path

from oasis_operator.adapters.audit.file_tail import AuditEvent, AuditFileTail, is_complete
from oasis_operator.cli.main import CliError
from oasis_operator.devcluster import ClusterConfig, DevCluster, SetupError, kube


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("demo", help="start the embedded control plane and show an audited round-trip")
    parser.add_argument("--keep", action="store_true", help="keep the cluster directory (logs, audit log)")
    parser.set_defaults(func=cmd_demo)


def cmd_demo(args: argparse.Namespace) -> int:
    workdir = Path(tempfile.mkdtemp(prefix="oasis-demo-"))
    started = time.monotonic()
    print("Starting the embedded control plane (the first run builds the binaries: ~5-10 min)...")
    dev = DevCluster(ClusterConfig(workdir=workdir))
    try:
        dev.start()
    except SetupError as exc:
        raise CliError(str(exc)) from None
    try:
        print(f"Control plane up in {time.monotonic() - started:.1f}s at {dev.server}\n")
        _show(dev)
    finally:
        dev.stop()
        if args.keep:
            print(f"\nCluster directory kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


def _show(dev: DevCluster) -> None:
    with dev.admin_http() as admin:
        print("NODES")
        for node in admin.get("/api/v1/nodes").json()["items"]:
            cond = {c["type"]: c["status"] for c in node["status"]["conditions"]}
            alloc = node["status"]["allocatable"]
            print(f"  {node['metadata']['name']:<10} Ready={cond.get('Ready')}  cpu={alloc['cpu']} "
                  f"memory={alloc['memory']} pods={alloc['pods']}")

        tail = AuditFileTail(dev.audit_log, from_start=False)
        tail.read_new()
        ns = f"shop-{kube.random_suffix()}"
        kube.create_namespace(admin, ns)
        rules = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "create", "patch"]}]
        sa = kube.create_service_account(admin, ns, "agent", rules)
        print(f"\nAUDIT ROUND-TRIP as {sa.username}")
        ids = []
        with dev.token_http(sa.token) as http:
            for method, path, body in [
                ("POST", f"/api/v1/namespaces/{ns}/configmaps",
                 {"metadata": {"name": "settings"}, "data": {"mode": "safe"}}),
                ("GET", f"/api/v1/namespaces/{ns}/configmaps/settings", None),
                ("DELETE", f"/api/v1/namespaces/{ns}/configmaps/settings", None),  # not allowed
            ]:
                audit_id = str(uuid.uuid4())
                ids.append(audit_id)
                sent = time.monotonic()
                resp = http.request(method, path, json=body, headers={"Audit-ID": audit_id})
                event = tail.wait_for(partial(is_complete, audit_id=audit_id), timeout=10)
                latency = (time.monotonic() - sent) * 1000
                print(f"  {method:<6} {path} -> HTTP {resp.status_code}")
                print("         " + (_describe(event, latency) if event else "NOT FOUND in the audit log"))
        kube.delete_namespace(admin, ns)


def _describe(event: AuditEvent, latency_ms: float) -> str:
    ref = event.get("objectRef", {})
    target = f"{ref.get('resource')}/{ref.get('name', '')}".rstrip("/")
    decision = event.get("annotations", {}).get("authorization.k8s.io/decision", "?")
    return (f"audit: user={event['user']['username']} verb={event['verb']} {target} "
            f"ns={ref.get('namespace')} code={event['responseStatus']['code']} "
            f"authz={decision} level={event['level']} ({latency_ms:.0f} ms after sending)")
