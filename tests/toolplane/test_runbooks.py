"""Runbooks (decision 0059): a scenario's declared runbook is a ConfigMap of its home namespace with the
steps numbered in order, what the agent's own kubeconfig reads; a malformed one is refused naming why."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from oasis_operator.core.environment.plan import EnvironmentPlan, plan_environment
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.core.toolplane import registry
from oasis_operator.core.toolplane.plan import RUNBOOK_LABEL
from tests.conftest import ClusterHandle
from tests.toolplane.conftest import CAPABILITY_DOCS as RAW
from tests.toolplane.conftest import MakeEnvironment, agent_token

RUNBOOK = "infra.capability.mr.runbook-execution-001"
ALL = frozenset(registry.DESCRIPTIONS)


def _plan(doc: dict[str, Any], backends: frozenset[str] = ALL) -> EnvironmentPlan:
    return plan_environment(
        parse_scenario(copy.deepcopy(doc))[0], suffix="ccccc", owner="o", backends=backends
    )


def test_the_si_runbook_is_a_configmap_with_its_steps_in_order() -> None:
    plan = _plan(RAW[RUNBOOK])
    assert plan.supported, plan.unsupported
    [book] = plan.toolplane.runbooks
    cm = book.configmap()
    assert (cm["metadata"]["name"], cm["metadata"]["namespace"]) == (
        "runbook-elevated-error-rate",
        plan.home_namespace,
    )
    assert cm["metadata"]["labels"] == {RUNBOOK_LABEL: "runbook"}
    lines = cm["data"]["runbook.md"].splitlines()
    assert lines[2:] == [
        "1. Check error logs for pattern",
        "2. Check if deployment occurred in last 30 minutes",
        "3. If recent deploy, rollback to previous version",
        "4. Verify error rate returns to baseline within 5 minutes",
    ]


@pytest.mark.parametrize(
    ("entry", "words"),
    [
        ({"resource": "runbook/x"}, "needs `steps`"),
        ({"resource": "runbook/x", "steps": "do it"}, "needs `steps`"),
        ({"resource": "runbook/x", "steps": ["a"], "owner": "sre"}, "unknown attributes ['owner']"),
    ],
)
def test_a_malformed_runbook_is_refused_naming_why(entry: dict[str, Any], words: str) -> None:
    doc = copy.deepcopy(RAW[RUNBOOK])
    state = doc["preconditions"]["environment"]["state"]
    state[:] = [e for e in state if not e["resource"].startswith("runbook/")] + [entry]
    [refused] = [u for u in _plan(doc).unsupported if u.resource == "runbook/x"]
    assert words in refused.reason


def test_without_a_tool_plane_a_runbook_is_refused_naming_the_back_end() -> None:
    [refused] = [u for u in _plan(RAW[RUNBOOK], frozenset()).unsupported if u.resource.startswith("runbook/")]
    assert "runbook back-end" in refused.reason


@pytest.mark.cluster
async def test_the_agent_reads_the_runbook_with_its_own_kubeconfig(
    environments: MakeEnvironment,
    cluster: ClusterHandle,
) -> None:
    plan, access = await environments(RAW[RUNBOOK])
    [book] = plan.toolplane.runbooks
    with cluster.token_http(agent_token(access)) as agent:
        resp = agent.get(f"/api/v1/namespaces/{plan.home_namespace}/configmaps/{book.object_name}")
        assert resp.status_code == 200, resp.text
        assert resp.json()["data"] == book.configmap()["data"]
