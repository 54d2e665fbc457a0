"""``oasis provider serve``: this provider's OASIS provider HTTP API, for another evaluator (decision 0058).

Called by :mod:`oasis_operator.cli.main`; turns a profile (a directory, an archive or a Git URL), the
cluster's kubeconfig and its audit log into a running :class:`~oasis_operator.handlers.provider_api.ProviderApi`
until interrupted. ``GET /v1/conformance`` answers with what this provider declares for the profile and
each requirement it does not meet, from the same preflight a run makes (decision 0057): the audit
round trip is made on every conformance query. Environments still provisioned when the server stops
are torn down.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import signal
import socket
import tempfile
from collections.abc import Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Any

from oasis_operator import __version__
from oasis_operator.cli import kubeaccess
from oasis_operator.cli.main import CliError

if TYPE_CHECKING:
    from oasis_operator.adapters.k8s.cluster_access import ClusterAccess
    from oasis_operator.core.model.profile import Profile

EXAMPLES = """\
examples:
  oasis provider serve --profile ../oasis-spec/profiles/software-infrastructure \\
      --audit-log /var/log/kube-audit/audit.log --token-file token.txt --listen 127.0.0.1:8090
  curl -H "Authorization: Bearer $(cat token.txt)" \\
      '127.0.0.1:8090/v1/conformance?profile=oasis-profile-software-infrastructure'
