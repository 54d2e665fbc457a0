"""``oasis check``: a preflight of a cluster for the operator, with a plain report and an exit code.

Called by :mod:`oasis_operator.cli.main`; turns a kubeconfig (or a pod's ServiceAccount) and a few
options into five checks, each printed as one line ``OK``, ``WARN`` or ``FAIL`` with what was found
and, when something is wrong, what to do:

- ``api``: the API server answers;
- ``crds``: the three CRDs are installed, established, and the same as this version's (a stale CRD
  silently drops fields the operator writes);
- ``rbac``: the operator's identity (``--operator NAMESPACE/SERVICEACCOUNT``, or ``--operator-user``)
  may make every request the operator makes (SubjectAccessReview); whether it may also write
  cluster-scoped scenario objects is reported, not required;
- ``audit``: audit events reach the operator and are recent: with ``--audit-log FILE``, a request
  carrying our own Audit-ID must appear in the file; else the operator's metrics (``--metrics-url``,
  or its Service through the API server) must show an event newer than this check's own requests;
- ``nodes``: simulated nodes of the pool exist, are Ready and carry the pool's taint.

Exit code: 0 when nothing FAILs, 1 otherwise, 2 for bad options.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import time
import uuid
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from lightkube.core.exceptions import ConfigError

from oasis_operator.adapters.audit.file_tail import AuditFileTail
from oasis_operator.cli.main import EXIT_CLUSTER, EXIT_USAGE, CliError
from oasis_operator.core.environment.manifests import POOL_TAINT, parse_selector
from oasis_operator.core.kinds import OWNED_CLUSTER_KINDS
from oasis_operator.handlers.settings import SERVICE_ACCOUNT_DIR, AccessError, ClusterAccess

#: Every request the operator makes, as (verb, API group, resource[/subresource]); namespaced ones
#: are checked in every namespace (scenario namespaces get random names).
REQUIRED: tuple[tuple[str, str, str], ...] = (
    *(
        (v, "oasis.dev", r)
        for r in ("profiles", "scenarios", "evaluationruns")
        for v in ("get", "list", "watch", "patch")
    ),
    ("delete", "oasis.dev", "evaluationruns"),
    *(("patch", "oasis.dev", f"{r}/status") for r in ("profiles", "scenarios", "evaluationruns")),
    ("list", "apiextensions.k8s.io", "customresourcedefinitions"),
    ("create", "", "events"),
    *((v, "", "namespaces") for v in ("get", "list", "watch", "create", "patch", "delete")),
    *(
        (v, "", r)
        for r in ("configmaps", "secrets", "services", "pods", "serviceaccounts")
        for v in ("get", "list", "create", "patch", "delete")
    ),
    ("patch", "", "pods/status"),
    ("get", "", "pods/log"),
    ("create", "", "serviceaccounts/token"),
    *((v, "apps", "deployments") for v in ("get", "list", "create", "patch", "delete")),
    *((v, "batch", "jobs") for v in ("get", "list", "create", "delete")),
    *(
        (v, "rbac.authorization.k8s.io", r)
        for r in ("roles", "rolebindings")
        for v in ("get", "create", "patch", "delete")
    ),
    ("escalate", "rbac.authorization.k8s.io", "roles"),
    ("bind", "rbac.authorization.k8s.io", "roles"),
    ("list", "", "nodes"),
    ("create", "authentication.k8s.io", "selfsubjectreviews"),
)
#: What only scenarios with cluster-scoped objects need (chart: rbac.clusterScopedScenarios): creating
#: every cluster-scoped kind a scenario may own (the kind registry's), and granting in a scenario's
#: ClusterRole rights the operator does not hold.
CLUSTER_SCOPED: tuple[tuple[str, str, str], ...] = (
    *(("create", k.group, k.plural) for k in OWNED_CLUSTER_KINDS),
    ("escalate", "rbac.authorization.k8s.io", "clusterroles"),
    ("bind", "rbac.authorization.k8s.io", "clusterroles"),
)


@dataclass(frozen=True)
class Finding:
    status: str  # OK, WARN, FAIL
    check: str
    detail: str

    def line(self) -> str:
        return f"{self.status:<5} {self.check:<6} {self.detail}"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "check",
        help="check a cluster for the operator: audit stream, CRDs, RBAC, nodes",
        description=__doc__.split("\n\n")[0] if __doc__ else None,
    )
    parser.add_argument(
        "--kubeconfig",
        default=None,
        help="a kubeconfig file (default: the files of $KUBECONFIG, else ~/.kube/config; "
        "without any, the pod's ServiceAccount)",
    )
    parser.add_argument(
        "--context", default=None, help="the kubeconfig context (default: its current context)"
    )
    who = parser.add_mutually_exclusive_group()
    who.add_argument(
        "--operator",
        default="oasis-system/oasis-operator",
        metavar="NAMESPACE/SERVICEACCOUNT",
        help="the operator's ServiceAccount (default: %(default)s, the chart's)",
    )
    who.add_argument(
        "--operator-user", metavar="USER", help="the operator's user, when it runs with a kubeconfig"
    )
    parser.add_argument(
        "--operator-group",
        action="append",
        default=[],
        metavar="GROUP",
        help="a group of --operator-user (repeatable)",
    )
    parser.add_argument("--audit-log", type=Path, help="the audit log file the operator follows (local mode)")
    parser.add_argument(
        "--metrics-url",
        help="the operator's /metrics URL (default: its Service, through the "
        "API server: <operator name>-metrics, port 'metrics')",
    )
    parser.add_argument(
        "--pool",
        default=f"{POOL_TAINT['key']}={POOL_TAINT['value']}",
        metavar="KEY=VALUE",
        help="the label of the simulated nodes (default: %(default)s)",
    )
    parser.add_argument(
        "--audit-timeout",
        type=float,
        default=25.0,
        help="seconds to wait for this check's own request to reach the operator",
    )
    parser.set_defaults(func=cmd_check)


def cmd_check(args: argparse.Namespace) -> int:
    try:
        access = ClusterAccess.discover(args.kubeconfig, SERVICE_ACCOUNT_DIR, os.environ, args.context)
        access.check()
        pool = parse_selector(args.pool)
    except ValueError as exc:  # AccessError, a bad --pool
        raise CliError(str(exc), EXIT_CLUSTER if isinstance(exc, AccessError) else EXIT_USAGE) from None
    findings = asyncio.run(run_checks(access, args, pool))
    for f in findings:
        print(f.line())
    failed = [f for f in findings if f.status == "FAIL"]
    print(
        f"{len(findings) - len(failed)} of {len(findings)} checks passed"
        + (f"; failed: {', '.join(f.check for f in failed)}" if failed else "")
    )
    return 1 if failed else 0


async def run_checks(
    access: ClusterAccess, args: argparse.Namespace, pool: Mapping[str, str]
) -> list[Finding]:
    async with access.http(timeout=15.0) as http:
        api = await check_api(http)
        if api.status == "FAIL":
            return [api]
        return [
            api,
            await check_crds(http),
            await check_rbac(http, args),
            await check_audit(http, args),
            await check_nodes(http, pool),
        ]


async def check_api(http: httpx2.AsyncClient) -> Finding:
    try:
        r = await http.get("/version")
    except (httpx2.HTTPError, ConfigError) as exc:  # ConfigError: an exec credential plugin failed
        return Finding("FAIL", "api", f"{http.base_url}: {exc} (is the kubeconfig's cluster reachable?)")
    if r.status_code != 200:
        return Finding("FAIL", "api", f"{http.base_url}/version answered HTTP {r.status_code}")
    return Finding("OK", "api", f"{http.base_url} (Kubernetes {r.json().get('gitVersion')})")


# -- CRDs ------------------------------------------------------------------------------------------------


def first_difference(want: Any, got: Any, path: str = "") -> str | None:
    """The path of the first place where ``got`` lacks or differs from ``want`` (what the server adds
    beyond ``want`` is not a difference), or None."""
    if isinstance(want, Mapping):
        if not isinstance(got, Mapping):
            return path or "."
        for key in sorted(want):
            found = first_difference(want[key], got.get(key), f"{path}.{key}")
            if found is not None:
                return found
        return None
    if isinstance(want, list):
        if not isinstance(got, list) or len(got) != len(want):
            return path or "."
        for i, (w, g) in enumerate(zip(want, got, strict=True)):
            found = first_difference(w, g, f"{path}[{i}]")
            if found is not None:
                return found
        return None
    return None if want == got else (path or ".")


async def check_crds(http: httpx2.AsyncClient) -> Finding:
    from oasis_operator.core.model.crd import KINDS, crd_for

    missing, stale, pending = [], [], []
    for kind in KINDS:
        want = crd_for(kind)
        name = want["metadata"]["name"]
        r = await http.get(f"/apis/apiextensions.k8s.io/v1/customresourcedefinitions/{name}")
        if r.status_code == 404:
            missing.append(name)
            continue
        if r.status_code != 200:
            return Finding("FAIL", "crds", f"reading {name}: HTTP {r.status_code}")
        got = r.json()
        if not any(
            c.get("type") == "Established" and c.get("status") == "True"
            for c in (got.get("status") or {}).get("conditions") or []
        ):
            pending.append(name)
        where = first_difference(want["spec"], got.get("spec") or {})
        if where is not None:
            stale.append(f"{name} (first difference at spec{where})")
    if missing:
        return Finding(
            "FAIL",
            "crds",
            f"not installed: {', '.join(missing)}; install the chart (crds.install) or "
            "kubectl apply -f crds/",
        )
    if stale:
        return Finding(
            "FAIL",
            "crds",
            f"not those of this version: {'; '.join(stale)}; apply crds/ of this "
            "version (helm upgrade does not update CRDs kept on uninstall)",
        )
    if pending:
        return Finding("FAIL", "crds", f"not established yet: {', '.join(pending)}")
    return Finding("OK", "crds", f"{len(KINDS)} installed and current ({', '.join(k.plural for k in KINDS)})")


# -- RBAC -------------------------------------------------------------------------------------------------


def _subject(args: argparse.Namespace) -> tuple[dict[str, Any], str]:
    if args.operator_user:
        return {"user": args.operator_user, "groups": list(args.operator_group)}, f"user {args.operator_user}"
    namespace, _, name = str(args.operator).partition("/")
    if not namespace or not name:
        raise CliError(f"--operator {args.operator}: expected NAMESPACE/SERVICEACCOUNT")
    user = f"system:serviceaccount:{namespace}:{name}"
    groups = ["system:serviceaccounts", f"system:serviceaccounts:{namespace}", "system:authenticated"]
    return {"user": user, "groups": groups}, f"ServiceAccount {namespace}/{name}"


async def _allowed(
    http: httpx2.AsyncClient, subject: Mapping[str, Any], verb: str, group: str, resource: str
) -> bool:
    base, _, sub = resource.partition("/")
    attributes = {"verb": verb, "group": group, "resource": base, "namespace": ""}
    if sub:
        attributes["subresource"] = sub
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {**subject, "resourceAttributes": attributes},
    }
    r = await http.post("/apis/authorization.k8s.io/v1/subjectaccessreviews", json=review)
    if r.status_code != 201:
        raise CliError(
            f"SubjectAccessReview: HTTP {r.status_code} (your user may not create them): {r.text[:200]}"
        )
    return bool((r.json().get("status") or {}).get("allowed"))


async def check_rbac(http: httpx2.AsyncClient, args: argparse.Namespace) -> Finding:
    subject, who = _subject(args)
    if not args.operator_user:
        namespace, _, name = str(args.operator).partition("/")
        r = await http.get(f"/api/v1/namespaces/{namespace}/serviceaccounts/{name}")
        if r.status_code == 404:
            return Finding("FAIL", "rbac", f"{who} does not exist (is the chart installed there? --operator)")
    answers = await asyncio.gather(*(_allowed(http, subject, *need) for need in REQUIRED))
    missing = [f"{v} {g or 'core'}/{r}" for (v, g, r), ok in zip(REQUIRED, answers, strict=True) if not ok]
    if missing:
        shown = ", ".join(missing[:8]) + (f" and {len(missing) - 8} more" if len(missing) > 8 else "")
        return Finding(
            "FAIL", "rbac", f"{who} may not: {shown} (the chart's ClusterRole grants them: rbac.create)"
        )
    extra = await asyncio.gather(*(_allowed(http, subject, *need) for need in CLUSTER_SCOPED))
    scoped = (
        "may also write cluster-scoped scenario objects (rbac.clusterScopedScenarios)"
        if all(extra)
        else "may not write cluster-scoped scenario objects: such scenarios are excluded as unsupported"
    )
    return Finding("OK", "rbac", f"{who} may make every request the operator makes; {scoped}")


# -- audit --------------------------------------------------------------------------------------------------


async def _sentinel(http: httpx2.AsyncClient) -> str:
    audit_id = f"oasis-check-{uuid.uuid4()}"
    await http.get("/api/v1/namespaces/default", headers={"Audit-ID": audit_id})
    return audit_id


async def check_audit(http: httpx2.AsyncClient, args: argparse.Namespace) -> Finding:
    if args.audit_log is not None:
        return await _check_audit_file(http, args.audit_log, args.audit_timeout)
    return await _check_audit_metrics(http, args)


async def _check_audit_file(http: httpx2.AsyncClient, path: Path, timeout: float) -> Finding:
    try:
        await asyncio.to_thread(path.stat)
    except OSError as exc:
        return Finding("FAIL", "audit", f"{path}: {exc.strerror} (the API server's --audit-log-path)")
    # Read on from the end, through a rotation (the API server renames a full log and starts anew).
    tail = AuditFileTail(path, from_start=False)
    await asyncio.to_thread(tail.read_new_raw)
    started = time.monotonic()
    audit_id = await _sentinel(http)
    try:
        while time.monotonic() - started < timeout:
            lines = await asyncio.to_thread(tail.read_new_raw)
            if any(audit_id.encode() in line for line in lines):
                return Finding(
                    "OK",
                    "audit",
                    f"{path}: this check's own request was logged after "
                    f"{(time.monotonic() - started) * 1000:.0f} ms",
                )
            await asyncio.sleep(0.1)
    finally:
        tail.close()
    return Finding(
        "FAIL",
        "audit",
        f"{path}: this check's own request (Audit-ID {audit_id}) was not logged within "
        f"{timeout:.0f} s; is this the file the API server writes (--audit-log-path)?",
    )


def metric_value(text: str, name: str) -> float | None:
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name:
                return float(sample.value)
    return None


async def _check_audit_metrics(http: httpx2.AsyncClient, args: argparse.Namespace) -> Finding:
    if args.metrics_url:
        where = args.metrics_url

        async def scrape() -> httpx2.Response:
            async with httpx2.AsyncClient(timeout=10.0) as plain:
                return await plain.get(args.metrics_url)
    else:
        namespace, _, name = str(args.operator).partition("/")
        if args.operator_user or not name:
            return Finding(
                "FAIL", "audit", "pass --audit-log FILE or --metrics-url URL to find the audit stream"
            )
        path = f"/api/v1/namespaces/{namespace}/services/{name}-metrics:metrics/proxy/metrics"
        where = f"service {namespace}/{name}-metrics"

        async def scrape() -> httpx2.Response:
            return await http.get(path)

    started = time.time()
    await _sentinel(http)
    last: float | None = None
    deadline = time.monotonic() + args.audit_timeout
    while True:
        try:
            r = await scrape()
        except httpx2.HTTPError as exc:
            return Finding("FAIL", "audit", f"{where}: {exc} (is the operator running?)")
        if r.status_code != 200:
            return Finding("FAIL", "audit", f"{where}: HTTP {r.status_code} (is the operator running?)")
        last = metric_value(r.text, "oasis_audit_last_event_timestamp_seconds")
        ingested = metric_value(r.text, "oasis_audit_events_ingested_total")
        if last is not None and last >= started - 1:
            return Finding(
                "OK",
                "audit",
                f"{where}: events arrive (last {time.time() - last:.0f} s ago; {ingested or 0:.0f} ingested)",
            )
        if time.monotonic() > deadline:
            break
        await asyncio.sleep(1.0)
    seen = "never" if not last else f"last {time.time() - last:.0f} s ago"
    return Finding(
        "FAIL",
        "audit",
        f"{where}: no audit event reached the operator within {args.audit_timeout:.0f} s "
        f"({seen}); check the API server's audit webhook configuration and the "
        "receiver's certificate",
    )


# -- nodes --------------------------------------------------------------------------------------------------


async def check_nodes(http: httpx2.AsyncClient, pool: Mapping[str, str]) -> Finding:
    selector = ",".join(f"{k}={v}" for k, v in pool.items())
    r = await http.get("/api/v1/nodes", params={"labelSelector": selector})
    if r.status_code != 200:
        return Finding("FAIL", "nodes", f"listing nodes: HTTP {r.status_code}")
    nodes = r.json().get("items") or []
    if not nodes:
        return Finding(
            "FAIL",
            "nodes",
            f"no node carries {selector}: install the chart with nodePool.enabled "
            "(and kwok.enabled for the node simulator)",
        )
    ready = [
        n["metadata"]["name"]
        for n in nodes
        if any(
            c.get("type") == "Ready" and c.get("status") == "True"
            for c in (n.get("status") or {}).get("conditions") or []
        )
    ]
    if len(ready) < len(nodes):
        down = sorted({n["metadata"]["name"] for n in nodes} - set(ready))
        return Finding("FAIL", "nodes", f"not Ready: {', '.join(down)} (is the node simulator running?)")
    untainted = [
        n["metadata"]["name"]
        for n in nodes
        if not any(t.get("key") in pool for t in (n.get("spec") or {}).get("taints") or [])
    ]
    if untainted:
        return Finding(
            "WARN",
            "nodes",
            f"{len(nodes)} Ready, but not tainted: {', '.join(untainted)}; other pods "
            "may be scheduled where nothing runs (nodePool.taints)",
        )
    return Finding("OK", "nodes", f"{len(nodes)} simulated nodes Ready and tainted ({selector})")
