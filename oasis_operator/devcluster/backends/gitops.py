"""GitOps: Flux's source-controller and kustomize-controller on the embedded API server, fed by a git
server (smart HTTP, github.com/fluxcd/gitkit) holding one directory of repositories per namespace.

Called by :mod:`oasis_operator.devcluster.backends`. The harness pushes a scenario's declared
manifests to ``<namespace>/<repo>.git`` and creates a GitRepository and a Kustomization in the
namespace; kustomize-controller then applies the manifests and, at every interval, re-applies them
over any direct edit (drift is corrected, and the correction is an audited write by the controller's
own identity). A credential reaches only its namespace's repositories.
"""

from __future__ import annotations

import datetime as dt
import secrets
import shutil
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import httpx2
import yaml

from oasis_operator.adapters.plumbing.apply import server_side_apply_sync
from oasis_operator.adapters.plumbing.git import GitFailed, push_tree
from oasis_operator.core.environment.gitops_deployer import DEPLOYER, deployer_manifests
from oasis_operator.core.environment.grants import namespace_rules
from oasis_operator.core.toolplane.gitops import (
    CREDENTIALS_FILE,
    FLUX_NAMESPACE,
    READ,
    REPOSITORIES,
    WRITE,
    flux_principals,
)
from oasis_operator.devcluster.backends.base import Backend, BackendContext, free_port, http_ok
from oasis_operator.devcluster.errors import SetupError

SYSTEM_NAMESPACE = FLUX_NAMESPACE
# Identities as a Flux installation's service accounts have them (both are cluster admins there).
SOURCE_USER, KUSTOMIZE_USER = flux_principals(SYSTEM_NAMESPACE)
FIELD_MANAGER = "oasis-gitops"


# -- the command line, shared with the Helm chart ------------------------------------------------------
# The chart (charts/oasis-operator, decision 0072) runs the same server as a sidecar of the operator's
# pod; tests/shipping/test_chart_gitops.py checks that its arguments are these.
def git_server_args(directory: Path, listen: str) -> list[str]:
    """The git server of the back-end's ``directory``: its repositories under ``repositories/``, its
    credentials in ``git-credentials`` (re-read per request), a repository made on its first push."""
    return [
        f"-listen={listen}",
        f"-root={directory / REPOSITORIES}",
        f"-credentials={directory / CREDENTIALS_FILE}",
        "-auto-create",
    ]


def kustomize_controller_lockdown(deployer: str = DEPLOYER) -> list[str]:
    """Flux's multi-tenancy lockdown of kustomize-controller (decision 0090), for a Flux that applies
    what an agent can push: a Kustomization that names no account is applied as the ``deployer``
    account of its own namespace (which holds nothing unless the harness made it, with the agent's
    rights), a Kustomization reads no source of another namespace, and kustomize fetches no remote
    base. The chart's README asks the same of a Flux installed beside the operator."""
    return [
        f"--default-service-account={deployer}",
        "--no-cross-namespace-refs=true",
        "--no-remote-bases=true",
    ]


def private_tmpdir(directory: Path, binary: str) -> Path:
    """A Flux controller's own temporary directory (its ``TMPDIR``), emptied first (decision 0075).

    kustomize-controller extracts every artifact it builds into ``$TMPDIR/kustomization-*`` and, when
    it starts, deletes every such directory it finds there, taking them for a previous process's
    leftovers. With the machine's ``/tmp`` shared, a controller of another stack (another session's,
    another test worker's, a second ``oasis dev-cluster up``) starting removed the directory a running
    one was building from: ``BuildFailed ... not a valid directory``, retried only an interval later.
    """
    tmp = directory / f"tmp-{binary}"
    shutil.rmtree(tmp, ignore_errors=True)
    tmp.mkdir(mode=0o700)
    return tmp


