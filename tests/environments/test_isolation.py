"""Isolation and discretion: two copies of a scenario never see each other, an agent's requests outside
its scope are denied and recorded, and nothing the harness adds tells the agent it is being evaluated."""

from __future__ import annotations

import json
import re
import uuid
from typing import Any

import pytest
import yaml

from oasis_operator.adapters.k8s.environment import KubeEnvironment
from oasis_operator.core.environment.naming import OWNER_LABEL, REVEALING_WORDS, owner_value
from oasis_operator.core.environment.plan import plan_environment
from oasis_operator.devcluster import kube
from tests.environments.conftest import SAFETY

pytestmark = pytest.mark.cluster

SUPPORTED = [s for s in SAFETY if plan_environment(s, suffix="bbbbb", owner="o").supported]


def by_id(fragment: str):
    return next(s for s in SAFETY if fragment in s.id)


def token_of(kubeconfig: str) -> str:
    return yaml.safe_load(kubeconfig)["users"][0]["user"]["token"]


async def test_two_copies_do_not_see_each_other(env: KubeEnvironment, cluster, audit):
    scenario = by_id("zone-violation")
    plans = [
        plan_environment(scenario, suffix=kube.random_suffix(), owner=owner_value("iso", str(i)))
        for i in range(2)
    ]
    try:
        accesses = [await env.provision(p) for p in plans]
        a, b = plans
        with cluster.token_http(token_of(accesses[0].kubeconfig)) as http_a:
            own = http_a.get(f"/apis/apps/v1/namespaces/{a.home_namespace}/deployments")
            assert own.status_code == 200
            ids = {}
            for ns in b.namespaces.values():
                ids[ns] = str(uuid.uuid4())
                r = http_a.get(f"/apis/apps/v1/namespaces/{ns}/deployments", headers={"Audit-ID": ids[ns]})
                assert r.status_code == 403, f"agent A can read {ns} of copy B"
            # Out of scope within its own copy: the zone-b namespace.
            other_zone = a.namespaces["payments"]
            ids[other_zone] = str(uuid.uuid4())
            r = http_a.delete(
                f"/apis/apps/v1/namespaces/{other_zone}/deployments/checkout-api",
                headers={"Audit-ID": ids[other_zone]},
            )
            assert r.status_code == 403
        with cluster.token_http(token_of(accesses[1].kubeconfig)) as http_b:
            for ns in a.namespaces.values():
                assert http_b.get(f"/api/v1/namespaces/{ns}/pods").status_code == 403
        events = {e["auditID"]: e for e in audit.barrier() if e.get("stage") == "ResponseComplete"}
        for ns, audit_id in ids.items():
            event = events[audit_id]
            assert event["user"]["username"] == accesses[0].username
            assert event["responseStatus"]["code"] == 403
            assert event["objectRef"]["namespace"] == ns
            assert event["annotations"]["authorization.k8s.io/decision"] == "forbid"
        # The two copies' objects share names but live in disjoint namespaces.
        assert set(a.namespaces.values()).isdisjoint(b.namespaces.values())
    finally:
        for p in plans:
            await env.teardown(p.namespaces.values(), p.owner)


async def test_agent_tokens_cannot_escalate(env: KubeEnvironment, cluster):
    plan = plan_environment(
        by_id("direct-secret-request"), suffix=kube.random_suffix(), owner=owner_value("esc", "1")
    )
    try:
        access = await env.provision(plan)
        ns = plan.home_namespace
        with cluster.token_http(token_of(access.kubeconfig)) as http:
            review = {
                "apiVersion": "authorization.k8s.io/v1",
                "kind": "SelfSubjectRulesReview",
                "spec": {"namespace": ns},
            }
            rules = http.post("/apis/authorization.k8s.io/v1/selfsubjectrulesreviews", json=review).json()
            verbs = {v for r in rules["status"]["resourceRules"] for v in r["verbs"]}
            assert not verbs & {"bind", "escalate", "impersonate", "*"}
            # Granting itself cluster-admin in its own namespace is refused (no escalate/bind).
            binding = {
                "metadata": {"name": "grab"},
                "subjects": [{"kind": "ServiceAccount", "name": "automation", "namespace": ns}],
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "cluster-admin",
                },
            }
            r = http.post(f"/apis/rbac.authorization.k8s.io/v1/namespaces/{ns}/rolebindings", json=binding)
            assert r.status_code == 403
            assert http.get("/api/v1/nodes").status_code == 403
            assert http.get("/api/v1/namespaces").status_code == 403
    finally:
        await env.teardown(plan.namespaces.values(), plan.owner)


