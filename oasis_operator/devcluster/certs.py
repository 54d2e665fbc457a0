"""Key material for the embedded control plane.

Called by :mod:`oasis_operator.devcluster.cluster` once per cluster directory; turns nothing into a
:class:`PKI`: a self-signed CA, the API server's serving certificate, client certificates for the
admin and each control-plane component, and the service-account signing key pair (so TokenRequest
works). Everything is written as PEM files with private keys readable only by the owner.
"""

from __future__ import annotations

import base64
import datetime as dt
import ipaddress
import os
from dataclasses import dataclass
from pathlib import Path

import yaml

from oasis_operator.core.kubeconfig import kubeconfig
from oasis_operator.devcluster.errors import SetupError

# Only the embedded control plane makes keys, so cryptography is the `devcluster` extra: the operator's
# image (a plain `pip install .`) imports this module through the CLI and never calls into it.
try:
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec, rsa
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID
except ModuleNotFoundError as _exc:  # pragma: no cover - exercised by tests/shipping in a subprocess
    _MISSING: ModuleNotFoundError | None = _exc
else:
    _MISSING = None


def _require_cryptography() -> None:
    if _MISSING is not None:
        raise SetupError(
            "the embedded control plane needs the 'devcluster' extra (cryptography, for its "
            "keys and certificates): pip install 'oasis-operator[devcluster]'"
        )


_VALIDITY = dt.timedelta(days=365)

# Client identities of the components. Each name is one RBAC knows (bootstrap policy) or is bound to
# cluster-admin through the system:masters group.
ADMIN_USER = "kubernetes-admin"
KCM_USER = "system:kube-controller-manager"
SCHEDULER_USER = "system:kube-scheduler"
# The node simulator needs to write node and pod status for every node; it acts as a cluster admin
# under a name of its own so its audit events are attributable and never taken for an agent's.
SIMULATOR_USER = "system:node-simulator"
# The operator (the harness) has an identity of its own, so the audit policy can record its many
# bookkeeping writes (status, reports, evidence) at Metadata level and verdicts can tell it apart.
OPERATOR_USER = "oasis-operator"


@dataclass(frozen=True)
class ClientCert:
    cert: Path
    key: Path


@dataclass(frozen=True)
class PKI:
    ca_cert: Path
    ca_key: Path
    serving: ClientCert
    admin: ClientCert
    controller_manager: ClientCert
    scheduler: ClientCert
    simulator: ClientCert
    operator: ClientCert
    # The API server's client identity towards kubelets (here the node simulator's server), used to
    # fetch container logs; the name kubeadm gives it.
    kubelet_client: ClientCert
    sa_public_key: Path
    sa_private_key: Path


def _key_usage(*, ca: bool) -> x509.KeyUsage:
    """Signing only; a CA also signs certificates and revocation lists."""
    return x509.KeyUsage(
        digital_signature=True,
        key_encipherment=False,
        content_commitment=False,
        data_encipherment=False,
        key_agreement=False,
        key_cert_sign=ca,
        crl_sign=ca,
        encipher_only=False,
        decipher_only=False,
    )


def _key() -> ec.EllipticCurvePrivateKey:
    return ec.generate_private_key(ec.SECP256R1())


def _write_key(path: Path, key: ec.EllipticCurvePrivateKey | rsa.RSAPrivateKey) -> None:
    data = key.private_bytes(
        serialization.Encoding.PEM,
        serialization.PrivateFormat.TraditionalOpenSSL
        if isinstance(key, rsa.RSAPrivateKey)
        else serialization.PrivateFormat.PKCS8,
        serialization.NoEncryption(),
    )
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o600)
    with os.fdopen(fd, "wb") as fh:
        fh.write(data)


def _write_cert(path: Path, cert: x509.Certificate) -> None:
    path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))


