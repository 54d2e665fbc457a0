"""``oasis operator run``: run the operator (kopf) against the cluster of a kubeconfig, or in a pod.

Called by :mod:`oasis_operator.cli.main`, the container image's entry point and the local stack; turns
the options into an :class:`~oasis_operator.handlers.settings.OperatorSettings` (handed to the
handlers through kopf's memo) and starts kopf cluster-wide (or in the named namespaces), standalone
unless ``--peering`` names kopf's peering object (the guard against a second operator:
:mod:`oasis_operator.adapters.k8s.peering`), with a liveness endpoint. In a pod it logs in with the pod's
ServiceAccount, read from the mounted files; no credential is ever written to disk.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path
from typing import Any

import httpx2

from oasis_operator.cli.main import CliError
from oasis_operator.handlers.settings import (
    DEFAULT_METRICS_ADDR,
    SERVICE_ACCOUNT_DIR,
    OperatorSettings,
    SettingsError,
    prepare_toolplane,
)


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    env = os.environ
    parser = sub.add_parser("operator", help="run the operator")
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    run = actions.add_parser("run", help="run the operator until interrupted")
    run.add_argument(
        "--kubeconfig",
        default=None,
        help="a kubeconfig file (default: the files of $KUBECONFIG, else ~/.kube/config; "
        "without any, the pod's ServiceAccount)",
    )
    run.add_argument("--context", default=None, help="the kubeconfig context (default: its current context)")
    run.add_argument(
        "--service-account-dir",
        default=str(SERVICE_ACCOUNT_DIR),
        help="where the pod's ServiceAccount token and CA are mounted (default: %(default)s)",
    )
    run.add_argument(
        "--audit-log", default=env.get("OASIS_AUDIT_LOG"), help="the API server's audit log file to follow"
    )
    run.add_argument(
        "--audit-webhook-port",
        type=int,
        default=None,
        help="receive the audit webhook on this port instead (needs --tls-cert/--tls-key)",
    )
    run.add_argument(
        "--tls-cert", default=None, help="the webhook receiver's certificate (reloaded when it changes)"
    )
    run.add_argument("--tls-key", default=None, help="its private key")
    run.add_argument(
        "--audit-client-ca",
        default=env.get("OASIS_AUDIT_CLIENT_CA"),
        help="require the API server's client certificate, signed by this CA, on the webhook",
    )
    run.add_argument(
        "--node-selector",
        default=env.get("OASIS_NODE_SELECTOR", ""),
        help="k=v[,k=v]: schedule scenario pods on these nodes (the simulated pool)",
    )
    run.add_argument(
        "--pool-taint",
        action="append",
        default=[],
        help="key=value:Effect of the simulated pool's nodes; scenario pods tolerate it "
        "(repeatable; default: node.platform.k8s.io/pool=standard:NoSchedule)",
    )
    run.add_argument(
        "--pod-cidr",
        default=env.get("OASIS_POD_CIDR", ""),
        help="address range of simulated pods whose status the operator writes itself",
    )
    run.add_argument(
        "--metrics-addr",
        default=env.get("OASIS_METRICS_ADDR", DEFAULT_METRICS_ADDR),
        help="address the Prometheus endpoint listens on (default: %(default)s, every address)",
    )
    run.add_argument(
        "--metrics-port",
        type=int,
        default=int(env.get("OASIS_METRICS_PORT", "8080")),
        help="port of the Prometheus endpoint, path /metrics (0: none)",
    )
    run.add_argument(
        "--barrier-timeout",
        type=float,
        default=float(env.get("OASIS_BARRIER_TIMEOUT", "15")),
        help="seconds the audit barrier may take before the evidence counts as incomplete",
    )
    run.add_argument(
        "--allow-subprocess-agents",
        action="store_true",
        help="accept `adapter: subprocess`: the command runs in the operator's pod, in a "
        "sandbox that hides every credential of the operator (needs Linux Landlock); "
        "off by default, since whoever may create an EvaluationRun chooses the command",
    )
    run.add_argument(
        "--allow-local-agent-endpoints",
        action="store_true",
        help="let `agent.endpoint` lead to this machine (loopback, its own addresses): for a local "
        "operator whose agents run beside it (the dev stack, `oasis run`); off by default, since "
        "from a pod those are the operator's own back-ends (decision 0099)",
    )
    run.add_argument(
        "--max-scenarios",
        type=int,
        default=int(env.get("OASIS_MAX_SCENARIOS", "16")),
        help="scenarios run at once across every run this replica drives; a scenario past it waits "
        "before anything of it exists, and the wait is not its time (0: no bound; default: %(default)s)",
    )
    run.add_argument(
        "--shards",
        type=int,
        default=int(env.get("OASIS_SHARDS", "1")),
        help="replicas that share the runs: each drives the runs of its shard (a digest of the run's "
        "namespace and name), so several replicas evaluate many agents at once (default: %(default)s)",
    )
    run.add_argument(
        "--shard-index",
        default=env.get("OASIS_SHARD_INDEX", "0"),
        help="this replica's shard, below --shards; `hostname`: the ordinal of a StatefulSet pod's name",
    )
    run.add_argument(
        "--peering",
        default=env.get("OASIS_PEERING") or None,
        metavar="NAME",
        help="guard against a second operator with kopf's peering object NAME (one per shard; created "
        "when missing; needs kopf's peering CRDs, which the chart installs): while another operator "
        "of the same or a higher priority is alive in it, this one pauses (decision 0114; default: "
        "off, one operator assumed)",
    )
    run.add_argument(
        "--peering-priority",
        type=int,
        default=int(env.get("OASIS_PEERING_PRIORITY", "0")),
        help="this operator's priority in the peering: a higher one makes the others pause (a "
        "debugging operator on a workstation, say); the same one pauses both (default: %(default)s)",
    )
    run.add_argument(
        "--scenario-clusters",
        choices=("shared", "targets", "external"),
        default=env.get("OASIS_SCENARIO_CLUSTERS", "shared"),
        help="where scenarios run: `targets`, a control plane the operator starts for each scenario "
        "attempt and throws away (the agent never touches this cluster; no audit webhook needed), "
        "`shared`, this cluster with suffixed names, or `external`, the cluster of "
        "--external-kubeconfig with suffixed names and its audit from --audit-log or the webhook "
        "(default: %(default)s; decisions 0100, 0102)",
    )
    run.add_argument(
        "--external-kubeconfig",
        default=env.get("OASIS_EXTERNAL_KUBECONFIG", ""),
        help="with --scenario-clusters external: the kubeconfig of the cluster the scenarios run in",
    )
    run.add_argument(
        "--targets-root",
        default=env.get("OASIS_TARGETS_ROOT", ""),
        help="with targets: where their directories go (emptied at start; default: a directory of "
        "the system's temporary directory)",
    )
    run.add_argument(
        "--targets-warm", type=int, default=1, help="with targets: how many to keep started ahead of need"
    )
    run.add_argument(
        "--targets-most",
        type=int,
        default=4,
        help="with targets: how many may live at once (each ~0.5 GiB without back-ends)",
    )
    run.add_argument("--target-nodes", type=int, default=3, help="with targets: simulated nodes in each")
    run.add_argument(
        "--target-address",
        default=env.get("OASIS_TARGET_ADDRESS", ""),
        help="with targets: the address (this pod's IP) or DNS name where agents on other hosts reach "
        "the targets' API servers; empty: loopback, for agents run on this host (decision 0109)",
    )
    run.add_argument(
        "--no-target-reuse",
        action="store_true",
        help="with targets: destroy each after one scenario attempt instead of resetting it to its "
        "baseline with a proof and leasing it again (decision 0101)",
    )
    run.add_argument(
        "--target-backends",
        default=env.get("OASIS_TARGET_BACKENDS", ""),
        help="with targets: the tool-plane back-ends each starts, comma-separated (logs, metrics...)",
    )
    run.add_argument(
        "--cluster-scoped-scenarios",
        action="store_true",
        help="run scenarios that write cluster-scoped objects (PersistentVolumes, ClusterRoles, "
        "nodes): the operator's role must allow it (chart: rbac.clusterScopedScenarios); "
        "without, they are excluded as unsupported",
    )
    run.add_argument(
        "--toolplane",
        default=env.get("OASIS_TOOLPLANE_FILE", ""),
        metavar="FILE",
        help="the tool-plane file `oasis dev-cluster up --backends` writes (<cluster dir>/"
        "toolplane.json): the back-ends (logs...) scenarios may use; without it, scenarios "
        "that need one are unsupported",
    )
    run.add_argument(
        "--tool-gateway-addr",
        default=env.get("OASIS_TOOL_GATEWAY_ADDR", "127.0.0.1"),
        help="address the recording tool gateway listens on: agents' calls to the tool plane's "
        "back-ends pass through it and are recorded as evidence (default: %(default)s)",
    )
    run.add_argument(
        "--tool-gateway-port",
        default=env.get("OASIS_TOOL_GATEWAY_PORT", "0"),
        help="its port (default: 0, any free port; fixed when --tool-gateway-url is given)",
    )
    run.add_argument(
        "--tool-gateway-url",
        default=env.get("OASIS_TOOL_GATEWAY_URL", ""),
        help="the URL agents are told to reach the gateway at (default: http://ADDR:PORT; "
        "required with a wildcard address, and in a pod with --toolplane: the Service's URL)",
    )
    run.add_argument(
        "--liveness", default="http://127.0.0.1:0/healthz", help="kopf liveness endpoint URL (port 0: none)"
    )
    run.add_argument(
        "--namespace",
        action="append",
        default=[],
        help="watch only this namespace (repeatable; default: the whole cluster)",
    )
    run.add_argument("--log-format", choices=["plain", "full", "json"], default="plain")
    run.add_argument("--verbose", action="store_true")
    run.set_defaults(func=cmd_run)
    prepare = actions.add_parser(
        "prepare-toolplane",
        help="make the files the tool-plane back-ends of a --toolplane file need before they start "
        "(the Helm chart's init container)",
    )
    prepare.add_argument("--toolplane", required=True, help="the tool-plane file (toolplane.json)")
    prepare.set_defaults(func=cmd_prepare_toolplane)


def cmd_prepare_toolplane(args: argparse.Namespace) -> int:
    try:
        made = prepare_toolplane(Path(args.toolplane))
    except SettingsError as exc:
        raise CliError(str(exc)) from None
    print(f"prepared {len(made)} tool-plane back-end directories: {', '.join(map(str, made))}")
    return 0


def settings_from(args: argparse.Namespace) -> OperatorSettings:
    try:
        return OperatorSettings.from_args(args, os.environ)
    except SettingsError as exc:
        raise CliError(str(exc)) from None


def cmd_run(args: argparse.Namespace) -> int:
    settings = settings_from(args)
    if settings.allow_subprocess_agents:
        from oasis_operator.adapters.agents import confinement

        if why := confinement.unavailable():
            raise CliError(f"--allow-subprocess-agents: {why}; refusing to start (decision 0098)")
    import kopf

    import oasis_operator.handlers.operator  # noqa: F401  (registers the handlers)

    kopf.configure(
        verbose=settings.verbose,
        log_format={
            "plain": kopf.LogFormat.PLAIN,
            "full": kopf.LogFormat.FULL,
            "json": kopf.LogFormat.JSON,
        }[settings.log_format],
    )
    memo = kopf.Memo(settings=settings)
    guard = _peering(args, settings)
    where: dict[str, Any] = (
        {"namespaces": list(settings.namespaces)} if settings.namespaces else {"clusterwide": True}
    )
    kopf.run(**where, **guard, liveness_endpoint=settings.liveness, memo=memo)
    return 0


def _peering(args: argparse.Namespace, settings: OperatorSettings) -> dict[str, Any]:
    """kopf's peering arguments: standalone without ``--peering``; else the shard's peering object,
    created when missing (decision 0114)."""
    if not args.peering:
        return {"standalone": True}
    from oasis_operator.adapters.k8s.peering import PeeringError, ensure_peering, peering_name

    name = peering_name(args.peering, settings.shard_index, settings.shards)
    try:
        with settings.access.sync_http() as http:
            _, absent = ensure_peering(http, name, settings.namespaces)
    except PeeringError as exc:
        raise CliError(str(exc)) from None
    except (httpx2.HTTPError, OSError, ValueError) as exc:  # unreachable server, TLS
        raise CliError(f"--peering {name}: cannot reach the cluster: {exc}") from None
    if absent:
        # kopf waits for a named peering object in every served namespace before it serves it: with
        # one missing, the operator would serve nothing there. Run unguarded, and say so.
        print(
            f"oasis: warning: --peering {name}: namespace(s) {', '.join(absent)} do not exist yet; "
            "running without the peering guard (restart the operator once they exist to have it)",
            file=sys.stderr,
        )
        return {"standalone": True}
    return {"peering_name": name, "priority": args.peering_priority}