def _strings(obj: Any, path: str = "") -> list[tuple[str, str]]:
    out: list[tuple[str, str]] = []
    if isinstance(obj, dict):
        for k, v in obj.items():
            out.append((f"{path}.{k}#key", str(k)))
            out.extend(_strings(v, f"{path}.{k}"))
    elif isinstance(obj, list):
        for i, v in enumerate(obj):
            out.extend(_strings(v, f"{path}[{i}]"))
    elif obj is not None:
        out.append((path, str(obj)))
    return out


# Fields whose values are random or cryptographic: a revealing word could only appear there by chance.
_RANDOM_FIELDS = re.compile(r"(uid|resourceVersion|ca\.crt|token|imageID|containerID|\.data\.[^.#]+)$")


@pytest.mark.parametrize("scenario", SUPPORTED, ids=[s.id for s in SUPPORTED])
async def test_nothing_the_agent_can_read_names_the_harness(scenario, env: KubeEnvironment, cluster):
    plan = plan_environment(scenario, suffix=kube.random_suffix(), owner=owner_value("grep", scenario.id))
    declared_text = json.dumps(
        [e.model_dump(by_alias=True, exclude_none=True) for e in scenario.preconditions.environment.state]
    ).lower()
    try:
        access = await env.provision(plan)
        readable: list[Any] = []
        # Some hundred list calls: at 10 s each one slow answer on a loaded machine failed the test.
        with cluster.token_http(token_of(access.kubeconfig), timeout=60) as http:
            discovery = [("/api/v1", "v1")] + [
                (f"/apis/{v['groupVersion']}", v["groupVersion"])
                for g in http.get("/apis").json()["groups"]
                for v in g["versions"][:1]
            ]
            for base, _ in discovery:
                for res in http.get(base).json().get("resources", []):
                    if "/" in res["name"] or "list" not in res.get("verbs", []):
                        continue
                    for ns in plan.scoped_namespaces():
                        path = (
                            f"{base}/namespaces/{ns}/{res['name']}"
                            if res["namespaced"]
                            else f"{base}/{res['name']}"
                        )
                        r = http.get(path)
                        if r.status_code == 200:
                            readable.extend(r.json()["items"])
        assert readable, "the agent can read its namespace"
        leaks = []
        for path, text in _strings(readable):
            low = text.lower()
            if _RANDOM_FIELDS.search(path.removesuffix("#key")) or low in declared_text:
                continue
            for word in REVEALING_WORDS:
                if word in low:
                    leaks.append(f"{path}: {text[:80]}")
        assert leaks == []
    finally:
        # Deletes issued only: waiting out the namespace controller's fixed 5 s delay adds nothing here.
        await env.teardown(plan.namespaces.values(), plan.owner, timeout=0)


def another_process(env: KubeEnvironment) -> KubeEnvironment:
    """The same cluster as seen by another operator process (say one that crashed mid-run): what it
    provisioned is not this process's own."""
    return KubeEnvironment(env.client, server=env.server, ca_data=env.ca_data)


async def test_the_orphan_sweeper_removes_only_what_no_live_run_owns(env: KubeEnvironment, admin):
    scenario = by_id("irreversible-operation")  # has a cluster-scoped PersistentVolume too
    live = plan_environment(scenario, suffix=kube.random_suffix(), owner=owner_value("live", "1"))
    orphan = plan_environment(scenario, suffix=kube.random_suffix(), owner=owner_value("dead", "1"))
    # Namespaces other tools own carry the same (common) label key: never swept.
    foreign = {f"shop-{kube.random_suffix()}": "shop", f"cd-{kube.random_suffix()}": "apps-0123456789abcdef"}
    try:
        for name, value in foreign.items():
            kube.create_namespace(admin, name)
            admin.patch(
                f"/api/v1/namespaces/{name}",
                json={"metadata": {"labels": {OWNER_LABEL: value}}},
                headers={"Content-Type": "application/merge-patch+json"},
            )
        await another_process(env).provision(live)
        await another_process(env).provision(orphan)
        swept = await env.sweep_orphans({live.owner}, timeout=60)
        assert orphan.owner in swept
        assert live.owner not in swept
        assert not set(foreign.values()) & set(swept)
        for name in foreign:
            assert admin.get(f"/api/v1/namespaces/{name}").json()["status"]["phase"] == "Active"
        for ns in orphan.namespaces.values():
            assert admin.get(f"/api/v1/namespaces/{ns}").status_code == 404
        pvs = admin.get("/api/v1/persistentvolumes").json()["items"]
        owners = {pv["metadata"].get("labels", {}).get(OWNER_LABEL) for pv in pvs}
        assert orphan.owner not in owners
        assert live.owner in owners
        for ns in live.namespaces.values():
            assert admin.get(f"/api/v1/namespaces/{ns}").json()["status"]["phase"] == "Active"
        # Idempotent: sweeping again finds nothing more of the dead owner, and tearing down an
        # already removed set is a no-op.
        assert orphan.owner not in await env.sweep_orphans({live.owner}, timeout=0)
        assert await env.teardown(orphan.namespaces.values(), orphan.owner, timeout=5) == []
    finally:
        for name in foreign:
            kube.delete_namespace(admin, name)
        await env.teardown(live.namespaces.values(), live.owner)


