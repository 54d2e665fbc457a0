"""How the command line reaches a cluster: the shared loader, kubectl's flags, one-line errors.

Called by the commands that read EvaluationRuns (``get``, ``describe``, ``wait``, ``report``,
``evidence``, ``run``) and by ``provider serve``. The kubeconfig rules, contexts and authentication
are :mod:`oasis_operator.adapters.k8s.cluster_access`'s, the same the operator and ``oasis check``
use: ``--kubeconfig``, else every file of ``$KUBECONFIG`` merged, else ``~/.kube/config``, else the
pod's ServiceAccount; ``--context`` picks a context; the namespace is ``-n``, else the context's,
else ``default``. Everything that keeps the cluster from being read (no kubeconfig, a missing
credential file, an exec plugin failing, a refused connection, a TLS failure) ends the command with
one line naming what failed and exit code :data:`~oasis_operator.cli.main.EXIT_CLUSTER`.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from lightkube.core.exceptions import ConfigError

from oasis_operator.adapters.k8s import cluster_access
from oasis_operator.adapters.k8s.cluster_access import (
    SERVICE_ACCOUNT_DIR,
    AccessError,
    ClusterAccess,
    kubeconfig_paths,
    merge_kubeconfigs,
)
from oasis_operator.cli.main import EXIT_CLUSTER, CliError

__all__ = [
    "Access",
    "add_flags",
    "cluster",
    "connect",
    "flattened",
    "kubeconfig_paths",
    "merge_kubeconfigs",
    "unreachable",
]

#: The EvaluationRuns of a namespace (the collection every run command reads).
RUNS = "/apis/oasis.dev/v1alpha1/namespaces/{ns}/evaluationruns"


@dataclass(frozen=True)
class Access:
    """An HTTP client for the chosen context and the namespace the command works in."""

    http: httpx2.Client
    namespace: str
    context: str


def add_flags(parser: argparse.ArgumentParser, *, all_namespaces: bool = False) -> None:
    """The connection flags every cluster command takes (kubectl's names)."""
    parser.add_argument(
        "--kubeconfig",
        type=Path,
        default=None,
        help="a kubeconfig file (default: the files of $KUBECONFIG, else ~/.kube/config)",
    )
    parser.add_argument(
        "--context", default=None, help="the kubeconfig context (default: its current context)"
    )
    parser.add_argument(
        "-n",
        "--namespace",
        default=None,
        help="the namespace (default: the context's namespace, else default)",
    )
    if all_namespaces:
        parser.add_argument("-A", "--all-namespaces", action="store_true", help="every namespace")


def flattened(explicit: Path | None, context: str | None) -> dict[str, Any]:
    """One kubeconfig document, merged as kubectl merges its files, whose current context is
    ``context``: what a child process (the local operator, the provider) is given."""
    try:
        return cluster_access.flattened(explicit, context)
    except AccessError as exc:
        raise CliError(str(exc), EXIT_CLUSTER) from None


def unreachable(server: str, context: str, exc: Exception) -> CliError:
    """The one line for a server that cannot be reached (refused, unknown host, TLS, timeout)."""
    reason = str(exc) or type(exc).__name__
    return CliError(f"cannot reach the API server {server} (context {context}): {reason}", EXIT_CLUSTER)


def cluster(args: argparse.Namespace) -> ClusterAccess:
    """The context ``args.kubeconfig``/``args.context`` name, checked (its credential files exist and
    its cluster names a CA) for a command that makes its own clients."""
    try:
        access = ClusterAccess.discover(
            getattr(args, "kubeconfig", None), SERVICE_ACCOUNT_DIR, os.environ, getattr(args, "context", None)
        )
        access.check()
        access.endpoint()
    except AccessError as exc:
        raise CliError(str(exc), EXIT_CLUSTER) from None
    return access


@contextmanager
def connect(args: argparse.Namespace, *, timeout: float = 10.0) -> Iterator[Access]:
    """The client for ``args.kubeconfig``/``args.context`` and the namespace to use; closed on exit.
    Errors reaching the cluster inside the block become one-line :class:`CliError` s."""
    try:
        access = ClusterAccess.discover(
            getattr(args, "kubeconfig", None),
            SERVICE_ACCOUNT_DIR,
            os.environ,
            getattr(args, "context", None),
        )
        http = access.sync_http(timeout, trust_env=False)
    except AccessError as exc:
        raise CliError(str(exc), EXIT_CLUSTER) from None
    namespace = getattr(args, "namespace", None) or access.namespace
    with http:
        try:
            yield Access(http, namespace, access.context)
        except ConfigError as exc:  # raised lazily, e.g. by an exec plugin when the first request is sent
            raise CliError(f"context {access.context}: {exc}", EXIT_CLUSTER) from None
        except httpx2.TransportError as exc:
            raise unreachable(access.server, access.context, exc) from None
        except OSError as exc:  # an exec plugin that cannot be started
            raise CliError(f"context {access.context}: {exc}", EXIT_CLUSTER) from None
