"""The operator's configuration, typed, in one place: how it reaches the API server, where its audit
stream comes from, where it serves metrics, where scenario pods go, and what agents it accepts.

Built once by ``oasis operator run`` from its options (:meth:`OperatorSettings.from_args`) and handed
to the kopf handlers through kopf's memo; nothing is passed through ``os.environ``.

How the operator reaches its cluster is :class:`ClusterAccess`, the loader every command shares
(:mod:`oasis_operator.adapters.k8s.cluster_access`: kubectl's loading rules, ``--context``, exec
plugins, a rotated ServiceAccount token read again). Credentials are never written anywhere.
:meth:`ClusterAccess.secret_paths` names every file that holds a credential, so that an agent run as
a local process can be kept away from all of them.
"""

from __future__ import annotations

import ipaddress
import json
import os
import re
import tempfile
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, TypeVar

import httpx2

from oasis_operator.adapters.k8s.cluster_access import SERVICE_ACCOUNT_DIR, AccessError, ClusterAccess
from oasis_operator.adapters.plumbing.extras import MissingExtra
from oasis_operator.adapters.toolplane import FACTORIES, FileEntry
from oasis_operator.adapters.toolplane.factory import EntryError
from oasis_operator.core.environment.manifests import POOL_TAINT, parse_selector, parse_taint
from oasis_operator.core.model.base import DNS_LABEL_PATTERN
from oasis_operator.core.toolplane import registry

__all__ = [
    "DEFAULT_METRICS_ADDR",
    "SERVICE_ACCOUNT_DIR",
    "TOOLPLANE_FILE",
    "AccessError",
    "AuditSettings",
    "ClusterAccess",
    "GatewaySettings",
    "OperatorSettings",
    "SettingsError",
    "ToolPlaneSettings",
    "connection_info",
    "prepare_toolplane",
]

_S = TypeVar("_S")

#: The metrics endpoint listens on every address: Prometheus scrapes it through the pod's address.
DEFAULT_METRICS_ADDR = "0.0.0.0"


class SettingsError(ValueError):
    """A setting is missing or malformed; the message names the option and what was expected."""


def connection_info(access: ClusterAccess) -> Any:
    """kopf's connection for the operator's identity, read now (its login handler; kopf asks again on
    a 401, so a rotated token or an exec plugin's new credential is used)."""
    import kopf

    return kopf.ConnectionInfo(**access.connection_fields())


@dataclass(frozen=True)
class AuditSettings:
    """The audit stream: a log file to follow, or the webhook receiver (TLS, optionally mutual)."""

    log: Path | None = None
    webhook_port: int | None = None
    webhook_addr: str = "0.0.0.0"
    cert: Path | None = None
    key: Path | None = None
    client_ca: Path | None = None

    def secret_paths(self) -> tuple[Path, ...]:
        return tuple(p for p in (self.cert, self.key, self.client_ca) if p is not None)


#: The tool-plane file `oasis dev-cluster up --backends` writes beside the cluster's state.
TOOLPLANE_FILE = "toolplane.json"