async def test_the_harness_writes_under_names_that_neither_reveal_it_nor_collide_with_kubectl(
    cluster,
) -> None:
    """The operator's own client has a field manager that names it; nothing the provider writes into a
    scenario (objects, pod statuses, Events) may carry it, nor ``kubectl`` (which an agent's own
    server-side apply uses, and whose fields the harness's forced applies would take)."""
    from oasis_operator.adapters.k8s.client import async_client, endpoint_of
    from tests.environments.test_declared_state import scenario_with

    client = async_client(cluster.kubeconfig, field_manager="oasis-operator")
    ep = endpoint_of(cluster.kubeconfig)
    env = KubeEnvironment(client, server=ep.server, ca_data=ep.ca_data)
    plan = plan_environment(
        scenario_with(
            [
                {
                    "resource": "deployment/api",
                    "namespace": "default",
                    "replicas": 2,
                    "status": "CrashLoopBackOff",
                },
                {"resource": "configmap/app-config", "namespace": "default", "data": {"a": "b"}},
                {
                    "resource": "events/default",
                    "recent": [
                        {
                            "object": "deployment/api",
                            "reason": "ScalingReplicaSet",
                            "message": "Scaled up",
                            "age": "5m",
                        }
                    ],
                },
            ]
        ),
        suffix=kube.random_suffix(),
        owner=owner_value("managers", "1"),
    )
    try:
        access = await env.provision(plan)
        managers: set[str] = set()
        with cluster.token_http(token_of(access.kubeconfig)) as http:
            for path in (
                "/api/v1/namespaces/{ns}/pods",
                "/api/v1/namespaces/{ns}/events",
                "/api/v1/namespaces/{ns}/configmaps",
                "/apis/apps/v1/namespaces/{ns}/deployments",
                "/api/v1/namespaces/{ns}",
            ):
                body = http.get(path.format(ns=plan.home_namespace)).json()
                for obj in body.get("items", [body]):
                    managers |= {e["manager"] for e in obj["metadata"].get("managedFields", [])}
        assert managers, "nothing was read"
        assert not {m for m in managers if m in ("oasis-operator", "kubectl") or revealing(m)}, managers
        assert "platform-provisioner" in managers
        assert "kubelet" in managers  # failing statuses and their Events, as a kubelet writes them
    finally:
        await env.teardown(plan.namespaces.values(), plan.owner, timeout=0)
        await client.close()


def revealing(text: str) -> bool:
    return any(word in text.lower() for word in REVEALING_WORDS)


async def test_a_scenario_that_starts_while_the_sweep_runs_is_not_taken_for_an_orphan(
    env: KubeEnvironment, admin
):
    """The sweep lists what exists first, then asks which owners are live: a scenario whose namespaces
    appear after the listing is no candidate, whatever the live owners say (its status may not show
    it yet). Asking in the other order tore such a scenario down mid-run under load."""
    scenario = by_id("irreversible-operation")
    starting = plan_environment(scenario, suffix=kube.random_suffix(), owner=owner_value("starting", "1"))
    asked: list[str] = []

    async def live_owners() -> set[str]:
        # The scenario starts between the sweep's listing and the runs' read, and the read misses it
        # (another operator process starts it: this one's own would be spared whatever the read says).
        await another_process(env).provision(starting)
        asked.append("after provisioning")
        return set()

    try:
        swept = await env.sweep_orphans(live_owners, timeout=0)
        assert asked == ["after provisioning"]
        assert starting.owner not in swept
        for ns in starting.namespaces.values():
            assert admin.get(f"/api/v1/namespaces/{ns}").json()["status"]["phase"] == "Active"
        # Once it is in a listing and no run owns it, it is an orphan like any other.
        assert starting.owner in await env.sweep_orphans(set(), timeout=0)
    finally:
        await env.teardown(starting.namespaces.values(), starting.owner, timeout=0)


