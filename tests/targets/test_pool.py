"""The target pool, live (decisions 0100, 0101): a target is leased at its baseline; whatever was done
in it (namespaces, workloads, RBAC, a cordoned node, a webhook, a deleted system object) is gone after
its reset, which is proven; a token of the previous attempt is refused when the target is leased
again, even one minted for an account of the baseline (decision 0115); a target that died is never handed out; without reuse every target is destroyed."""

from __future__ import annotations

import asyncio
import contextlib
import tempfile
import time
from collections.abc import Iterator
from pathlib import Path

import httpx2
import pytest

from oasis_operator.devcluster.targets import Target, TargetPool, TargetPoolConfig

pytestmark = pytest.mark.cluster

MERGE = {"Content-Type": "application/merge-patch+json"}


@pytest.fixture
def root() -> Iterator[Path]:
    with tempfile.TemporaryDirectory(prefix="oasis-pool-test-") as d:
        yield Path(d)


def _ok(r: httpx2.Response) -> None:
    assert r.status_code in (200, 201), r.text[:300]


def _mess(target: Target) -> tuple[str, str]:
    """What a scenario and a hostile agent leave; returns the agent's token and one minted for a
    ServiceAccount of the baseline."""
    with target.cluster.admin_http() as h:
        _ok(h.post("/api/v1/namespaces", json={"metadata": {"name": "payments"}}))
        _ok(h.post("/api/v1/namespaces/payments/serviceaccounts", json={"metadata": {"name": "automation"}}))
        _ok(
            h.post(
                "/apis/rbac.authorization.k8s.io/v1/clusterrolebindings",
                json={
                    "metadata": {"name": "automation-admin"},
                    "roleRef": {
                        "apiGroup": "rbac.authorization.k8s.io",
                        "kind": "ClusterRole",
                        "name": "cluster-admin",
                    },
                    "subjects": [{"kind": "ServiceAccount", "name": "automation", "namespace": "payments"}],
                },
            )
        )
        baseline_account = h.post(  # a baseline account: the reset writes it back (decision 0115)
            "/api/v1/namespaces/default/serviceaccounts/default/token",
            json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
        ).json()["status"]["token"]
        token = h.post(
            "/api/v1/namespaces/payments/serviceaccounts/automation/token",
            json={"apiVersion": "authentication.k8s.io/v1", "kind": "TokenRequest", "spec": {}},
        ).json()["status"]["token"]
    with target.cluster.token_http(token) as agent:
        _ok(
            agent.post(
                "/apis/apps/v1/namespaces/payments/deployments",
                json={
                    "metadata": {"name": "web"},
                    "spec": {
                        "replicas": 3,
                        "selector": {"matchLabels": {"app": "web"}},
                        "template": {
                            "metadata": {"labels": {"app": "web"}},
                            "spec": {
                                "tolerations": [{"operator": "Exists"}],
                                "containers": [{"name": "c", "image": "x"}],
                            },
                        },
                    },
                },
            )
        )
        _ok(
            agent.patch(
                f"/api/v1/nodes/{target.cluster.nodes[0]}",
                json={"spec": {"unschedulable": True}},
                headers=MERGE,
            )
        )
        _ok(
            agent.post(
                "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations",
                json={"metadata": {"name": "steal"}, "webhooks": []},
            )
        )
        _ok(
            agent.patch(
                "/apis/rbac.authorization.k8s.io/v1/clusterroles/view",
                json={"metadata": {"labels": {"x": "y"}}},
                headers=MERGE,
            )
        )
        _ok(agent.delete("/api/v1/namespaces/kube-public/configmaps/kube-root-ca.crt"))
        # A deployment's pods exist before the reset: the controllers were at work.
        deadline = time.monotonic() + 30
        while len(agent.get("/api/v1/namespaces/payments/pods").json()["items"]) < 3:
            assert time.monotonic() < deadline
            time.sleep(0.3)
    return token, baseline_account


async def test_a_reset_target_is_back_at_its_baseline_and_the_old_token_is_refused(root: Path) -> None:
    pool = TargetPool(TargetPoolConfig(root=root, nodes=2, warm=0, most=1))
    await pool.open()
    try:
        first = await pool.lease()
        token, baseline_account = await asyncio.to_thread(_mess, first)
        await pool.give_back(first)
        (proof,) = pool.resets
        assert proof.proven, proof
        assert proof.writes >= 8
        second = await pool.lease()  # the only slot: the same target, after its rest
        assert second is first
        assert second.uses == 2
        waited = time.monotonic() - (second.rests_until - pool.config.quarantine_seconds)
        assert waited >= pool.config.quarantine_seconds
        with second.cluster.admin_http() as h:
            assert h.get("/api/v1/namespaces/payments").status_code == 404
            assert (
                h.get("/apis/rbac.authorization.k8s.io/v1/clusterrolebindings/automation-admin").status_code
                == 404
            )
            assert (
                h.get(
                    "/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations/steal"
                ).status_code
                == 404
            )
            assert "x" not in (
                h.get("/apis/rbac.authorization.k8s.io/v1/clusterroles/view").json()["metadata"].get("labels")
                or {}
            )
            assert h.get("/api/v1/namespaces/kube-public/configmaps/kube-root-ca.crt").status_code == 200
            node = h.get(f"/api/v1/nodes/{second.cluster.nodes[0]}").json()
            assert not node["spec"].get("unschedulable")
            assert h.get("/api/v1/pods", params={"labelSelector": "app=web"}).json()["items"] == []
            # The same names can be made again, as the next scenario makes them.
            _ok(h.post("/api/v1/namespaces", json={"metadata": {"name": "payments"}}))
            _ok(
                h.post(
                    "/api/v1/namespaces/payments/serviceaccounts", json={"metadata": {"name": "automation"}}
                )
            )
        for old_token in (token, baseline_account):
            with second.cluster.token_http(old_token) as old:
                assert old.get("/api/v1/namespaces").status_code == 401
        with second.cluster.admin_http() as h:  # the baseline account itself is there, under a new uid
            assert h.get("/api/v1/namespaces/default/serviceaccounts/default").status_code == 200
    finally:
        await pool.close()
        for t in list(pool._ready):
            await pool.discard(t)


async def test_without_reuse_each_target_is_destroyed_and_a_dead_one_never_handed_out(root: Path) -> None:
    pool = TargetPool(TargetPoolConfig(root=root, nodes=1, warm=1, most=2, reuse=False))
    await pool.open()
    try:
        await pool.warmed()
        warm = pool._ready[0]
        # The warm target dies before anyone leases it.
        for pid in warm.cluster.component_pids().values():
            with_signal(pid)
        first = await pool.lease()
        assert first is not warm
        assert first.alive()
        assert not warm.cluster.workdir.exists()
        await pool.give_back(first)
        assert not first.cluster.workdir.exists()
        assert pool.resets == []
    finally:
        await pool.close()


def with_signal(pid: int) -> None:
    import os
    import signal

    with contextlib.suppress(ProcessLookupError):
        os.kill(pid, signal.SIGKILL)
    for _ in range(50):
        try:
            os.waitpid(pid, os.WNOHANG)
        except ChildProcessError:
            return
        time.sleep(0.05)
