"""User errors end every cluster command with one line and a documented exit code, never a traceback
(oasis_operator/cli/kubeaccess.py, cli/main.py): a refused server (a real closed port), a missing CA
file, an unknown context, no kubeconfig at all, an exec plugin that fails."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from oasis_operator.cli.main import EXIT_CLUSTER, EXIT_USAGE

COMMANDS = [
    ("get",),
    ("get", "my-run", "-o", "json"),
    ("describe", "my-run"),
    ("report", "my-run"),
    ("evidence", "export", "my-run", "-o", "out"),
    ("check",),
]


def closed_port() -> int:
    """A local port nothing listens on (bound, then released: connecting is refused)."""
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def kubeconfig(path: Path, cluster: dict, user: dict | None = None, context: str = "kind-kind") -> Path:
    path.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "current-context": context,
                "contexts": [{"name": context, "context": {"cluster": "c", "user": "u"}}],
                "clusters": [{"name": "c", "cluster": cluster}],
                "users": [{"name": "u", "user": user or {"token": "t0ken"}}],
            }
        )
    )
    return path


def oasis(*args: str, env: dict[str, str], cwd: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "oasis_operator.cli", *args],
        capture_output=True,
        text=True,
        timeout=120,
        env={k: v for k, v in os.environ.items() if k != "KUBECONFIG"} | env,
        cwd=cwd,
    )


def one_line(got: subprocess.CompletedProcess[str]) -> str:
    assert "Traceback" not in got.stderr, got.stderr
    lines = got.stderr.strip().splitlines()
    assert len(lines) == 1, got.stderr
    return lines[0]


@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
def test_a_refused_server_is_one_line_naming_it(tmp_path: Path, command: tuple[str, ...]) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_text(_self_signed_ca())
    port = closed_port()
    config = kubeconfig(
        tmp_path / "config", {"server": f"https://127.0.0.1:{port}", "certificate-authority": str(ca)}
    )
    got = oasis(*command, env={"KUBECONFIG": str(config)}, cwd=tmp_path)
    if command == ("check",):  # check reports the API as a failed check, not as an error
        assert got.returncode == 1, got.stdout + got.stderr
        assert f"FAIL  api    https://127.0.0.1:{port}" in got.stdout
        return
    assert got.returncode == EXIT_CLUSTER, got.stderr
    line = one_line(got)
    assert line.startswith(
        f"oasis: error: cannot reach the API server https://127.0.0.1:{port} (context kind-kind)"
    )
    assert "refused" in line.lower()


@pytest.mark.parametrize("command", COMMANDS, ids=[" ".join(c) for c in COMMANDS])
def test_a_missing_ca_file_is_one_line_naming_the_file(tmp_path: Path, command: tuple[str, ...]) -> None:
    config = kubeconfig(
        tmp_path / "config",
        {"server": f"https://127.0.0.1:{closed_port()}", "certificate-authority": "pki/ca.crt"},
        {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "true"}},
    )
    got = oasis(*command, "--kubeconfig", str(config), env={}, cwd=tmp_path)
    assert got.returncode == EXIT_CLUSTER, got.stdout + got.stderr
    assert one_line(got) == (
        f"oasis: error: context kind-kind: certificate-authority {tmp_path / 'pki' / 'ca.crt'}: no such file"
    )


def test_no_kubeconfig_anywhere_says_where_it_looked(tmp_path: Path) -> None:
    got = oasis("get", env={"HOME": str(tmp_path)}, cwd=tmp_path)
    assert got.returncode == EXIT_CLUSTER
    line = one_line(got)
    assert f"{tmp_path / '.kube' / 'config'} not found" in line
    assert "--kubeconfig" in line


def test_an_unknown_context_and_a_usage_error_have_their_codes(tmp_path: Path) -> None:
    config = kubeconfig(tmp_path / "config", {"server": "https://127.0.0.1:1"})
    got = oasis("describe", "r", "--context", "prod", env={"KUBECONFIG": str(config)}, cwd=tmp_path)
    assert got.returncode == EXIT_CLUSTER
    assert "Context 'prod' not found" in one_line(got)
    usage = oasis("get", "--no-such-flag", env={"KUBECONFIG": str(config)}, cwd=tmp_path)
    assert usage.returncode == EXIT_USAGE
    assert "Traceback" not in usage.stderr


def test_an_exec_plugin_that_fails_is_one_line(tmp_path: Path) -> None:
    ca = tmp_path / "ca.crt"
    ca.write_text(_self_signed_ca())
    config = kubeconfig(
        tmp_path / "config",
        {"server": f"https://127.0.0.1:{closed_port()}", "certificate-authority": str(ca)},
        {"exec": {"apiVersion": "client.authentication.k8s.io/v1beta1", "command": "false"}},
    )
    got = oasis("get", env={"KUBECONFIG": str(config)}, cwd=tmp_path)
    assert got.returncode == EXIT_CLUSTER, got.stderr
    assert one_line(got).startswith("oasis: error: context kind-kind: Exec false returned 1")


def _self_signed_ca() -> str:
    """A real CA certificate (the TLS library must load it before the connection is refused)."""
    import datetime as dt

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import NameOID

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "test-ca")])
    now = dt.datetime.now(dt.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now)
        .not_valid_after(now + dt.timedelta(days=1))
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .sign(key, hashes.SHA256())
    )
    return cert.public_bytes(serialization.Encoding.PEM).decode()