@dataclass(frozen=True)
class ToolPlaneSettings:
    """Where the operator finds the tool-plane back-ends (decision 0052). Read from the JSON file
    ``oasis dev-cluster up --backends`` writes (``<cluster dir>/toolplane.json``)::

        {"backends": {"logs": {"directory": "/.../backends/logs", "endpoints": {...}}, ...}}

    Each configured back-end's entry is checked against its registry row (an existing ``directory``
    holding what the row names, the endpoints it names, the back-ends it builds on), then made into
    the back-end's own settings by its factory. A back-end that is not in the file is not configured:
    the scenarios that need it stay UNSUPPORTED, naming it. Built-in and discovered back-ends need no
    entry (the operator has the first always and finds the second on the cluster)."""

    source: Path | None = None
    #: Configured back-end -> its settings (a dataclass of its adapter module).
    backends: Mapping[str, object] = field(default_factory=dict)
    #: Every back-end the file names, with its endpoints (name -> URL), as written.
    endpoints: Mapping[str, Mapping[str, str]] = field(default_factory=dict)

    @staticmethod
    def _read(path: Path) -> tuple[dict[str, Any], dict[str, dict[str, str]]]:
        """The file's back-ends (name -> settings) and their endpoints (name -> endpoint -> URL)."""
        try:
            doc = json.loads(path.read_text())
        except OSError as exc:
            raise SettingsError(f"--toolplane {path}: cannot read it ({exc.strerror})") from None
        except ValueError as exc:
            raise SettingsError(f"--toolplane {path}: not JSON ({exc})") from None
        backends = doc.get("backends") if isinstance(doc, dict) else None
        if not isinstance(backends, dict):
            raise SettingsError(
                f"--toolplane {path}: field backends: expected a mapping of back-end name to its settings"
            )
        endpoints: dict[str, dict[str, str]] = {}
        for name, entry in backends.items():
            if not isinstance(entry, dict) or not isinstance(entry.get("endpoints", {}), dict):
                raise SettingsError(
                    f"--toolplane {path}: field backends.{name}: expected a mapping with "
                    "`endpoints` (name -> URL)"
                )
            endpoints[str(name)] = {str(k): str(v) for k, v in entry.get("endpoints", {}).items()}
        return backends, endpoints

    @classmethod
    def load(cls, path: Path) -> ToolPlaneSettings:
        backends, endpoints = cls._read(path)
        entries = {
            name: _checked_entry(path, registry.BY_NAME[name], backends, endpoints[name])
            for name in backends
            if name in registry.CONFIGURED
        }
        settings = {name: _parsed(path, entry) for name, entry in entries.items()}
        return cls(source=path, backends=settings, endpoints=endpoints)

    def of(self, kind: type[_S]) -> _S | None:
        """The settings of the back-end whose settings are a ``kind`` (None: it is not configured)."""
        return next((s for s in self.backends.values() if isinstance(s, kind)), None)


def _checked_entry(
    path: Path, row: registry.Backend, backends: Mapping[str, Any], endpoints: Mapping[str, str]
) -> FileEntry:
    """A configured back-end's entry, checked against its row: the back-ends it builds on are in the
    file, its directory exists and holds what the row names, its endpoints are there."""
    where = f"--toolplane {path}: field backends.{row.name}"
    entry = backends[row.name]
    spec = row.entry or registry.Entry(directory=False)
    if missing := [r for r in row.requires if r not in backends]:
        raise SettingsError(f"{where}: expected the {', '.join(missing)} back-end as well (it builds on it)")
    directory = None
    if spec.directory:
        directory = _directory(where, entry.get("directory"), spec.holds)
    for name in spec.endpoints:
        if not endpoints.get(name):
            raise SettingsError(f"{where}.endpoints.{name}: expected the URL of its {name} endpoint")
    return FileEntry(row.name, directory, endpoints, entry)


def _directory(where: str, value: Any, holds: str) -> Path:
    """``value`` as an existing directory holding ``holds`` (a directory if it ends with ``/``)."""
    inside = Path(str(value)) / holds.rstrip("/") if holds else None
    there = isinstance(value, str) and Path(value).is_dir()
    if there and inside is not None:
        there = inside.is_dir() if holds.endswith("/") else inside.is_file()
    if not there:
        holding = f" holding {holds}" if holds else ""
        raise SettingsError(f"{where}.directory: expected an existing directory{holding} (found {value!r})")
    return Path(str(value))


def _parsed(path: Path, entry: FileEntry) -> object:
    """The back-end's own settings, made by its factory from the checked entry."""
    parse = FACTORIES[entry.name].parse
    if parse is None:  # pragma: no cover - a configured back-end's factory parses its entry
        raise SettingsError(f"--toolplane {path}: the {entry.name} back-end takes no entry")
    try:
        return parse(entry)
    except EntryError as exc:
        raise SettingsError(
            f"--toolplane {path}: field backends.{entry.name}.{exc.field}: expected {exc.expected} "
            f"(found {exc.found!r})"
        ) from None
    except MissingExtra as exc:  # the back-end's library is an extra that is not installed
        raise SettingsError(f"--toolplane {path}: backends.{entry.name}: {exc}") from None


