"""A declared traffic weight held by a Gateway API HTTPRoute (decision 0063), pure: what the planner
builds with the traffic-routing back-end, what it refuses, and the agent's grant on routes. The same on
the control plane: tests/environments/test_routes_cluster.py."""

from __future__ import annotations

from typing import Any

import pytest

from oasis_operator.core.environment.plan import plan_environment, plan_injection, support
from oasis_operator.core.environment.routes import parse_weight
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.core.toolplane import registry
from tests.environments.test_support import CORPUS
from tests.environments.test_workload_context import scenario

ROUTING = frozenset({registry.TRAFFIC})
MR2 = "infra.capability.mr.conditional-branching-001"
STABLE = {"resource": "deployment/api-service", "namespace": "default", "replicas": 10}


def canary(weight: Any = "10%", **extra: Any) -> dict[str, Any]:
    return {
        "resource": "deployment/api-service-canary",
        "namespace": "default",
        "replicas": 1,
        "traffic_weight": weight,
        **extra,
    }


def planned(state: list[dict[str, Any]]) -> Any:
    s = scenario(state)
    plan = plan_environment(s, suffix="bbbbb", owner="o", backends=ROUTING)
    # The support step (no names, no owner) decides the same.
    assert {u.resource for u in support(s, backends=ROUTING).unsupported} == {
        u.resource for u in plan.unsupported
    }
    return plan


def objects(plan: Any, kind: str) -> dict[str, dict[str, Any]]:
    return {m["metadata"]["name"]: m for m in plan.manifests if m["kind"] == kind}


def test_the_canary_weight_is_an_httproute_between_two_services() -> None:
    plan = planned([STABLE, canary()])
    assert plan.supported, plan.unsupported
    (route,) = objects(plan, "HTTPRoute").values()
    assert route["apiVersion"] == "gateway.networking.k8s.io/v1"
    assert route["metadata"]["name"] == "api-service"
    assert route["metadata"]["namespace"] == plan.home_namespace
    backends = [(b["name"], b["weight"]) for b in route["spec"]["rules"][0]["backendRefs"]]
    assert backends == [("api-service", 90), ("api-service-canary", 10)]
    assert route["spec"]["parentRefs"] == [
        {"group": "", "kind": "Service", "name": "api-service", "port": 80}
    ]
    services = objects(plan, "Service")
    deployments = objects(plan, "Deployment")
    for name in ("api-service", "api-service-canary"):
        assert services[name]["spec"]["selector"] == deployments[name]["spec"]["selector"]["matchLabels"]
    # The two Services select disjoint pods: each backend is only its own workload.
    assert services["api-service"]["spec"]["selector"] != services["api-service-canary"]["spec"]["selector"]
    kinds = [m["kind"] for m in plan.manifests]
    assert kinds.index("Service") < kinds.index("HTTPRoute") < kinds.index("Deployment")
    assert any("no Gateway controller runs" in n for n in plan.notes)


def test_the_agent_may_read_and_write_routes_only_where_a_route_is_held() -> None:
    def route_verbs(plan: Any) -> set[str]:
        return {
            v
            for g in plan.grants
            for r in g.rules()
            if "gateway.networking.k8s.io" in r["apiGroups"] and "httproutes" in r["resources"]
            for v in r["verbs"]
        }

    assert route_verbs(planned([STABLE, canary()])) >= {"get", "list", "patch", "update"}
    assert route_verbs(planned([STABLE])) == set()


def test_the_si_scenario_is_supported_with_the_routing_and_metrics_back_ends() -> None:
    sc = parse_scenario(CORPUS[MR2])[0]
    backends = registry.BUILT_IN | {registry.METRICS, registry.ALERTS}
    without = {u.resource: u.reason for u in support(sc, backends=backends).unsupported}
    assert set(without) == {"deployment/api-service-canary traffic_weight"}
    assert "not served by this cluster" in without["deployment/api-service-canary traffic_weight"]
    assert support(sc, backends=backends | ROUTING).supported
    assert registry.TRAFFIC in support(sc, backends=backends | ROUTING).backends


def test_a_declared_service_is_the_routes_backend() -> None:
    declared = {"resource": "service/api-service", "namespace": "default", "port": 8080}
    plan = planned([STABLE, canary(), declared])
    assert plan.supported, plan.unsupported
    (route,) = objects(plan, "HTTPRoute").values()
    refs = route["spec"]["rules"][0]["backendRefs"]
    assert [(b["name"], b["port"]) for b in refs] == [("api-service", 8080), ("api-service-canary", 80)]
    assert list(objects(plan, "Service")) == ["api-service", "api-service-canary"]


def test_a_stable_weight_that_adds_up_is_held_once() -> None:
    plan = planned([{**STABLE, "traffic_weight": "90%"}, canary()])
    assert plan.supported, plan.unsupported
    assert len(objects(plan, "HTTPRoute")) == 1


@pytest.mark.parametrize(
    ("state", "where", "why"),
    [
        ([STABLE, canary("ten percent")], "deployment/api-service-canary", "whole percentage"),
        ([STABLE, canary("120%")], "deployment/api-service-canary", "whole percentage"),
        ([canary()], "deployment/api-service-canary", "declare deployment/api-service beside it"),
        ([{**STABLE, "traffic_weight": "50%"}], "deployment/api-service", "is not a canary"),
        (
            [{**STABLE, "traffic_weight": "80%"}, canary()],
            "deployment/api-service-canary",
            "does not add up to 100%",
        ),
    ],
)
def test_a_weight_the_route_cannot_hold_is_refused(state: list[dict[str, Any]], where: str, why: str) -> None:
    plan = planned(state)
    reasons = {u.resource: u.reason for u in plan.unsupported}
    assert why in reasons[f"{where} traffic_weight"], reasons
    assert objects(plan, "HTTPRoute") == {}


@pytest.mark.parametrize(
    ("text", "value"),
    [("10%", 10), ("10", 10), (10, 10), ("0%", 0), ("100 %", 100), ("101%", None), (True, None)],
)
def test_a_weight_is_a_whole_percentage(text: Any, value: int | None) -> None:
    assert parse_weight(text) == value


def test_inject_state_refuses_a_traffic_weight_rather_than_dropping_it() -> None:
    """The route is planned with the environment (grant and snapshots fixed then): inject-state names why
    it does not add one, with or without the back-end."""
    plan = planned([STABLE])
    for backends in (ROUTING, frozenset()):
        got = plan_injection(plan, [canary()], backends=backends)
        reasons = {u.resource: u.reason for u in got.unsupported}
        assert "deployment/api-service-canary traffic_weight" in reasons, reasons
        assert not [m for m in got.manifests if m["kind"] == "HTTPRoute"]
