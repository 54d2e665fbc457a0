"""The chart's ClusterRole against the kind registry (:mod:`oasis_operator.core.kinds`): the operator may
write every kind a scenario's environment is made of, cluster-scoped ones only with the opt-in
``rbac.clusterScopedScenarios``; and it may create nothing else but its own objects, each listed here
with the reason. A new state kind whose resource the chart does not grant fails here, not in a run."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from oasis_operator.core import kinds
from tests.shipping.conftest import Tools, helm_template

Grant = tuple[str, str, str]  # (group, resource, verb)

#: Resources the operator creates that are not a scenario's state: its own API, the agent's
#: credentials, the Job agent transport, its identity and revocation checks, its admission policy.
OPERATOR_OWN: dict[tuple[str, str], str] = {
    ("oasis.dev", "profiles"): "imported profiles",
    ("oasis.dev", "scenarios"): "imported scenarios",
    ("oasis.dev", "evaluationruns"): "the runs it drives",
    ("", "serviceaccounts/token"): "the agent's token (TokenRequest)",
    ("batch", "jobs"): "the Job agent transport",
    ("authentication.k8s.io", "selfsubjectreviews"): "the audit barrier's identity check",
    ("authorization.k8s.io", "subjectaccessreviews"): "the revocation proof",
    ("admissionregistration.k8s.io", "validatingadmissionpolicies"): "the provider's admission policy",
    ("admissionregistration.k8s.io", "validatingadmissionpolicybindings"): "its binding",
    ("events.k8s.io", "events"): "kopf's and the run's Events, through the newer Events API",
    ("kopf.dev", "clusterkopfpeerings"): "the peering guard against a second operator (decision 0114)",
    ("kopf.dev", "kopfpeerings"): "the same guard for an operator limited to namespaces",
}

#: Server-side apply creates or patches; what the provisioner applies needs both.
APPLY = ("create", "patch")
#: Cluster-scoped objects are found by their ownership label and deleted at teardown and by the sweep.
CLUSTER_OWNED = ("create", "patch", "list", "delete")


def granted(tools: Tools, tmp: Path, **rbac: Any) -> set[Grant]:
    done = helm_template(tools, tmp, {"rbac": rbac} if rbac else None)
    assert done.returncode == 0, done.stderr
    roles = [
        d
        for d in yaml.safe_load_all(done.stdout)
        if d and d["kind"] == "ClusterRole" and d["metadata"]["name"] == "oasis-operator"
    ]
    assert len(roles) == 1, [r["metadata"]["name"] for r in roles]
    return {
        (group, resource, verb)
        for rule in roles[0]["rules"]
        for group in rule.get("apiGroups", [])
        for resource in rule.get("resources", [])
        for verb in rule.get("verbs", [])
    }


def applied_namespaced() -> list[kinds.Kind]:
    """The namespaced kinds the provisioner applies: the ranked ones and those a state kind builds."""
    built = {s.kind for s in kinds.STATE_KINDS.values() if s.built}
    return [k for k in kinds.KINDS if not k.cluster_scoped and (k.rank is not None or k.kind in built)]


def missing(have: set[Grant], k: kinds.Kind, verbs: tuple[str, ...]) -> list[str]:
    return [
        f"{verb} {k.group or 'core'}/{k.plural}" for verb in verbs if (k.group, k.plural, verb) not in have
    ]


@pytest.fixture(scope="module")
def default_grants(tools: Tools, tmp_path_factory: pytest.TempPathFactory) -> set[Grant]:
    return granted(tools, tmp_path_factory.mktemp("rbac-default"))


@pytest.fixture(scope="module")
def opted_in_grants(tools: Tools, tmp_path_factory: pytest.TempPathFactory) -> set[Grant]:
    return granted(tools, tmp_path_factory.mktemp("rbac-cluster"), clusterScopedScenarios=True)


def test_the_registry_names_kinds_of_both_scopes() -> None:
    assert len(applied_namespaced()) >= 10
    assert len(kinds.OWNED_CLUSTER_KINDS) >= 3


def test_every_namespaced_kind_the_provisioner_applies_is_granted(default_grants: set[Grant]) -> None:
    lacking = [m for k in applied_namespaced() for m in missing(default_grants, k, APPLY)]
    assert lacking == []


def test_namespaces_are_created_found_and_deleted(default_grants: set[Grant]) -> None:
    assert missing(default_grants, kinds.BY_KIND["Namespace"], CLUSTER_OWNED) == []


def test_cluster_scoped_scenario_kinds_need_the_opt_in(
    default_grants: set[Grant], opted_in_grants: set[Grant]
) -> None:
    for k in kinds.OWNED_CLUSTER_KINDS:
        assert (k.group, k.plural, "create") not in default_grants, k.kind
    lacking = [m for k in kinds.OWNED_CLUSTER_KINDS for m in missing(opted_in_grants, k, CLUSTER_OWNED)]
    assert lacking == []


def test_the_operator_creates_nothing_but_registry_kinds_and_its_own_objects(
    opted_in_grants: set[Grant],
) -> None:
    registry = {(k.group, k.plural) for k in kinds.KINDS}
    created = {(group, resource) for group, resource, verb in opted_in_grants if verb == "create"}
    assert sorted(created - registry - set(OPERATOR_OWN)) == []
    # Each of the operator's own entries is still granted (a stale entry would hide a new grant).
    assert sorted(set(OPERATOR_OWN) - created) == []
