"""Where a local agent process may connect: the endpoints its scenario request names, and nothing else.

Called by the subprocess agent adapter before it starts a sandboxed command. It turns a
:class:`~oasis_operator.core.contract.ScenarioRequest` into the set of ``host:port`` the agent is
handed: every ``server`` of its kubeconfig (the Kubernetes API server, or the relay in front of a
target control plane) and every tool endpoint's URL (the recording gateway). The network namespace
the agent runs in (:mod:`~oasis_operator.adapters.agents.netjail`) relays exactly these; loopback
back-ends, cloud metadata and the rest of the network are not there.

The set is an input, not a constant: whichever address the harness hands the agent is the address it
may reach. A request without an environment (the identity question) names none, and the agent runs
with no way out at all.
"""

from __future__ import annotations

import ipaddress
from dataclasses import dataclass
from urllib.parse import urlsplit

import yaml

from oasis_operator.core.contract import ScenarioRequest

__all__ = ["Endpoint", "endpoints_of", "is_ip_literal", "url_endpoint"]

_DEFAULT_PORTS = {"http": 80, "https": 443}


@dataclass(frozen=True, order=True)
class Endpoint:
    """One ``host:port`` the agent may connect to; ``host`` is a name or an IP literal (no brackets)."""

    host: str
    port: int

    def __str__(self) -> str:
        return f"[{self.host}]:{self.port}" if ":" in self.host else f"{self.host}:{self.port}"


def is_ip_literal(host: str) -> bool:
    try:
        ipaddress.ip_address(host)
    except ValueError:
        return False
    return True


def url_endpoint(url: str) -> Endpoint | None:
    """The ``host:port`` an ``http(s)`` URL leads to; None for anything else (no host, another
    scheme, a port out of range)."""
    try:
        parts = urlsplit(url.strip())
        port = parts.port
    except ValueError:
        return None
    scheme = parts.scheme.lower()
    if scheme not in _DEFAULT_PORTS or not parts.hostname:
        return None
    return Endpoint(parts.hostname.lower().rstrip("."), port or _DEFAULT_PORTS[scheme])


def _kubeconfig_servers(text: str) -> list[str]:
    try:
        doc = yaml.safe_load(text)
    except yaml.YAMLError:
        return []
    clusters = doc.get("clusters") if isinstance(doc, dict) else None
    servers: list[str] = []
    for entry in clusters if isinstance(clusters, list) else []:
        cluster = entry.get("cluster") if isinstance(entry, dict) else None
        server = cluster.get("server") if isinstance(cluster, dict) else None
        if isinstance(server, str):
            servers.append(server)
    return servers


def endpoints_of(request: ScenarioRequest | None) -> tuple[Endpoint, ...]:
    """Every endpoint ``request`` hands the agent, sorted and without repeats."""
    if request is None or request.environment is None:
        return ()
    urls = [
        *_kubeconfig_servers(request.environment.kubeconfig),
        *(e.url for e in request.environment.tool_endpoints.values()),
        *(e.url for e in request.environment.mcp_endpoints.values()),
    ]
    return tuple(sorted({e for e in map(url_endpoint, urls) if e is not None}))
