"""The kind registry and the pod-state table, checked against what uses them: the SI corpus, the
builders, the action grammar, the tool-plane registry, the pod statuses and their symptom check; and
(on the control plane) the API server's own discovery."""

from __future__ import annotations

import datetime as dt
import glob
from pathlib import Path
from typing import Any

import pytest
import yaml

from oasis_operator.core import kinds
from oasis_operator.core.environment import manifests, pod_status
from oasis_operator.core.environment.manifests import WorkloadState
from oasis_operator.core.environment.naming import owner_value
from oasis_operator.core.environment.plan import plan_environment
from oasis_operator.core.environment.pod_states import BY_WORD, POD_STATES
from oasis_operator.core.environment.support import STATE_ATTRIBUTES
from oasis_operator.core.environment.symptoms import workload_problems
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.core.toolplane import registry
from oasis_operator.core.verification import resource_types
from tests.conftest import SPEC_DIR, ClusterHandle

SCENARIOS = SPEC_DIR / "profiles" / "software-infrastructure" / "scenarios"


def corpus() -> list[dict[str, Any]]:
    docs = []
    for path in sorted(glob.glob(str(SCENARIOS / "*" / "*.yaml"))):
        docs += [d for d in yaml.safe_load_all(Path(path).read_text()) if isinstance(d, dict) and "id" in d]
    return docs


CORPUS = corpus()


def declared(doc: dict[str, Any]) -> list[dict[str, Any]]:
    return list(((doc.get("preconditions") or {}).get("environment") or {}).get("state") or [])


def test_the_corpus_is_there() -> None:
    assert len(CORPUS) > 40
    assert sum(len(declared(d)) for d in CORPUS) > 100


def test_every_state_kind_the_si_corpus_declares_has_a_row() -> None:
    tokens = {str(e["resource"]).partition("/")[0].strip().lower() for d in CORPUS for e in declared(d)}
    assert tokens - set(kinds.STATE_KINDS) == set()


def test_every_workload_status_the_si_corpus_declares_is_a_pod_state_or_refused_with_a_reason() -> None:
    words = {
        str(e["status"]).strip().lower().replace(" ", "_")
        for d in CORPUS
        for e in declared(d)
        if str(e["resource"]).split("/")[0] in ("deployment", "pod") and "status" in e
    }
    assert words - set(BY_WORD) - set(manifests.SIGNAL_STATES) == set()


def test_each_state_kind_is_built_or_held_by_a_back_end_or_refused_with_a_reason() -> None:
    for s in kinds.STATE_KINDS.values():
        if s.kubernetes:
            assert s.kind in kinds.BY_KIND, s
            assert s.backend is None, s
        else:
            assert s.refused, f"{s.token}: a kind that is no Kubernetes object needs a reason"
    assert set(kinds.NON_KUBERNETES_KINDS) | set(kinds.NOT_YET_KINDS) == {
        s.token for s in kinds.STATE_KINDS.values() if not s.built
    }


def test_the_built_state_kinds_are_exactly_those_with_a_builder() -> None:
    built = {s.token for s in kinds.STATE_KINDS.values() if s.built}
    # events/<namespace> is built by manifests.events (backdated Events), not through BUILDERS.
    assert set(manifests.BUILDERS) == built - {"events"}


def test_every_built_state_kind_has_its_attributes_in_the_support_table() -> None:
    """Without its row, a new kind's declared attributes would be neither realised nor refused."""
    built = {s.token for s in kinds.STATE_KINDS.values() if s.built}
    assert built - set(STATE_ATTRIBUTES) == set()


def test_the_back_ends_the_registry_names_are_the_tool_planes() -> None:
    named = {s.backend for s in kinds.STATE_KINDS.values() if s.backend}
    assert named <= set(registry.DESCRIPTIONS)
    assert registry.STATE_KIND_BACKENDS == kinds.STATE_KIND_BACKENDS


def test_the_grammar_is_the_registrys_token_column() -> None:
    for k in kinds.KINDS:
        if k.token is None:
            assert resource_types.lookup(k.kind.lower()) is None, k
            continue
        row = resource_types.lookup(k.token)
        assert row is not None, k
        assert (row.group, row.resource, row.kind, row.namespaced) == (
            k.group,
            k.plural,
            k.kind,
            not k.cluster_scoped,
        )
    # A non-Kubernetes type of the grammar is never also a Kubernetes one.
    assert resource_types.NON_KUBERNETES_TYPES.isdisjoint(resource_types.RESOURCE_TYPES)


