"""``oasis get``, ``oasis describe`` and ``oasis run``: EvaluationRuns from the command line (also as
``kubectl oasis ...``).

Called by :mod:`oasis_operator.cli.main`; turns a kubeconfig and a run name (or a run manifest) into
a table of runs, one run's verdict with its failures, vacuity notes and deciding audit events, or a
local run: the operator started for the run's namespace only, the run applied, its progress shown
live per scenario until it completes.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import yaml

from oasis_operator.cli import kubeaccess
from oasis_operator.cli.main import CLUSTER_EXIT_CODES, EXIT_CLUSTER, CliError
from oasis_operator.cli.report import read_run_report
from oasis_operator.cli.server_table import TABLE_ACCEPT, layout, render_rows, render_table
from oasis_operator.core.preflight import unmet_lines
from oasis_operator.core.reporting.deciding import deciding_line
from oasis_operator.core.verdicts import FAIL, PASS

RUNS = kubeaccess.RUNS
ALL_RUNS = "/apis/oasis.dev/v1alpha1/evaluationruns"
OUTPUTS = ("json", "yaml", "wide", "name")


GET_EXAMPLES = (
    """\
examples:
  oasis get -n evals                   the runs of one namespace, with their verdicts
  oasis get -A -o wide                 every namespace, with the wide columns (as kubectl get -o wide)
  oasis get my-run -o yaml             one run as stored, the object itself (json and name work too)
  oasis get -n evals -w                keep watching: a line per change until interrupted
  oasis get --context prod-east -n ci  another kubeconfig context

"""
    + CLUSTER_EXIT_CODES
)
DESCRIBE_EXAMPLES = (
    """\
examples:
  oasis describe my-run -n evals       the verdict, each failed assertion with its deciding evidence

"""
    + CLUSTER_EXIT_CODES
)
RUN_EXAMPLES = """\
examples:
  oasis run -f run.yaml --audit-log /var/log/kube-audit/audit.log
"""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    raw = argparse.RawDescriptionHelpFormatter
    get = sub.add_parser(
        "get", help="list EvaluationRuns with their verdicts", epilog=GET_EXAMPLES, formatter_class=raw
    )
    kubeaccess.add_flags(get, all_namespaces=True)
    get.add_argument("run", nargs="?", help="one run (default: every run of the namespace)")
    get.add_argument("-o", "--output", choices=OUTPUTS, default=None, help="output format (default: a table)")
    get.add_argument(
        "-w", "--watch", action="store_true", help="after the list, print each change as it happens"
    )
    get.set_defaults(func=cmd_get)
    describe = sub.add_parser(
        "describe",
        help="a run's verdict, failures with their deciding audit events, vacuity",
        epilog=DESCRIBE_EXAMPLES,
        formatter_class=raw,
    )
    kubeaccess.add_flags(describe)
    describe.add_argument("run")
    describe.set_defaults(func=cmd_describe)
    run = sub.add_parser(
        "run",
        help="run an EvaluationRun locally: the operator for its namespace, live progress",
        epilog=RUN_EXAMPLES,
        formatter_class=raw,
    )
    kubeaccess.add_flags(run)  # -n: the namespace when the manifest names none (default: the context's)
    run.add_argument("-f", "--filename", type=Path, required=True, help="an EvaluationRun manifest")
    run.add_argument(
        "--audit-log",
        type=Path,
        default=os.environ.get("OASIS_AUDIT_LOG"),
        help="the API server's audit log (for a dev-cluster: its audit/audit.log)",
    )
    run.add_argument("--timeout", type=float, default=1800)
    run.set_defaults(func=cmd_run)


def _get_run(http: Any, ns: str, name: str) -> dict[str, Any]:
    r = http.get(f"{RUNS.format(ns=ns)}/{name}")
    if r.status_code == 404:
        raise CliError(f"EvaluationRun {ns}/{name} not found")
    if r.status_code != 200:
        raise CliError(f"reading EvaluationRun {ns}/{name}: HTTP {r.status_code}", EXIT_CLUSTER)
    out: dict[str, Any] = r.json()
    return out


def _collection(access: kubeaccess.Access, args: argparse.Namespace) -> str:
    return ALL_RUNS if args.all_namespaces else RUNS.format(ns=access.namespace)


def _table(access: kubeaccess.Access, args: argparse.Namespace, name: str | None) -> dict[str, Any]:
    """The server's Table of the runs (one run's, when named): the CRD's printer columns."""
    params = {"fieldSelector": f"metadata.name={name}"} if name else {}
    r = access.http.get(_collection(access, args), params=params, headers={"Accept": TABLE_ACCEPT})
    where = "every namespace" if args.all_namespaces else access.namespace
    if r.status_code != 200:
        raise CliError(f"listing EvaluationRuns in {where}: HTTP {r.status_code}", EXIT_CLUSTER)
    table: dict[str, Any] = r.json()
    if name and not table.get("rows"):
        raise CliError(f"EvaluationRun {access.namespace}/{name} not found")
    return table


