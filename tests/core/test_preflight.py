"""The preflight's decisions (:mod:`oasis_operator.core.preflight`), on the SI profile's own
provider-conformance requirements and tiers as the import reads them from the spec: what this
provider declares, what is met and what not (with why and what it excludes), which failures end the
run and which only make it incomplete. Pure: no clock, no cluster."""

from __future__ import annotations

import functools
from typing import Any

import pytest

from oasis_operator.core import preflight as pf
from oasis_operator.core.model.profile import Profile, ProviderConformance
from oasis_operator.core.reporting.provenance import OASIS_CORE_VERSION
from oasis_operator.core.toolplane import registry
from oasis_operator.devcluster.stack import SI_PROFILE_DIR
from oasis_operator.loading.profile_dir import import_profile

LIVE = pf.AuditRoundTrip(True, 0.05, "the probe request was observed")
DEAD = pf.AuditRoundTrip(False, 15.0, "audit source not live: the sentinel did not appear")


@functools.cache
def si_profile() -> Profile:
    imported = import_profile(SI_PROFILE_DIR)
    assert imported.profile is not None
    return imported.profile


@functools.cache
def si_spec() -> dict[str, Any]:
    spec: dict[str, Any] = si_profile().model_dump(mode="json", exclude_none=True)
    return spec


def run(
    facts: pf.ProviderFacts,
    *,
    tier: int = 1,
    conformance: dict[str, Any] | None = None,
    tiers: dict[int, list[str]] | None = None,
) -> pf.PreflightResult:
    spec = si_spec()
    block = (
        spec["provider_conformance"]
        if conformance is None
        else {**spec["provider_conformance"], **conformance}
    )
    return pf.preflight(
        ProviderConformance.model_validate(block),
        pf.tiers_of(si_profile()) if tiers is None else tiers,
        tier,
        facts,
    )


def by_name(result: pf.PreflightResult) -> dict[str, pf.Check]:
    return {c.name: c for c in result.checks}


def test_every_requirement_key_of_the_si_profile_gets_exactly_one_check() -> None:
    keys = set(si_spec()["provider_conformance"]["requirements"])
    assert len(keys) == 8
    result = run(pf.ProviderFacts(LIVE))
    assert {c.name for c in result.checks if c.kind == pf.REQUIREMENT} == keys
    assert [c.name for c in result.checks if c.kind == pf.SELF_TEST] == [pf.AUDIT_ROUND_TRIP]
    assert [c.name for c in result.checks if c.kind == pf.TIER] == ["tier 1"]


def test_this_provider_declares_false_where_it_does_not_meet_a_requirement() -> None:
    checks = by_name(run(pf.ProviderFacts(LIVE)))
    met = {name for name, c in checks.items() if c.kind == pf.REQUIREMENT and c.met}
    assert met == {
        "environment_type",
        # Declared 1, the schema's floor (decision 0105): the unverified tier-1 lines are the tier
        # check's ("tier 1" below), which labels the evaluation incomplete.
        "complexity_tier_supported",
        "oasis_core_spec_version",
        "evidence_sources_available",
        "value_containment_support",
        "audit_policy_installation",
    }
    # Simulated pods exchange no traffic; the provider guide's metrics, traces, runbooks... are not
    # injected; tier 1's environment (3 nodes, ingress, cert-manager...) is not verified.
    assert checks["network_policy_enforcement"].declared is False
    assert "never enforced" in checks["network_policy_enforcement"].reason
    assert checks["state_injection"].declared is False
    assert "state kind metrics" in checks["state_injection"].reason
    # Only the environmental_state forms not delivered are named, never the whole type (decision 0068).
    reason = checks["state_injection"].reason
    assert "stimulus environmental_state (log line)" in reason  # no log back-end configured here
    assert "stimulus environmental_state (partial failure of a step)" in reason
    assert "stimulus environmental_state (concurrent modification)" in reason
    for delivered in ("annotation", "ConfigMap value", "object name"):
        assert f"environmental_state ({delivered})" not in reason
    assert "stimulus environmental_state," not in f"{reason},"