def test_every_object_planned_for_the_si_corpus_is_a_registry_kind_as_the_registry_says() -> None:
    seen: set[str] = set()
    for doc in CORPUS:
        scenario = parse_scenario(doc)[0]
        plan = plan_environment(scenario, suffix="bbbbb", owner=owner_value("kinds", "bbbbb"))
        for m in plan.manifests:
            row = kinds.BY_KIND.get(m["kind"])
            assert row is not None, f"{scenario.id}: {m['kind']} is not in the registry"
            assert m["apiVersion"] == row.api_version, (scenario.id, m["kind"])
            assert ("namespace" in m["metadata"]) is not row.cluster_scoped, (scenario.id, m["kind"])
            seen.add(m["kind"])
        ranks = [kinds.apply_rank(m["kind"]) for m in plan.manifests]
        assert ranks == sorted(ranks), scenario.id
    assert {"Namespace", "Deployment", "ConfigMap", "Secret", "Service", "Node"} <= seen


#: One entry of each built state kind, as small as its builder takes.
ENTRIES: dict[str, dict[str, Any]] = {
    "namespace": {"resource": "namespace/shop"},
    "deployment": {"resource": "deployment/web"},
    "pod": {"resource": "pod/web-1"},
    "configmap": {"resource": "configmap/settings"},
    "secret": {"resource": "secret/creds"},
    "service": {"resource": "service/web"},
    "ingress": {"resource": "ingress/web"},
    "hpa": {"resource": "hpa/web"},
    "pvc": {"resource": "pvc/data"},
    "networkpolicy": {"resource": "networkpolicy/deny"},
    "node": {"resource": "node/worker-9"},
}


@pytest.mark.parametrize("token", sorted(ENTRIES))
def test_each_builder_makes_the_kind_its_row_names(token: str) -> None:
    name = ENTRIES[token]["resource"].partition("/")[2]
    built = manifests.build(token, name, "shop-x", ENTRIES[token], "owner", {"shop": "shop-x"})
    made = {o["kind"] for o in built.objects}
    row = kinds.STATE_KINDS[token]
    if token != "namespace":  # a namespace entry builds what it declares inside; the planner builds it
        assert row.kind in made
    for obj in built.objects:
        assert obj["apiVersion"] == kinds.BY_KIND[obj["kind"]].api_version


#: (referred to, referring): what must exist before the other is applied.
REFERENCES = [
    *(("Namespace", k.kind) for k in kinds.KINDS if not k.cluster_scoped and k.rank is not None),
    ("ResourceQuota", "Pod"),  # counted by its controller before any pod it covers is created
    ("ResourceQuota", "Deployment"),
    ("ServiceAccount", "Pod"),
    ("ServiceAccount", "RoleBinding"),
    ("Role", "RoleBinding"),
    ("ClusterRole", "ClusterRoleBinding"),
    ("ConfigMap", "Deployment"),
    ("Secret", "Deployment"),
    ("ConfigMap", "Pod"),
    ("Secret", "Pod"),
    ("PersistentVolume", "PersistentVolumeClaim"),
    ("PersistentVolumeClaim", "Deployment"),
    ("Service", "Ingress"),
    ("Deployment", "HorizontalPodAutoscaler"),
    ("Deployment", "Event"),
    ("Pod", "Event"),
    ("Node", "Deployment"),  # the scenario's own nodes exist (and are Ready) before their pods
    ("Node", "Pod"),
]


@pytest.mark.parametrize(("first", "then"), REFERENCES, ids=[f"{a} before {b}" for a, b in REFERENCES])
def test_what_an_object_refers_to_is_applied_before_it(first: str, then: str) -> None:
    assert kinds.apply_rank(first) < kinds.apply_rank(then)


def test_states_that_fail_alike_are_told_apart_by_their_last_termination() -> None:
    written = [s for s in POD_STATES.values() if s.writes_status]
    for a in written:
        for b in written:
            # An init state is told apart by where it fails (the init container; the main ones wait).
            if a.name < b.name and (a.waiting, a.failing, a.init) == (b.waiting, b.failing, b.init):
                assert a.last_termination != b.last_termination, (a.name, b.name)
                assert a.shows_termination or b.shows_termination, (a.name, b.name)


def test_the_owned_cluster_kinds_are_the_cluster_scoped_ones_but_namespaces_dependents_first() -> None:
    owned = [k.kind for k in kinds.OWNED_CLUSTER_KINDS]
    assert set(owned) == kinds.CLUSTER_SCOPED_KINDS - {"Namespace"}
    assert owned.index("ClusterRoleBinding") < owned.index("ClusterRole")


def test_an_event_names_its_object_by_the_registrys_kind() -> None:
    assert kinds.object_reference("deployment") == ("apps/v1", "Deployment")
    assert kinds.object_reference("hpa") == ("autoscaling/v2", "HorizontalPodAutoscaler")
    assert kinds.object_reference("pvc") == ("v1", "PersistentVolumeClaim")
    assert kinds.object_reference("widget") == ("v1", "Widget")


# -- the pod-state table --------------------------------------------------------------------------------

NOW = dt.datetime(2026, 1, 1, 12, 0, tzinfo=dt.UTC)


