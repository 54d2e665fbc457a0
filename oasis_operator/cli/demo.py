"""``oasis demo``: the main job on the embedded default, start to finish, in one command.

Called by :mod:`oasis_operator.cli.main` (and ``make demo``); turns nothing into a printed evaluation:
it starts the embedded control plane, installs the CRDs, imports the official Software Infrastructure
profile (Profile + 50 Scenarios), starts four reference agents and the operator as processes: ``careful``
and ``reckless`` (safe and unsafe), ``diligent`` and ``hasty`` (both safe, differing in competence);
applies one EvaluationRun per agent for the whole SI profile (capability runs only for an agent that
passes safety), waits with ``kubectl wait --for=condition=Completed``, prints ``kubectl get
evaluationruns``, every scenario's verdict and a capability table (core dimension scores per agent,
and how many capability scenarios were judged), writes the HTML and JUnit reports, and stops
everything it started.
"""

from __future__ import annotations

import argparse
import json
import shutil
import subprocess
import tempfile
import time
from pathlib import Path
from typing import Any

from oasis_operator.cli.main import CliError
from oasis_operator.cli.report import read_run_report
from oasis_operator.core.verdicts import NOT_EXECUTED_BY_PROVIDER, PASS
from oasis_operator.devcluster import ClusterConfig, DevCluster, SetupError, binaries, stack
from oasis_operator.devcluster.backends import BACKENDS

NAMESPACE = "evaluations"
PERSONAS = ("careful", "reckless", "diligent", "hasty")
#: The tool-plane back-ends the demo starts: every one the dev cluster runs (the operator finds them
#: through the tool-plane file, and the traffic-routing one's HTTPRoute API on the cluster itself).
DEMO_BACKENDS = tuple(BACKENDS)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("demo", help="evaluate four reference agents on the SI profile, locally")
    parser.add_argument("--out", default="out/demo", help="where the reports go (default: out/demo)")
    parser.add_argument("--keep", action="store_true", help="keep the cluster directory (logs, audit log)")
    parser.add_argument("--parallelism", type=int, default=8)
    parser.add_argument(
        "--profile",
        metavar="SOURCE",
        default=None,
        help=f"the SI profile: a directory, an archive or a Git URL (default: ${stack.SI_PROFILE_ENV}, "
        "else the spec checkout next to this repository)",
    )
    parser.add_argument("--profile-ref", metavar="REF", help="with a Git URL: the branch, tag or commit")
    parser.add_argument(
        "--scenario-clusters",
        choices=("shared", "targets"),
        default="shared",
        help="where scenarios run: the demo's one cluster (shared), or a control plane per scenario "
        "attempt that the operator starts, each with every back-end (targets; decision 0100)",
    )
    parser.add_argument(
        "--targets-most", type=int, default=4, help="with targets: how many may live at once (~1 GiB each)"
    )
    parser.add_argument(
        "--personas",
        default=",".join(PERSONAS),
        help=f"the reference agents to evaluate, comma-separated (default: {','.join(PERSONAS)})",
    )
    parser.add_argument(
        "--profile-path",
        metavar="PATH",
        help="the profile inside the archive or repository, e.g. profiles/software-infrastructure",
    )
    parser.set_defaults(func=cmd_demo)


def _kubectl(bins: binaries.Binaries, kubeconfig: Path, *args: str, timeout: float = 600) -> str:
    proc = subprocess.run(
        [str(bins.path("kubectl")), "--kubeconfig", str(kubeconfig), *args],
        capture_output=True,
        text=True,
        timeout=timeout,
    )
    if proc.returncode != 0:
        raise CliError(f"kubectl {' '.join(args)} failed: {proc.stderr.strip()}")
    return proc.stdout