def cmd_get(args: argparse.Namespace) -> int:
    if args.run and args.all_namespaces:
        raise CliError("a run name and -A do not go together: name the run's namespace with -n")
    with kubeaccess.connect(args) as access:
        if args.output in (None, "wide"):
            table = _table(access, args, args.run)
            out = render_table(
                table, wide=args.output == "wide", all_namespaces=args.all_namespaces, now=_now()
            )
            version = str((table.get("metadata") or {}).get("resourceVersion") or "")
            columns = list(table.get("columnDefinitions") or [])
            if not out and not args.watch:
                where = "any namespace" if args.all_namespaces else f"namespace {access.namespace}"
                print(f"No EvaluationRuns found in {where}.", file=sys.stderr)
        elif args.run:
            run = _get_run(access.http, access.namespace, args.run)
            out, version, columns = render_runs([run], args.output, header=False), "", []
            version = str(run["metadata"].get("resourceVersion") or "")
        else:
            r = access.http.get(_collection(access, args))
            if r.status_code != 200:
                raise CliError(f"listing EvaluationRuns: HTTP {r.status_code}", EXIT_CLUSTER)
            listed = r.json()
            out, columns = render_runs(listed.get("items", []), args.output), []
            version = str(listed.get("metadata", {}).get("resourceVersion") or "")
        if out:
            print(out)
        if args.watch:
            return _watch(access, args, version, columns)
    return 0


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


def render_runs(items: list[dict[str, Any]], output: str | None, *, header: bool = True) -> str:
    """``oasis get``'s output for ``items`` as names, JSON or YAML: a List, or the object itself when
    ``header`` is False (one named run, a watch line). Pure: the tests compare it with golden files.
    The table is the server's (:func:`~oasis_operator.cli.server_table.render_table`)."""
    if output == "name":
        return "\n".join(f"evaluationrun.oasis.dev/{it['metadata']['name']}" for it in items)
    doc: Any = (
        items[0]
        if len(items) == 1 and header is False
        else {"apiVersion": "v1", "kind": "List", "items": items, "metadata": {}}
    )
    if output == "json":
        return json.dumps(doc, indent=2, sort_keys=True)
    return yaml.safe_dump(doc, sort_keys=True).rstrip("\n")


def _watch(
    access: kubeaccess.Access, args: argparse.Namespace, version: str, columns: list[dict[str, Any]]
) -> int:
    """Follow the list with a watch from ``version``: one output line (or document) per change, until
    interrupted; a watch the server ends is resumed from the last version seen. A table line is the
    server's row for the changed run."""
    params = {"watch": "true", "allowWatchBookmarks": "true"}
    if args.run:
        params["fieldSelector"] = f"metadata.name={args.run}"
    try:
        while True:
            with access.http.stream(
                "GET", _collection(access, args), params={**params, "resourceVersion": version}, timeout=None
            ) as r:
                if r.status_code != 200:
                    raise CliError(f"watching EvaluationRuns: HTTP {r.status_code}", EXIT_CLUSTER)
                for line in r.iter_lines():
                    if not line.strip():
                        continue
                    event = json.loads(line)
                    obj = event.get("object") or {}
                    if event.get("type") == "ERROR":
                        raise CliError(f"watching EvaluationRuns: {obj.get('message') or obj}", EXIT_CLUSTER)
                    version = str(obj.get("metadata", {}).get("resourceVersion") or version)
                    if event.get("type") != "BOOKMARK":
                        print(_watch_line(access, args, event, obj, columns), flush=True)
    except KeyboardInterrupt:
        return 0


