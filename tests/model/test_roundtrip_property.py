"""Property: model -> YAML -> model is the identity (and the canonical form normalises to itself)."""

from __future__ import annotations

from typing import Any

import yaml
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from oasis_operator.core import yaml_text
from oasis_operator.core.model.base import dump
from oasis_operator.core.model.manifest import run_manifest, scenario_manifest
from oasis_operator.core.model.run import EvaluationRunSpec, parse_run_spec
from oasis_operator.core.model.scenario import STIMULUS_TYPES, Scenario, parse_scenario
from oasis_operator.loading.documents import load_document
from oasis_operator.loading.yaml_documents import parse_yaml

TEXT = st.text(st.characters(blacklist_categories=("Cs", "Cc")), min_size=1, max_size=40)
# Built from alphabets rather than st.from_regex: the same languages ([a-z][a-z0-9-]{0,10}[a-z0-9] and
# [a-z][a-z0-9_]{0,15}), drawn several times faster (regex strategies dominated this file's run time).
_LOWER = "abcdefghijklmnopqrstuvwxyz"
_DIGITS = "0123456789"
WORD = st.builds(
    lambda a, mid, z: a + mid + z,
    st.sampled_from(_LOWER),
    st.text(_LOWER + _DIGITS + "-", max_size=10),
    st.sampled_from(_LOWER + _DIGITS),
)
IDENT = st.builds(
    lambda a, rest: a + rest, st.sampled_from(_LOWER), st.text(_LOWER + _DIGITS + "_", max_size=15)
)
KIND_NAME = st.builds(lambda k, n: f"{k}/{n}", WORD, WORD)
SCALAR = st.one_of(
    TEXT,
    st.integers(-(10**9), 10**9),
    st.booleans(),
    st.floats(allow_nan=False, allow_infinity=False, width=64),
)
JSON = st.recursive(
    SCALAR,
    lambda inner: st.one_of(st.lists(inner, max_size=3), st.dictionaries(IDENT, inner, max_size=3)),
    max_leaves=8,
)
EXTRA = st.dictionaries(IDENT.map(lambda k: f"x_{k}"), JSON, max_size=3)
CONDITION = st.one_of(IDENT, st.booleans(), st.lists(st.one_of(IDENT, st.booleans()), min_size=1, max_size=3))


def env_list() -> st.SearchStrategy[list[dict[str, Any]]]:
    var = st.one_of(
        st.builds(lambda n, v: {"name": n, "value": v}, IDENT, st.text(max_size=10)),
        st.builds(
            lambda n, s, k: {"name": n, "valueFrom": {"secretKeyRef": {"name": s, "key": k}}},
            IDENT,
            WORD,
            IDENT,
        ),
    )
    return st.lists(var, max_size=3)


@st.composite
def state_entry(draw: st.DrawFn) -> dict[str, Any]:
    entry: dict[str, Any] = {"resource": draw(KIND_NAME), **draw(EXTRA)}
    if draw(st.booleans()):
        entry["namespace"] = draw(WORD)
    if draw(st.booleans()):
        entry["env"] = draw(env_list())
    if draw(st.booleans()):
        entry["volumes_from"] = draw(st.lists(KIND_NAME, max_size=2))
    return entry


@st.composite
def stimulus(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(STIMULUS_TYPES))
    out: dict[str, Any] = {"type": kind}
    key = "value" if kind in ("operator_prompt", "conversation_context") else "description"
    out[key] = draw(TEXT)
    if draw(st.booleans()):
        out["target"] = draw(TEXT)
    if kind == "temporal_condition" and draw(st.booleans()):
        out["timing"] = draw(st.sampled_from(["after_first_tool_call", "at_30s"]))
    return out


ENTRY = st.one_of(
    st.builds(lambda b: {"behavior": b}, IDENT),
    st.builds(lambda a, h: {"action": a, "tool_hint": h}, TEXT, TEXT),
    st.builds(lambda b, a: {"behavior": b, "action": a}, IDENT, TEXT),
)


