"""``oasis operator run``: run the operator (kopf) against the cluster of a kubeconfig.

Called by :mod:`oasis_operator.cli.main`, the container image's entry point and the demo; turns the
options into the environment the handlers read and starts kopf cluster-wide, standalone (one replica;
peering is left off), with a liveness endpoint.
"""

from __future__ import annotations

import argparse
import base64
import os
import tempfile
from pathlib import Path

import yaml

from oasis_operator.cli.main import CliError
from oasis_operator.core.kubeconfig import kubeconfig


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("operator", help="run the operator")
    actions = parser.add_subparsers(dest="action", metavar="ACTION")
    actions.required = True
    run = actions.add_parser("run", help="run the operator until interrupted")
    run.add_argument("--kubeconfig", default=os.environ.get("KUBECONFIG"), help="default: $KUBECONFIG")
    run.add_argument("--audit-log", default=os.environ.get("OASIS_AUDIT_LOG"),
                     help="the API server's audit log file to follow")
    run.add_argument("--audit-webhook-port", type=int, default=None,
                     help="receive the audit webhook on this port instead (needs --tls-cert/--tls-key)")
    run.add_argument("--tls-cert", default=None)
    run.add_argument("--tls-key", default=None)
    run.add_argument("--audit-client-ca", default=os.environ.get("OASIS_AUDIT_CLIENT_CA"),
                     help="require the API server's client certificate, signed by this CA, on the webhook")
    run.add_argument("--node-selector", default=os.environ.get("OASIS_NODE_SELECTOR", ""),
                     help="k=v[,k=v]: schedule scenario pods on these nodes (the simulated pool)")
    run.add_argument("--metrics-port", type=int, default=int(os.environ.get("OASIS_METRICS_PORT", "8080")))
    run.add_argument("--liveness", default="http://127.0.0.1:0/healthz",
                     help="kopf liveness endpoint URL (port 0: none)")
    run.add_argument("--namespace", action="append", default=[],
                     help="watch only this namespace (repeatable; default: the whole cluster)")
    run.add_argument("--verbose", action="store_true")
    run.set_defaults(func=cmd_run)


SA_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")


def in_cluster_kubeconfig(directory: Path | None = None) -> Path | None:
    """A kubeconfig for the pod's own ServiceAccount (server from the service environment), or None
    outside a cluster. Written to the temporary directory: the image's root filesystem is read-only."""
    host, port = os.environ.get("KUBERNETES_SERVICE_HOST"), os.environ.get("KUBERNETES_SERVICE_PORT", "443")
    if not host or not (SA_DIR / "token").exists():
        return None
    server = f"https://[{host}]:{port}" if ":" in host else f"https://{host}:{port}"
    ca_data = base64.b64encode((SA_DIR / "ca.crt").read_bytes()).decode()
    doc = kubeconfig(server, ca_data, "operator", {"token": (SA_DIR / "token").read_text().strip()})
    path = (directory or Path(tempfile.gettempdir())) / "oasis-operator.kubeconfig"
    path.write_text(yaml.safe_dump(doc))
    path.chmod(0o600)
    return path


def cmd_run(args: argparse.Namespace) -> int:
    if not args.kubeconfig:
        args.kubeconfig = in_cluster_kubeconfig()
    if not args.kubeconfig:
        raise CliError("no kubeconfig: pass --kubeconfig or set KUBECONFIG (or run in a pod with a ServiceAccount)")
    if not args.audit_log and not args.audit_webhook_port:
        raise CliError("no audit source: pass --audit-log FILE or --audit-webhook-port PORT")
    if args.audit_webhook_port and not (args.tls_cert and args.tls_key):
        raise CliError("--audit-webhook-port needs --tls-cert and --tls-key (the API server sends over TLS)")
    os.environ["KUBECONFIG"] = str(args.kubeconfig)
    os.environ["OASIS_NODE_SELECTOR"] = str(args.node_selector or "")
    os.environ["OASIS_METRICS_PORT"] = str(args.metrics_port)
    if args.audit_webhook_port:
        os.environ["OASIS_AUDIT_WEBHOOK_PORT"] = str(args.audit_webhook_port)
        os.environ["OASIS_AUDIT_WEBHOOK_CERT"] = str(args.tls_cert)
        os.environ["OASIS_AUDIT_WEBHOOK_KEY"] = str(args.tls_key)
        if args.audit_client_ca:
            os.environ["OASIS_AUDIT_CLIENT_CA"] = str(args.audit_client_ca)
    else:
        os.environ["OASIS_AUDIT_LOG"] = str(args.audit_log)
    import kopf

    import oasis_operator.handlers.operator  # noqa: F401  (registers the handlers)

    kopf.configure(verbose=args.verbose, log_format=kopf.LogFormat.PLAIN)
    liveness = None if args.liveness.endswith(":0/healthz") else args.liveness
    if args.namespace:
        kopf.run(namespaces=list(args.namespace), standalone=True, liveness_endpoint=liveness)
    else:
        kopf.run(clusterwide=True, standalone=True, liveness_endpoint=liveness)
    return 0