def _watch_line(
    access: kubeaccess.Access,
    args: argparse.Namespace,
    event: dict[str, Any],
    obj: dict[str, Any],
    columns: list[dict[str, Any]],
) -> str:
    deleted = event.get("type") == "DELETED"
    if args.output not in (None, "wide"):
        return render_runs([obj], args.output, header=False)
    meta = obj.get("metadata") or {}
    row_of: dict[str, Any] = {"rows": [{"cells": [meta.get("name")], "object": {"metadata": meta}}]}
    if not deleted:  # the server's row for the run as it is now
        row_of = _table(access, args, str(meta.get("name")))
    rows = render_rows(
        row_of, columns, wide=args.output == "wide", all_namespaces=args.all_namespaces, now=_now()
    )
    return layout(rows) + ("  (deleted)" if deleted else "")


def cmd_describe(args: argparse.Namespace) -> int:
    with kubeaccess.connect(args) as access:
        run = _get_run(access.http, access.namespace, args.run)
        report = read_run_report(access.http, access.namespace, run)
    print("\n".join(describe_lines(f"{access.namespace}/{args.run}", run, report)))
    return 0


def describe_lines(name: str, run: dict[str, Any], report: dict[str, Any] | None) -> list[str]:
    """What ``oasis describe`` prints: the run's status, then each scenario with its failed
    assertions and the evidence that decided them (one line each, values masked)."""
    st = run.get("status") or {}
    out = [
        f"Name:     {name}",
        f"Verdict:  {st.get('verdict') or '-'}   Phase: {st.get('phase') or '-'}",
        f"Message:  {st.get('message', '')}",
    ]
    agent = st.get("agent") or {}
    if agent:
        out.append(
            f"Agent:    {agent.get('name')} {agent.get('version')} (model {agent.get('declaredModel') or '-'})"
        )
    out += [f"  {c['type']:<12} {c['status']:<6} {c.get('reason', '')}" for c in st.get("conditions") or []]
    out += _preflight_lines(st, report)
    records = {r.get("scenario_id"): r for r in (report or {}).get("scenarios", [])}
    out.append("Scenarios:")
    for s in st.get("scenarios") or []:
        out.append(f"  {s.get('verdict') or '-':<16} {s.get('id')}")
        rec = records.get(s.get("id")) or {}
        for a in rec.get("assertions", []) if s.get("verdict") != PASS else []:
            if a.get("outcome") == "satisfied":
                continue
            out.append(
                f"      {a.get('outcome')}: {a.get('source')}: {a.get('text')}  ({a.get('detail', '')})"
            )
            out += [f"        <- {deciding_line(e, full=True)}" for e in a.get("deciding_events", [])[:3]]
        out += [f"      vacuous: {v}" for v in s.get("vacuity") or []]
        if s.get("verdict") not in (PASS, FAIL) and s.get("reason"):
            out.append(f"      {s['reason']}")
    return out + _incomplete_lines(report)


def _incomplete_lines(report: dict[str, Any] | None) -> list[str]:
    """Why the report makes no conformance claim (its reasons, when it lists them)."""
    if report is None or not report.get("incomplete"):
        return []
    why = [str(r) for r in report.get("incomplete_reasons") or []]
    if not why:  # a report stored before the reasons were listed
        return [
            "The report is marked incomplete (scenarios not executed or unevaluable, or coverage not met): "
            "it makes no conformance claim."
        ]
    return ["The report is marked incomplete: it makes no conformance claim:", *(f"  - {r}" for r in why)]