def test_with_the_log_backend_a_log_line_stimulus_is_no_gap() -> None:
    checks = by_name(run(pf.ProviderFacts(LIVE, backends=frozenset({registry.LOGS}))))
    reason = checks["state_injection"].reason
    assert "environmental_state (log line)" not in reason
    assert "environmental_state (partial failure of a step)" in reason
    assert checks["complexity_tier_supported"].declared == 1  # the schema's floor; "tier 1" is unmet
    assert not checks["tier 1"].met
    for c in checks.values():
        if not c.met:
            assert c.excludes, f"{c.name}: an unmet check says what it excludes"


@pytest.mark.parametrize(
    ("requirement", "facts", "met", "reason_has"),
    [
        pytest.param(
            "evidence_sources_available",
            pf.ProviderFacts(DEAD),
            False,
            "missing ['audit_log']",
            id="no audit round trip: the audit log is not an available evidence source",
        ),
        pytest.param(
            "audit_policy_installation",
            pf.ProviderFacts(DEAD),
            False,
            "no audit event for the probe",
            id="no audit round trip: no audit policy is shown to be installed",
        ),
        pytest.param(
            "audit_policy_installation",
            pf.ProviderFacts(LIVE),
            True,
            "does not install",
            id="the round trip shows the cluster's policy logs requests, which the operator did not install",
        ),
        pytest.param(
            "oasis_core_spec_version",
            pf.ProviderFacts(LIVE),
            True,
            OASIS_CORE_VERSION,
            id="our core version satisfies the profile's dependency by semver precedence",
        ),
        pytest.param(
            "value_containment_support",
            pf.ProviderFacts(LIVE),
            True,
            "contextual mode is refused",
            id="containment is supported in absolute mode, and says so",
        ),
    ],
)
def test_a_requirement_follows_the_facts(
    requirement: str, facts: pf.ProviderFacts, met: bool, reason_has: str
) -> None:
    check = by_name(run(facts))[requirement]
    assert check.met is met, check
    assert reason_has in check.reason


def test_state_injection_follows_the_usable_back_ends() -> None:
    everything = frozenset(registry.INTEGRATED)
    with_all = by_name(run(pf.ProviderFacts(LIVE, backends=everything)))["state_injection"].reason
    without = by_name(run(pf.ProviderFacts(LIVE)))["state_injection"].reason
    assert "state kind logs" in without
    assert "state kind logs" not in with_all
    assert "state kind dashboard" in without
    assert "state kind dashboard" not in with_all
    assert "state kind runbook" in without
    assert "state kind runbook" not in with_all
    # The database back-end realises migrations (decision 0066): declared only when it is usable.
    assert "state kind database-migration" in without
    assert "state kind database-migration" not in with_all


CONFORMANCE = {
    "requirements": {
        "environment_type": {
            "type": "string",
            "required": True,
            "expected": "kubernetes-cluster",
            "description": "x",
        },
    }
}


@pytest.mark.parametrize(
    ("requirement", "met", "reason_has"),
    [
        pytest.param(
            {"type": "semver_list", "required": True, "expected": ">=2.0.0", "description": "d"},
            False,
            "satisfying >=2.0.0",
            id="a core version the profile needs and we do not implement is unmet",
        ),
        pytest.param(
            {
                "type": "semver_list",
                "required": True,
                "expected": ">=1.0.0-rc1.9, <1.1.0",
                "description": "d",
            },
            True,
            "satisfying",
            id="a range of comparators: rc1.12 is past rc1.9 by numeric identifiers",
        ),
        pytest.param(
            {
                "type": "integer",
                "required": True,
                "expected": {"comparison_operator": "gte", "value": 0},
                "description": "d",
            },
            True,
            ">= 0",
            id="an integer bound other than the run's tier",
        ),
        pytest.param(
            {"type": "mystery", "required": True, "expected": 1, "description": "d"},
            False,
            "not understood",
            id="a requirement type this provider does not know is never taken as met",
        ),
    ],
)
def test_requirements_are_compared_by_their_declared_type(
    requirement: dict[str, Any], met: bool, reason_has: str
) -> None:
    key = "oasis_core_spec_version" if requirement["type"] == "semver_list" else "complexity_tier_supported"
    if requirement["type"] == "mystery":
        key = "environment_type"
    check = by_name(run(pf.ProviderFacts(LIVE), conformance={"requirements": {key: requirement}}))[key]
    assert (check.met, reason_has in check.reason) == (met, True), check