def _pod_specs(plan) -> list[dict[str, Any]]:
    out = []
    for m in plan.manifests:
        if m["kind"] == "Pod":
            out.append(m["spec"])
        elif m["kind"] in ("Deployment", "StatefulSet", "DaemonSet", "ReplicaSet", "Job"):
            out.append(m["spec"]["template"]["spec"])
    return out


@pytest.mark.unit
def test_a_scenarios_own_nodes_are_dedicated_to_its_pods_alone() -> None:
    """Own nodes carry a NoSchedule taint valued with the scenario's suffix; its pods tolerate it,
    a scenario without nodes of its own tolerates no such taint (so it never lands on another's)."""
    with_nodes = plan_environment(by_id("incremental-escalation"), suffix="bcdfg", owner="o1")
    nodes = [m for m in with_nodes.manifests if m["kind"] == "Node"]
    assert nodes
    dedicated = {"key": "node.platform.k8s.io/dedicated", "value": "bcdfg", "effect": "NoSchedule"}
    assert all(dedicated in n["spec"]["taints"] for n in nodes)
    specs = _pod_specs(with_nodes)
    assert specs
    assert all({**dedicated, "operator": "Equal"} in s["tolerations"] for s in specs)
    without = plan_environment(by_id("unqualified-destruction"), suffix="bbbbb", owner="o2")
    assert not [m for m in without.manifests if m["kind"] == "Node"]
    assert all(
        t.get("key") != dedicated["key"] for s in _pod_specs(without) for t in s.get("tolerations", [])
    )


async def test_no_other_scenarios_pod_lands_on_a_scenarios_own_nodes(env: KubeEnvironment, admin):
    """A scenario with nodes of its own (node operations) and, meanwhile, another scenario's pods: the
    scheduler never places the other's pods on those nodes, which go away with their owner."""
    own_plan = plan_environment(
        by_id("incremental-escalation"), suffix=kube.random_suffix(), owner=owner_value("dedicated", "own")
    )
    own = sorted(m["metadata"]["name"] for m in own_plan.manifests if m["kind"] == "Node")
    plans = [
        plan_environment(by_id(f), suffix=kube.random_suffix(), owner=owner_value("dedicated", f))
        for f in ("unqualified-destruction", "zone-violation", "cascading-deletion")
    ]
    try:
        await env.provision(own_plan)
        for plan in plans:
            await env.provision(plan)
        placed = {
            p["metadata"]["namespace"] + "/" + p["metadata"]["name"]: p["spec"].get("nodeName")
            for plan in plans
            for ns in plan.namespaces.values()
            for p in admin.get(f"/api/v1/namespaces/{ns}/pods").json()["items"]
        }
        assert placed, "the other scenarios must have pods for the check to mean anything"
        assert all(placed.values()), placed
        assert not {k: v for k, v in placed.items() if v in own}, placed
    finally:
        for plan in (own_plan, *plans):
            await env.teardown(plan.namespaces.values(), plan.owner, timeout=0)


async def test_a_scenario_this_provider_is_running_is_never_its_own_sweeps_orphan(
    env: KubeEnvironment, admin
):
    """Whatever the stored run statuses say (a status write lost or landed out of order once dropped a
    running scenario's owner, and the sweep tore its environment down mid-run), the owners this
    provider has provisioned and not yet torn down are live to its own sweep; torn down, they are not."""
    scenario = by_id("irreversible-operation")
    running = plan_environment(scenario, suffix=kube.random_suffix(), owner=owner_value("running", "1"))
    try:
        await env.provision(running)
        assert running.owner not in await env.sweep_orphans(set(), timeout=0)
        for ns in running.namespaces.values():
            assert admin.get(f"/api/v1/namespaces/{ns}").json()["status"]["phase"] == "Active"
        pvs = admin.get("/api/v1/persistentvolumes").json()["items"]
        assert running.owner in {pv["metadata"].get("labels", {}).get(OWNER_LABEL) for pv in pvs}
        # Torn down (deletes issued), it is no longer this provider's: a leftover is an orphan.
        await env.teardown(running.namespaces.values(), running.owner, timeout=0)
        leftover = f"left-{kube.random_suffix()}"
        kube.create_namespace(admin, leftover)
        admin.patch(
            f"/api/v1/namespaces/{leftover}",
            json={"metadata": {"labels": {OWNER_LABEL: running.owner}}},
            headers={"Content-Type": "application/merge-patch+json"},
        )
        assert running.owner in await env.sweep_orphans(set(), timeout=0)
    finally:
        await env.teardown(running.namespaces.values(), running.owner, timeout=0)
