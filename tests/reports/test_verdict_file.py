"""The verdict file: its JSON Schema, and the metadata a run carries into it.

Every report the test session renders or the operator stores is also checked against the schema by
``tests/report_schema.py``; here the schema is shown to refuse what the Reporting document requires
and a run's report is shown to carry the agent's identity declaration and the provider's metadata.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from oasis_operator.cli.main import main
from oasis_operator.core.reporting.provenance import OASIS_CORE_VERSION, iso_duration
from oasis_operator.reports.schema import report_problems
from tests.verification.test_cli_evaluate import make_run
from tests.workflows.world import CASCADING, DESTRUCTION, World


def _meta(r: dict[str, Any]) -> dict[str, Any]:
    meta: dict[str, Any] = r["verdict"]["metadata"]
    return meta


def _executed(r: dict[str, Any]) -> dict[str, Any]:
    return next(s for s in r["scenarios"] if "evidence_artifact" in s)


#: sentence -> how a valid report is broken -> the field path the schema names.
BROKEN: dict[str, tuple[Callable[[dict[str, Any]], None], str]] = {
    "a verdict file without the OASIS core version": (
        lambda r: _meta(r).pop("oasis_core_version"),
        "report.verdict.metadata: 'oasis_core_version'",
    ),
    "a verdict file without the provider's version": (
        lambda r: _meta(r)["environment"].pop("provider_version"),
        "report.verdict.metadata.environment:",
    ),
    "a verdict file without tier evidence": (
        lambda r: _meta(r)["environment"].pop("tier_evidence"),
        "'tier_evidence' is a required property",
    ),
    "a verdict file without the preflight summary": (
        lambda r: _meta(r)["environment"].pop("conformance_check"),
        "'conformance_check' is a required",
    ),
    "an identity declaration without the system-prompt hash key": (
        lambda r: _meta(r)["agent_identity"].pop("system_prompt_hash"),
        "report.verdict.metadata.agent_identity",
    ),
    "a heterogeneous run that does not list the scenarios": (
        lambda r: _meta(r)["agent_identity"].update(heterogeneous=True),
        "'heterogeneity_detail' is a required",
    ),
    "an aborted run without its reason": (
        lambda r: (_meta(r).update(aborted=True), _meta(r).pop("abort_reason", None)),
        "'abort_reason'",
    ),
    "a verdict status the spec does not define": (
        lambda r: r["verdict"].update(safety="NEEDS_REVIEW"),
        "report.verdict.safety",
    ),
    "configuration coverage without its warnings": (
        lambda r: _meta(r)["configuration_coverage"].pop("warnings"),
        "'warnings' is a required property",
    ),
    "an executed scenario without its session id": (
        lambda r: _executed(r).pop("session_id"),
        "'session_id' is a required property",
    ),
    "non-scoring metadata without the step count": (
        lambda r: _executed(r)["non_scoring_metadata"].pop("steps"),
        "'steps' is a required property",
    ),
    "an evidence artifact outside the run directory": (
        lambda r: _executed(r).update(evidence_artifact="../evidence-x.json"),
        "evidence_artifact",
    ),
    "a conformance claim on an incomplete evaluation": (
        lambda r: r.update(incomplete=True),
        "report.incomplete",
    ),
    "a duration that is no ISO 8601 duration": (
        lambda r: _meta(r).update(duration="95 seconds"),
        "report.verdict.metadata.duration",
    ),
}


def test_the_recorded_reports_are_valid_verdict_files(reports: dict[str, dict[str, Any]]) -> None:
    for name, report in reports.items():
        assert report_problems(report) == [], name


@pytest.mark.parametrize("sentence", sorted(BROKEN))
def test_the_schema_refuses(sentence: str, reports: dict[str, dict[str, Any]]) -> None:
    breaking, named = BROKEN[sentence]
    report = copy.deepcopy(reports["pass"])
    report.setdefault(
        "conformance_claim",
        {  # the pass run is incomplete (no capability coverage)
            "domain_profile": "p",
            "domain_profile_version": "1.0.0",
            "tier": 1,
            "agent": "a",
            "agent_version": "1",
            "agent_configuration": {},
            "date": "2026-11-30T12:00:00Z",
            "verdict": "PASS",
        },
    )
    report["incomplete"] = False
    assert report_problems(report) == []
    breaking(report)
    problems = report_problems(report)
    assert any(named in p for p in problems), problems


def test_a_run_description_without_the_metadata_is_refused_naming_what_is_missing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    run = make_run(tmp_path / "run", {"no-deletes": "get", "stay-home": "list", "find-it": "get"})
    doc = json.loads((run / "run.json").read_text())
    del doc["evaluator"], doc["oasis_core_version"]
    (run / "run.json").write_text(json.dumps(doc))
    assert main(["evaluate", "--run-dir", str(run), "--write"]) == 2
    err = capsys.readouterr().err
    assert "run.json" in err
    assert "report.verdict.metadata: 'evaluator' is a required property" in err
    assert "'oasis_core_version' is a required property" in err
    assert not (run / "report.json").exists(), "nothing half-written"


@pytest.mark.parametrize("missing", [("duration",), ("environment",), ("duration", "environment")])
def test_a_run_description_without_optional_metadata_is_replayed_with_it_unknown(
    missing: tuple[str, ...], tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Issue 32's replay finding: the run's duration and environment description are written as
    unknown (null), never a reason to refuse the run directory; without an environment description
    the tier is not evidenced, so the report makes no claim and says why."""
    run = make_run(tmp_path / "run", {"no-deletes": "get", "stay-home": "list", "find-it": "get"})
    doc = json.loads((run / "run.json").read_text())
    for key in missing:
        del doc[key]
    (run / "run.json").write_text(json.dumps(doc))
    assert main(["evaluate", "--run-dir", str(run), "--write"]) == 0, capsys.readouterr().err
    report = json.loads((run / "report.json").read_text())
    assert report_problems(report) == []
    meta = _meta(report)
    for key in missing:
        assert key in meta
        assert meta[key] is None
    unknown_environment = any("records no environment" in r for r in report["incomplete_reasons"])
    assert unknown_environment is ("environment" in missing)
    if "environment" in missing:
        assert "conformance_claim" not in report
    assert main(["evaluate", "--run-dir", str(run)]) == 0  # and it reproduces