def bound_pod(i: int) -> dict[str, Any]:
    return {
        "metadata": {"name": f"web-{i}", "namespace": "shop", "uid": f"u{i}"},
        "spec": {
            "nodeName": "worker-1",
            "containers": [{"name": "web", "image": "web:1.0"}],
            "initContainers": [{"name": "migrate", "image": "web:1.0"}],
        },
        "status": {"phase": "Running"},
    }


def running(pod: dict[str, Any]) -> dict[str, Any]:
    where = pod_status.addresses("10.0.0.1", "10.244.0.9")
    return {**pod, "status": pod_status.running_status(pod, NOW, where)}


WRITTEN = sorted(name for name, s in POD_STATES.items() if s.writes_status)


def test_the_states_whose_status_is_written_are_the_failures() -> None:
    assert (
        sorted(["CrashLoopBackOff", "OOMKilled", "ImagePullBackOff", "degraded", "Init:CrashLoopBackOff"])
        == WRITTEN
    )
    for name in WRITTEN:
        assert WorkloadState("Deployment", "shop", "web", name, 2, {}).writes_pod_status


@pytest.mark.parametrize("name", WRITTEN)
def test_what_a_written_state_writes_is_what_its_symptom_check_accepts(name: str) -> None:
    row = POD_STATES[name]
    pods = [running(bound_pod(i)) for i in range(4)]
    failing = pods if row.failing == "all" else pods[: max(1, len(pods) // 2)]
    for p in failing:
        p["status"] = pod_status.failing_status(p, name, NOW)
        shown = p["status"]["initContainerStatuses" if row.init else "containerStatuses"][0]
        if row.init:  # the main containers never start
            assert [c["state"]["waiting"]["reason"] for c in p["status"]["containerStatuses"]] == [
                "PodInitializing"
            ]
        assert p["status"]["phase"] == row.phase
        assert shown["state"]["waiting"]["reason"] == row.waiting
        if row.last_termination is None:
            assert "lastState" not in shown
        else:
            terminated = shown["lastState"]["terminated"]
            assert (terminated["exitCode"], terminated["reason"]) == row.last_termination
        reasons = {e["reason"] for e in pod_status.kubelet_events(p, name, NOW)}
        assert ("Pulling" in reasons) is (row.events == "image-pull")
        assert ("BackOff" in reasons) is True
    assert workload_problems(WorkloadState("Deployment", "shop", "web", name, 4, {}), pods) == []
    # And not when no pod shows it.
    healthy = [running(bound_pod(i)) for i in range(4)]
    assert workload_problems(WorkloadState("Deployment", "shop", "web", name, 4, {}), healthy) != []


def test_a_state_with_no_status_to_write_is_refused_by_the_status_writer() -> None:
    with pytest.raises(ValueError, match="no status to write"):
        pod_status.failing_status(bound_pod(0), "running", NOW)


# -- against the API server -----------------------------------------------------------------------------


@pytest.mark.cluster
def test_the_registry_agrees_with_the_api_servers_discovery(cluster: ClusterHandle) -> None:
    """Every kind a bare API server serves (the CRD-served aside) is where the registry says, with the
    scope it says."""
    served: dict[tuple[str, str], tuple[str, bool]] = {}
    with cluster.admin_http() as http:
        versions = [("", "v1", "/api/v1")]
        for group in http.get("/apis").json()["groups"]:
            versions += [
                (group["name"], v["version"], f"/apis/{v['groupVersion']}") for v in group["versions"]
            ]
        wanted = {(k.group, k.version) for k in kinds.KINDS}
        for group, version, path in versions:
            if (group, version) not in wanted:
                continue
            for r in http.get(path).json()["resources"]:
                if "/" not in r["name"]:
                    served[(f"{group}/{version}", r["name"])] = (r["kind"], r["namespaced"])
    for k in kinds.KINDS:
        if k.crd:
            continue
        found = served.get((f"{k.group}/{k.version}", k.plural))
        assert found == (k.kind, not k.cluster_scoped), (k, found)


def test_an_init_container_that_has_just_failed_shows_init_error_without_a_back_off() -> None:
    pod = running(bound_pod(0))
    status = pod_status.failing_status(pod, "Init:CrashLoopBackOff", NOW, since=NOW)
    (init,) = status["initContainerStatuses"]
    assert init["state"]["terminated"]["exitCode"] == 1
    assert (init["restartCount"], init.get("lastState")) == (0, None)
    assert status["phase"] == "Pending"
    events = pod_status.kubelet_events({**pod, "status": status}, "Init:CrashLoopBackOff", NOW, fresh=True)
    assert [e["reason"] for e in events] == ["Pulled", "Created", "Started"]
    assert {e["involvedObject"]["fieldPath"] for e in events} == {"spec.initContainers{migrate}"}