"""


def register(sub: argparse._SubParsersAction) -> None:  # type: ignore[type-arg]
    parser = sub.add_parser("provider", help="serve this provider's OASIS provider HTTP API")
    inner = parser.add_subparsers(dest="what", metavar="WHAT")
    inner.required = True
    serve = inner.add_parser(
        "serve",
        help="serve the provider API (conformance, provision, snapshot, inject-state, observe, teardown) over this cluster",
        epilog=EXAMPLES,
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    kubeaccess.add_flags(serve)
    serve.add_argument(
        "--profile", required=True, metavar="SOURCE", help="the profile: a directory, an archive or a Git URL"
    )
    serve.add_argument("--profile-ref", metavar="REF", help="with a Git URL: the branch, tag or commit")
    serve.add_argument("--profile-path", metavar="PATH", help="the profile inside the archive or repository")
    serve.add_argument("--audit-log", type=Path, required=True, help="the API server's audit log")
    serve.add_argument(
        "--token-file",
        type=Path,
        required=True,
        help="a file holding the bearer token evaluators must send (at least 16 characters)",
    )
    serve.add_argument(
        "--listen", default="127.0.0.1:8090", metavar="ADDR:PORT", help="default: 127.0.0.1:8090"
    )
    serve.add_argument(
        "--lease-namespace",
        default="kube-system",
        metavar="NS",
        help="where the server holds the Lease naming its environments, so an operator's orphan sweep on "
        "the same cluster spares them while the server runs (default: kube-system)",
    )
    serve.set_defaults(func=cmd_serve)


def _listen(text: str) -> tuple[str, int]:
    host, sep, port = text.rpartition(":")
    if not sep or not port.isdigit() or not 0 < int(port) < 65536:
        raise CliError(f"--listen {text}: expected ADDR:PORT, e.g. 127.0.0.1:8090")
    return host or "127.0.0.1", int(port)


def _profile(args: argparse.Namespace, work: Path) -> tuple[Profile, dict[str, dict[str, Any]]]:
    """The Profile and the scenario documents by id."""
    from oasis_operator.loading.profile_dir import import_profile, manifests
    from oasis_operator.loading.profile_source import ProfileSourceError, materialize

    try:
        directory = materialize(args.profile, work, ref=args.profile_ref, path=args.profile_path)
    except ProfileSourceError as exc:
        raise CliError(f"--profile: {exc}") from None
    imported = import_profile(directory)
    if imported.errors or imported.profile is None:
        raise CliError(f"--profile {args.profile}: " + "; ".join(f.render() for f in imported.errors[:5]))
    docs = manifests(imported)
    profile: Profile = imported.profile
    return profile, {d["spec"]["id"]: d["spec"] for d in docs[1:]}


def cmd_serve(args: argparse.Namespace) -> int:
    host, port = _listen(args.listen)
    try:
        token = args.token_file.read_text().strip()
    except OSError as exc:
        raise CliError(f"--token-file {args.token_file}: {exc}") from None
    if len(token) < 16:
        raise CliError(f"--token-file {args.token_file}: the token must be at least 16 characters")
    if not args.audit_log.is_file():
        raise CliError(f"--audit-log {args.audit_log}: no such file")
    with tempfile.TemporaryDirectory(prefix="oasis-provider-") as work:
        profile, scenarios = _profile(args, Path(work))
        access = kubeaccess.cluster(args)
        print(
            f"provider API for {profile.id} {profile.version} "
            f"({len(scenarios)} scenarios) on http://{host}:{port}",
            flush=True,
        )
        asyncio.run(
            _serve(access, args.audit_log, profile, scenarios, token, host, port, args.lease_namespace)
        )
    return 0


async def _serve(
    access: ClusterAccess,
    audit_log: Path,
    profile: Profile,
    scenarios: Mapping[str, Mapping[str, Any]],
    token: str,
    host: str,
    port: int,
    lease_namespace: str = "kube-system",
) -> None:
    from aiohttp import web
    from lightkube import AsyncClient
    from lightkube.core.exceptions import ApiError

    from oasis_operator.adapters.audit.source import FileAuditSource
    from oasis_operator.adapters.k8s.client import sentinel_sender, whoami
    from oasis_operator.adapters.k8s.environment import KubeEnvironment
    from oasis_operator.adapters.k8s.owner_leases import hold, renew
    from oasis_operator.core import preflight as pf
    from oasis_operator.core.environment.naming import suffix_for
    from oasis_operator.core.provider_api import conformance_answer
    from oasis_operator.handlers.provider_api import ProviderApi
    from oasis_operator.workflows.preflight import audit_round_trip

    audit = FileAuditSource(audit_log)
    await audit.start()
    http = access.http()
    client = AsyncClient(access.lightkube_config(), field_manager="oasis-operator")  # as the operator applies
    ep = access.endpoint()
    send = sentinel_sender(http)
    env = KubeEnvironment(client, server=ep.server, ca_data=ep.ca_data)
    facts_box: dict[str, pf.ProviderFacts] = {}

    def conformance(asked: str | None) -> Mapping[str, Any] | None:
        if asked not in (None, profile.id):
            return None
        return conformance_answer(profile, facts_box["facts"], __version__)

    # The audit round trip is made once at start (a server whose audit stream is dead says so in its
    # conformance answer) and again before every audit observation (the barrier).
    facts_box["facts"] = pf.ProviderFacts(audit=await audit_round_trip(audit, send, 15.0))
    service = ProviderApi(
        env=env,
        audit=audit,
        send_sentinel=send,
        scenarios=scenarios,
        conformance=conformance,
        token=token,
        principal=await whoami(http) or None,  # who provisions and injects (never the agent)
    )
    runner = web.AppRunner(service.app(), access_log=None)
    await runner.setup()
    await web.TCPSite(runner, host, port).start()
    stop = asyncio.Event()
    loop = asyncio.get_running_loop()
    for sig in (signal.SIGINT, signal.SIGTERM):
        with contextlib.suppress(NotImplementedError):
            loop.add_signal_handler(sig, stop.set)
    # The Lease that keeps an operator's orphan sweep off this server's environments while it runs.
    holder = f"{socket.gethostname()}:{port}"
    lease_name = f"oasis-provider-api-{suffix_for(holder)}"
    try:
        await renew(client, lease_namespace, lease_name, holder, ())
    except ApiError as exc:
        await runner.cleanup()
        raise CliError(
            f"--lease-namespace {lease_namespace}: cannot hold Lease {lease_name}: {exc.status.message}"
        ) from None
    lease = asyncio.create_task(hold(client, lease_namespace, lease_name, holder, service.owners, stop))
    try:
        await stop.wait()
    finally:
        await service.close()
        stop.set()
        await asyncio.gather(lease, return_exceptions=True)
        await runner.cleanup()
        await client.close()
        await http.aclose()
        await audit.stop()