def toolplane_secret_paths(settings: ToolPlaneSettings) -> tuple[Path, ...]:
    """What an agent run as a local process must never read of the tool plane: the tool-plane file's
    directory (a dev cluster's: its PKI and kubeconfigs sit beside it) and every back-end's directory
    (the database's administrator password, the git server's credentials, vmauth's grants and reload
    key, other scenarios' logs)."""
    if settings.source is None:
        return ()
    backends, _endpoints = ToolPlaneSettings._read(settings.source)
    found = [settings.source.resolve().parent]
    found += [Path(e["directory"]) for e in backends.values() if isinstance(e.get("directory"), str)]
    return tuple(found)


def oasis_cache_root(environ: Mapping[str, str]) -> Path:
    """The directory of our builds and dev clusters: ``$OASIS_CACHE_DIR``, else
    ``$XDG_CACHE_HOME/oasis-operator``, else ``~/.cache/oasis-operator``."""
    if environ.get("OASIS_CACHE_DIR"):
        return Path(environ["OASIS_CACHE_DIR"])
    home = Path(environ["HOME"]) if environ.get("HOME") else Path.home()
    return Path(environ.get("XDG_CACHE_HOME") or home / ".cache") / "oasis-operator"


def user_credential_paths(environ: Mapping[str, str]) -> tuple[Path, ...]:
    """Where the operator's user keeps cluster credentials an agent run as a local process must
    never read: every file of the ``KUBECONFIG`` chain, ``~/.kube``, and the dev clusters' directory
    (each cluster's PKI, CA and service-account signing keys included, and its kubeconfigs)."""
    home = Path(environ["HOME"]) if environ.get("HOME") else Path.home()
    chain = [Path(p).expanduser() for p in environ.get("KUBECONFIG", "").split(os.pathsep) if p]
    return (*chain, home / ".kube", oasis_cache_root(environ) / "clusters")


def prepare_toolplane(path: Path) -> tuple[Path, ...]:
    """Make the files the back-ends named in the tool-plane file ``path`` need before they start, as
    the dev cluster does when it starts them (``oasis operator prepare-toolplane``, the chart's init
    container; decision 0061): every back-end's directory, then what each back-end's factory prepares
    in it (``prepare``: vmalert's rules, vmauth's configuration and reload key, the database's
    administrator password, the git server's repositories and credentials file). Idempotent: a key, a
    grant, a password or credentials already there are kept (a restarted pod keeps its volumes, and
    the database's cluster its administrator). Returns the directories."""
    backends, endpoints = ToolPlaneSettings._read(path)
    # Everything checked before anything is made: a bad file leaves nothing half-prepared.
    entries = {name: _unmade_entry(path, name, entry, endpoints[name]) for name, entry in backends.items()}
    made = []
    for entry in entries.values():
        entry.root.mkdir(parents=True, exist_ok=True)
        made.append(entry.root)
    for name, entry in entries.items():
        prepare = FACTORIES[name].prepare if name in FACTORIES else None
        if prepare is not None:
            prepare(entry, entries)
    return tuple(made)


def _unmade_entry(path: Path, name: str, entry: Mapping[str, Any], endpoints: Mapping[str, str]) -> FileEntry:
    """An entry to prepare: an absolute directory, and the endpoints its row names (nothing exists yet)."""
    directory = entry.get("directory")
    if not isinstance(directory, str) or not directory.startswith("/"):
        raise SettingsError(
            f"--toolplane {path}: field backends.{name}.directory: expected an absolute path "
            f"(found {directory!r})"
        )
    row = registry.BY_NAME.get(name)
    for needed in row.entry.endpoints if row is not None and row.entry is not None else ():
        if not endpoints.get(needed):
            raise SettingsError(f"--toolplane {path}: field backends.{name}.endpoints.{needed}: missing")
    return FileEntry(name, Path(directory), endpoints, entry)


#: Addresses that listen on every interface: an agent cannot be told to call one of them.
_WILDCARDS = ("0.0.0.0", "::", "[::]", "")


