"""How every command and the operator reach a Kubernetes API server: one loader, kubectl's rules.

Called by the command line (``cli/kubeaccess``: ``get``, ``describe``, ``wait``, ``report``, ``run``,
``evidence``, ``provider serve``), by ``oasis check`` and ``oasis operator run`` (``handlers/settings``)
and by the operator's target clusters. Turns the kubectl options (``--kubeconfig``, ``--context``) and
the environment into a :class:`ClusterAccess`: one context, from which come the lightkube client's
configuration, plain HTTP clients, kopf's connection and the endpoint agents' kubeconfigs point at.

Which credentials (kubectl's loading rules):

- ``--kubeconfig FILE`` alone when given (it must exist);
- else every file of ``$KUBECONFIG`` (a list, ``os.pathsep``-separated), merged as kubectl merges it:
  the first file to name a cluster, user, context or the current context wins, a listed file that does
  not exist is skipped, a relative path is resolved against the directory of its own file;
- else ``~/.kube/config``;
- when none of these files exists: the pod's ServiceAccount (``KUBERNETES_SERVICE_HOST`` and the token,
  CA and namespace mounted in ``service_account_dir``), as lightkube's ``from_service_account`` reads it.

``--context`` picks a context (default: the current one). Authentication is lightkube's
(``lightkube.config.client_adapter``): client certificates, tokens, exec credential plugins (API
versions ``client.authentication.k8s.io/v1beta1`` and ``v1alpha1``, a limit of lightkube's), basic
auth. One difference, kept on purpose: a token *file* (the ServiceAccount's, which the kubelet rotates)
is read again for every request, not only after a 401, so a rotated token is used at once. kopf's
connection is derived from the same context at each login (:meth:`ClusterAccess.connection_fields`;
kopf logs in again on a 401, which runs the exec plugin or reads the token file again). Decision 0106.
"""

from __future__ import annotations

import base64
import os
import ssl
from collections.abc import Generator, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import msgspec
import yaml
from lightkube.config import client_adapter
from lightkube.config.kubeconfig import KubeConfig, SingleConfig
from lightkube.config.models import Cluster, User
from lightkube.core.exceptions import ConfigError

__all__ = [
    "SERVICE_ACCOUNT_DIR",
    "AccessError",
    "ClusterAccess",
    "ClusterEndpoint",
    "flattened",
    "kubeconfig_paths",
    "merge_kubeconfigs",
]

#: Where Kubernetes mounts a pod's ServiceAccount credentials.
SERVICE_ACCOUNT_DIR = Path("/var/run/secrets/kubernetes.io/serviceaccount")
#: Fields holding a file path, resolved against the directory of the file that declares them (kubectl
#: does the same), so a merged configuration keeps pointing at the right files.
PATH_FIELDS = {
    "clusters": ("certificate-authority",),
    "users": ("client-certificate", "client-key", "tokenFile"),
}
SECTIONS = {"clusters": "cluster", "users": "user", "contexts": "context"}


@dataclass(frozen=True)
class ClusterEndpoint:
    """Where agents' kubeconfigs point: the server and its CA (base64 PEM)."""

    server: str
    ca_data: str


class AccessError(ValueError):
    """The cluster cannot be reached with what was given; the message names the file, context or field."""


