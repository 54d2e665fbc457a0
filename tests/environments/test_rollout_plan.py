"""A rollout in progress, as planned (pure): which images it goes between, and what the plan asks for."""

from __future__ import annotations

import pytest

from oasis_operator.core.environment.manifests import ROLLING_START_SECONDS, _bump, _rollout_images
from oasis_operator.core.environment.naming import STATUS_BY_PROVIDER_ANNOTATION, status_marker
from oasis_operator.core.environment.plan import plan_environment
from tests.environments.test_declared_state import scenario_with


@pytest.mark.parametrize(
    ("entry", "images"),
    [
        ({}, ("registry.internal/web:1.4.2", "registry.internal/web:1.5.0")),
        ({"image": "shop/web:v2.1.0"}, ("shop/web:v2.0.0", "shop/web:v2.1.0")),
        ({"previous_image": "web:3.0.1", "current_image": "web:3.1.0"}, ("web:3.0.1", "web:3.1.0")),
        ({"previous_image": "web:3.0.1"}, ("web:3.0.1", "web:3.1.0")),
        ({"image": "web:stable"}, ("web:stable-prev", "web:stable")),
    ],
    ids=["default images", "target declared", "both declared", "source declared", "a tag that is no version"],
)
def test_the_images_a_rollout_goes_between(entry, images):
    assert _rollout_images("web", entry) == images


def test_bumping_the_lowest_version_goes_to_the_major_below():
    assert _bump("web:1.0.3", -1) == "web:0.9.0"
    assert _bump("registry:5000/web", +1) == "registry:5000/web:latest-next"


def test_the_plan_of_a_rollout_in_progress():
    plan = plan_environment(
        scenario_with(
            [
                {
                    "resource": "deployment/web-app",
                    "namespace": "default",
                    "replicas": 3,
                    "status": "rolling_update_in_progress",
                }
            ]
        ),
        suffix="bcdfg",
        owner="0123456789ab",
    )
    assert plan.supported, plan.unsupported
    (w,) = plan.workloads
    assert (w.state, w.history, w.on_restart, w.start_seconds) == (
        "rolling",
        ("registry.internal/web-app:1.4.2",),
        "running",
        ROLLING_START_SECONDS,
    )
    (dep,) = [m for m in plan.manifests if m["kind"] == "Deployment"]
    tpl = dep["spec"]["template"]
    assert tpl["spec"]["containers"][0]["image"] == "registry.internal/web-app:1.5.0"
    assert tpl["metadata"]["annotations"] == {STATUS_BY_PROVIDER_ANNOTATION: status_marker("0123456789ab")}
    assert dep["spec"]["strategy"] == {"type": "RollingUpdate"}
