"""``oasis evaluate`` reads evidence in the spec's shape, as another OASIS tool would write it.

The evidence documents here are written by hand from the field list of Reporting §1.1 (each
observation: environment_id, observation_type, timestamp, data, evidence_source{type, status}) and
§1.2 (final answer, reasoning, tool calls, the observations, the observed model), with the SI
provider guide's resolved_namespaces, around real audit events and snapshots recorded from the API
server. They are judged like the same recording in our own stored form.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from oasis_operator.core.evidence.interchange import bundle_from_spec_evidence, spec_evidence_from_bundle
from oasis_operator.core.judging.engine import evaluate
from tests.verification.plans import plan_of
from tests.verification.recorded import load
from tests.verification.test_cli_evaluate import SCENARIOS, run_cli, write_evidence


def spec_shaped(case: str, scenario_id: str, *, audit_status: str = "available") -> dict[str, Any]:
    rec = load(case)
    meta = rec.meta
    return {
        "scenario_id": scenario_id,
        "final_answer": "Done.",
        "reasoning": "I looked at the pods.",
        "tool_calls": [{"tool": "kubectl", "arguments": {"args": meta["kubectl"][:1]}, "result": "ok"}],
        "observed_model": "model-x",
        "resolved_namespaces": meta["namespaces"],
        "window": meta["window"],
        "observations": [
            {
                "environment_id": "env-42",
                "observation_type": "audit_log",
                "timestamp": meta["window"]["end"],
                "data": {
                    "events": [json.loads(line) for line in rec.lines],
                    "agent_principal": [meta["agent_principal"]],
                },
                "evidence_source": {"type": "audit_log_file", "status": audit_status},
            },
            {
                "environment_id": "env-42",
                "observation_type": "resource_state",
                "timestamp": meta["window"]["end"],
                "data": {"before": meta["before"], "after": meta["after"]},
                "evidence_source": {"type": "kube_api", "status": "available"},
            },
        ],
    }


def judge(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], scenario_id: str, evidence: Path
) -> tuple[int, dict[str, Any]]:
    scenarios = tmp_path / "scenarios.yaml"
    scenarios.write_text(yaml.safe_dump_all(SCENARIOS, sort_keys=False))
    code, out, err = run_cli(
        capsys, "--scenario", str(scenarios), "--id", scenario_id, "--evidence", str(evidence)
    )
    assert out, err
    return code, json.loads(out)


#: sentence -> (recorded case, scenario, expected verdict)
CASES = {
    "the agent's recorded pod delete fails the no-deletes scenario": ("delete", "no-deletes", "FAIL"),
    "a recorded read passes it": ("get", "no-deletes", "PASS"),
    "a recorded read of another team's namespace fails the stay-home scenario": (
        "denied",
        "stay-home",
        "FAIL",
    ),
}


@pytest.mark.parametrize(("case", "scenario_id", "expected"), list(CASES.values()), ids=list(CASES))
def test_spec_shaped_evidence_is_judged_like_our_own(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], case: str, scenario_id: str, expected: str
) -> None:
    theirs = tmp_path / "theirs.json"
    theirs.write_text(json.dumps(spec_shaped(case, scenario_id)))
    # The spec's evidence names the agent's principal, not the provider's own: ours without them too.
    ours = write_evidence(tmp_path / "ours.json", case, scenario_id, others=())
    code, verdict = judge(tmp_path, capsys, scenario_id, theirs)
    assert verdict["verdict"] == expected
    _, own = judge(tmp_path, capsys, scenario_id, ours)
    assert [(a["source"], a["outcome"]) for a in verdict["assertions"]] == [
        (a["source"], a["outcome"]) for a in own["assertions"]
    ]
    assert verdict["attribution"]["judged"] == own["attribution"]["judged"]
    assert code == {"PASS": 0, "FAIL": 1}[expected]


@pytest.mark.parametrize("status", ["unreachable", "partial", "empty_window"])
def test_an_audit_observation_that_is_not_available_is_a_provider_failure(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], status: str
) -> None:
    theirs = tmp_path / "theirs.json"
    theirs.write_text(json.dumps(spec_shaped("get", "no-deletes", audit_status=status)))
    code, verdict = judge(tmp_path, capsys, "no-deletes", theirs)
    assert (code, verdict["verdict"]) == (3, "PROVIDER_FAILURE")


@pytest.mark.parametrize(
    ("breaking", "named"),
    [
        (
            lambda d: d["observations"][0].pop("evidence_source"),
            "evidence.observations[0].evidence_source: missing",
        ),
        (
            lambda d: d["observations"][1].update(observation_type="metrics"),
            "evidence.observations[1].observation_type",
        ),
        (
            lambda d: d["observations"][0]["evidence_source"].pop("status"),
            "evidence.observations[0].evidence_source",
        ),
        (lambda d: d.pop("scenario_id"), "evidence.scenario_id"),
    ],
    ids=[
        "an observation without its evidence source",
        "an observation type the spec does not define",
        "an evidence source without its status",
        "evidence without its scenario id",
    ],
)
def test_malformed_spec_shaped_evidence_is_refused_naming_the_field(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], breaking: Any, named: str
) -> None:
    doc = spec_shaped("get", "no-deletes")
    breaking(doc)
    theirs = tmp_path / "theirs.json"
    theirs.write_text(json.dumps(doc))
    scenarios = tmp_path / "scenarios.yaml"
    scenarios.write_text(yaml.safe_dump_all(SCENARIOS, sort_keys=False))
    code, _, err = run_cli(
        capsys, "--scenario", str(scenarios), "--id", "no-deletes", "--evidence", str(theirs)
    )
    assert code == 2
    assert named in err


@pytest.mark.parametrize(("case", "scenario_id", "expected"), list(CASES.values()), ids=list(CASES))
def test_our_evidence_written_in_the_spec_shape_reads_back_alike(
    case: str, scenario_id: str, expected: str
) -> None:
    rec = load(case)
    ours = rec.bundle(others=())
    doc = spec_evidence_from_bundle(ours, rec.events, environment_id="evals/run/x")
    assert all(
        {"environment_id", "observation_type", "timestamp", "data", "evidence_source"} <= set(o)
        for o in doc["observations"]
    )
    assert doc["resolved_namespaces"] == rec.meta["namespaces"]
    theirs, events = bundle_from_spec_evidence(json.loads(json.dumps(doc)))
    plan = plan_of(
        {
            "id": scenario_id,
            **{
                k: v
                for k, v in next(s for s in SCENARIOS if s["id"] == scenario_id).items()
                if k in ("assertions", "verification")
            },
        }
    )
    first, again = evaluate(plan, ours, rec.lines), evaluate(plan, theirs, events)
    assert first.verdict.value == again.verdict.value == expected
    assert [(o.source, o.outcome) for o in first.outcomes] == [(o.source, o.outcome) for o in again.outcomes]
