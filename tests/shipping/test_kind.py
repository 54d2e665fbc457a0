"""The kind walk-through (docs/kind.md) and its files: kind-config.yaml mounts what the API server's
audit flags name, step 1's `oasis certs create` (run here) gives certificates that fit the webhook
configuration and the chart's Service, a TLS handshake with them succeeds only with the client
certificate, the documented helm command renders the Service at the configured address, and the
example agent and run are valid manifests."""

from __future__ import annotations

import ipaddress
import re
import shlex
import socket
import ssl
import subprocess
import sys
import threading
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import yaml
from cryptography import x509
from cryptography.x509.oid import ExtendedKeyUsageOID

from tests.shipping.conftest import REPO, Render, Tools, by_kind
from tests.shipping.test_chart import kubeconform

DOC = (REPO / "docs" / "kind.md").read_text()
KIND = yaml.safe_load((REPO / "kind-config.yaml").read_text())
WEBHOOK = yaml.safe_load((REPO / "docs" / "kind" / "audit-webhook.kubeconfig").read_text())


def bash_blocks(section: str) -> list[str]:
    """The ```bash blocks of the section whose heading starts with ``section``."""
    part = DOC.split(f"\n## {section}", 1)[1].split("\n## ", 1)[0]
    return re.findall(r"```bash\n(.*?)```", part, re.S)


def command(block: str, program: str) -> list[str]:
    """The first command of a block that starts with ``program``, continuation lines joined."""
    joined = block.replace("\\\n", " ")
    line = next(line for line in joined.splitlines() if line.strip().startswith(program))
    return shlex.split(line)


def control_plane() -> dict[str, Any]:
    (node,) = [n for n in KIND["nodes"] if n["role"] == "control-plane"]
    return node


def api_server() -> dict[str, Any]:
    (patch,) = [yaml.safe_load(p) for p in control_plane()["kubeadmConfigPatches"]]
    assert patch["kind"] == "ClusterConfiguration"
    assert "apiVersion" not in patch  # applies to v1beta3 and v1beta4 alike
    server: dict[str, Any] = patch["apiServer"]
    return server


def node_path(container_path: str) -> Path | None:
    """The host file (relative to the repo) mounted at a node path, if a mount covers it."""
    for mount in control_plane()["extraMounts"]:
        target = PurePosixPath(mount["containerPath"])
        wanted = PurePosixPath(container_path)
        if wanted == target or target in wanted.parents:
            return Path(mount["hostPath"]) / wanted.relative_to(target)
    return None


def in_api_server_pod(path: str) -> bool:
    return any(
        PurePosixPath(v["mountPath"]) in PurePosixPath(path).parents for v in api_server()["extraVolumes"]
    )


def test_the_api_server_audits_to_a_json_file_and_to_the_webhook() -> None:
    args = api_server()["extraArgs"]
    assert args["audit-log-format"] == "json"
    assert args["audit-log-path"].startswith("/var/log/kubernetes/audit/")
    for flag in ("audit-policy-file", "audit-webhook-config-file"):
        path = args[flag]
        assert in_api_server_pod(path), f"{flag}={path} is not mounted into the API server pod"
        host = node_path(path)
        assert host is not None, f"{flag}={path} is not mounted into the node"
        assert (REPO / host).is_file(), host
    assert node_path(args["audit-policy-file"]) == Path("oasis_operator/devcluster/audit-policy.yaml")
    assert in_api_server_pod(args["audit-log-path"])
    assert all(isinstance(v, str) for v in args.values())  # kubeadm wants strings