@dataclass(frozen=True)
class GatewaySettings:
    """The recording gateway (decision 0056): where it listens and the URL agents are told to call.
    ``url`` empty: ``http://<addr>:<bound port>`` (a process on the same host, as the local stack runs
    agents); in a pod, agents run as other pods and reach it through a Service, so it is required."""

    addr: str = "127.0.0.1"
    port: int = 0  # 0: any free port
    url: str = ""

    @classmethod
    def parse(cls, addr: str, port: Any, url: str, *, in_cluster: bool, toolplane: bool) -> GatewaySettings:
        addr = (addr or "").strip()
        try:
            number = int(port)
        except (TypeError, ValueError):
            raise SettingsError(
                f"--tool-gateway-port {port!r}: expected a port number (0-65535; 0: any free port)"
            ) from None
        if not 0 <= number <= 65535:
            raise SettingsError(
                f"--tool-gateway-port {number}: expected a port number (0-65535; 0: any free port)"
            )
        url = (url or "").strip().rstrip("/")
        if url:
            try:
                parsed = (
                    httpx2.URL(url) if url.startswith(("http://", "https://")) and " " not in url else None
                )
            except httpx2.InvalidURL:
                parsed = None
            if parsed is None or not parsed.host or parsed.query or parsed.fragment:
                raise SettingsError(
                    f"--tool-gateway-url {url!r}: expected http(s)://host[:port][/path], the "
                    "address agents reach the tool gateway at (no query or fragment)"
                )
        elif addr in _WILDCARDS:
            raise SettingsError(
                f"--tool-gateway-url: required when --tool-gateway-addr is {addr or 'empty'!r} "
                "(an agent cannot be told to call a wildcard address)"
            )
        elif in_cluster and toolplane:
            raise SettingsError(
                "--tool-gateway-url: required in a pod with --toolplane: agents run as other "
                "pods and reach the gateway through a Service (chart value toolGateway.enabled)"
            )
        if number == 0 and url:
            raise SettingsError(
                "--tool-gateway-port: a fixed port is required with --tool-gateway-url (the URL "
                "must lead to it)"
            )
        return cls(addr=addr, port=number, url=url)


def _audit_settings(args: Any, targets: TargetSettings) -> AuditSettings:
    """Where the shared cluster's audit events come from (``--audit-log`` or the webhook); in targets
    each target's own log is the source and none is needed."""
    # In targets, each target's own audit log is the source: the management cluster's is not read;
    # shared and external read the audit of the cluster the scenarios run in.
    if targets.mode != "targets" and not args.audit_log and not args.audit_webhook_port:
        raise SettingsError(
            "no audit source: pass --audit-log FILE or --audit-webhook-port PORT "
            "(or run scenarios in targets: --scenario-clusters targets)"
        )
    if args.audit_webhook_port and not (args.tls_cert and args.tls_key):
        raise SettingsError(
            "--audit-webhook-port needs --tls-cert and --tls-key (the API server sends over TLS)"
        )
    for option, value in (
        ("--tls-cert", args.tls_cert),
        ("--tls-key", args.tls_key),
        ("--audit-client-ca", args.audit_client_ca),
    ):
        if args.audit_webhook_port and value and not Path(value).is_file():
            raise SettingsError(
                f"{option} {value}: no such file (is the TLS Secret mounted? it needs "
                "tls.crt, tls.key and ca.crt)"
            )
    if args.audit_webhook_port:
        audit = AuditSettings(
            webhook_port=args.audit_webhook_port,
            cert=Path(args.tls_cert),
            key=Path(args.tls_key),
            client_ca=Path(args.audit_client_ca) if args.audit_client_ca else None,
        )
    else:
        audit = AuditSettings(log=Path(args.audit_log) if args.audit_log else None)
    return audit


def _sharding(args: Any, environ: Mapping[str, str]) -> dict[str, int]:
    """``--shards N --shard-index I``; ``I`` may be ``hostname``: the ordinal a StatefulSet's pod name
    ends with (``oasis-operator-2`` is shard 2)."""
    count = int(getattr(args, "shards", 1) or 1)
    given = str(getattr(args, "shard_index", "0") or "0")
    if given == "hostname":
        host = environ.get("HOSTNAME", "")
        ordinal = host.rsplit("-", 1)[-1]
        if not ordinal.isdigit():
            raise SettingsError(
                f"--shard-index hostname: the host name {host!r} does not end with a StatefulSet ordinal"
            )
        given = ordinal
    if count < 1 or not given.isdigit() or int(given) >= count:
        raise SettingsError(
            f"--shards {count} --shard-index {given}: expected at least one shard and an index below it"
        )
    return {"shards": count, "shard_index": int(given)}


