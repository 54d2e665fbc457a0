"""The audit barrier: after it, the stream holds everything requested before it; when the stream
stops, the barrier fails with a provider fault instead of handing over incomplete evidence.

Tested with both sources: the audit log file, and the webhook backend posting to our TLS receiver
(a second control plane, configured with the webhook, started for this module)."""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import threading
import uuid
from collections.abc import Iterator
from concurrent.futures import Future
from pathlib import Path
from typing import Any

import pytest
import yaml

from oasis_operator.adapters.audit.source import FileAuditSource, WebhookAuditSource
from oasis_operator.adapters.k8s.client import async_http, sentinel_sender
from oasis_operator.core.errors import AuditBarrierTimeout
from oasis_operator.core.evidence.sentinel import Sentinel
from oasis_operator.devcluster import ClusterConfig, DevCluster, binaries, kube
from oasis_operator.devcluster.certs import generate_pki
from oasis_operator.workflows.barrier import audit_barrier

pytestmark = pytest.mark.cluster

RULES = [{"apiGroups": [""], "resources": ["configmaps"], "verbs": ["get", "list", "create"]}]


def act_as_agent(dev: DevCluster, ns: str) -> dict[str, int]:
    """A service account makes three writes and one denied read; returns audit ID -> HTTP code."""
    with dev.admin_http() as admin:
        kube.create_namespace(admin, ns)
        sa = kube.create_service_account(admin, ns, "worker", RULES)
    done: dict[str, int] = {}
    with dev.token_http(sa.token) as http:
        for i in range(3):
            audit_id = str(uuid.uuid4())
            r = http.post(
                f"/api/v1/namespaces/{ns}/configmaps",
                json={"metadata": {"name": f"c{i}"}},
                headers={"Audit-ID": audit_id},
            )
            done[audit_id] = r.status_code
        audit_id = str(uuid.uuid4())
        done[audit_id] = http.get(
            f"/api/v1/namespaces/{ns}/secrets", headers={"Audit-ID": audit_id}
        ).status_code
    return done


async def barrier_window(
    dev: DevCluster, source: Any, ns: str, timeout: float = 15
) -> tuple[dict[str, int], set[str]]:
    sub = source.subscribe()
    done = await asyncio.to_thread(act_as_agent, dev, ns)
    async with async_http(dev.kubeconfig) as http:
        await audit_barrier(source, sentinel_sender(http), timeout=timeout)
    source.unsubscribe(sub)
    return done, {e["auditID"] for e in sub.events if e.get("stage") == "ResponseComplete"}


async def test_file_source_barrier_holds_the_whole_window(cluster):
    source = FileAuditSource(cluster.audit_log)
    await source.start()
    try:
        done, seen = await barrier_window(cluster.dev, source, f"ns-{kube.random_suffix()}")
    finally:
        await source.stop()
    assert sorted(done.values()) == [201, 201, 201, 403]
    assert set(done) <= seen