def test_the_webhook_kubeconfig_points_at_the_fixed_service_address() -> None:
    (cluster,) = WEBHOOK["clusters"]
    url = cluster["cluster"]["server"]
    match = re.fullmatch(r"https://([\d.]+):(\d+)(/\S+)", url)
    assert match, url
    ip, port, path = match.groups()
    assert ipaddress.ip_address(ip) in ipaddress.ip_network(KIND["networking"]["serviceSubnet"])
    values = yaml.safe_load((REPO / "charts" / "oasis-operator" / "values.yaml").read_text())
    assert (int(port), path) == (values["auditWebhook"]["service"]["port"], values["auditWebhook"]["path"])
    helm = command(bash_blocks("4.")[0], "helm install")
    assert f"auditWebhook.service.clusterIP={ip}" in helm
    (user,) = WEBHOOK["users"]
    for node_file in (
        cluster["cluster"]["certificate-authority"],
        user["user"]["client-certificate"],
        user["user"]["client-key"],
    ):
        assert in_api_server_pod(node_file)
        host = node_path(node_file)
        assert host is not None
        assert str(host).startswith(".kind/audit-pki/")  # written by step 1


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Step 1 of the walk-through, run as written, in a scratch directory."""
    work = tmp_path_factory.mktemp("kind")
    (work / ".venv").symlink_to(Path(sys.executable).parents[1])  # the checkout's environment, as documented
    (block,) = bash_blocks("1.")
    done = subprocess.run(["bash", "-euo", "pipefail", "-c", block], cwd=work, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert (work / ".kind" / "audit-log").is_dir()
    return work / ".kind" / "audit-pki"


def cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def test_step_one_gives_the_certificates_the_webhook_and_the_chart_need(pki: Path, render: Render) -> None:
    for name in ("ca.crt", "tls.crt", "tls.key", "client.crt", "client.key"):
        assert (pki / name).is_file(), name
    serving = cert(pki / "tls.crt")
    sans = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    helm = command(bash_blocks("4.")[0], "helm install")
    values = {"auditWebhook": {"service": {"clusterIP": "10.96.0.250"}}}
    assert "auditWebhook.service.clusterIP=10.96.0.250" in helm
    (service,) = [s for s in by_kind(render(values), "Service") if s["metadata"]["name"].endswith("-audit")]
    assert ipaddress.ip_address(service["spec"]["clusterIP"]) in sans.get_values_for_type(x509.IPAddress)
    dns = f"{service['metadata']['name']}.{helm[helm.index('--namespace') + 1]}.svc"
    assert dns in sans.get_values_for_type(x509.DNSName)
    client = cert(pki / "client.crt")
    usage = client.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert ExtendedKeyUsageOID.CLIENT_AUTH in usage
    for name in ("tls.crt", "client.crt"):
        verified = subprocess.run(
            ["openssl", "verify", "-CAfile", str(pki / "ca.crt"), str(pki / name)],
            capture_output=True,
            text=True,
        )
        assert verified.returncode == 0, verified.stdout + verified.stderr


def test_the_secret_of_step_four_is_the_one_the_chart_mounts(render: Render) -> None:
    secret = command(bash_blocks("4.")[0], "kubectl -n oasis-system create secret")
    name = secret[secret.index("generic") + 1]
    keys = {arg.split("=", 1)[1].split("=", 1)[0] for arg in secret if arg.startswith("--from-file=")}
    assert keys == {"tls.crt", "tls.key", "ca.crt"}
    (operator,) = [d for d in by_kind(render(), "Deployment") if d["metadata"]["name"] == "oasis-operator"]
    volumes = {v["name"]: v for v in operator["spec"]["template"]["spec"]["volumes"]}
    assert volumes["audit-tls"]["secret"]["secretName"] == name
    args = operator["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--audit-client-ca=/etc/oasis/audit-tls/ca.crt" in args, (
        "the CA in the Secret checks the API server"
    )


def handshake(pki: Path, with_client_cert: bool) -> bytes:
    """A TLS exchange with a receiver holding step 1's serving certificate and requiring a client
    certificate of the CA, the way the API server connects to 10.96.0.250."""
    server_ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    server_ctx.load_cert_chain(pki / "tls.crt", pki / "tls.key")
    server_ctx.load_verify_locations(pki / "ca.crt")
    server_ctx.verify_mode = ssl.CERT_REQUIRED
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]

    def serve() -> None:
        conn, _ = listener.accept()
        try:
            with server_ctx.wrap_socket(conn, server_side=True) as tls:
                tls.sendall(b"ok")
        except (ssl.SSLError, OSError):
            pass

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    client_ctx = ssl.create_default_context(cafile=pki / "ca.crt")
    if with_client_cert:
        client_ctx.load_cert_chain(pki / "client.crt", pki / "client.key")
    try:
        with (
            socket.create_connection(("127.0.0.1", port), timeout=5) as raw,
            client_ctx.wrap_socket(raw, server_hostname="10.96.0.250") as tls,
        ):
            return tls.recv(2)
    finally:
        thread.join(5)
        listener.close()


def test_the_receiver_certificate_verifies_for_the_service_address_and_wants_the_client(pki: Path) -> None:
    assert handshake(pki, with_client_cert=True) == b"ok"
    with pytest.raises((ssl.SSLError, ConnectionError)):
        handshake(pki, with_client_cert=False)


def test_every_step_uses_the_files_of_the_repository() -> None:
    for path in re.findall(r"(?:-f|--config) ((?:docs|charts|examples)/\S+|kind-config\.yaml)", DOC):
        assert (REPO / path).exists(), path
    assert "kind create cluster --name oasis --config kind-config.yaml" in DOC
    assert "--for=condition=Completed" in DOC


@pytest.mark.cluster
def test_the_example_agent_and_run_are_valid_manifests(tools: Tools, schema_dir: Path) -> None:
    text = "\n---\n".join(
        (REPO / "docs" / "kind" / name).read_text()
        for name in ("reference-agent.yaml", "evaluation-run.yaml")
    )
    report = kubeconform(tools, schema_dir, text)
    assert report["returncode"] == 0, report["resources"]
    assert report["summary"]["valid"] == 4