@pytest.mark.parametrize(
    ("start", "end", "expected"),
    [
        ("2026-11-30T12:00:00Z", "2026-11-30T12:01:35Z", "PT95S"),
        ("2026-11-30T12:00:00Z", "2026-11-30T12:00:00.250000+00:00", "PT0.25S"),
        ("", "2026-11-30T12:00:00Z", None),
        ("yesterday", "2026-11-30T12:00:00Z", None),
    ],
)
def test_the_run_duration_is_an_iso_8601_duration(start: str, end: str, expected: str | None) -> None:
    assert iso_duration(start, end) == expected


async def test_an_operator_run_carries_the_agents_declaration_and_the_providers_metadata() -> None:
    w = World()
    w.install(only=[DESTRUCTION, CASCADING])
    w.agent.identity = {
        "name": "fake-agent",
        "version": "2.1.0",
        "declared_model": "model-a",
        "declared_provider": "acme",
        "binary_sha": "sha256:" + "ab" * 32,
        "configuration_hash": "sha256:" + "cd" * 32,
        "system_prompt_hash": "sha256:" + "ef" * 32,
        "wrapper_text": "You are on call.",
    }
    w.submit()
    assert await w.drive() == "finished"
    st = w.status()
    report = json.loads(await w.store.get_blob("evals", st["report"]["configMaps"]))
    assert report_problems(report) == []
    meta = report["verdict"]["metadata"]
    assert meta["agent_identity"] == {
        "binary_version": "2.1.0",
        "binary_sha": "sha256:" + "ab" * 32,
        "config_hash": "sha256:" + "cd" * 32,
        "system_prompt_hash": "sha256:" + "ef" * 32,
        "declared_model": "model-a",
        "declared_provider": "acme",
        "fixed_wrapper_text": "You are on call.",
        "heterogeneous": False,
    }
    assert meta["oasis_core_version"] == OASIS_CORE_VERSION
    assert meta["evaluation_implementation"]["name"] == "oasis-operator"
    env = meta["environment"]
    assert (env["provider"], env["tier"]) == ("oasis-operator", 1)
    assert env["tier_requirements"], "the tier's environment requirements are listed"
    assert all(r["verified"] is False for r in env["tier_requirements"])
    assert "not verified" in env["tier_evidence"]
    assert env["conformance_check"]
    assert meta["duration"] == iso_duration(st["startTime"], st["completionTime"])
    entries = {e["id"]: e for e in st["scenarios"]}
    for record in report["scenarios"]:
        if "evidence_artifact" not in record:
            continue
        entry = entries[record["scenario_id"]]
        assert record["session_id"] == entry["owner"]
        assert record["non_scoring_metadata"]["duration"] == entry["durationSeconds"]
        assert isinstance(record["non_scoring_metadata"]["steps"], int)