class GitOpsBackend(Backend):
    name = "gitops"
    components = ("git-server", "source-controller", "kustomize-controller")

    def __init__(self) -> None:
        super().__init__()
        self.git_url = ""
        self._root: Path | None = None
        self._credentials: Path | None = None
        self._grants: dict[tuple[str, str], tuple[str, str]] = {}  # (namespace, mode) -> (user, password)

    def start(self, ctx: BackendContext) -> None:
        from oasis_operator.devcluster.certs import issue_client_cert, write_kubeconfig
        from oasis_operator.devcluster.stack import install_crd_files

        cluster = ctx.cluster
        assert cluster.pki is not None
        d = ctx.directory(self.name)
        self._root = d / REPOSITORIES
        self._root.mkdir(exist_ok=True)
        self._credentials = d / CREDENTIALS_FILE
        self._write_credentials()

        crds = sorted(ctx.bins.crd_dir.glob("*.toolkit.fluxcd.io_*.yaml"))
        if not crds:
            raise SetupError(f"no Flux CRDs in {ctx.bins.crd_dir}")
        with cluster.admin_http() as http:
            install_crd_files(http, crds)
            resp = http.post("/api/v1/namespaces", json={"metadata": {"name": SYSTEM_NAMESPACE}})
            if resp.status_code not in (201, 409):
                raise SetupError(f"creating namespace {SYSTEM_NAMESPACE}: HTTP {resp.status_code}")

        git_port = free_port()
        self.git_url = f"http://127.0.0.1:{git_port}"
        self._run(
            ctx,
            "git-server",
            [str(ctx.bins.path("git-server")), *git_server_args(d, f"127.0.0.1:{git_port}")],
            http_ok(f"{self.git_url}/", expect=lambda r: r.status_code in (401, 403, 404)),
            "the git server",
        )

        now = dt.datetime.now(dt.UTC)
        for binary, user, extra in (
            ("source-controller", SOURCE_USER, self._storage_flags(d)),
            ("kustomize-controller", KUSTOMIZE_USER, kustomize_controller_lockdown()),
        ):
            cert = issue_client_cert(cluster.pki, binary, user, "system:masters", now)
            kc = write_kubeconfig(d / f"{binary}.kubeconfig", cluster.server, cluster.ca_file, binary, cert)
            tmp = private_tmpdir(d, binary)
            health = free_port()
            self._run(
                ctx,
                binary,
                [
                    str(ctx.bins.path(binary)),
                    "--watch-all-namespaces=true",
                    "--enable-leader-election=false",
                    f"--metrics-addr=127.0.0.1:{free_port()}",
                    f"--health-addr=127.0.0.1:{health}",
                    "--log-level=info",
                    *extra,
                ],
                http_ok(f"http://127.0.0.1:{health}/readyz"),
                f"{binary} /readyz",
                env={"KUBECONFIG": str(kc), "RUNTIME_NAMESPACE": SYSTEM_NAMESPACE, "TMPDIR": str(tmp)},
            )

    def _storage_flags(self, d: Path) -> list[str]:
        port = free_port()
        (d / "artifacts").mkdir(exist_ok=True)  # source-controller wants it to exist
        return [
            f"--storage-path={d / 'artifacts'}",
            f"--storage-addr=127.0.0.1:{port}",
            f"--storage-adv-addr=127.0.0.1:{port}",
        ]

    def endpoints(self) -> dict[str, str]:
        return {"git": self.git_url}

    # -- the harness side -------------------------------------------------------------------------
    def grant(self, namespace: str, mode: str = WRITE) -> tuple[str, str]:
        """A git credential (user, password) that reaches only ``namespace``'s repositories: to fetch
        and push (``write``), or to fetch only (``read``)."""
        if (namespace, mode) not in self._grants:
            user = f"{namespace}-git" if mode == WRITE else f"{namespace}-{mode}"
            self._grants[(namespace, mode)] = (user, secrets.token_urlsafe(18))
            self._write_credentials()
        return self._grants[(namespace, mode)]

    def _write_credentials(self) -> None:
        assert self._credentials is not None
        lines = [f"{u} {p} {ns} {mode}\n" for (ns, mode), (u, p) in sorted(self._grants.items())]
        tmp = self._credentials.with_suffix(".tmp")
        tmp.write_text("".join(lines))
        tmp.chmod(0o600)
        tmp.replace(self._credentials)

    def repo_url(self, namespace: str, repo: str) -> str:
        return f"{self.git_url}/{namespace}/{repo}.git"

    def push(
        self,
        namespace: str,
        repo: str,
        files: Mapping[str, str],
        message: str = "Update manifests",
        branch: str = "main",
    ) -> str:
        """Commit ``files`` (path -> text; the whole tree) to the repository; returns the commit id."""
        user, password = self.grant(namespace)
        url = self.repo_url(namespace, repo).replace("http://", f"http://{user}:{password}@", 1)
        try:
            return push_tree(url, files, message=message, branch=branch)
        except GitFailed as exc:
            raise SetupError(f"git {exc.command} for {namespace}/{repo}: {exc.stderr[:400]}") from None

    def sync(
        self,
        http: httpx2.Client,
        namespace: str,
        name: str,
        repo: str,
        path: str = "./",
        interval: str = "10s",
        branch: str = "main",
    ) -> None:
        """Create (or update) the GitRepository ``name`` for ``repo`` with its credential Secret (fetch
        only), and the Kustomization ``name`` applying ``path`` of it into ``namespace``, with drift
        correction, as the namespace's deployer account (a read-write grant there, decision 0090)."""
        user, password = self.grant(namespace, READ)
        secret = {
            "apiVersion": "v1",
            "kind": "Secret",
            "metadata": {"name": f"{name}-git", "namespace": namespace},
            "stringData": {"username": user, "password": password},
        }
        source = {
            "apiVersion": "source.toolkit.fluxcd.io/v1",
            "kind": "GitRepository",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "url": self.repo_url(namespace, repo),
                "ref": {"branch": branch},
                "interval": interval,
                "secretRef": {"name": f"{name}-git"},
            },
        }
        kustomization = {
            "apiVersion": "kustomize.toolkit.fluxcd.io/v1",
            "kind": "Kustomization",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {
                "sourceRef": {"kind": "GitRepository", "name": name},
                "path": path,
                "interval": interval,
                "prune": True,
                "targetNamespace": namespace,
                "serviceAccountName": DEPLOYER,
                "wait": False,
            },
        }
        deployer = [
            (m, _path_of(m))
            for m in deployer_manifests(namespace, namespace_rules(namespace, read_only=False))
        ]
        for doc, url in (
            *deployer,
            (secret, f"/api/v1/namespaces/{namespace}/secrets/{name}-git"),
            (source, f"/apis/source.toolkit.fluxcd.io/v1/namespaces/{namespace}/gitrepositories/{name}"),
            (
                kustomization,
                f"/apis/kustomize.toolkit.fluxcd.io/v1/namespaces/{namespace}/kustomizations/{name}",
            ),
        ):
            refused = server_side_apply_sync(http, url, doc, FIELD_MANAGER)
            if refused:
                raise SetupError(f"applying {doc['kind']} {namespace}/{name}: {refused}")


def _path_of(obj: dict[str, Any]) -> str:
    """The API path of one of the deployer's objects (a ServiceAccount, Role or RoleBinding)."""
    ns, name = obj["metadata"]["namespace"], obj["metadata"]["name"]
    if obj["kind"] == "ServiceAccount":
        return f"/api/v1/namespaces/{ns}/serviceaccounts/{name}"
    return f"/apis/{obj['apiVersion']}/namespaces/{ns}/{obj['kind'].lower()}s/{name}"


def manifests(*docs: dict[str, Any]) -> str:
    """Kubernetes objects as one multi-document YAML file."""
    return yaml.safe_dump_all(list(docs), sort_keys=False)
