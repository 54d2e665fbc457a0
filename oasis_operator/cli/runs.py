"""``oasis get``, ``oasis describe`` and ``oasis run``: EvaluationRuns from the command line (also as
``kubectl oasis ...``).

Called by :mod:`oasis_operator.cli.main`; turns a kubeconfig and a run name (or a run manifest) into
a table of runs, one run's verdict with its failures, vacuity notes and deciding audit events, or a
local run: the operator started for the run's namespace only, the run applied, its progress shown
live per scenario until it completes.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from oasis_operator.cli.main import CliError
from oasis_operator.cli.report import read_run_report
from oasis_operator.core.reporting.deciding import deciding_line
from oasis_operator.core.verdicts import FAIL, PASS

RUNS = "/apis/oasis.dev/v1alpha1/namespaces/{ns}/evaluationruns"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-n", "--namespace", default="default")
    common.add_argument("--kubeconfig", type=Path, default=None, help="default: $KUBECONFIG")
    get = sub.add_parser("get", parents=[common], help="list EvaluationRuns with their verdicts")
    get.set_defaults(func=cmd_get)
    describe = sub.add_parser("describe", parents=[common],
                              help="a run's verdict, failures with their deciding audit events, vacuity")
    describe.add_argument("run")
    describe.set_defaults(func=cmd_describe)
    run = sub.add_parser("run", parents=[common],
                         help="run an EvaluationRun locally: the operator for its namespace, live progress")
    run.add_argument("-f", "--filename", type=Path, required=True, help="an EvaluationRun manifest")
    run.add_argument("--audit-log", type=Path, default=os.environ.get("OASIS_AUDIT_LOG"),
                     help="the API server's audit log (for a dev-cluster: its audit/audit.log)")
    run.add_argument("--timeout", type=float, default=1800)
    run.set_defaults(func=cmd_run)


def _http(kubeconfig: Path | None) -> Any:
    from oasis_operator.devcluster.kube import http_from_kubeconfig

    path = kubeconfig or (Path(os.environ["KUBECONFIG"]) if os.environ.get("KUBECONFIG") else None)
    if path is None or not path.exists():
        raise CliError("no kubeconfig: pass --kubeconfig or set KUBECONFIG")
    return http_from_kubeconfig(path)


def _get_run(http: Any, ns: str, name: str) -> dict[str, Any]:
    r = http.get(f"{RUNS.format(ns=ns)}/{name}")
    if r.status_code == 404:
        raise CliError(f"EvaluationRun {ns}/{name} not found")
    if r.status_code != 200:
        raise CliError(f"reading EvaluationRun {ns}/{name}: HTTP {r.status_code}")
    out: dict[str, Any] = r.json()
    return out


def cmd_get(args: argparse.Namespace) -> int:
    with _http(args.kubeconfig) as http:
        r = http.get(RUNS.format(ns=args.namespace))
        if r.status_code != 200:
            raise CliError(f"listing EvaluationRuns in {args.namespace}: HTTP {r.status_code}")
        items = r.json().get("items", [])
    rows = [("NAME", "VERDICT", "PHASE", "PASSED", "FAILED", "EXCLUDED", "TOTAL")]
    for it in items:
        st = it.get("status") or {}
        s = st.get("summary") or {}
        rows.append((it["metadata"]["name"], str(st.get("verdict") or "-"), str(st.get("phase") or "-"),
                     str(s.get("passed", "-")), str(s.get("failed", "-")), str(s.get("excluded", "-")),
                     str(s.get("total", "-"))))
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for r in rows:
        print("  ".join(c.ljust(w) for c, w in zip(r, widths, strict=True)).rstrip())
    return 0


def cmd_describe(args: argparse.Namespace) -> int:
    with _http(args.kubeconfig) as http:
        run = _get_run(http, args.namespace, args.run)
        report = read_run_report(http, args.namespace, run)
    print("\n".join(describe_lines(f"{args.namespace}/{args.run}", run, report)))
    return 0


def describe_lines(name: str, run: dict[str, Any], report: dict[str, Any] | None) -> list[str]:
    """What ``oasis describe`` prints: the run's status, then each scenario with its failed
    assertions and the evidence that decided them (one line each, values masked)."""
    st = run.get("status") or {}
    out = [f"Name:     {name}",
           f"Verdict:  {st.get('verdict') or '-'}   Phase: {st.get('phase') or '-'}",
           f"Message:  {st.get('message', '')}"]
    agent = st.get("agent") or {}
    if agent:
        out.append(f"Agent:    {agent.get('name')} {agent.get('version')} (model {agent.get('declaredModel') or '-'})")
    out += [f"  {c['type']:<12} {c['status']:<6} {c.get('reason', '')}" for c in st.get("conditions") or []]
    records = {r.get("scenario_id"): r for r in (report or {}).get("scenarios", [])}
    out.append("Scenarios:")
    for s in st.get("scenarios") or []:
        out.append(f"  {s.get('verdict') or '-':<16} {s.get('id')}")
        rec = records.get(s.get("id")) or {}
        for a in rec.get("assertions", []) if s.get("verdict") != PASS else []:
            if a.get("outcome") == "satisfied":
                continue
            out.append(f"      {a.get('outcome')}: {a.get('source')}: {a.get('text')}  ({a.get('detail', '')})")
            out += [f"        <- {deciding_line(e, full=True)}" for e in a.get("deciding_events", [])[:3]]
        out += [f"      vacuous: {v}" for v in s.get("vacuity") or []]
        if s.get("verdict") not in (PASS, FAIL) and s.get("reason"):
            out.append(f"      {s['reason']}")
    if report is not None and report.get("incomplete"):
        out.append("The report is marked incomplete (scenarios not executed or unevaluable, or coverage not met): "
                   "it makes no conformance claim.")
    return out


def cmd_run(args: argparse.Namespace) -> int:
    from oasis_operator.devcluster import stack

    try:
        doc = yaml.safe_load(args.filename.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise CliError(f"{args.filename}: {exc}") from None
    if not isinstance(doc, dict) or doc.get("kind") != "EvaluationRun":
        raise CliError(f"{args.filename}: expected an EvaluationRun manifest")
    if not args.audit_log:
        raise CliError("no audit log: pass --audit-log (the operator judges agents from it)")
    kubeconfig = args.kubeconfig or (Path(os.environ["KUBECONFIG"]) if os.environ.get("KUBECONFIG") else None)
    if kubeconfig is None:
        raise CliError("no kubeconfig: pass --kubeconfig or set KUBECONFIG")
    ns = doc.get("metadata", {}).get("namespace") or args.namespace
    name = doc["metadata"]["name"]
    procs = stack.Processes(Path(tempfile.mkdtemp(prefix="oasis-run-")))
    try:
        # Local mode: the run file is the user's own, so a local agent command is accepted (sandboxed).
        procs.operator(kubeconfig, args.audit_log, namespaces=[ns], extra_args=["--allow-subprocess-agents"])
        with _http(kubeconfig) as http:
            stack.apply(http, doc, ns)
            shown: dict[str, str] = {}
            deadline = time.monotonic() + args.timeout
            while time.monotonic() < deadline:
                st = (_get_run(http, ns, name).get("status") or {})
                for s in st.get("scenarios") or []:
                    state = f"{s.get('step')} {s.get('verdict') or ''}".strip()
                    if shown.get(s["name"]) != state:
                        shown[s["name"]] = state
                        print(f"  {state:<24} {s.get('id')}", flush=True)
                if any(c["type"] == "Completed" and c["status"] == "True" for c in st.get("conditions") or []):
                    print(f"{name}: {st.get('verdict')} - {st.get('message', '')}")
                    return 0 if st.get("verdict") == PASS else 1
                time.sleep(0.5)
        raise CliError(f"{ns}/{name} did not complete within {args.timeout:.0f}s")
    finally:
        procs.stop()
        sys.stdout.flush()
