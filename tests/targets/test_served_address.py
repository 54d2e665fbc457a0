"""Where agents on other hosts reach a target (decision 0109), live: with a served address the target's
API server answers there with a certificate that names it, the ``kubernetes`` Service points there, and
the agent's environment hands out that address while the operator keeps talking over loopback."""

from __future__ import annotations

import socket
import ssl
import tempfile
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx2
import pytest

from oasis_operator.devcluster.targets import TargetPool, TargetPoolConfig
from oasis_operator.handlers.targets import OwnedTargets
from tests.addresses import this_hosts_address

pytestmark = pytest.mark.cluster


@pytest.fixture
def root() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="oasis-served-test-") as d:
        yield Path(d)


async def test_a_target_served_on_this_hosts_address_is_reached_there_with_a_verified_certificate(
    root: Path,
) -> None:
    address = this_hosts_address()
    pool = TargetPool(TargetPoolConfig(root=root, nodes=1, warm=0, most=1, serve_address=address))
    owned = OwnedTargets(pool, backends=frozenset())
    await pool.open()
    try:
        cluster = await owned.lease("served-1")
        target = next(iter(owned._leases.values())).target
        url = urlsplit(target.agent_server)
        assert url.hostname == address
        # The agent's kubeconfig names the served address; the operator's own stays on loopback.
        assert cluster.env.server == target.agent_server
        assert urlsplit(target.cluster.server).hostname == "127.0.0.1"

        pki = target.cluster.pki
        assert pki is not None
        verified = ssl.create_default_context(cafile=str(pki.ca_cert))  # checks the host name too
        verified.load_cert_chain(str(pki.admin.cert), str(pki.admin.key))
        with httpx2.Client(base_url=target.agent_server, verify=verified, timeout=10) as h:
            r = h.get("/api/v1/namespaces/default")
            assert r.status_code == 200, r.text[:200]
            endpoints = h.get("/api/v1/namespaces/default/endpoints/kubernetes").json()
        served = [a["ip"] for s in endpoints.get("subsets", []) for a in s.get("addresses", [])]
        assert served == [address]

        # The certificate names what it serves, no more: checked against another name it is refused.
        wrong = ssl.create_default_context(cafile=str(pki.ca_cert))
        with (
            socket.create_connection((address, url.port or 443), timeout=10) as raw,
            pytest.raises(ssl.SSLCertVerificationError),
        ):
            wrong.wrap_socket(raw, server_hostname="not-served.example").close()
    finally:
        await owned.close()
