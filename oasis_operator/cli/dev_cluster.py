"""``oasis dev-cluster up | down | status | kubeconfig``: the embedded control plane on this machine.

Called by :mod:`oasis_operator.cli.main`; turns the sub-command into a started or stopped
:class:`~oasis_operator.devcluster.DevCluster` whose state lives in a named directory, so that a later
command (or another shell) finds it. ``up`` leaves the processes running after it returns.
"""

from __future__ import annotations

import argparse
import os
import time
from pathlib import Path

import httpx2

from oasis_operator.cli.main import CliError
from oasis_operator.devcluster import ClusterConfig, DevCluster, SetupError, load_state
from oasis_operator.devcluster.backends import BACKENDS, parse_selection
from oasis_operator.devcluster.cluster import remove_workdir
from oasis_operator.devcluster.kube import http_from_kubeconfig
from oasis_operator.devcluster.processes import pid_alive, terminate
from oasis_operator.handlers.settings import oasis_cache_root

# Components in start order; stopped in reverse.
_ORDER = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kwok")


def clusters_root() -> Path:
    # One definition: the operator hides this directory from local agent processes (decision 0098).
    return oasis_cache_root(os.environ) / "clusters"


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser(
        "dev-cluster",
        help="start, stop or inspect the embedded local control plane",
        description="A local Kubernetes control plane (etcd, kube-apiserver with auditing, controller "
        "manager, scheduler, simulated nodes) built from Go modules and run as processes.",
    )
    parser.add_argument("--name", default="default", help="cluster name (several can run at once)")
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    up = actions.add_parser("up", help="start the cluster (builds the binaries on first use)")
    up.add_argument("--nodes", type=int, default=3, help="number of simulated nodes (default 3)")
    up.add_argument("--port", type=int, default=None, help="API server port (default: a free one)")
    up.add_argument(
        "--backends",
        default="",
        metavar="all|NAME,...",
        help="tool-plane back-ends to start too: all, or some of "
        f"{','.join(BACKENDS)} (default: none); built on first use",
    )
    up.set_defaults(func=cmd_up)
    down = actions.add_parser("down", help="stop the cluster and delete its data")
    down.add_argument("--keep", action="store_true", help="keep the data directory (logs, audit log)")
    down.set_defaults(func=cmd_down)
    actions.add_parser("status", help="show the components and nodes").set_defaults(func=cmd_status)
    actions.add_parser("kubeconfig", help="print the path of the admin kubeconfig").set_defaults(
        func=cmd_kubeconfig
    )


def _workdir(args: argparse.Namespace) -> Path:
    return clusters_root() / str(args.name)


def _running(workdir: Path) -> dict[str, bool] | None:
    state = load_state(workdir)
    if state is None:
        return None
    return {name: pid_alive(pid) for name, pid in state.pids.items()}


def cmd_up(args: argparse.Namespace) -> int:
    workdir = _workdir(args)
    try:
        selected = parse_selection(args.backends)
    except SetupError as exc:
        raise CliError(str(exc)) from None
    alive = _running(workdir)
    if alive and all(alive.values()):
        print(f"dev-cluster '{args.name}' is already running")
        print(f"export KUBECONFIG={workdir / 'kubeconfig'}")
        return 0
    if alive:
        _stop(workdir)
    remove_workdir(workdir)
    workdir.mkdir(parents=True)
    started = time.monotonic()
    dev = DevCluster(
        ClusterConfig(
            workdir=workdir,
            nodes=args.nodes,
            apiserver_port=args.port,
            tie_to_parent=False,
            backends=selected,
        )
    )
    try:
        dev.start()
    except SetupError as exc:
        raise CliError(str(exc)) from None
    print(f"dev-cluster '{args.name}' is up in {time.monotonic() - started:.1f}s at {dev.server}")
    print(f"  nodes:     {', '.join(dev.nodes)}")
    print(f"  audit log: {dev.audit_log}")
    print(f"  logs:      {workdir / 'logs'}")
    if dev.backends:
        print("  back-ends:")
    for name, backend in dev.backends.items():
        urls = ", ".join(f"{k} {v}" for k, v in backend.endpoints().items())
        print(f"    {name + ':':<18} {urls}")
    if dev.backends:
        print(f"  tool plane: {dev.toolplane_file}  (oasis operator run --toolplane FILE)")
    print(f"export KUBECONFIG={dev.kubeconfig}")
    return 0


def _stop(workdir: Path) -> list[str]:
    state = load_state(workdir)
    if state is None:
        return []
    stopped = []
    # Back-ends first (they are clients of the control plane), then the control plane in reverse.
    names = [n for n in state.pids if n not in _ORDER] + list(reversed(_ORDER))
    for name in names:
        pid = state.pids.get(name)
        if pid and pid_alive(pid):
            terminate(pid)
            stopped.append(name)
    return stopped


def cmd_down(args: argparse.Namespace) -> int:
    workdir = _workdir(args)
    if load_state(workdir) is None:
        print(f"dev-cluster '{args.name}' is not running")
        return 0
    stopped = _stop(workdir)
    if not args.keep:
        remove_workdir(workdir)
    print(
        f"dev-cluster '{args.name}' stopped ({', '.join(stopped) or 'nothing was running'})"
        + ("" if args.keep else "; data removed")
    )
    return 0


def cmd_status(args: argparse.Namespace) -> int:
    workdir = _workdir(args)
    state = load_state(workdir)
    if state is None:
        print(f"dev-cluster '{args.name}' is not running")
        return 3
    healthy = True
    print(f"dev-cluster '{args.name}' ({state.server}, started {state.started_at})")
    for name in [*_ORDER, *sorted(n for n in state.pids if n not in _ORDER)]:
        pid = state.pids.get(name)
        alive = bool(pid) and pid_alive(pid or 0)
        healthy &= alive
        print(f"  {name:<24} {'running' if alive else 'STOPPED'}  pid {pid}")
    try:
        with http_from_kubeconfig(Path(state.kubeconfig), timeout=3) as http:
            ready = http.get("/readyz").status_code == 200
            nodes = http.get("/api/v1/nodes").json().get("items", [])
        print(f"  API server ready: {ready}")
        for n in nodes:
            cond = {c["type"]: c["status"] for c in n.get("status", {}).get("conditions", [])}
            print(f"  node {n['metadata']['name']:<18} Ready={cond.get('Ready', 'Unknown')}")
        healthy &= ready
    except (OSError, httpx2.HTTPError, ValueError, KeyError) as exc:
        print(f"  API server unreachable: {exc}")
        healthy = False
    return 0 if healthy else 1


def cmd_kubeconfig(args: argparse.Namespace) -> int:
    state = load_state(_workdir(args))
    if state is None:
        raise CliError(f"dev-cluster '{args.name}' is not running; start it with `oasis dev-cluster up`")
    print(state.kubeconfig)
    return 0
