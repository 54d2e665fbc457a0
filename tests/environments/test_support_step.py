"""The support step (environment/plan.support) decides from the scenario alone what the building step
(plan_environment) decides for any names: what is refused, exclusivity, the cluster-scoped kinds and
the tool-plane back-ends. Triage asks only the support step, so a disagreement would run a scenario
the provisioner then refuses, or exclude one it could run."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from oasis_operator.core.environment.naming import OWNER_LABEL, Naming, owner_value
from oasis_operator.core.environment.plan import (
    EnvironmentPlan,
    Support,
    build_plan,
    plan_environment,
    support,
)
from oasis_operator.core.kinds import CLUSTER_SCOPED_KINDS
from oasis_operator.core.model.scenario import Scenario, parse_scenario
from oasis_operator.core.toolplane import registry
from oasis_operator.core.triage import triage, unreadable
from oasis_operator.core.verdicts import Exclusion
from tests.environments.test_support import CORPUS

SCENARIOS: dict[str, Scenario] = {sid: parse_scenario(copy.deepcopy(doc))[0] for sid, doc in CORPUS.items()}
ALL = frozenset(registry.DESCRIPTIONS)
NAMINGS = (("bcdfg", owner_value("run-a", "1")), ("zz999", owner_value("run-b", "2")))


def _as_support(plan: EnvironmentPlan) -> Support:
    kinds = {str(m.get("kind")) for m in plan.manifests} & (CLUSTER_SCOPED_KINDS - {"Namespace"})
    if plan.cluster_grants:
        kinds |= {"ClusterRole", "ClusterRoleBinding"}
    return Support(plan.unsupported, plan.exclusive, tuple(sorted(kinds)), plan.toolplane.backends)


@pytest.mark.parametrize("backends", [frozenset(), ALL], ids=["no-backends", "all-backends"])
def test_support_is_the_building_steps_for_every_naming(backends: frozenset[str]) -> None:
    decided = {sid: support(s, backends=backends) for sid, s in SCENARIOS.items()}
    assert len(decided) == 50
    # With every back-end, every SI scenario can be built; without, those needing one are refused.
    assert {d.supported for d in decided.values()} == ({True} if backends else {True, False})
    # One refused whatever the back-ends (a status marker the provisioner cannot honour), so both
    # answers are compared between the two steps in either case.
    scenarios = {**SCENARIOS, "refused": _with_pod({"checksum/config": "0" * 64})}
    decided["refused"] = support(scenarios["refused"], backends=backends)
    assert not decided["refused"].supported
    for suffix, owner in NAMINGS:
        built = {
            sid: _as_support(plan_environment(s, suffix=suffix, owner=owner, backends=backends))
            for sid, s in scenarios.items()
        }
        assert decided == built
    # The corpus exercises every answer: alone and not, cluster-scoped writes.
    assert {d.exclusive for d in decided.values()} == {True, False}
    assert any(d.cluster_kinds for d in decided.values())


def test_a_naming_without_a_suffix_keeps_the_declared_names_owns_what_it_adds_and_decides_the_same() -> None:
    # A cluster of the scenario's own needs no suffix: the names are the declared ones, exactly.
    owner = owner_value("run-c", "3")
    for sid, scenario in SCENARIOS.items():
        plan = build_plan(scenario, Naming(owner=owner), backends=ALL)
        assert all(logical == physical for logical, physical in plan.namespaces.items()), sid
        assert {m["metadata"].get("namespace") for m in plan.manifests} <= {None, *plan.namespaces}, sid
        owned = [m for m in plan.manifests if m.get("kind") in CLUSTER_SCOPED_KINDS]
        assert all(m["metadata"]["labels"][OWNER_LABEL] == owner for m in owned), sid
        assert Support.of(plan) == support(scenario, backends=ALL), sid


def _with_pod(annotations: dict[str, str]) -> Scenario:
    doc: dict[str, Any] = copy.deepcopy(CORPUS["infra.safety.do.unqualified-destruction-001"])
    doc["preconditions"]["environment"]["state"].append(
        {"resource": "pod/marked", "namespace": "default", "status": "running", "annotations": annotations}
    )
    return parse_scenario(doc)[0]


def test_a_declared_status_marker_is_refused_before_any_ownership_value_exists() -> None:
    scenario = _with_pod({"checksum/config": "0" * 64})
    refused = [u.resource for u in support(scenario).unsupported]
    assert refused == ["pod/marked"]
    built = plan_environment(scenario, suffix="bcdfg", owner=owner_value("r", "s"))
    assert [u.resource for u in built.unsupported] == refused


def test_triage_reads_the_support_step() -> None:
    decided = triage(SCENARIOS["infra.safety.ae.incremental-escalation-001"], {}, cluster_scoped=False)
    assert decided.exclusion == Exclusion.UNSUPPORTED
    assert decided.exclusive is True
    assert "needs cluster-scoped ClusterRole, ClusterRoleBinding, Node" in decided.reason


def test_a_document_the_model_refuses_is_invalid_with_the_error() -> None:
    decided = unreadable("preconditions: required field is missing")
    assert (decided.exclusion, decided.reason, decided.exclusive) == (
        Exclusion.INVALID,
        "preconditions: required field is missing",
        None,
    )


def test_the_cascading_diagnosis_runs_with_its_back_ends_and_is_refused_without_the_log_back_end() -> None:
    scenario = SCENARIOS["infra.capability.da.cascading-diagnosis-001"]
    assert support(scenario, backends=ALL).unsupported == ()
    without_logs = support(scenario, backends=ALL - {registry.LOGS})
    assert sorted(u.resource for u in without_logs.unsupported) == [
        "agent.tools: observability-logging",
        "deployment/api-backend init_containers[0] logs",
        "logs/service-mesh-sidecar",
    ]
