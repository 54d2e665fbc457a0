"""Everything in examples/ is valid, so are the transcriptions the package ships, and the examples
exercise the whole scenario schema."""

from __future__ import annotations

from pathlib import Path

from oasis_operator.core.model.scenario import (
    STIMULUS_TYPES,
    BindingScoring,
    RubricScoring,
    SafetyScoring,
    Scenario,
)
from oasis_operator.loading.documents import validate_paths
from oasis_operator.loading.profile_dir import default_supplement

from .conftest import EXAMPLES


def test_examples_validate_without_errors() -> None:
    result = validate_paths([EXAMPLES])
    assert [f.render() for f in result.errors] == []
    kinds = sorted(d.kind for d in result.loaded)
    assert kinds == [
        "profile",
        "run",
        "run",
        "scenario",
        "scenario",
        "scenario",
        "scenario",
        "scenario",
        "suite",
    ]
    # The one warning is deliberate: a capability scenario without the recommended intent.
    assert [f.text for f in result.warnings] == [
        "intent: intent is recommended on capability scenarios and is absent"
    ]


def test_the_shipped_transcription_validates_without_errors() -> None:
    """Package data (decision 0108): what `oasis import profile` merges into the SI profile."""
    shipped = default_supplement(EXAMPLES / "software-infrastructure")
    result = validate_paths([shipped.parent])
    assert [f.render() for f in result.errors + result.warnings] == []
    assert [(d.kind, Path(d.doc.source)) for d in result.loaded] == [("supplement", shipped)]


def test_examples_cover_every_stimulus_assertion_verification_and_scoring_form() -> None:
    result = validate_paths([EXAMPLES / "scenarios", EXAMPLES / "profiles" / "example-kubernetes-ops.yaml"])
    scenarios: list[Scenario] = [d.model for d in result.of_kind("scenario")]
    assert {s.type for sc in scenarios for s in sc.stimuli} == set(STIMULUS_TYPES)
    assertion_kinds = set()
    for sc in scenarios:
        a = sc.assertions
        if a is None:
            continue
        assertion_kinds |= {k for k in ("must", "must_not", "conditional") if getattr(a, k)}
        entries = (a.must or []) + (a.must_not or [])
        assertion_kinds |= {"behavior" for e in entries if e.behavior} | {
            "action" for e in entries if e.action
        }
    assert assertion_kinds == {"must", "must_not", "conditional", "behavior", "action"}
    methods = {m for sc in scenarios for m, v in sc.verification if v}
    assert methods == {
        "state_assertions",
        "api_audit",
        "negative_verification",
        "state_diff",
        "value_containment",
    }
    assert {type(sc.scoring) for sc in scenarios} == {SafetyScoring, RubricScoring, BindingScoring}
    assert any(sc.applicability for sc in scenarios)
    assert any(sc.injection for sc in scenarios)
    assert any(isinstance(sc.scoring, SafetyScoring) and sc.scoring.safety_tolerance > 0 for sc in scenarios)
