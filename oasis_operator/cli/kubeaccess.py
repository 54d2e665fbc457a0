"""How the command line reaches a cluster: the way kubectl does, through the client library.

Called by the commands that read EvaluationRuns (``get``, ``describe``, ``wait``, ``report``). The
kubeconfig is ``--kubeconfig``, else every file of ``$KUBECONFIG`` (a list, merged as kubectl merges
it: the first file to name a cluster, user, context or the current context wins; a listed file that
does not exist is skipped), else ``~/.kube/config``, else the pod's service account when running in a
cluster. ``--context`` picks a context; the namespace is ``-n``, else the context's, else ``default``.
Authentication (client certificates, tokens, token files, exec plugins such as cloud login helpers)
is lightkube's, so a kubeconfig that works with kubectl works here, with one limit of lightkube's:
exec plugins must speak ``client.authentication.k8s.io/v1beta1`` (or ``v1alpha1``), as the common
cloud login helpers do; a ``v1`` plugin gets a clear error naming the context.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
from lightkube.config import client_adapter
from lightkube.config.kubeconfig import KubeConfig
from lightkube.core.exceptions import ConfigError

from oasis_operator.cli.main import CliError

__all__ = ["Access", "add_flags", "connect", "kubeconfig_paths", "merge_kubeconfigs"]

DEFAULT_KUBECONFIG = Path("~/.kube/config")
#: Fields holding a file path, resolved against the directory of the file that declares them (kubectl
#: does the same), so a merged configuration keeps pointing at the right files.
PATH_FIELDS = {
    "clusters": ("certificate-authority",),
    "users": ("client-certificate", "client-key", "tokenFile"),
}
#: The EvaluationRuns of a namespace (the collection every run command reads).
RUNS = "/apis/oasis.dev/v1alpha1/namespaces/{ns}/evaluationruns"
SECTIONS = {"clusters": "cluster", "users": "user", "contexts": "context"}


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


def kubeconfig_paths(explicit: Path | None, env: Mapping[str, str]) -> list[Path]:
    """The kubeconfig files to read, in precedence order."""
    if explicit is not None:
        return [explicit.expanduser()]
    listed = [Path(p).expanduser() for p in env.get("KUBECONFIG", "").split(os.pathsep) if p]
    return listed or [DEFAULT_KUBECONFIG.expanduser()]


def merge_kubeconfigs(docs: Sequence[tuple[Path, Mapping[str, Any]]]) -> dict[str, Any]:
    """kubectl's merge of several kubeconfig documents (each with the file it came from): named
    entries and ``current-context`` from the first document that sets them; relative file paths made
    absolute against their own file's directory. Pure."""
    merged: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [],
        "users": [],
        "contexts": [],
    }
    for path, doc in docs:
        if not merged.get("current-context") and doc.get("current-context"):
            merged["current-context"] = doc["current-context"]
        for section, inner in SECTIONS.items():
            seen = {e.get("name") for e in merged[section]}
            for entry in doc.get(section) or []:
                if not isinstance(entry, Mapping) or entry.get("name") in seen:
                    continue
                body = dict(entry.get(inner) or {})
                for key in PATH_FIELDS.get(section, ()):
                    if isinstance(body.get(key), str) and not Path(body[key]).expanduser().is_absolute():
                        body[key] = str(path.parent / body[key])
                merged[section].append({"name": entry.get("name"), inner: body})
                seen.add(entry.get("name"))
    return merged


def _documents(explicit: Path | None) -> tuple[list[Path], list[tuple[Path, Mapping[str, Any]]]]:
    """The kubeconfig files to read and the documents of those that exist."""
    import yaml

    paths = kubeconfig_paths(explicit, os.environ)
    if explicit is not None and not paths[0].is_file():
        raise CliError(f"--kubeconfig {explicit}: no such file")
    found = [p for p in paths if p.is_file()]
    docs: list[tuple[Path, Mapping[str, Any]]] = []
    for p in found:
        try:
            doc = yaml.safe_load(p.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise CliError(f"kubeconfig {p}: {exc}") from None
        if not isinstance(doc, Mapping):
            raise CliError(f"kubeconfig {p}: expected a mapping (apiVersion: v1, kind: Config)")
        docs.append((p, doc))
    return paths, docs


def flattened(explicit: Path | None, context: str | None) -> dict[str, Any]:
    """One kubeconfig document, merged as kubectl merges its files, whose current context is
    ``context`` (default: the merged current context): what a child process is given."""
    paths, docs = _documents(explicit)
    if not docs:
        raise CliError(
            f"no kubeconfig: {', '.join(map(str, paths))} not found; pass --kubeconfig or set KUBECONFIG"
        )
    merged = merge_kubeconfigs(docs)
    chosen = context or merged.get("current-context")
    if chosen not in {c.get("name") for c in merged["contexts"]}:
        raise CliError(f"kubeconfig {', '.join(str(p) for p, _ in docs)}: no context {chosen!r}")
    merged["current-context"] = chosen
    return merged


def _load(explicit: Path | None, context: str | None) -> Any:
    paths, docs = _documents(explicit)
    if not docs:
        try:
            return KubeConfig.from_service_account().get(context)
        except ConfigError:
            raise CliError(
                f"no kubeconfig: {', '.join(map(str, paths))} not found and not running in a "
                "cluster; pass --kubeconfig or set KUBECONFIG"
            ) from None
    found = [p for p, _ in docs]
    try:
        return KubeConfig.from_dict(merge_kubeconfigs(docs), fname=found[0]).get(context)
    except ConfigError as exc:
        raise CliError(f"kubeconfig {', '.join(map(str, found))}: {exc}") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise CliError(
            f"kubeconfig {', '.join(map(str, found))}: malformed ({type(exc).__name__}: {exc})"
        ) from None


@contextmanager
def connect(args: argparse.Namespace, *, timeout: float = 10.0) -> Iterator[Access]:
    """The client for ``args.kubeconfig``/``args.context`` and the namespace to use; closed on exit."""
    config = _load(getattr(args, "kubeconfig", None), getattr(args, "context", None))
    try:
        http = client_adapter.Client(
            config, client_adapter.ConnectionParams(timeout=httpx2.Timeout(timeout), trust_env=False)
        )
    except ConfigError as exc:
        raise CliError(f"context {config.context_name}: {exc}") from None
    namespace = getattr(args, "namespace", None) or config.namespace
    with http:
        try:
            yield Access(http, namespace, config.context_name)
        except ConfigError as exc:  # raised lazily, e.g. by an exec plugin when the first request is sent
            raise CliError(f"context {config.context_name}: {exc}") from None
