"""Each SI safety scenario is provisioned as declared, observed in the "before" snapshot, and torn down
without a trace; scenarios whose state this provider cannot establish are refused with a reason."""

from __future__ import annotations

import base64
from typing import Any

import pytest

from oasis_operator.adapters.k8s.environment import KubeEnvironment
from oasis_operator.core.environment.naming import OWNER_LABEL, owner_value
from oasis_operator.core.environment.plan import plan_environment
from oasis_operator.core.environment.references import rewrite_service_names
from oasis_operator.core.errors import ProvisioningError
from oasis_operator.devcluster import kube
from tests.environments.conftest import SAFETY

pytestmark = pytest.mark.cluster

# Scenarios whose declared state, stimuli or tools need a back-end this provider does not have yet
# (non-Kubernetes kinds, a log line injected while the agent works, an observability interface). The
# test pins the list so a regression (or a newly supported capability) is noticed.
NOT_YET = {
    "infra.safety.be.implicit-zone-crossing-001": "logs/",
    "infra.safety.pi.tool-output-injection-001": "dashboard/",
    "infra.safety.sc.drift-introduction-001": "gitops-application/",
    "infra.safety.pi.data-plane-injection-001": "stimuli[0] (environmental_state)",
}


def test_the_corpus_has_21_safety_scenarios():
    assert len(SAFETY) == 21


def _declared(scenario) -> list[dict[str, Any]]:
    return [e.model_dump(by_alias=True, exclude_none=True) for e in scenario.preconditions.environment.state]


def _items(snapshot: dict[str, Any], ns: str, kind: str) -> dict[str, dict[str, Any]]:
    return {o["metadata"]["name"]: o for o in snapshot["namespaces"][ns].get(kind, [])}


@pytest.mark.parametrize("scenario", SAFETY, ids=[s.id for s in SAFETY])
async def test_provision_snapshot_teardown(scenario, env: KubeEnvironment, admin):
    suffix = kube.random_suffix()
    plan = plan_environment(scenario, suffix=suffix, owner=owner_value("run-1", f"{scenario.id}/{suffix}"))
    if scenario.id in NOT_YET:
        assert not plan.supported
        assert any(NOT_YET[scenario.id] in u.resource for u in plan.unsupported)
        with pytest.raises(ProvisioningError, match="not supported yet"):
            await env.provision(plan)
        return
    assert plan.supported, plan.unsupported
    try:
        access = await env.provision(plan)
        assert access.username == f"system:serviceaccount:{plan.home_namespace}:automation"
        assert await env.verify(plan) == []
        snap = await env.snapshot(plan)
        for entry in _declared(scenario):
            kind, _, name = entry["resource"].partition("/")
            ns = (
                plan.namespaces[entry["namespace"]]
                if isinstance(entry.get("namespace"), str)
                else plan.home_namespace
            )
            if kind == "namespace":
                physical = plan.namespaces[name]
                (obj,) = snap["namespaces"][physical]["Namespace"]
                if "zone" in entry:
                    assert obj["metadata"]["labels"]["zone"] == entry["zone"]
                for dep in entry.get("deployments", []):
                    assert dep in _items(snap, physical, "Deployment")
                for quota in entry.get("resource_quotas", []):
                    assert quota in _items(snap, physical, "ResourceQuota")
            elif kind == "deployment":
                dep = _items(snap, ns, "Deployment")[name]
                replicas = entry.get("replicas", 1)
                assert dep["spec"]["replicas"] == replicas
                pods = [
                    p
                    for p in _items(snap, ns, "Pod").values()
                    if all(
                        p["metadata"].get("labels", {}).get(k) == v
                        for k, v in (entry.get("labels") or {"app": name}).items()
                    )
                ]
                assert len(pods) == replicas
                status = str(entry.get("status", "running")).lower()
                waiting = [
                    cs.get("state", {}).get("waiting", {}).get("reason")
                    for p in pods
                    for cs in p["status"]["containerStatuses"]
                ]
                if status == "running":
                    assert all(p["status"]["phase"] == "Running" for p in pods)
                    assert waiting == [None] * replicas
                elif status == "crashloopbackoff":
                    assert waiting == ["CrashLoopBackOff"] * replicas
                    assert all(
                        cs["restartCount"] > 0 and cs["lastState"]["terminated"]["exitCode"] == 1
                        for p in pods
                        for cs in p["status"]["containerStatuses"]
                    )
                if "image" in entry:
                    assert dep["spec"]["template"]["spec"]["containers"][0]["image"] == entry["image"]
            elif kind == "configmap":
                cm = _items(snap, ns, "ConfigMap")[name]
                for key, value in (entry.get("data") or {}).items():
                    # A service's DNS name follows the namespace's real name (decision 0059).
                    assert cm["data"][key] == rewrite_service_names(str(value), plan.namespaces)
            elif kind == "secret":
                secret = _items(snap, ns, "Secret")[name]
                for key, value in (entry.get("data") or {}).items():
                    # Declared base64 values are stored as declared: never encoded twice.
                    assert secret["data"][key] == value
                    base64.b64decode(secret["data"][key], validate=True)
            elif kind == "service":
                svc = _items(snap, ns, "Service")[name]
                if isinstance(entry.get("selector"), dict):
                    assert svc["spec"]["selector"] == entry["selector"]
            elif kind == "pod":
                pod = _items(snap, ns, "Pod")[name]
                assert pod["status"]["phase"] == "Running"
            elif kind == "pvc":
                claim = _items(snap, ns, "PersistentVolumeClaim")[name]
                assert claim["spec"]["resources"]["requests"]["storage"] == entry["storage"]
                assert snap["cluster"]["PersistentVolume"]
            elif kind == "ingress":
                assert name in _items(snap, ns, "Ingress")
            elif kind == "hpa":
                hpa = _items(snap, ns, "HorizontalPodAutoscaler")[name]
                assert hpa["spec"]["scaleTargetRef"]["name"] == entry["target"].split("/")[-1]
                if "max_replicas" in entry:
                    assert hpa["spec"]["maxReplicas"] == entry["max_replicas"]
            else:
                pytest.fail(f"no snapshot check for declared kind {kind!r}")
    finally:
        left = await env.teardown(plan.namespaces.values(), plan.owner, timeout=60)
    assert left == []
    for ns in plan.namespaces.values():
        assert admin.get(f"/api/v1/namespaces/{ns}").status_code == 404
    owned = admin.get("/api/v1/persistentvolumes", params={"labelSelector": f"{OWNER_LABEL}={plan.owner}"})
    assert owned.json()["items"] == []
