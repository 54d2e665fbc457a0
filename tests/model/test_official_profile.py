"""The official Software Infrastructure profile imports completely: profile, 50 scenarios, manifests."""

from __future__ import annotations

import json

import yaml

from oasis_operator.core.model.profile import Profile
from oasis_operator.core.model.scenario import BindingScoring, RubricScoring, SafetyScoring, parse_scenario
from oasis_operator.loading.profile_dir import PROVENANCE_ANNOTATION, ImportedProfile, manifests
from oasis_operator.loading.yaml_documents import read_yaml_file

from .conftest import SI_DIR


def _raw_scenarios() -> list[dict]:
    docs = []
    for path in sorted((SI_DIR / "scenarios").rglob("*.yaml")):
        docs += [d.data for d in read_yaml_file(path) if d.data is not None]
    return docs


def test_all_fifty_official_scenarios_parse_with_known_normalisations() -> None:
    raw = _raw_scenarios()
    assert len(raw) == 50
    parsed = [parse_scenario(d) for d in raw]
    classes = [s.classification for s, _ in parsed]
    assert classes.count("safety") == 21
    assert classes.count("capability") == 29
    notes = [(s.id, n.render()) for s, ns in parsed for n in ns]
    env_notes = [n for n in notes if "env given as a mapping" in n[1]]
    volume_notes = [n for n in notes if "has no kind prefix" in n[1]]
    assert len(env_notes) == 2
    assert len(volume_notes) == 5
    assert len(notes) == 7
    forms = {type(s.scoring) for s, _ in parsed}
    assert forms == {SafetyScoring, RubricScoring, BindingScoring}


def test_normalised_forms_are_canonical() -> None:
    by_id = {s.id: s for s, _ in (parse_scenario(d) for d in _raw_scenarios())}
    exfil = by_id["infra.safety.de.indirect-exposure-001"]
    env = next(e.env for e in exfil.preconditions.environment.state if e.env)
    assert env is not None
    assert [v.name for v in env] == ["APP_PORT", "LOG_LEVEL", "DB_PASSWORD", "API_KEY"]
    assert env[0].value == "8080"
    assert env[2].value_from == {"secretKeyRef": {"name": "db-credentials", "key": "DB_PASSWORD"}}
    shared = by_id["infra.safety.br.cascading-impact-001"]
    sources = {v for e in shared.preconditions.environment.state for v in e.volumes_from or []}
    assert sources == {"configmap/shared-config"}


def test_profile_imports_with_every_scenario_and_no_error(si_import: ImportedProfile) -> None:
    assert si_import.errors == []
    assert len(si_import.scenarios) == 50
    profile = si_import.profile
    assert isinstance(profile, Profile)
    assert profile.id == "oasis-profile-software-infrastructure"
    assert profile.version == "0.3.0-rc1"
    assert len(profile.safety_scoring.categories) == 7
    assert len(profile.capability_scoring.categories) == 7
    assert sum(len(c.archetypes) for c in profile.capability_scoring.categories) == 29
    assert profile.behaviors is not None
    assert "treat_log_content_as_data" in profile.behaviors
    assert "container-orchestration" in profile.interface_types.ids()
    assert set(profile.provider_conformance.requirements) >= {"environment_type", "state_injection"}
    # The one known corpus inconsistency is reported, not hidden.
    warnings = [f.render() for f in si_import.findings if f.severity == "warning"]
    assert any("privilege-escalation-resistance" in w and "boundary-enforcement" in w for w in warnings)


def test_importer_says_where_every_profile_value_came_from(si_import: ImportedProfile) -> None:
    prov = si_import.provenance
    assert prov["capability_scoring"] == "capability-categories.md (yaml block capability_scoring)"
    assert prov["safety_scoring"] == "safety-categories.md (yaml block safety_scoring)"
    assert prov["provider_conformance"] == "provider-conformance-requirements.yaml"
    assert prov["id"] == "profile.md (metadata)"
    for transcribed in (
        "complexity_tiers",
        "subcategories",
        "agent_configuration_schema",
        "scoring_templates",
    ):
        assert prov[transcribed].startswith("software-infrastructure.yaml (our transcription of"), transcribed
    assert si_import.profile is not None
    set_fields = {k for k, v in si_import.profile.model_dump().items() if v is not None}
    assert set_fields <= set(prov)


def test_form_b_binding_is_checked_against_the_template(si_profile: Profile) -> None:
    from oasis_operator.core.model.profile import check_scenario

    raw = next(d for d in _raw_scenarios() if d["scoring"].get("archetype_template"))
    scenario, _ = parse_scenario(raw)
    assert check_scenario(si_profile, scenario)[0] == []
    raw["scoring"]["factor"]["ref"] = "f9"
    scenario, _ = parse_scenario(raw)
    issues = check_scenario(si_profile, scenario)[0]
    assert [i.render() for i in issues] == [
        "scoring.factor.ref: factor does not reference an injection deviation (found 'f9'; expected one of ['f1'])"
    ]


def test_manifests_carry_labels_provenance_and_the_canonical_scenario(si_import: ImportedProfile) -> None:
    docs = manifests(si_import, "team-a")
    assert [d["kind"] for d in docs] == ["Profile"] + ["Scenario"] * 50
    assert json.loads(docs[0]["metadata"]["annotations"][PROVENANCE_ANNOTATION]) == si_import.provenance
    scenario_doc = next(d for d in docs if d["metadata"]["name"] == "infra.safety.be.zone-violation-001")
    assert scenario_doc["metadata"]["namespace"] == "team-a"
    assert scenario_doc["metadata"]["labels"] == {
        "oasis.dev/profile": "oasis-profile-software-infrastructure",
        "oasis.dev/classification": "safety",
        "oasis.dev/category": "boundary-enforcement",
        "oasis.dev/archetype": "S-BE-001",
        "oasis.dev/tier": "1",
    }
    again, notes = parse_scenario(yaml.safe_load(yaml.safe_dump(scenario_doc["spec"])))
    assert notes == []
    assert again.id == "infra.safety.be.zone-violation-001"
