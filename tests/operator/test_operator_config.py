"""Configuration the chart relies on: in a pod the operator logs in with its ServiceAccount's mounted
files, read when needed and never copied; scenario pods go to the pool and tolerate its taint; the
webhook receiver refuses senders without the API server's client certificate and picks up a renewed
certificate without a restart."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import shutil
import ssl
import tempfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import httpx2
import pytest
from cryptography import x509

from oasis_operator.adapters.audit.source import WebhookAuditSource
from oasis_operator.cli.main import build_parser
from oasis_operator.core.environment.manifests import POOL_TAINT, parse_selector, parse_taint
from oasis_operator.core.environment.plan import plan_environment
from oasis_operator.devcluster import kube
from oasis_operator.devcluster.certs import generate_pki
from oasis_operator.handlers.settings import OperatorSettings, SettingsError, connection_info
from tests.environments.conftest import SAFETY

#: One context on a server nobody is asked (start-up reads the context, and talks to nobody yet).
MINIMAL_KUBECONFIG = """\
apiVersion: v1
kind: Config
current-context: c
contexts: [{name: c, context: {cluster: c, user: u}}]
clusters: [{name: c, cluster: {server: "https://127.0.0.1:1"}}]
users: [{name: u, user: {token: t}}]
"""


def operator_args(*extra: str) -> Any:
    return build_parser().parse_args(["operator", "run", *extra])


def service_account_dir(root: Path, token: str, ca: Path) -> Path:
    """A directory laid out as the kubelet mounts a ServiceAccount (token, ca.crt, namespace)."""
    directory = root / "serviceaccount"
    directory.mkdir(exist_ok=True)
    (directory / "token").write_text(token)
    shutil.copy(ca, directory / "ca.crt")
    (directory / "namespace").write_text("oasis-system")
    return directory


def pod_environ(server: str) -> dict[str, str]:
    host, port = server.removeprefix("https://").rsplit(":", 1)
    return {"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port}


def test_without_a_kubeconfig_or_a_service_account_the_error_says_what_is_missing(tmp_path):
    args = operator_args("--audit-log", "/x.log", "--service-account-dir", str(tmp_path))
    args.kubeconfig = None
    with pytest.raises(SettingsError, match=r"no cluster credentials.*--kubeconfig"):
        OperatorSettings.from_args(args, {})


@pytest.mark.parametrize(
    ("argv", "complaint"),
    [
        (["--audit-webhook-port", "8443"], "needs --tls-cert and --tls-key"),
        (
            ["--audit-webhook-port", "8443", "--tls-cert", "/nope/tls.crt", "--tls-key", "/nope/tls.key"],
            "--tls-cert /nope/tls.crt: no such file",
        ),
        (["--audit-log", "/x.log", "--pool-taint", "pool=standard"], "expected key=value:Effect"),
        (["--audit-log", "/x.log", "--node-selector", "pool"], "expected key=value"),
        ([], "no audit source"),
        (["--scenario-clusters", "targets", "--target-backends", "logs,nope"], "unknown back-end nope"),
        (["--scenario-clusters", "targets", "--targets-most", "0"], "--targets-most 0: expected a number"),
        (
            ["--scenario-clusters", "targets", "--target-address", "pod ip!"],
            "--target-address pod ip!: expected an IP address of this host or a DNS name",
        ),
        (["--audit-log", "/x.log", "--shards", "2", "--shard-index", "2"], "an index below it"),
        (["--audit-log", "/x.log", "--shards", "2", "--shard-index", "hostname"], "StatefulSet ordinal"),
    ],
)
def test_bad_options_are_named(tmp_path, argv, complaint):
    (tmp_path / "kubeconfig").write_text(MINIMAL_KUBECONFIG)
    args = operator_args("--kubeconfig", str(tmp_path / "kubeconfig"), *argv)
    with pytest.raises(SettingsError, match=complaint):
        OperatorSettings.from_args(args, {})


def test_the_metrics_endpoint_listens_on_every_address_by_default(tmp_path):
    (tmp_path / "kubeconfig").write_text(MINIMAL_KUBECONFIG)
    settings = OperatorSettings.from_args(
        operator_args("--kubeconfig", str(tmp_path / "kubeconfig"), "--audit-log", "/x.log"), {}
    )
    assert settings.metrics_addr == "0.0.0.0"
    assert settings.pool_taints == (POOL_TAINT,)
    assert settings.allow_subprocess_agents is False


@pytest.mark.cluster
async def test_in_a_pod_the_service_account_is_read_from_its_files_and_never_copied(
    cluster, admin, namespace, tmp_path, monkeypatch
):
    # Two ServiceAccounts: the second one's token stands for the kubelet's rotation of the file.
    for name in ("operator", "rotated"):
        kube.expect(
            admin.post(f"/api/v1/namespaces/{namespace}/serviceaccounts", json={"metadata": {"name": name}}),
            "create sa",
            201,
        )
    first, second = (kube.request_token(admin, namespace, n, 600) for n in ("operator", "rotated"))
    directory = service_account_dir(tmp_path, first, cluster.ca_file)
    scratch = tmp_path / "tmp"
    scratch.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(scratch))
    args = operator_args("--service-account-dir", str(directory), "--audit-log", "/x.log")
    args.kubeconfig = None
    settings = OperatorSettings.from_args(args, pod_environ(cluster.server))
    access = settings.access
    assert access.in_cluster
    assert access.server == cluster.server
    assert access.secret_paths() == (directory,)

    async def whoami(http: httpx2.AsyncClient) -> str:
        r = await http.post(
            "/apis/authentication.k8s.io/v1/selfsubjectreviews",
            json={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
        )
        assert r.status_code == 201, r.text
        return str(r.json()["status"]["userInfo"]["username"])

    from lightkube import ApiError, AsyncClient
    from lightkube.resources.core_v1 import ServiceAccount

    async with access.http() as http:
        assert await whoami(http) == f"system:serviceaccount:{namespace}:operator"
        (directory / "token").write_text(second)  # the kubelet rotates the token
        assert await whoami(http) == f"system:serviceaccount:{namespace}:rotated"
    client = AsyncClient(access.lightkube_config())
    try:
        with pytest.raises(ApiError) as refused:
            await client.get(ServiceAccount, "operator", namespace=namespace)
        assert refused.value.status.code == 403, "authenticated as the ServiceAccount (403, not 401)"
    finally:
        await client.close()
    info = connection_info(access)
    assert info.token == second
    assert info.server == cluster.server
    assert info.default_namespace == "oasis-system"
    leftovers = [p for p in scratch.rglob("*") if p.is_file()]
    assert leftovers == [], "nothing of the credentials is written to disk"


def test_scenario_pods_go_to_the_pool_and_tolerate_its_taint_and_nothing_else_does():
    selector = parse_selector("node.platform.k8s.io/pool=standard")
    taint = parse_taint("node.platform.k8s.io/pool=standard:NoSchedule")
    assert taint == POOL_TAINT
    plan = plan_environment(
        next(s for s in SAFETY if "cascading-deletion" in s.id),
        suffix="bbbbb",
        owner="o",
        node_selector=selector,
        pool_taints=[taint],
    )
    deps = [m for m in plan.manifests if m["kind"] == "Deployment"]
    assert deps
    toleration = {
        "key": "node.platform.k8s.io/pool",
        "operator": "Equal",
        "value": "standard",
        "effect": "NoSchedule",
    }
    for d in deps:
        pod = d["spec"]["template"]["spec"]
        assert pod["nodeSelector"] == selector
        assert pod["tolerations"] == [toleration]
    # Without a selector (the embedded cluster's own tests) the pods still tolerate the pool's taint.
    free = plan_environment(
        next(s for s in SAFETY if "cascading-deletion" in s.id), suffix="bbbbb", owner="o"
    )
    assert all(
        d["spec"]["template"]["spec"]["tolerations"] == [toleration]
        for d in free.manifests
        if d["kind"] == "Deployment"
    )
    with pytest.raises(ValueError, match="key=value"):
        parse_selector("no-equals-sign")
    with pytest.raises(ValueError, match="Effect"):
        parse_taint("pool=standard:Sometimes")


async def test_the_webhook_receiver_requires_the_api_servers_client_certificate(tmp_path):
    pki = generate_pki(tmp_path / "pki", dt.datetime.now(dt.UTC))
    source = WebhookAuditSource(
        cert_file=pki.serving.cert, key_file=pki.serving.key, client_ca_file=pki.ca_cert
    )
    await source.start()
    body = {
        "kind": "EventList",
        "apiVersion": "audit.k8s.io/v1",
        "items": [{"auditID": "forged", "stage": "ResponseComplete"}],
    }
    try:
        anonymous = ssl.create_default_context(cafile=str(pki.ca_cert))
        async with httpx2.AsyncClient(verify=anonymous) as client:
            with pytest.raises(httpx2.HTTPError):
                await client.post(source.url, json=body)
        assert source.ingested == 0, "a sender without a client certificate cannot inject audit events"
        trusted = ssl.create_default_context(cafile=str(pki.ca_cert))
        trusted.load_cert_chain(str(pki.admin.cert), str(pki.admin.key))
        async with httpx2.AsyncClient(verify=trusted) as client:
            r = await client.post(source.url, json=body)
        assert r.status_code == 200
        assert source.ingested == 1
    finally:
        await source.stop()
        await asyncio.sleep(0)


def served_certificate(port: int, client: Any) -> x509.Certificate:
    ctx = ssl.create_default_context(cafile=str(client.ca))
    ctx.check_hostname = False
    ctx.load_cert_chain(str(client.cert), str(client.key))
    import socket

    with socket.create_connection(("127.0.0.1", port), timeout=5) as raw, ctx.wrap_socket(raw) as tls:
        der = tls.getpeercert(binary_form=True)
    assert der is not None
    return x509.load_der_x509_certificate(der)


def kubelet_swap(mount: Path, files: dict[str, bytes]) -> None:
    """Update a Secret volume the way the kubelet does: a new timestamped directory, then an atomic
    swap of the ``..data`` symlink the file names point through."""
    stamp = mount / f"..{dt.datetime.now(dt.UTC).strftime('%Y_%m_%d_%H_%M_%S.%f')}"
    stamp.mkdir()
    for name, data in files.items():
        (stamp / name).write_bytes(data)
    tmp = mount / "..data_tmp"
    tmp.symlink_to(stamp.name)
    os.replace(tmp, mount / "..data")
    for name in files:
        if not (mount / name).is_symlink():
            (mount / name).symlink_to(f"..data/{name}")


async def test_a_renewed_webhook_certificate_is_served_without_a_restart(tmp_path):
    old = generate_pki(tmp_path / "old", dt.datetime.now(dt.UTC))
    new = generate_pki(tmp_path / "new", dt.datetime.now(dt.UTC))
    mount = tmp_path / "audit-tls"
    mount.mkdir()

    def files(pki: Any) -> dict[str, bytes]:
        return {
            "tls.crt": pki.serving.cert.read_bytes(),
            "tls.key": pki.serving.key.read_bytes(),
            "ca.crt": pki.ca_cert.read_bytes(),
        }

    kubelet_swap(mount, files(old))
    source = WebhookAuditSource(
        cert_file=mount / "tls.crt", key_file=mount / "tls.key", client_ca_file=mount / "ca.crt"
    )
    await source.start()
    try:
        before = SimpleNamespace(ca=old.ca_cert, cert=old.admin.cert, key=old.admin.key)
        after = SimpleNamespace(ca=new.ca_cert, cert=new.admin.cert, key=new.admin.key)
        first = await asyncio.to_thread(served_certificate, source.port, before)
        assert first == x509.load_pem_x509_certificate(old.serving.cert.read_bytes())
        kubelet_swap(mount, files(new))  # cert-manager renewed it; the kubelet updated the volume
        await asyncio.sleep(1.1)
        renewed = await asyncio.to_thread(served_certificate, source.port, after)
        assert renewed == x509.load_pem_x509_certificate(new.serving.cert.read_bytes())
        # The client CA followed too: a client of the old CA is refused now, one of the new accepted.
        body = {"kind": "EventList", "apiVersion": "audit.k8s.io/v1", "items": [{"auditID": "x"}]}
        for pki, accepted in ((old, False), (new, True)):
            ctx = ssl.create_default_context(cafile=str(new.ca_cert))
            ctx.load_cert_chain(str(pki.admin.cert), str(pki.admin.key))
            async with httpx2.AsyncClient(verify=ctx) as client:
                if accepted:
                    assert (await client.post(source.url, json=body)).status_code == 200
                else:
                    with pytest.raises(httpx2.HTTPError):
                        await client.post(source.url, json=body)
        assert source.ingested == 1
    finally:
        await source.stop()


def test_in_targets_no_audit_source_is_needed_and_the_pool_is_configured(tmp_path):
    (tmp_path / "kubeconfig").write_text(MINIMAL_KUBECONFIG)
    settings = OperatorSettings.from_args(
        operator_args(
            "--kubeconfig",
            str(tmp_path / "kubeconfig"),
            "--scenario-clusters",
            "targets",
            "--targets-root",
            str(tmp_path / "t"),
            "--targets-most",
            "6",
            "--target-backends",
            "logs",
            "--no-target-reuse",
            "--target-address",
            "10.244.3.17",
        ),
        {},
    )
    t = settings.targets
    assert (t.mode, t.root, t.most, t.backends, t.reuse) == ("targets", tmp_path / "t", 6, ("logs",), False)
    assert t.address == "10.244.3.17"
    assert settings.audit.log is None
    assert settings.audit.webhook_port is None


def test_a_statefulset_pod_takes_its_shard_from_its_name(tmp_path):
    (tmp_path / "kubeconfig").write_text(MINIMAL_KUBECONFIG)
    args = operator_args(
        "--kubeconfig",
        str(tmp_path / "kubeconfig"),
        "--audit-log",
        "/x.log",
        "--shards",
        "3",
        "--shard-index",
        "hostname",
    )
    settings = OperatorSettings.from_args(args, {"HOSTNAME": "oasis-operator-2"})
    assert (settings.shards, settings.shard_index) == (3, 2)


@pytest.mark.parametrize(
    ("given", "kept"),
    [("", None), ("fd00::2", "fd00::2"), ("Operator.OASIS-System.svc.", "operator.oasis-system.svc")],
)
def test_the_target_address_is_an_ip_or_a_dns_name(tmp_path, given, kept):
    (tmp_path / "kubeconfig").write_text(MINIMAL_KUBECONFIG)
    argv = ["--kubeconfig", str(tmp_path / "kubeconfig"), "--scenario-clusters", "targets"]
    settings = OperatorSettings.from_args(operator_args(*argv, "--target-address", given), {})
    assert settings.targets.address == kept


def test_the_api_servers_certificate_names_each_served_address(tmp_path):
    pki = generate_pki(tmp_path, dt.datetime.now(dt.UTC), serve_names=("192.0.2.2", "fd00::2", "ops.example"))
    cert = x509.load_pem_x509_certificate(pki.serving.cert.read_bytes())
    sans = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    ips = {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}
    assert {"127.0.0.1", "192.0.2.2", "fd00::2"} <= ips
    assert "ops.example" in sans.get_values_for_type(x509.DNSName)
    plain = generate_pki(tmp_path / "plain", dt.datetime.now(dt.UTC))
    plain_sans = x509.load_pem_x509_certificate(plain.serving.cert.read_bytes()).extensions
    assert "192.0.2.2" not in {
        str(ip)
        for ip in plain_sans.get_extension_for_class(x509.SubjectAlternativeName).value.get_values_for_type(
            x509.IPAddress
        )
    }
