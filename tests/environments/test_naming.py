"""Names the harness gives what it creates: ordinary to an agent, exact for the harness (decision 0044)."""

from __future__ import annotations

import re

import pytest

from oasis_operator.core.environment.admission import policy_manifests
from oasis_operator.core.environment.naming import (
    OWNER_LABEL,
    OWNER_VALUE_PATTERN,
    is_owner_value,
    owner_value,
    physical_namespace,
    revealing_words_in,
    status_marker,
)

#: Instance label values real clusters carry (Helm releases, Argo CD applications), and near misses.
FOREIGN = {
    "a Helm release": "ingress-nginx",
    "an Argo CD application": "apps",
    "the right shape with a wrong check": "apps-0123456789abcdef",
    "too short": "apps-0123456789abc",
    "upper-case hex": owner_value("r", "s").upper(),
    "an empty value": "",
}


def test_an_ownership_value_reads_as_an_application_name_and_is_recognised_exactly() -> None:
    values = {owner_value(f"run-{i}", "infra.safety.do.x-001#1") for i in range(200)}
    assert len(values) == 200
    assert all(is_owner_value(v) and re.match(OWNER_VALUE_PATTERN, v) for v in values)
    assert all(len(v) <= 63 and not revealing_words_in(v) for v in values)
    assert owner_value("r", "s") == owner_value("r", "s")  # recomputable after a restart


@pytest.mark.parametrize("value", list(FOREIGN.values()), ids=list(FOREIGN))
def test_an_instance_label_another_tool_set_is_never_taken_for_the_harness(value: str) -> None:
    assert not is_owner_value(value)


def test_the_ownership_label_is_the_instance_label_gitops_tools_set() -> None:
    # Not a reserved Kubernetes domain (k8s.io, kubernetes.io) that no real component uses on namespaces:
    # the shared recommended-label prefix app.kubernetes.io/.
    assert OWNER_LABEL == "app.kubernetes.io/instance"


def test_the_admission_policy_keys_on_the_label_and_checks_the_value_shape() -> None:
    policy, _ = policy_manifests()
    selector = policy["spec"]["matchConstraints"]["namespaceSelector"]["matchExpressions"]
    assert selector == [{"key": OWNER_LABEL, "operator": "Exists"}]
    (variable,) = policy["spec"]["variables"]
    assert OWNER_LABEL in variable["expression"]
    assert OWNER_VALUE_PATTERN in variable["expression"]
    assert all(v["expression"].startswith("!variables.owned || ") for v in policy["spec"]["validations"])


def test_the_pod_status_marker_is_a_config_checksum_of_the_owner() -> None:
    marker = status_marker(owner_value("r", "s"))
    assert re.fullmatch(r"[0-9a-f]{64}", marker)
    assert marker != status_marker(owner_value("r", "t"))


@pytest.mark.parametrize(
    ("logical", "suffix", "physical"),
    [
        ("default", "x7kqz", "default-x7kqz"),
        ("Payments_EU", "bcdfg", "payments-eu-bcdfg"),
        ("a" * 80, "bcdfg", "a" * 57 + "-bcdfg"),
    ],
)
def test_a_physical_namespace_is_the_logical_name_and_the_suffix(
    logical: str, suffix: str, physical: str
) -> None:
    assert physical_namespace(logical, suffix) == physical


@pytest.mark.parametrize(
    ("sentence", "entry"),
    [
        (
            "a namespace declaring the ownership label",
            {"resource": "namespace/default", "labels": {OWNER_LABEL: "shop"}},
        ),
        (
            "a pod declaring the status marker",
            {"resource": "pod/worker-0", "namespace": "default", "annotations": {"checksum/config": "abc"}},
        ),
    ],
    ids=lambda v: v if isinstance(v, str) else "",
)
def test_declared_state_that_would_collide_with_the_harness_bookkeeping_is_refused(
    sentence: str, entry: dict
) -> None:
    from oasis_operator.core.environment.plan import plan_environment
    from tests.environments.test_declared_state import scenario_with

    plan = plan_environment(scenario_with([entry]), suffix="bcdfg", owner=owner_value("r", "s"))
    assert not plan.supported
    assert any(OWNER_LABEL in u.reason or "checksum/config" in u.reason for u in plan.unsupported), (
        plan.unsupported
    )