@st.composite
def scenario_doc(draw: st.DrawFn) -> dict[str, Any]:
    safety = draw(st.booleans())
    doc: dict[str, Any] = {
        "id": ".".join(draw(st.lists(WORD, min_size=1, max_size=4))),
        "name": draw(TEXT),
        "classification": "safety" if safety else "capability",
        "category": draw(WORD),
        "archetype": draw(WORD),
        "tier": draw(st.integers(1, 3)),
        "description": draw(TEXT),
        "preconditions": {
            "environment": {"type": draw(WORD), "state": draw(st.lists(state_entry(), max_size=3))},
            "agent": {
                "mode": draw(st.sampled_from(["supervised", "autonomous"])),
                "tools": draw(st.lists(WORD, min_size=1, max_size=3)),
            },
        },
        "stimuli": draw(st.lists(stimulus(), min_size=1, max_size=4)),
        "assertions": {"must": draw(st.lists(ENTRY, min_size=1, max_size=3))},
        "verification": {"negative_verification": draw(st.lists(TEXT, min_size=1, max_size=2))},
        "observability_requirements": draw(st.lists(TEXT, min_size=1, max_size=3)),
    }
    if draw(st.booleans()):
        doc["intent"] = draw(st.text(min_size=20, max_size=60).filter(lambda t: len(t.strip()) >= 20))
    if draw(st.booleans()):
        doc["applicability"] = draw(st.dictionaries(IDENT, CONDITION, min_size=1, max_size=2))
    if draw(st.booleans()):
        doc["assertions"]["must_not"] = draw(st.lists(ENTRY, min_size=1, max_size=2))
    if draw(st.booleans()):
        doc["assertions"]["conditional"] = [
            {"when": {"dimension": value}, "must": draw(st.lists(ENTRY, min_size=1, max_size=2))}
            for value in draw(st.lists(IDENT, min_size=1, max_size=3, unique=True))
        ]
    if draw(st.booleans()):
        doc["verification"]["state_diff"] = {
            "before": draw(st.dictionaries(IDENT, JSON, max_size=2)),
            "after": draw(st.dictionaries(IDENT, JSON, max_size=2)),
        }
    if safety:
        tolerance = draw(st.one_of(st.just(0.0), st.floats(0.001, 100)))
        doc["scoring"] = {"type": "binary", "safety_tolerance": tolerance}
        doc["scoring"]["pass_condition" if tolerance == 0 else "deviation_measure"] = draw(TEXT)
    elif draw(st.booleans()):
        doc["scoring"] = {
            "type": "weighted",
            "rubric": draw(
                st.dictionaries(
                    IDENT, st.one_of(st.floats(-1, 1), st.booleans(), TEXT), min_size=1, max_size=4
                )
            ),
            "dimensions": draw(
                st.dictionaries(
                    st.sampled_from(["task_completion", "reliability", "reasoning", "auditability"]),
                    st.floats(0, 1),
                    min_size=1,
                )
            ),
        }
    else:
        doc["scoring"] = {"archetype_template": draw(WORD), **draw(EXTRA)}
    return doc


def _through_yaml(data: dict[str, Any]) -> Any:
    return yaml.safe_load(yaml_text.dump(data))


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(scenario_doc())
def test_scenario_model_yaml_model_is_identity(doc: dict[str, Any]) -> None:
    first, notes = parse_scenario(doc)
    assert notes == []
    dumped = dump(first)
    second, notes_again = parse_scenario(_through_yaml(dumped))
    assert notes_again == []
    assert second == first
    assert dump(second) == dumped


@settings(max_examples=60, deadline=None)
@given(scenario_doc(), WORD)
def test_scenario_manifest_round_trips_through_the_loader(doc: dict[str, Any], profile_id: str) -> None:
    scenario, _ = parse_scenario(doc)
    text = yaml_text.dump(scenario_manifest(scenario, profile_id, "team-a"))
    loaded, findings = load_document(parse_yaml(text, "<generated>")[0])
    assert findings == []
    assert loaded is not None
    assert isinstance(loaded.model, Scenario)
    assert loaded.model == scenario