def cmd_demo(args: argparse.Namespace) -> int:
    personas = tuple(p for p in args.personas.split(",") if p)
    if not personas or set(personas) - set(PERSONAS):
        raise CliError(f"--personas {args.personas}: expected some of {', '.join(PERSONAS)}")
    targets = args.scenario_clusters == "targets"
    if args.targets_most < 1:
        raise CliError(f"--targets-most {args.targets_most}: expected a number of at least 1")
    workdir = Path(tempfile.mkdtemp(prefix="oasis-demo-"))
    out = Path(args.out).resolve()
    out.mkdir(parents=True, exist_ok=True)
    started = time.monotonic()
    try:  # before anything starts: a missing profile is the first thing to say
        profile_dir = stack.si_profile(
            workdir / "profile", args.profile, ref=args.profile_ref, path=args.profile_path
        )
    except SetupError as exc:
        raise CliError(str(exc)) from None
    print(
        "[1/6] Starting the embedded control plane and its tool-plane back-ends (a first run builds them "
        "once: about 8 min for the control plane and 25 for the back-ends on 2 cores, each step printed "
        "as it goes)...",
        flush=True,
    )
    try:
        bins = binaries.resolve()
        # The log back-end (the node simulator's kubelet API behind the API server) shapes how the API
        # server starts; GitOps is Flux and a git server; dashboards need none. With them, all 21 SI
        # safety scenarios run.
        # With targets, this cluster only holds the runs: each target starts the back-ends itself.
        dev = DevCluster(ClusterConfig(workdir=workdir, backends=() if targets else DEMO_BACKENDS), bins)
        dev.start()
    except SetupError as exc:
        raise CliError(str(exc)) from None
    procs = stack.Processes(workdir / "logs")
    try:
        print(
            f"      up in {time.monotonic() - started:.1f}s at {dev.server} ({len(dev.nodes)} simulated nodes)"
        )
        with dev.admin_http() as http:
            print(
                "[2/6] Installing the CRDs and importing the Software Infrastructure profile...", flush=True
            )
            stack.install_crds(http)
            stack.ensure_namespace(http, NAMESPACE)
            docs = stack.import_si_profile(http, NAMESPACE, profile_dir)
            print(f"      Profile + {len(docs) - 1} Scenarios in namespace {NAMESPACE}")
            print("[3/6] Starting the reference agents and the operator...", flush=True)
            urls = {p: procs.agent(p) for p in personas}
            where = (
                [
                    "--scenario-clusters=targets",
                    f"--targets-root={workdir / 'targets'}",
                    f"--targets-most={args.targets_most}",
                    f"--targets-warm={min(2, args.targets_most)}",
                    f"--target-backends={','.join(DEMO_BACKENDS)}",
                ]
                if targets
                else ["--toolplane", str(dev.toolplane_file)]
            )
            procs.operator(dev.operator_kubeconfig, dev.audit_log, namespaces=[NAMESPACE], extra_args=where)
            print(
                "[4/6] Applying one EvaluationRun per agent (the whole SI profile, parallelism "
                f"{args.parallelism})...",
                flush=True,
            )
            t0 = time.monotonic()
            for persona, url in urls.items():
                # The whole profile: safety first; capability only if safety passes (the gate).
                stack.apply(
                    http,
                    stack.evaluation_run(
                        f"{persona}-agent", url, classification=None, parallelism=args.parallelism
                    ),
                    NAMESPACE,
                )
        print("[5/6] kubectl wait --for=condition=Completed evaluationrun --all ...", flush=True)
        _kubectl(
            bins,
            dev.kubeconfig,
            "-n",
            NAMESPACE,
            "wait",
            "--for=condition=Completed",
            "evaluationrun",
            "--all",
            "--timeout=1500s",
            timeout=1600,
        )
        print(f"      all runs completed in {time.monotonic() - t0:.1f}s\n")
        print("$ kubectl get evaluationruns -n", NAMESPACE)
        print(_kubectl(bins, dev.kubeconfig, "-n", NAMESPACE, "get", "evaluationruns"))
        with dev.admin_http() as http:
            runs = {}
            for persona in personas:
                run = http.get(
                    f"/apis/oasis.dev/v1alpha1/namespaces/{NAMESPACE}/evaluationruns/{persona}-agent"
                ).json()
                runs[persona] = run
                _print_run(run)
                _write_reports(http, run, out)
        print(capability_table(runs))
        print(f"[6/6] Reports written to {out}/ (open the .html files in a browser)")
    except (SetupError, TimeoutError) as exc:
        raise CliError(
            f"{exc}\n(component logs: {workdir / 'logs'}; rerun with --keep to keep them)"
        ) from None
    finally:
        procs.stop()
        dev.stop()
        if args.keep:
            print(f"Cluster directory kept: {workdir}")
        else:
            shutil.rmtree(workdir, ignore_errors=True)
    return 0


def _print_run(run: dict[str, Any]) -> None:
    st = run.get("status") or {}
    print(f"{run['metadata']['name']}: {st.get('verdict')} ({st.get('message', '')})")
    if st.get("capability"):
        print(f"  capability: {json.dumps(st['capability'], sort_keys=True)[:300]}")
    for s in st.get("scenarios", []):
        if s.get("verdict") in NOT_EXECUTED_BY_PROVIDER and s.get("classification") == "capability":
            continue  # summarised below
        verdict = s.get("verdict") or "-"
        reason = s.get("reason") or ""
        print(
            f"  {verdict:<16} {s.get('id')}"
            + (f"\n  {'':<16}   {reason[:150]}" if verdict != PASS and reason else "")
        )
    skipped = [
        s
        for s in st.get("scenarios", [])
        if s.get("classification") == "capability" and s.get("verdict") in NOT_EXECUTED_BY_PROVIDER
    ]
    if skipped:
        print(
            f"  ({len(skipped)} capability scenarios not executable by this provider yet: missing back-ends or "
            "verification rules; listed in the report)"
        )
    print()


def capability_table(runs: dict[str, dict[str, Any]]) -> str:
    """Core dimension scores per agent (``-``: not evaluated; an agent that failed safety has none),
    and per agent how many capability scenarios were judged (a PASS or FAIL verdict)."""
    names = list(runs)
    status = {n: runs[n].get("status") or {} for n in names}
    dims = sorted({d for n in names for d in ((status[n].get("capability") or {}).get("dimensions") or {})})
    width = max([len("capability judged"), *(len(d) for d in dims)])
    lines = [
        "Capability (core dimensions, 0..1):",
        "  " + f"{'':<{width}}" + "".join(f"{n:>11}" for n in names),
    ]
    for d in dims:
        cells = []
        for n in names:
            value = ((status[n].get("capability") or {}).get("dimensions") or {}).get(d)
            cells.append(f"{value:>11.3f}" if isinstance(value, int | float) else f"{'-':>11}")
        lines.append(f"  {d:<{width}}" + "".join(cells))
    judged = []
    for n in names:
        caps = [s for s in status[n].get("scenarios", []) if s.get("classification") == "capability"]
        done = sum(1 for s in caps if s.get("verdict") in ("PASS", "FAIL"))
        judged.append(f"{done:>8}/{len(caps):<2}")
    lines.append(f"  {'capability judged':<{width}}" + "".join(judged))
    return "\n".join(lines) + "\n"


#: The formats the demo writes beside each other for every run.
DEMO_FORMATS = ("json", "html", "junit")


def _write_reports(http: Any, run: dict[str, Any], out: Path) -> None:
    from oasis_operator.reports import FORMATS

    report = read_run_report(http, NAMESPACE, run)
    if report is None:
        return
    for name in DEMO_FORMATS:
        fmt = FORMATS[name]
        (out / f"{run['metadata']['name']}{fmt.suffix}").write_text(fmt.render(report))
