"""Configuration the chart relies on: the in-cluster kubeconfig fallback, the scenario node pool, and
the webhook receiver refusing senders without the API server's client certificate."""

from __future__ import annotations

import asyncio
import datetime as dt
import ssl

import httpx
import pytest
import yaml

from oasis_operator.adapters.audit.source import WebhookAuditSource
from oasis_operator.cli import operator as operator_cli
from oasis_operator.core.environment.manifests import parse_selector
from oasis_operator.core.environment.plan import plan_environment
from oasis_operator.devcluster.certs import generate_pki
from tests.environments.conftest import SAFETY


def test_in_cluster_kubeconfig_comes_from_the_service_account(tmp_path, monkeypatch):
    sa = tmp_path / "sa"
    sa.mkdir()
    (sa / "token").write_text("tok-123\n")
    (sa / "ca.crt").write_bytes(b"-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
    monkeypatch.setattr(operator_cli, "SA_DIR", sa)
    monkeypatch.setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1")
    monkeypatch.setenv("KUBERNETES_SERVICE_PORT", "443")
    path = operator_cli.in_cluster_kubeconfig(tmp_path)
    assert path is not None
    doc = yaml.safe_load(path.read_text())
    assert doc["clusters"][0]["cluster"]["server"] == "https://10.96.0.1:443"
    assert doc["users"][0]["user"]["token"] == "tok-123"
    monkeypatch.delenv("KUBERNETES_SERVICE_HOST")
    assert operator_cli.in_cluster_kubeconfig(tmp_path) is None


def test_scenario_pods_and_nodes_go_to_the_pool():
    selector = parse_selector("node.platform.k8s.io/pool=standard")
    plan = plan_environment(next(s for s in SAFETY if "cascading-deletion" in s.id), suffix="bbbbb", owner="o",
                            node_selector=selector)
    deps = [m for m in plan.manifests if m["kind"] == "Deployment"]
    assert deps
    assert all(d["spec"]["template"]["spec"]["nodeSelector"] == selector for d in deps)
    with pytest.raises(ValueError, match="key=value"):
        parse_selector("no-equals-sign")


async def test_the_webhook_receiver_requires_the_api_servers_client_certificate(tmp_path):
    pki = generate_pki(tmp_path / "pki", dt.datetime.now(dt.UTC))
    source = WebhookAuditSource(cert_file=pki.serving.cert, key_file=pki.serving.key, client_ca_file=pki.ca_cert)
    await source.start()
    body = {"kind": "EventList", "apiVersion": "audit.k8s.io/v1",
            "items": [{"auditID": "forged", "stage": "ResponseComplete"}]}
    try:
        anonymous = ssl.create_default_context(cafile=str(pki.ca_cert))
        async with httpx.AsyncClient(verify=anonymous) as client:
            with pytest.raises(httpx.HTTPError):
                await client.post(source.url, json=body)
        assert source.ingested == 0, "a sender without a client certificate cannot inject audit events"
        trusted = ssl.create_default_context(cafile=str(pki.ca_cert))
        trusted.load_cert_chain(str(pki.admin.cert), str(pki.admin.key))
        async with httpx.AsyncClient(verify=trusted) as client:
            r = await client.post(source.url, json=body)
        assert r.status_code == 200
        assert source.ingested == 1
    finally:
        await source.stop()
        await asyncio.sleep(0)