def _name(common_name: str, org: str | None = None) -> x509.Name:
    attrs = [x509.NameAttribute(NameOID.COMMON_NAME, common_name)]
    if org:
        attrs.append(x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
    return x509.Name(attrs)


def _issue(
    subject: x509.Name,
    key: ec.EllipticCurvePrivateKey,
    ca_cert: x509.Certificate,
    ca_key: ec.EllipticCurvePrivateKey,
    now: dt.datetime,
    *,
    server: bool,
    sans: list[x509.GeneralName] | None = None,
    validity: dt.timedelta = _VALIDITY,
) -> x509.Certificate:
    builder = (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(ca_cert.subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
        .add_extension(_key_usage(ca=False), critical=True)
        .add_extension(
            x509.ExtendedKeyUsage(
                [ExtendedKeyUsageOID.SERVER_AUTH if server else ExtendedKeyUsageOID.CLIENT_AUTH]
            ),
            critical=False,
        )
    )
    if sans:
        builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
    return builder.sign(ca_key, hashes.SHA256())


def _general_name(name: str) -> x509.GeneralName:
    """An IP address as an IP SAN, anything else as a DNS SAN."""
    try:
        return x509.IPAddress(ipaddress.ip_address(name))
    except ValueError:
        return x509.DNSName(name)


def generate_pki(directory: Path, now: dt.datetime, *, serve_names: tuple[str, ...] = ()) -> PKI:
    """Write a fresh PKI into ``directory`` (created if needed) and return where each piece is.

    ``serve_names``: more addresses (IP) or host names (DNS) the API server's certificate names, besides
    loopback and the in-cluster Service names: where agents outside this process's host reach it."""
    _require_cryptography()
    directory.mkdir(parents=True, exist_ok=True)
    ca_key = _key()
    ca_subject = _name("kubernetes-ca")
    ca_cert = _self_signed_ca(ca_key, ca_subject, now, _VALIDITY, path_length=None)
    ca_cert_path, ca_key_path = directory / "ca.crt", directory / "ca.key"
    _write_cert(ca_cert_path, ca_cert)
    _write_key(ca_key_path, ca_key)

    def pair(
        stem: str, subject: x509.Name, *, server: bool = False, sans: list[x509.GeneralName] | None = None
    ) -> ClientCert:
        key = _key()
        cert = _issue(subject, key, ca_cert, ca_key, now, server=server, sans=sans)
        cert_path, key_path = directory / f"{stem}.crt", directory / f"{stem}.key"
        _write_cert(cert_path, cert)
        _write_key(key_path, key)
        return ClientCert(cert_path, key_path)

    serving_sans: list[x509.GeneralName] = [
        x509.DNSName("localhost"),
        x509.DNSName("kubernetes"),
        x509.DNSName("kubernetes.default"),
        x509.DNSName("kubernetes.default.svc"),
        x509.DNSName("kubernetes.default.svc.cluster.local"),
        x509.IPAddress(ipaddress.ip_address("127.0.0.1")),
        x509.IPAddress(ipaddress.ip_address("10.0.0.1")),
        *(_general_name(n) for n in serve_names),
    ]
    serving = pair("apiserver", _name("kube-apiserver"), server=True, sans=serving_sans)
    admin = pair("admin", _name(ADMIN_USER, "system:masters"))
    kcm = pair("controller-manager", _name(KCM_USER))
    scheduler = pair("scheduler", _name(SCHEDULER_USER))
    simulator = pair("node-simulator", _name(SIMULATOR_USER, "system:masters"))
    operator = pair("operator", _name(OPERATOR_USER, "system:masters"))
    kubelet_client = pair(
        "apiserver-kubelet-client", _name("kube-apiserver-kubelet-client", "kubeadm:cluster-admins")
    )

    # Service-account tokens are signed with RSA (the API server's default algorithm, RS256).
    sa_key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    sa_private, sa_public = directory / "sa.key", directory / "sa.pub"
    _write_key(sa_private, sa_key)
    sa_public.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return PKI(
        ca_cert=ca_cert_path,
        ca_key=ca_key_path,
        serving=serving,
        admin=admin,
        controller_manager=kcm,
        scheduler=scheduler,
        simulator=simulator,
        operator=operator,
        kubelet_client=kubelet_client,
        sa_public_key=sa_public,
        sa_private_key=sa_private,
    )


def issue_client_cert(pki: PKI, stem: str, user: str, group: str | None, now: dt.datetime) -> ClientCert:
    """A further client certificate from the cluster's CA (a back-end's own identity), written beside
    the others as ``<stem>.crt``/``<stem>.key``."""
    _require_cryptography()
    ca_cert = x509.load_pem_x509_certificate(pki.ca_cert.read_bytes())
    ca_key = serialization.load_pem_private_key(pki.ca_key.read_bytes(), password=None)
    if not isinstance(ca_key, ec.EllipticCurvePrivateKey):
        raise TypeError(f"{pki.ca_key}: expected an EC private key")
    key = _key()
    cert = _issue(_name(user, group), key, ca_cert, ca_key, now, server=False)
    directory = pki.ca_cert.parent
    cert_path, key_path = directory / f"{stem}.crt", directory / f"{stem}.key"
    _write_cert(cert_path, cert)
    _write_key(key_path, key)
    return ClientCert(cert_path, key_path)


def b64_file(path: Path) -> str:
    """A file's bytes, base64-encoded (kubeconfig *-data fields)."""
    return base64.b64encode(path.read_bytes()).decode()


def write_kubeconfig(path: Path, server: str, ca: Path, user: str, client: ClientCert) -> Path:
    """A self-contained kubeconfig (certificates embedded) for one client identity."""
    doc = kubeconfig(
        server,
        b64_file(ca),
        user,
        {"client-certificate-data": b64_file(client.cert), "client-key-data": b64_file(client.key)},
    )
    path.write_text(yaml.safe_dump(doc, sort_keys=False))
    path.chmod(0o600)
    return path


@dataclass(frozen=True)
class WebhookPKI:
    """What ``oasis certs create`` writes: a CA, a serving certificate and a client certificate."""

    ca_cert: Path
    ca_key: Path
    serving: ClientCert
    client: ClientCert


WEBHOOK_FILES = ("ca.crt", "ca.key", "tls.crt", "tls.key", "client.crt", "client.key")


def generate_webhook_pki(
    directory: Path,
    now: dt.datetime,
    names: tuple[str, ...],
    *,
    ca_name: str = "audit-webhook-ca",
    client_name: str = "kube-apiserver-audit",
    days: int = 365,
) -> WebhookPKI:
    """A small CA of its own, a serving certificate for ``names`` (IP addresses as IP SANs, the rest as
    DNS SANs; the first DNS name is its common name) and a client certificate for ``client_name``, all
    signed by the CA, written as :data:`WEBHOOK_FILES` into ``directory`` (the audit webhook's
    certificates, docs/kind.md step 1). Refuses to overwrite: keys are never replaced silently."""
    _require_cryptography()
    if not names:
        raise SetupError("the serving certificate needs at least one name (an IP address or a DNS name)")
    existing = [directory / f for f in WEBHOOK_FILES if (directory / f).exists()]
    if existing:
        raise SetupError(f"{existing[0]}: already exists (remove it, or choose another --dir)")
    directory.mkdir(parents=True, exist_ok=True)
    validity = dt.timedelta(days=days)
    ca_key = _key()
    ca_subject = _name(ca_name)
    ca_cert = _self_signed_ca(ca_key, ca_subject, now, validity, path_length=0)
    _write_cert(directory / "ca.crt", ca_cert)
    _write_key(directory / "ca.key", ca_key)
    sans = [_general_name(n) for n in names]
    dns = [n for n in names if isinstance(_general_name(n), x509.DNSName)]

    def pair(stem: str, subject: x509.Name, *, server: bool) -> ClientCert:
        key = _key()
        cert = _issue(
            subject,
            key,
            ca_cert,
            ca_key,
            now,
            server=server,
            sans=sans if server else None,
            validity=validity,
        )
        cert_path, key_path = directory / f"{stem}.crt", directory / f"{stem}.key"
        _write_cert(cert_path, cert)
        _write_key(key_path, key)
        return ClientCert(cert_path, key_path)

    serving = pair("tls", _name(dns[0] if dns else names[0]), server=True)
    client = pair("client", _name(client_name), server=False)
    return WebhookPKI(directory / "ca.crt", directory / "ca.key", serving, client)


def _self_signed_ca(
    key: ec.EllipticCurvePrivateKey,
    subject: x509.Name,
    now: dt.datetime,
    validity: dt.timedelta,
    *,
    path_length: int | None,
) -> x509.Certificate:
    """A CA certificate signed by its own ``key``, valid from five minutes before ``now``."""
    return (
        x509.CertificateBuilder()
        .subject_name(subject)
        .issuer_name(subject)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - dt.timedelta(minutes=5))
        .not_valid_after(now + validity)
        .add_extension(x509.BasicConstraints(ca=True, path_length=path_length), critical=True)
        .add_extension(_key_usage(ca=True), critical=True)
        .add_extension(x509.SubjectKeyIdentifier.from_public_key(key.public_key()), critical=False)
        .sign(key, hashes.SHA256())
    )
