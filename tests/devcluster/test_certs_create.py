"""`oasis certs create`: the audit webhook's certificates in one command (decision 0114). The files
verify: both leaves are signed by the CA, the serving certificate names every NAME and serves, the
client certificate authenticates a client, the CA signs certificates only, keys are private."""

from __future__ import annotations

import datetime as dt
import ipaddress
import stat
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import serialization
from cryptography.x509.oid import ExtendedKeyUsageOID

from oasis_operator.cli.main import main
from oasis_operator.devcluster.certs import WEBHOOK_FILES

NAMES = (
    "10.96.0.250,oasis-operator-audit.oasis-system.svc,oasis-operator-audit.oasis-system.svc.cluster.local"
)


def cert(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


@pytest.fixture(scope="module")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("certs") / "pki"
    assert main(["certs", "create", "--dir", str(out), "--names", NAMES, "--days", "30"]) == 0
    return out


def test_every_file_is_written_and_the_keys_are_private(pki: Path) -> None:
    assert sorted(p.name for p in pki.iterdir()) == sorted(WEBHOOK_FILES)
    for name in ("ca.key", "tls.key", "client.key"):
        assert stat.S_IMODE((pki / name).stat().st_mode) == 0o600, name


def test_the_chain_verifies_and_each_key_matches_its_certificate(pki: Path) -> None:
    ca = cert(pki / "ca.crt")
    ca.verify_directly_issued_by(ca)
    for stem in ("tls", "client"):
        leaf = cert(pki / f"{stem}.crt")
        leaf.verify_directly_issued_by(ca)
        key = serialization.load_pem_private_key((pki / f"{stem}.key").read_bytes(), password=None)
        assert key.public_key() == leaf.public_key(), stem
        assert leaf.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is False
        days = (leaf.not_valid_after_utc - dt.datetime.now(dt.UTC)).days
        assert 28 <= days <= 30, (stem, days)


def test_the_ca_signs_certificates_and_nothing_below_it_does(pki: Path) -> None:
    ca = cert(pki / "ca.crt")
    constraints = ca.extensions.get_extension_for_class(x509.BasicConstraints).value
    assert constraints.ca is True
    assert constraints.path_length == 0
    usage = ca.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.key_cert_sign
    assert usage.crl_sign
    assert ca.subject.rfc4514_string() == "CN=audit-webhook-ca"


def test_the_serving_certificate_names_every_name_and_only_serves(pki: Path) -> None:
    serving = cert(pki / "tls.crt")
    sans = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert sans.get_values_for_type(x509.IPAddress) == [ipaddress.ip_address("10.96.0.250")]
    assert sans.get_values_for_type(x509.DNSName) == NAMES.split(",")[1:]
    assert serving.subject.rfc4514_string() == "CN=oasis-operator-audit.oasis-system.svc"
    assert list(serving.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.SERVER_AUTH
    ]
    usage = serving.extensions.get_extension_for_class(x509.KeyUsage).value
    assert usage.digital_signature
    assert not usage.key_cert_sign


def test_the_client_certificate_only_authenticates_the_api_server(pki: Path) -> None:
    client = cert(pki / "client.crt")
    assert client.subject.rfc4514_string() == "CN=kube-apiserver-audit"
    assert list(client.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value) == [
        ExtendedKeyUsageOID.CLIENT_AUTH
    ]
    with pytest.raises(x509.ExtensionNotFound):
        client.extensions.get_extension_for_class(x509.SubjectAlternativeName)


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["--names", " , "], "--names ' , ': expected IP addresses or DNS names"),
        (["--names", "a.svc", "--days", "0"], "--days 0: expected a positive number of days"),
    ],
)
def test_bad_arguments_are_one_line_errors(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], argv: list[str], expected: str
) -> None:
    assert main(["certs", "create", "--dir", str(tmp_path / "pki"), *argv]) == 2
    err = capsys.readouterr().err
    assert expected in err
    assert "Traceback" not in err
    assert not (tmp_path / "pki").exists()


def test_existing_keys_are_never_overwritten(pki: Path, capsys: pytest.CaptureFixture[str]) -> None:
    before = (pki / "ca.key").read_bytes()
    assert main(["certs", "create", "--dir", str(pki), "--names", "x.svc"]) == 2
    assert f"{pki / 'ca.crt'}: already exists" in capsys.readouterr().err
    assert (pki / "ca.key").read_bytes() == before