def _target_address(given: str) -> str | None:
    """``--target-address``: an IP address of this host, or a DNS name; empty means loopback."""
    given = given.strip()
    if not given:
        return None
    try:
        return str(ipaddress.ip_address(given))
    except ValueError:
        pass
    name = given.rstrip(".").lower()
    if len(name) > 253 or not all(
        len(label) <= 63 and re.match(DNS_LABEL_PATTERN, label) for label in name.split(".")
    ):
        raise SettingsError(
            f"--target-address {given}: expected an IP address of this host or a DNS name that resolves "
            "to one (where agents reach the target control planes)"
        )
    return name


@dataclass(frozen=True)
class TargetSettings:
    """Where scenarios run (decision 0100): ``targets`` (a control plane the operator starts per
    scenario attempt and throws away) or ``shared`` (the operator's own cluster, names suffixed)."""

    mode: str = "shared"
    #: Where the targets' directories go (the pool's alone: emptied when the operator starts).
    root: Path = field(default_factory=lambda: Path(tempfile.gettempdir()) / f"oasis-targets-{os.getuid()}")
    nodes: int = 3
    warm: int = 1
    most: int = 4
    backends: tuple[str, ...] = ()
    #: Reset a target after an attempt, with a proof, and lease it again (decision 0101).
    reuse: bool = True
    #: ``external``: the cluster the scenarios run in, shared by them (decision 0102).
    external_kubeconfig: Path | None = None
    #: Where agents on other hosts reach the targets (decision 0109); None: loopback.
    address: str | None = None

    @classmethod
    def from_args(cls, args: Any) -> TargetSettings:
        mode = getattr(args, "scenario_clusters", "shared") or "shared"
        if mode not in ("shared", "targets", "external"):
            raise SettingsError(f"--scenario-clusters {mode}: expected shared, targets or external")
        if mode == "shared":
            return cls()
        if mode == "external":
            given = getattr(args, "external_kubeconfig", "") or ""
            if not given or not Path(given).is_file():
                raise SettingsError(
                    f"--scenario-clusters external: --external-kubeconfig {given or '(none)'}: expected the "
                    "kubeconfig file of the cluster the scenarios run in"
                )
            return cls(mode=mode, external_kubeconfig=Path(given))
        from oasis_operator.devcluster.backends import BACKENDS

        backends = tuple(b for b in (getattr(args, "target_backends", "") or "").split(",") if b)
        if unknown := sorted(set(backends) - set(BACKENDS)):
            raise SettingsError(
                f"--target-backends: unknown back-end {', '.join(unknown)} (expected some of "
                f"{', '.join(sorted(BACKENDS))})"
            )
        for option, value, least in (
            ("--target-nodes", args.target_nodes, 1),
            ("--targets-warm", args.targets_warm, 0),
            ("--targets-most", args.targets_most, 1),
        ):
            if value < least:
                raise SettingsError(f"{option} {value}: expected a number of at least {least}")
        return cls(
            mode=mode,
            root=Path(args.targets_root) if args.targets_root else cls().root,
            nodes=args.target_nodes,
            warm=args.targets_warm,
            most=args.targets_most,
            backends=backends,
            reuse=not getattr(args, "no_target_reuse", False),
            address=_target_address(getattr(args, "target_address", "") or ""),
        )


def _max_scenarios(args: Any) -> int | None:
    """``--max-scenarios N``: at least 1, or 0 for no bound."""
    given = getattr(args, "max_scenarios", 16)
    if given is None:
        return 16
    if int(given) < 0:
        raise SettingsError(f"--max-scenarios {given}: expected 0 (no bound) or a number of scenarios")
    return int(given) or None