def kubeconfig_paths(explicit: Path | str | None, environ: Mapping[str, str]) -> list[Path]:
    """The kubeconfig files to read, in precedence order."""
    if explicit:
        return [Path(explicit).expanduser()]
    listed = [Path(p).expanduser() for p in environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    if listed:
        return listed
    home = environ.get("HOME")
    return [Path(home) / ".kube" / "config"] if home else [Path("~/.kube/config").expanduser()]


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


def _documents(
    explicit: Path | str | None, environ: Mapping[str, str]
) -> tuple[list[Path], list[tuple[Path, Mapping[str, Any]]]]:
    """The kubeconfig files to read and the documents of those that exist."""
    paths = kubeconfig_paths(explicit, environ)
    if explicit and not paths[0].is_file():
        raise AccessError(f"--kubeconfig {explicit}: no such file")
    docs: list[tuple[Path, Mapping[str, Any]]] = []
    for p in (p for p in paths if p.is_file()):
        try:
            doc = yaml.safe_load(p.read_text())
        except (OSError, yaml.YAMLError) as exc:
            raise AccessError(f"kubeconfig {p}: {exc}") from None
        if not isinstance(doc, Mapping):
            raise AccessError(f"kubeconfig {p}: expected a mapping (apiVersion: v1, kind: Config)")
        docs.append((p, doc))
    return paths, docs


def flattened(
    explicit: Path | str | None, context: str | None, environ: Mapping[str, str] = os.environ
) -> dict[str, Any]:
    """One kubeconfig document, merged as kubectl merges its files, whose current context is
    ``context`` (default: the merged current context): what a child process is given."""
    paths, docs = _documents(explicit, environ)
    if not docs:
        raise AccessError(
            f"no kubeconfig: {', '.join(map(str, paths))} not found; pass --kubeconfig or set KUBECONFIG"
        )
    merged = merge_kubeconfigs(docs)
    chosen = context or merged.get("current-context")
    if chosen not in {c.get("name") for c in merged["contexts"]}:
        raise AccessError(f"kubeconfig {', '.join(str(p) for p, _ in docs)}: no context {chosen!r}")
    merged["current-context"] = chosen
    return merged


class _TokenFileAuth(httpx2.Auth):
    """A bearer token read from its file for every request (the kubelet rotates the file)."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def auth_flow(self, request: httpx2.Request) -> Generator[httpx2.Request, httpx2.Response, None]:
        request.headers["Authorization"] = f"Bearer {self.path.read_text().strip()}"
        yield request


@dataclass(frozen=True, eq=False)
class ClusterAccess:
    """One kubeconfig context (or the pod's ServiceAccount) and everything built from it."""

    config: SingleConfig
    #: The kubeconfig files it was read from (none in a pod).
    files: tuple[Path, ...] = ()
    service_account_dir: Path | None = None

    # -- loading ------------------------------------------------------------------------------------------
    @classmethod
    def discover(
        cls,
        kubeconfig: Path | str | None,
        service_account_dir: Path = SERVICE_ACCOUNT_DIR,
        environ: Mapping[str, str] = os.environ,
        context: str | None = None,
    ) -> ClusterAccess:
        """kubectl's loading rules (see the module's documentation); :class:`AccessError` names what is
        missing or wrong."""
        paths, docs = _documents(kubeconfig, environ)
        if docs:
            found = tuple(p for p, _ in docs)
            where = f"kubeconfig {', '.join(map(str, found))}"
            try:
                config = KubeConfig.from_dict(merge_kubeconfigs(docs), fname=found[0]).get(context)
            except ConfigError as exc:
                raise AccessError(f"{where}: {exc}") from None
            except (KeyError, TypeError, ValueError, msgspec.MsgspecError) as exc:
                raise AccessError(f"{where}: malformed ({type(exc).__name__}: {exc})") from None
            assert config is not None
            return cls(config=config, files=found)
        host = environ.get("KUBERNETES_SERVICE_HOST", "")
        if host and (service_account_dir / "token").is_file():
            return cls(
                config=_service_account_config(
                    service_account_dir, host, environ.get("KUBERNETES_SERVICE_PORT", "443")
                ),
                service_account_dir=service_account_dir,
            )
        raise AccessError(
            f"no cluster credentials: no kubeconfig ({', '.join(map(str, paths))} not found; pass "
            f"--kubeconfig or set KUBECONFIG), and not in a pod whose ServiceAccount token is mounted "
            f"at {service_account_dir}"
        )

    @classmethod
    def from_kubeconfig(cls, path: Path | str, context: str | None = None) -> ClusterAccess:
        """The context of one kubeconfig file (default: its current context)."""
        return cls.discover(path, SERVICE_ACCOUNT_DIR, {}, context)

    # -- what it names ------------------------------------------------------------------------------------
    @property
    def in_cluster(self) -> bool:
        return self.service_account_dir is not None

    @property
    def context(self) -> str:
        return str(self.config.context_name)

    @property
    def namespace(self) -> str:
        return str(self.config.namespace or "default")

    @property
    def server(self) -> str:
        return str(self.config.cluster.server)

    def _path(self, value: str) -> Path:
        return Path(str(self.config.abs_file(value)))

    def ca_pem(self) -> str:
        cluster = self.config.cluster
        if cluster.certificate_auth_data:
            return base64.b64decode(cluster.certificate_auth_data).decode()
        if cluster.certificate_auth:
            path = self._path(cluster.certificate_auth)
            try:
                return path.read_text()
            except OSError as exc:
                raise AccessError(
                    f"context {self.context}: certificate-authority {path}: {exc.strerror}"
                ) from None
        raise AccessError(
            f"context {self.context}: the cluster names no certificate authority "
            "(certificate-authority or certificate-authority-data); agents' kubeconfigs need one"
        )

    def endpoint(self) -> ClusterEndpoint:
        """The server and CA that agents' kubeconfigs point at (the same the operator uses)."""
        return ClusterEndpoint(server=self.server, ca_data=base64.b64encode(self.ca_pem().encode()).decode())

    def lightkube_config(self) -> SingleConfig:
        return self.config

    def secret_paths(self) -> tuple[Path, ...]:
        """Every file or directory holding one of the credentials."""
        if self.service_account_dir is not None:
            return (self.service_account_dir,)
        user = self.config.user
        named = (user.client_cert, user.client_key, user.token_file) if user is not None else ()
        return (*self.files, *(self._path(v) for v in named if v))

    # -- clients --------------------------------------------------------------------------------------------
    def check(self) -> None:
        """:class:`AccessError` naming a credential file that is missing (before the TLS library fails
        without naming it)."""
        cluster, user = self.config.cluster, self.config.user or User()
        for option, value in (
            ("certificate-authority", cluster.certificate_auth),
            ("client-certificate", user.client_cert),
            ("client-key", user.client_key),
            ("tokenFile", user.token_file),
        ):
            if value and not self._path(value).is_file():
                raise AccessError(f"context {self.context}: {option} {self._path(value)}: no such file")

    def _httpx_params(self, timeout: float, trust_env: bool) -> dict[str, Any]:
        self.check()
        params = client_adapter.ConnectionParams(timeout=httpx2.Timeout(timeout), trust_env=trust_env)
        try:
            out = params.httpx_params(self.config)
        except ConfigError as exc:
            raise AccessError(f"context {self.context}: {exc}") from None
        except (OSError, ssl.SSLError, ValueError) as exc:
            raise AccessError(f"context {self.context}: cannot load its TLS credentials: {exc}") from None
        if self.config.user is not None and self.config.user.token_file:
            out["auth"] = _TokenFileAuth(self._path(self.config.user.token_file))
        return out

    def http(self, timeout: float = 10.0, *, trust_env: bool = True) -> httpx2.AsyncClient:
        """An async HTTP client with this identity, based at the server (for requests with own headers)."""
        return httpx2.AsyncClient(**self._httpx_params(timeout, trust_env))

    def sync_http(self, timeout: float = 10.0, *, trust_env: bool = True) -> httpx2.Client:
        """The same, synchronous (the command line)."""
        return httpx2.Client(**self._httpx_params(timeout, trust_env))

    def bearer_token(self) -> str | None:
        """The bearer token of this identity now: the token, the token file read now, or the exec
        plugin run now (lightkube's own flow); None for certificates and basic auth."""
        user = self.config.user
        if user is None:
            return None
        if user.token_file:
            return self._path(user.token_file).read_text().strip()
        try:
            auth = client_adapter.user_auth(user)
            if auth is None:
                return None
            request = httpx2.Request("GET", self.server)
            next(auth.sync_auth_flow(request))
        except ConfigError as exc:
            raise AccessError(f"context {self.context}: {exc}") from None
        header = request.headers.get("Authorization", "")
        return header.removeprefix("Bearer ") if header.startswith("Bearer ") else None

    def connection_fields(self) -> dict[str, Any]:
        """The fields of kopf's ``ConnectionInfo`` for this identity, read now: the handlers' login
        builds kopf's connection from them at each login (kopf logs in again on a 401)."""
        cluster, user = self.config.cluster, self.config.user or User()
        info: dict[str, Any] = {"server": self.server, "default_namespace": self.config.context.namespace}
        if cluster.certificate_auth_data or cluster.certificate_auth:
            info["ca_data"] = self.ca_pem()
        else:
            info["insecure"] = bool(cluster.insecure)
        if user.client_cert_data:
            info["certificate_data"] = base64.b64decode(user.client_cert_data)
            info["private_key_data"] = base64.b64decode(user.client_key_data or "")
        elif user.client_cert:
            info["certificate_path"] = str(self._path(user.client_cert))
            info["private_key_path"] = str(self._path(user.client_key or ""))
        token = self.bearer_token()
        if token:
            info.update(token=token, scheme="Bearer")
        elif user.username:
            info.update(username=user.username, password=user.password)
        return info


def _service_account_config(directory: Path, host: str, port: str) -> SingleConfig:
    """lightkube's ``from_service_account``, with the service address from the given environment."""
    ns_file = directory / "namespace"
    host = f"[{host}]" if ":" in host else host
    config = KubeConfig.from_one(
        cluster=Cluster(server=f"https://{host}:{port}", certificate_auth=str(directory / "ca.crt")),
        # A token file, not its content: read again for every request (the kubelet rotates it).
        user=User(token_file=str(directory / "token")),
        namespace=ns_file.read_text().strip() if ns_file.is_file() else None,
    ).get()
    assert config is not None
    return config