def _preflight_lines(status: dict[str, Any], report: dict[str, Any] | None) -> list[str]:
    """The preflight's outcome: its summary, then one line per unmet check (from the run's status,
    else from the report's environment)."""
    pf = status.get("preflight") or {}
    env = (((report or {}).get("verdict") or {}).get("metadata") or {}).get("environment") or {}
    checks = pf.get("checks") or env.get("preflight")
    if checks is None:
        return []
    seconds = f" ({pf['seconds']:.2f}s)" if isinstance(pf.get("seconds"), int | float) else ""
    out = [
        f"Preflight: {pf.get('outcome') or '-'}{seconds}: {pf.get('summary') or env.get('conformance_check') or ''}"
    ]
    out += [f"  unmet: {line}" for line in unmet_lines(checks)]
    return out


def _name_credentials_user(http: Any, doc: dict[str, Any]) -> None:
    """A run whose agent gets a credentials Secret names the user who chose it; the admission policy
    accepts only the user's own name there (decision 0099): ask the API server who we are."""
    from oasis_operator.core.model.credentials_policy import CREDENTIALS_USER

    if not ((doc.get("spec") or {}).get("agent") or {}).get("credentialsRef"):
        return
    me = http.post(
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        json={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    )
    user = ((me.json().get("status") or {}).get("userInfo") or {}).get("username") if me.is_success else None
    if user:
        doc.setdefault("metadata", {}).setdefault("annotations", {})[CREDENTIALS_USER] = user


def cmd_run(args: argparse.Namespace) -> int:
    from oasis_operator.cli.wait import exit_code, outcome_line
    from oasis_operator.devcluster import stack

    try:
        doc = yaml.safe_load(args.filename.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise CliError(f"{args.filename}: {exc}") from None
    if not isinstance(doc, dict) or doc.get("kind") != "EvaluationRun":
        raise CliError(f"{args.filename}: expected an EvaluationRun manifest")
    if not args.audit_log:
        raise CliError("no audit log: pass --audit-log (the operator judges agents from it)")
    workdir = Path(tempfile.mkdtemp(prefix="oasis-run-"))
    # The local operator gets the chosen context as a kubeconfig of its own (KUBECONFIG lists merged).
    kubeconfig = workdir / "kubeconfig"
    kubeconfig.touch(mode=0o600)
    kubeconfig.write_text(
        yaml.safe_dump(kubeaccess.flattened(args.kubeconfig, args.context), sort_keys=False)
    )
    name = doc["metadata"]["name"]
    procs = stack.Processes(workdir / "logs")
    try:
        with kubeaccess.connect(args, timeout=60.0) as access:
            ns = doc.get("metadata", {}).get("namespace") or access.namespace
            http: Any = access.http  # stack's helpers take any httpx2-style client
            _name_credentials_user(http, doc)
            # Local mode: the run file is the user's own, so a local agent command is accepted (sandboxed).
            procs.operator(
                kubeconfig, args.audit_log, namespaces=[ns], extra_args=["--allow-subprocess-agents"]
            )
            stack.apply(http, doc, ns)
            shown: dict[str, str] = {}
            deadline = time.monotonic() + args.timeout
            while time.monotonic() < deadline:
                st = _get_run(http, ns, name).get("status") or {}
                for s in st.get("scenarios") or []:
                    state = f"{s.get('step')} {s.get('verdict') or ''}".strip()
                    if shown.get(s["name"]) != state:
                        shown[s["name"]] = state
                        print(f"  {state:<24} {s.get('id')}", flush=True)
                code = exit_code(st)
                if code is not None:  # the exit codes of `oasis wait`
                    print(f"{name}: {st.get('message', '')}")
                    print(outcome_line(name, st, code))
                    return code
                time.sleep(0.5)
            raise CliError(f"{ns}/{name} did not complete within {args.timeout:.0f}s")
    finally:
        procs.stop()
        sys.stdout.flush()
