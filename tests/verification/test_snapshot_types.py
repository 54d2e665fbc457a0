"""A snapshot object's type is the resource its audit events name: the state cross-check looks the
object's writers up by it. For a kind served under an irregular plural (``Endpoints``) a guessed
``endpointss`` found no writer at all, so the endpoints controller's every update of a Service's
Endpoints, after a restart say, was an unaudited change held against the agent."""

from __future__ import annotations

import pytest

from oasis_operator.core.environment.grants import snapshot_resources
from oasis_operator.core.verification.resource_types import plural_of, type_of_object
from oasis_operator.core.verification.unaudited import declared_diff
from tests.capability.cases import CASES
from tests.capability.replay import replay


@pytest.mark.parametrize("granted", snapshot_resources(), ids=lambda r: r.kind)
def test_every_snapshotted_kind_is_keyed_by_its_served_resource(granted) -> None:
    version = f"{granted.group}/{granted.version}" if granted.group else granted.version
    assert type_of_object({"apiVersion": version, "kind": granted.kind}) == (granted.group, granted.plural)


@pytest.mark.parametrize(
    ("kind", "plural"),
    [
        ("Endpoints", "endpoints"),
        ("EndpointSlice", "endpointslices"),
        ("Ingress", "ingresses"),
        ("NetworkPolicy", "networkpolicies"),
        ("Gateway", "gateways"),
        ("Lease", "leases"),
    ],
)
def test_kinds_outside_the_registry_get_their_english_plural(kind: str, plural: str) -> None:
    assert plural_of(kind) == plural


def test_a_restart_leaves_no_unaudited_change_of_the_services_endpoints() -> None:
    """Recorded on the real control plane: the hasty persona restarts a deployment behind a Service;
    the endpoints controller's writes explain what changed of its Endpoints."""
    case = next(c for c in CASES if c.name == "ca2_hasty")
    assert replay(case).result.attribution.unaudited_changes == 0


def test_a_controller_removing_its_last_bookkeeping_annotation_changes_no_declared_field() -> None:
    """Recorded in the demo: scaling a canary to zero, the endpoints controller removed its trigger-time
    annotation, the object's only one, so ``annotations`` was gone after, and that read as a change of
    the declared annotations no audited write explained."""
    before = {"metadata": {"annotations": {"endpoints.kubernetes.io/last-change-trigger-time": "t"}}}
    assert declared_diff(before, {"metadata": {}}) == []
    assert declared_diff({"metadata": {"labels": {}}}, {"metadata": {}}) == []


def test_removing_every_label_or_annotation_is_still_a_change() -> None:
    assert declared_diff({"metadata": {"labels": {"app": "a"}}}, {"metadata": {}}) == ["metadata.labels"]
    assert declared_diff({"metadata": {"annotations": {"team": "x"}}}, {"metadata": {}}) == [
        "metadata.annotations"
    ]
    assert declared_diff({"metadata": {}}, {"metadata": {"labels": {"app": "a"}}}) == ["metadata.labels"]