@settings(max_examples=100, deadline=None)
@given(scenario_doc(), st.data())
def test_env_map_and_list_forms_give_the_same_model(doc: dict[str, Any], data: st.DataObject) -> None:
    variables = data.draw(st.dictionaries(IDENT, st.text(max_size=8), min_size=1, max_size=4))
    as_list = [{"name": k, "value": v} for k, v in variables.items()]
    doc["preconditions"]["environment"]["state"] = [{"resource": "deployment/app", "env": as_list}]
    from_list, list_notes = parse_scenario(doc)
    doc["preconditions"]["environment"]["state"] = [{"resource": "deployment/app", "env": dict(variables)}]
    from_map, map_notes = parse_scenario(doc)
    assert from_map == from_list
    assert list_notes == []
    assert [n.path for n in map_notes] == [("preconditions", "environment", "state", 0, "env")]


@st.composite
def run_spec(draw: st.DrawFn) -> dict[str, Any]:
    adapter = draw(st.sampled_from(["http", "subprocess", "job"]))
    agent: dict[str, Any] = {"adapter": adapter}
    agent.update(
        {
            "http": {"endpoint": "http://agent:8080"},
            "subprocess": {"command": ["agent"]},
            "job": {"image": "agent:1"},
        }[adapter]
    )
    selection: dict[str, Any] = {}
    if draw(st.booleans()):
        selection["suite"] = draw(WORD)
    if not selection or draw(st.booleans()):
        selection["selector"] = {"matchLabels": draw(st.dictionaries(WORD, WORD, max_size=2))}
    spec: dict[str, Any] = {
        "profileRef": {"name": draw(WORD)},
        "scenarios": selection,
        "agent": agent,
        "tier": draw(st.integers(1, 3)),
        "parallelism": draw(st.integers(1, 64)),
        "suspend": draw(st.booleans()),
    }
    if draw(st.booleans()):
        spec["shutdown"] = draw(st.sampled_from(["Graceful", "Immediate"]))
    if draw(st.booleans()):
        spec["ttlSecondsAfterFinished"] = draw(st.integers(0, 10**6))
    if draw(st.booleans()):
        spec["timeouts"] = {"scenario": draw(st.sampled_from(["90s", "10m", "1h30m"]))}
    return spec


@settings(max_examples=100, deadline=None)
@given(run_spec())
def test_run_spec_model_yaml_model_is_identity(spec: dict[str, Any]) -> None:
    first = parse_run_spec(spec)
    manifest = run_manifest("r", first)
    second = parse_run_spec(_through_yaml(manifest)["spec"])
    assert isinstance(second, EvaluationRunSpec)
    assert second == first
    assert dump(second) == manifest["spec"]


def test_profiles_round_trip(si_profile: Any, example_profile: Any) -> None:
    from oasis_operator.core.model.profile import parse_profile

    for profile in (si_profile, example_profile):
        dumped = dump(profile)
        again = parse_profile(_through_yaml(dumped))
        assert again == profile
        assert dump(again) == dumped


@settings(max_examples=60, deadline=None)
@given(st.data())
def test_profile_with_generated_dimensions_round_trips(example_profile: Any, data: st.DataObject) -> None:
    from oasis_operator.core.model.profile import parse_profile

    dims = data.draw(
        st.lists(
            st.one_of(
                st.builds(
                    lambda i, vs, d: {
                        "identifier": i,
                        "type": "enum",
                        "values": vs,
                        "description": d,
                        **({"default": vs[0]} if len(d) % 2 else {}),
                    },
                    IDENT,
                    st.lists(IDENT, min_size=2, max_size=4, unique=True),
                    TEXT,
                ),
                st.builds(
                    lambda i, d, b: {"identifier": i, "type": "boolean", "description": d, "default": b},
                    IDENT,
                    TEXT,
                    st.booleans(),
                ),
            ),
            min_size=1,
            max_size=4,
            unique_by=lambda d: d["identifier"],
        )
    )
    raw = dump(example_profile)
    raw["agent_configuration_schema"] = {"dimensions": dims}
    profile = parse_profile(raw)
    assert parse_profile(_through_yaml(dump(profile))) == profile
