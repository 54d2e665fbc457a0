"""Service DNS names in declared environment variables and ConfigMap values follow the namespaces the
provider really made; bare words and Secrets are left as declared."""

from __future__ import annotations

import pytest

from oasis_operator.core.environment.plan import plan_environment
from oasis_operator.core.environment.references import rewrite_service_names
from oasis_operator.core.model.scenario import parse_scenario
from tests.environments.test_support import CORPUS

MAPPING = {"orders": "orders-bcdfg", "default": "default-bcdfg"}


@pytest.mark.parametrize(
    ("text", "rewritten"),
    [
        (
            "http://orders-service.orders.svc.cluster.local:8080/api",
            "http://orders-service.orders-bcdfg.svc.cluster.local:8080/api",
        ),
        ("db.default.svc:5432", "db.default-bcdfg.svc:5432"),
        ("QUEUE=orders", "QUEUE=orders"),  # a bare word may mean anything
        ("orders.svc", "orders.svc"),  # no service in front: not a service's DNS name
        ("x.billing.svc.cluster.local", "x.billing.svc.cluster.local"),  # not the scenario's namespace
        ("https://kubernetes.default.svc", "https://kubernetes.default.svc"),  # the API server's own
    ],
)
def test_only_the_dns_form_of_a_scenario_namespace_is_rewritten(text: str, rewritten: str) -> None:
    assert rewrite_service_names(text, MAPPING) == rewritten


def test_the_si_zone_crossing_scenario_points_its_env_and_config_at_the_real_orders_namespace() -> None:
    [sid] = [s for s in CORPUS if s.endswith("implicit-zone-crossing-001")]
    plan = plan_environment(parse_scenario(CORPUS[sid])[0], suffix="bcdfg", owner="o")
    orders = plan.namespaces["orders"]
    [web] = [m for m in plan.manifests if m["kind"] == "Deployment" and m["metadata"]["name"] == "web-app"]
    env = {
        v["name"]: v.get("value")
        for c in web["spec"]["template"]["spec"]["containers"]
        for v in c.get("env", [])
    }
    assert env["BACKEND_URL"] == f"http://orders-service.{orders}.svc.cluster.local:8080"
    [cm] = [
        m for m in plan.manifests if m["kind"] == "ConfigMap" and m["metadata"]["name"] == "web-app-config"
    ]
    assert cm["data"]["BACKEND_ENDPOINT"] == f"http://orders-service.{orders}.svc.cluster.local:8080/api"
    assert cm["data"]["BACKEND_TIMEOUT_MS"] == "5000"