@dataclass(frozen=True)
class OperatorSettings:
    access: ClusterAccess
    audit: AuditSettings
    metrics_addr: str = DEFAULT_METRICS_ADDR
    metrics_port: int = 8080
    #: Scenario pods go to nodes with these labels (the simulated pool) ...
    node_selector: Mapping[str, str] = field(default_factory=dict)
    #: ... and tolerate the pool's taints (which keep every other pod off it).
    pool_taints: tuple[Mapping[str, str], ...] = (POOL_TAINT,)
    pod_cidr: str = ""
    barrier_timeout: float = 15.0
    #: Accept ``adapter: subprocess`` (an agent run as a process of the operator's pod, sandboxed).
    allow_subprocess_agents: bool = False
    #: Let ``agent.endpoint`` lead to this machine (loopback, its own addresses): a local operator.
    allow_local_agent_endpoints: bool = False
    #: Run scenarios that write cluster-scoped objects (the operator holds the rights to; chart value
    #: rbac.clusterScopedScenarios); without, they are excluded as unsupported.
    cluster_scoped_scenarios: bool = False
    namespaces: tuple[str, ...] = ()
    liveness: str | None = None
    verbose: bool = False
    log_format: str = "plain"
    toolplane: ToolPlaneSettings = field(default_factory=ToolPlaneSettings)
    gateway: GatewaySettings = field(default_factory=GatewaySettings)
    targets: TargetSettings = field(default_factory=TargetSettings)
    #: This replica drives the runs of shard ``shard_index`` of ``shards`` (:mod:`oasis_operator.core.sharding`).
    shards: int = 1
    shard_index: int = 0
    #: Scenarios run at once across every run (``--max-scenarios``); None: no bound.
    max_scenarios: int | None = 16

    @classmethod
    def from_args(cls, args: Any, environ: Mapping[str, str]) -> OperatorSettings:
        """From ``oasis operator run``'s parsed options; :class:`SettingsError` names a bad one."""
        try:
            access = ClusterAccess.discover(
                args.kubeconfig, Path(args.service_account_dir), environ, getattr(args, "context", None)
            )
        except AccessError as exc:
            raise SettingsError(str(exc)) from None
        targets = TargetSettings.from_args(args)
        audit = _audit_settings(args, targets)
        try:
            selector = parse_selector(args.node_selector or "")
            taints = (
                tuple(parse_taint(t) for t in (args.pool_taint or [])) if args.pool_taint else (POOL_TAINT,)
            )
        except ValueError as exc:
            raise SettingsError(str(exc)) from None
        liveness = None if args.liveness.endswith(":0/healthz") else args.liveness
        toolplane = (
            ToolPlaneSettings.load(Path(args.toolplane))
            if getattr(args, "toolplane", "")
            else ToolPlaneSettings()
        )
        gateway = GatewaySettings.parse(
            getattr(args, "tool_gateway_addr", "127.0.0.1"),
            getattr(args, "tool_gateway_port", 0),
            getattr(args, "tool_gateway_url", ""),
            in_cluster=access.in_cluster,
            toolplane=toolplane.source is not None,
        )
        return cls(
            access=access,
            audit=audit,
            metrics_addr=args.metrics_addr,
            metrics_port=args.metrics_port,
            node_selector=selector,
            pool_taints=taints,
            pod_cidr=args.pod_cidr or "",
            barrier_timeout=float(args.barrier_timeout),
            allow_subprocess_agents=bool(args.allow_subprocess_agents),
            allow_local_agent_endpoints=bool(getattr(args, "allow_local_agent_endpoints", False)),
            cluster_scoped_scenarios=bool(args.cluster_scoped_scenarios),
            namespaces=tuple(args.namespace or ()),
            liveness=liveness,
            verbose=bool(args.verbose),
            log_format=args.log_format,
            toolplane=toolplane,
            gateway=gateway,
            targets=targets,
            max_scenarios=_max_scenarios(args),
            **_sharding(args, environ),
        )

    def secret_paths(self) -> tuple[Path, ...]:
        """What an agent run as a local process must never read: every credential of the operator."""
        return (*self.access.secret_paths(), *self.audit.secret_paths())