class LoopThread:
    """An event loop in a thread, so the webhook receiver answers while tests block."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, daemon=True)
        self.thread.start()

    def run(self, coro: Any, timeout: float = 60) -> Any:
        fut: Future[Any] = asyncio.run_coroutine_threadsafe(coro, self.loop)
        return fut.result(timeout)

    def close(self) -> None:
        self.loop.call_soon_threadsafe(self.loop.stop)
        self.thread.join(5)


@pytest.fixture(scope="module")
def webhook_cluster(
    tmp_path_factory: pytest.TempPathFactory, cluster
) -> Iterator[tuple[DevCluster, WebhookAuditSource, LoopThread]]:
    work = tmp_path_factory.mktemp("webhook")
    pki = generate_pki(work / "receiver-pki", dt.datetime.now(dt.UTC))
    loop = LoopThread()
    source = WebhookAuditSource(cert_file=pki.serving.cert, key_file=pki.serving.key)
    loop.run(source.start())
    config = work / "audit-webhook.kubeconfig"
    config.write_text(
        yaml.safe_dump(
            {
                "apiVersion": "v1",
                "kind": "Config",
                "clusters": [
                    {
                        "name": "receiver",
                        "cluster": {"server": source.url, "certificate-authority": str(pki.ca_cert)},
                    }
                ],
                "users": [{"name": "apiserver", "user": {}}],
                "contexts": [{"name": "default", "context": {"cluster": "receiver", "user": "apiserver"}}],
                "current-context": "default",
            }
        )
    )
    dev = DevCluster(
        ClusterConfig(
            workdir=work / "cluster",
            nodes=1,
            audit_webhook_config=config,
            audit_webhook_batch_max_wait="200ms",
        ),
        binaries.resolve(quiet=True),
    )
    dev.start()
    try:
        yield dev, source, loop
    finally:
        dev.stop()
        loop.run(source.stop())
        loop.close()


def test_webhook_source_barrier_holds_the_whole_window(webhook_cluster):
    dev, source, loop = webhook_cluster
    done, seen = loop.run(barrier_window(dev, source, f"ns-{kube.random_suffix()}"))
    assert sorted(done.values()) == [201, 201, 201, 403]
    assert set(done) <= seen
    assert source.ingested > 0


def test_a_stopped_webhook_stream_is_a_provider_fault(webhook_cluster):
    dev, source, loop = webhook_cluster
    source.paused = True
    try:
        with pytest.raises(AuditBarrierTimeout, match="did not appear in the audit stream"):
            loop.run(barrier_window(dev, source, f"ns-{kube.random_suffix()}", timeout=3))
    finally:
        source.paused = False


async def test_a_file_stream_that_goes_silent_is_a_provider_fault(webhook_cluster):
    # The webhook cluster also writes a log file; it is this module's own, so it can be broken here.
    dev, _, _ = webhook_cluster
    source = FileAuditSource(dev.audit_log)
    await source.start()
    try:
        # Someone moves the log away and leaves an empty file: the API server keeps writing to the
        # moved file, the source follows the path, and the stream it sees goes silent.
        os.rename(dev.audit_log, Path(str(dev.audit_log) + ".moved"))
        dev.audit_log.write_bytes(b"")
        with pytest.raises(AuditBarrierTimeout):
            await barrier_window(dev, source, f"ns-{kube.random_suffix()}", timeout=3)
    finally:
        await source.stop()


async def test_a_request_reusing_the_sentinels_audit_id_does_not_pass_the_barrier(cluster, admin):
    """Clients choose their own Audit-ID: an agent that sends one equal to the sentinel's (to end the
    wait early, before its own writes are in the stream) is not taken for the sentinel. Only an event
    of the harness's user for the sentinel's exact URI passes the barrier."""
    ns = f"ns-{kube.random_suffix()}"
    kube.create_namespace(admin, ns)
    sa = kube.create_service_account(admin, ns, "automation", RULES)
    source = FileAuditSource(cluster.audit_log)
    await source.start()
    try:
        async with async_http(cluster.kubeconfig) as http:
            genuine = sentinel_sender(http)

            async def impostor_only(audit_id: str) -> Sentinel:
                sentinel = await genuine(f"warm-up-{audit_id}")  # learns the harness's user name
                with cluster.token_http(sa.token) as agent:
                    await asyncio.to_thread(
                        agent.get, "/api/v1/namespaces/default", headers={"Audit-ID": audit_id}
                    )
                    await asyncio.to_thread(
                        agent.get, f"/api/v1/namespaces/{ns}/configmaps", headers={"Audit-ID": audit_id}
                    )
                return sentinel

            with pytest.raises(AuditBarrierTimeout):
                await audit_barrier(source, impostor_only, timeout=3)
            impostors = {e["user"]["username"] for e in source.impostors}
            assert impostors == {f"system:serviceaccount:{ns}:automation"}
            assert len(source.impostors) == 2
            # The genuine sentinel still passes.
            await audit_barrier(source, genuine, timeout=10)
    finally:
        await source.stop()
        kube.delete_namespace(admin, ns)
