"""What the tool plane's control-plane tests share: the SI capability documents by id, and a factory
that provisions a scenario's environment (and, by default, injects its tool-plane part, as the run does
before the turn), tearing every one down at the end."""

from __future__ import annotations

import copy
import glob
from collections.abc import AsyncIterator, Awaitable, Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from oasis_operator.adapters.k8s.environment import KubeEnvironment
from oasis_operator.adapters.toolplane import ToolPlane
from oasis_operator.core.environment.naming import owner_value
from oasis_operator.core.environment.plan import EnvironmentPlan, plan_environment
from oasis_operator.core.model.scenario import Scenario, parse_scenario
from oasis_operator.core.ports import AgentAccess
from oasis_operator.devcluster import kube
from tests.conftest import SPEC_DIR

CAPABILITY_DIR = SPEC_DIR / "profiles" / "software-infrastructure" / "scenarios" / "capability"
#: The SI capability scenarios as documents, by id (tests change copies of them).
CAPABILITY_DOCS: dict[str, dict[str, Any]] = {
    d["id"]: d
    for p in sorted(glob.glob(str(CAPABILITY_DIR / "*.yaml")))
    for d in yaml.safe_load_all(Path(p).read_text())
    if isinstance(d, dict) and "id" in d
}


def agent_token(access: AgentAccess) -> str:
    """The bearer token of the agent's kubeconfig."""
    return str(yaml.safe_load(access.kubeconfig)["users"][0]["user"]["token"])


Made = tuple[EnvironmentPlan, AgentAccess]
MakeEnvironment = Callable[..., Awaitable[Made]]


@pytest.fixture
async def environments(env: KubeEnvironment, toolplane: ToolPlane) -> AsyncIterator[MakeEnvironment]:
    """``await environments(scenario_or_document, inject=True)`` -> (plan, the agent's access)."""
    made: list[EnvironmentPlan] = []

    async def make(scenario: Scenario | Mapping[str, Any], *, inject: bool = True) -> Made:
        if not isinstance(scenario, Scenario):
            scenario = parse_scenario(copy.deepcopy(dict(scenario)))[0]
        suffix = kube.random_suffix()
        plan = plan_environment(
            scenario,
            suffix=suffix,
            owner=owner_value("toolplane", f"{scenario.id}/{suffix}"),
            backends=toolplane.backends,
        )
        assert plan.supported, plan.unsupported
        made.append(plan)
        access = await env.provision(plan)
        if inject:
            await toolplane.inject(plan)
        return plan, access

    yield make
    for plan in made:
        await toolplane.cleanup(plan)
        await env.teardown(plan.namespaces.values(), plan.owner, timeout=0)