def test_a_requirement_this_provider_declares_nothing_for_is_unmet_and_says_what_the_profile_needs_it_for() -> (
    None
):
    conformance = {
        "requirements": {
            "gpu_nodes": {
                "type": "boolean",
                "required": True,
                "expected": True,
                "description": "Clusters have GPU nodes. Needed for training scenarios.",
            }
        }
    }
    check = by_name(run(pf.ProviderFacts(LIVE), conformance=conformance))["gpu_nodes"]
    assert not check.met
    assert check.reason == "this provider makes no declaration for this requirement"
    assert check.excludes == "what the profile requires it for: Clusters have GPU nodes"


def test_an_optional_requirement_never_makes_the_run_incomplete() -> None:
    conformance = {
        "requirements": {
            "network_policy_enforcement": {
                "type": "boolean",
                "required": False,
                "expected": True,
                "description": "d",
            }
        }
    }
    result = run(pf.ProviderFacts(LIVE), conformance=conformance, tiers={1: []})
    check = by_name(result)["network_policy_enforcement"]
    assert not check.met
    assert not check.required
    assert result.unmet == []
    assert pf.unmet_lines(result.records()) == [
        f"requirement network_policy_enforcement (optional): {check.reason} -- excludes {check.excludes}"
    ]


@pytest.mark.parametrize(
    ("audit", "probes", "ends", "failed"),
    [
        pytest.param(
            LIVE,
            (pf.BackendProbe("logs", True, "served"),),
            False,
            [],
            id="a live audit stream and every back-end answering: the run goes on",
        ),
        pytest.param(
            DEAD,
            (pf.BackendProbe("logs", True, "served"),),
            True,
            [pf.AUDIT_ROUND_TRIP],
            id="no audit round trip: the evidence path is broken and the run ends",
        ),
        pytest.param(
            LIVE,
            (pf.BackendProbe("logs", False, "ConnectError"),),
            True,
            ["back-end logs"],
            id="a configured back-end that does not answer ends the run",
        ),
        pytest.param(
            LIVE,
            (pf.BackendProbe("logs", None, "no self-test"),),
            False,
            [],
            id="a back-end without a self-test is listed as not self-tested, without ending the run",
        ),
        pytest.param(
            LIVE, (), False, [], id="a configured back-end nobody probed is listed as having no self-test"
        ),
    ],
)
def test_which_failures_end_the_run(
    audit: pf.AuditRoundTrip, probes: tuple[pf.BackendProbe, ...], ends: bool, failed: list[str]
) -> None:
    result = run(pf.ProviderFacts(audit, backends=frozenset({"logs"}), probes=probes))
    assert result.ends_run is ends
    assert [c.name for c in result.failed_self_tests] == failed
    assert "back-end logs" in by_name(result)
    if ends:
        assert result.summary().startswith("preflight failed, the evidence path is broken")
    else:
        assert "unmet: network_policy_enforcement, state_injection, tier 1" in result.summary()
        # Requirements unmet: the run starts only as an opted-in incomplete evaluation (decision 0105).
        assert [c.name for c in result.blocking] == ["network_policy_enforcement", "state_injection"]
        assert "the run starts only as an incomplete evaluation" in result.summary()


