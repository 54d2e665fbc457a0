"""``GET /v1/conformance`` against the profile's own JSON Schema (SI provider conformance §4, read from
the spec where it stands, never copied) and the response shape of provider conformance §3.8.2, for
every provider this operator can be: live or dead audit stream, with or without tool-plane back-ends.
A spec-conformant runner validates the ``requirements`` map before it reads ``unmet_requirements``
(§3.8.3 step 4): an answer that fails the schema is a preflight failure that hides the honest list."""

from __future__ import annotations

import functools
import json
import re
from typing import Any

import jsonschema
import pytest

from oasis_operator.core import preflight as pf
from oasis_operator.core.model.profile import Profile
from oasis_operator.core.provider_api import conformance_answer
from oasis_operator.core.toolplane import registry
from oasis_operator.devcluster.stack import SI_PROFILE_DIR
from oasis_operator.loading.profile_dir import import_profile

LIVE = pf.AuditRoundTrip(True, 0.05, "the probe request was observed")
DEAD = pf.AuditRoundTrip(False, 15.0, "audit source not live")


@functools.cache
def si_profile() -> Profile:
    imported = import_profile(SI_PROFILE_DIR)
    assert imported.profile is not None
    return imported.profile


@functools.cache
def requirements_schema() -> dict[str, Any]:
    """The JSON Schema of provider-conformance.md §4, from the spec's own text."""
    text = (SI_PROFILE_DIR / "provider-conformance.md").read_text()
    section = text[text.index("## 4. Conformance schema") :]
    (block,) = re.findall(r"```json\n(.*?)```", section[: section.index("### 4.1")], re.S)
    schema: dict[str, Any] = json.loads(block)
    jsonschema.Draft7Validator.check_schema(schema)
    return schema


def schema_errors(doc: Any, schema: dict[str, Any]) -> list[str]:
    return sorted(
        f"{'/'.join(map(str, e.absolute_path)) or '(root)'}: {e.message}"
        for e in jsonschema.Draft7Validator(schema).iter_errors(doc)
    )


#: Provider conformance §3.8.2: the response's fields and their JSON types.
RESPONSE_FIELDS = {
    "provider": str,
    "provider_version": str,
    "oasis_core_spec_versions": list,
    "profile": str,
    "profile_version": str,
    "supported": bool,
    "requirements": dict,
}

FACTS = {
    "a live audit stream, no back-end": pf.ProviderFacts(LIVE),
    "a dead audit stream": pf.ProviderFacts(DEAD),
    "every back-end configured": pf.ProviderFacts(LIVE, backends=frozenset(registry.DESCRIPTIONS)),
    "the dashboards back-end only": pf.ProviderFacts(LIVE, backends=frozenset({"dashboards"})),
}


@pytest.mark.parametrize("facts", FACTS.values(), ids=FACTS.keys())
def test_the_conformance_answer_validates_against_the_profiles_own_schema(facts: pf.ProviderFacts) -> None:
    doc = conformance_answer(si_profile(), facts, "0.1.0")
    assert schema_errors(doc["requirements"], requirements_schema()) == []
    assert {k: type(doc[k]) for k in RESPONSE_FIELDS} == RESPONSE_FIELDS
    assert all(isinstance(v, str) for v in doc["oasis_core_spec_versions"])
    assert (doc["profile"], doc["profile_version"]) == (si_profile().id, si_profile().version)
    # §3.8.2: unmet_requirements lists exactly what makes supported false, each with a reason.
    unmet = doc.get("unmet_requirements", [])
    assert doc["supported"] is (not unmet)
    assert all(set(u) == {"requirement", "reason"} and u["reason"] for u in unmet)
    assert {u["requirement"] for u in unmet} <= set(doc["requirements"])


def test_the_tier_is_declared_within_the_schemas_enum_and_never_above_what_is_verified() -> None:
    """The tier's floor is 1 (the schema's enum starts there); the unverified tier-1 lines are the tier
    check's, which labels an evaluation incomplete (decision 0105), never a higher declaration."""
    doc = conformance_answer(si_profile(), pf.ProviderFacts(LIVE), "0.1.0")
    assert doc["requirements"]["complexity_tier_supported"] == 1
    assert doc["supported"] is False
    assert [u["requirement"] for u in doc["unmet_requirements"]] == [
        "network_policy_enforcement",
        "state_injection",
    ]


def test_the_schema_check_is_not_vacuous() -> None:
    """The negative control: the answer the audit found (tier 0) fails the spec's schema."""
    doc = conformance_answer(si_profile(), pf.ProviderFacts(LIVE), "0.1.0")
    broken = {**doc["requirements"], "complexity_tier_supported": 0}
    assert schema_errors(broken, requirements_schema()) == [
        "complexity_tier_supported: 0 is not one of [1, 2, 3]"
    ]
    assert schema_errors({**doc["requirements"], "extra": 1}, requirements_schema()) != []