@pytest.mark.parametrize(
    ("line", "backends", "verified", "reason_has"),
    [
        pytest.param(
            "observability-dashboards",
            {"dashboards"},
            True,
            "supplied: observability-dashboards",
            id="an interface type whose back-end is usable is verified",
        ),
        pytest.param(
            "observability-dashboards",
            set(),
            False,
            "needs the operator's tool plane",
            id="without the tool plane even the built-in dashboards are not supplied",
        ),
        pytest.param(
            "observability-metrics and observability-dashboards",
            {"dashboards", "metrics", "alerts"},
            registry.METRICS in registry.INTEGRATED,
            "observability-metrics",
            id="metrics count only once the provider injects a scenario's metrics",
        ),
        pytest.param(
            "a gitops controller, ingress and certificate management",
            {"gitops"},
            False,
            "gitops supplied, but this provider has no check",
            id="prose beside an interface type: what has no check is never taken as met",
        ),
        pytest.param(
            "at least 2 security zones",
            {"logs"},
            False,
            "no check that establishes it",
            id="prose alone is not verified",
        ),
        pytest.param(
            "secret-management, external DNS and a policy-engine",
            set(),
            False,
            "policy-engine",
            id="interface types this provider does not supply are named",
        ),
    ],
)
def test_tier_requirements_are_verified_only_where_a_check_establishes_them(
    line: str, backends: set[str], verified: bool, reason_has: str
) -> None:
    (row,) = pf.tier_lines([line], registry.usable(backends), frozenset(backends))
    assert row["verified"] is verified, row
    assert reason_has in row["reason"]


def test_an_unbacked_tier_claim_is_unmet_and_the_declared_tier_is_the_highest_fully_verified() -> None:
    tiers = {1: ["observability-dashboards"], 2: ["observability-tracing"], 3: []}
    result = run(pf.ProviderFacts(LIVE, backends=frozenset({"dashboards"})), tier=2, tiers=tiers)
    checks = by_name(result)
    assert checks["complexity_tier_supported"].declared == 1
    assert not checks["complexity_tier_supported"].met
    assert not checks["tier 2"].met
    assert "observability-tracing" in checks["tier 2"].reason
    assert "not verified" in result.tier_evidence(2)
    backed = run(pf.ProviderFacts(LIVE, backends=frozenset({"dashboards"})), tier=1, tiers=tiers)
    assert by_name(backed)["tier 1"].met
    assert by_name(backed)["complexity_tier_supported"].met
    assert "all 1 environment requirement(s) of the profile verified" in backed.tier_evidence(1)


def test_a_tier_the_profile_does_not_declare_is_unmet() -> None:
    check = by_name(run(pf.ProviderFacts(LIVE), tier=3, tiers={1: []}))["tier 3"]
    assert (check.met, check.reason) == (False, "the profile declares no such tier")


def test_records_carry_what_the_report_schema_asks_of_each_kind() -> None:
    for r in run(pf.ProviderFacts(DEAD, backends=frozenset({"logs"}))).records():
        assert {"kind", "name", "met", "required", "reason"} <= set(r)
        assert ("excludes" in r) is (not r["met"])
        assert ("declared" in r) is (r["kind"] == pf.REQUIREMENT)


@pytest.mark.parametrize(
    ("profile", "mismatch"),
    [
        pytest.param(
            ("oasis-profile-software-infrastructure", "0.3.0-rc1"),
            False,
            id="requirements declared for the run's profile and version: no extra line",
        ),
        pytest.param(
            ("oasis-profile-software-infrastructure", "0.4.0"),
            True,
            id="requirements of another version of the profile back no claim",
        ),
    ],
)
def test_the_requirements_must_be_declared_for_the_runs_profile(
    profile: tuple[str, str], mismatch: bool
) -> None:
    result = pf.preflight(
        si_profile().provider_conformance, pf.tiers_of(si_profile()), 1, pf.ProviderFacts(LIVE), profile
    )
    check = by_name(result).get("profile")
    assert (check is not None) is mismatch
    if check is not None:
        assert not check.met
        assert "declared for oasis-profile-software-infrastructure 0.3.0-rc1" in check.reason
        assert check in result.unmet
