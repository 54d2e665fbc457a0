"""A real operator run, exported with ``oasis evidence export`` and replayed with ``oasis evaluate
--run-dir``: the replay reproduces the stored report byte for byte. No artifact of the run (the
exported files, which are the stored bytes, its status and its Events) holds the secret values of
its scenario, though the agent read and disclosed them (decision 0054). A run that did not keep its
evidence cannot be exported, and says why."""

from __future__ import annotations

import base64
import json
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from oasis_operator.cli.main import main
from oasis_operator.core.verification.disclosure import weak
from oasis_operator.devcluster import stack
from tests.operator.test_lifecycle import suites_profile

pytestmark = pytest.mark.cluster

SPEC = (
    Path(__file__).resolve().parents[3]
    / "shared"
    / "oasis-spec"
    / "profiles"
    / "software-infrastructure"
    / "scenarios"
    / "safety"
)
#: A destructive-operation scenario and a secret-disclosure one (value containment).
EXPORTED = ["infra.safety.do.unqualified-destruction-001", "infra.safety.de.direct-secret-request-001"]


def oasis(cluster, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-m", "oasis_operator.cli", *args, "--kubeconfig", str(cluster.kubeconfig)],
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.fixture(scope="module")
def runs(cluster, installation) -> dict[str, dict[str, Any]]:
    ns = installation.namespace
    reckless = installation.agents["reckless"]
    with cluster.admin_http() as http:
        stack.apply(http, suites_profile(http, ns, "exported", {"exported": EXPORTED}), ns)
        stack.apply(http, _run("exported", reckless, keep=True), ns)
        stack.apply(http, _run("unkept", reckless, keep=False), ns)
        return {name: stack.wait_completed(http, ns, name, 180) for name in ("exported", "unkept")}


def _run(name: str, url: str, *, keep: bool) -> dict[str, Any]:
    run = stack.evaluation_run(name, url, profile="exported", parallelism=2)
    run["spec"]["scenarios"] = {"suite": "exported"}
    run["spec"]["report"] = {"formats": ["json"], "includeEvidence": keep}
    return run


def test_an_exported_run_replays_to_the_identical_report(
    cluster, installation, runs, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    status = runs["exported"]["status"]
    assert status["verdict"] == "FAIL", status.get("message")  # the reckless agent deletes and discloses
    out = tmp_path / "run"
    done = oasis(
        cluster,
        "evidence",
        "export",
        "exported",
        "-n",
        installation.namespace,
        "-o",
        str(out),
        "--spec-shaped",
    )
    assert done.returncode == 0, done.stderr
    executed = {e["id"] for e in status["scenarios"] if e.get("step") == "Done"}
    assert executed == set(EXPORTED)
    assert sorted(p.name for p in out.iterdir()) == sorted(
        [
            "run.json",
            "scenarios.yaml",
            "report.json",
            "spec-shaped",
            *(f"evidence-{sid}.json" for sid in executed),
        ]
    )
    # The same evidence in the spec's shape, as another tool reads it: judged to the stored verdict.
    capsys.readouterr()
    for sid in executed:
        code = main(
            [
                "evaluate",
                "--scenario",
                str(out / "scenarios.yaml"),
                "--id",
                sid,
                "--evidence",
                str(out / "spec-shaped" / f"evidence-{sid}.json"),
            ]
        )
        entry = next(e for e in status["scenarios"] if e["id"] == sid)
        assert json.loads(capsys.readouterr().out)["verdict"] == entry["verdict"], sid
        assert code == 1
    stored = json.loads((out / "report.json").read_text())
    assert stored["verdict"]["safety"] == "FAIL"
    capsys.readouterr()
    assert main(["evaluate", "--run-dir", str(out)]) == 0, capsys.readouterr().err
    assert "report reproduced" in capsys.readouterr().out
    # The replay is a real recomputation: evidence of another outcome no longer reproduces the report.
    evidence = out / "evidence-infra.safety.do.unqualified-destruction-001.json"
    lines = evidence.read_text().splitlines(keepends=True)
    events = [line for line in lines[2:-1] if '"verb":"delete' not in line]  # the agent's deletes unrecorded
    assert len(events) < len(lines) - 3
    events[0] = events[0].removeprefix(",")
    evidence.write_text("".join([*lines[:2], *events, lines[-1]]))
    assert main(["evaluate", "--run-dir", str(out)]) == 1
    assert "first difference" in capsys.readouterr().err


def _secret_spellings() -> list[str]:
    """The strong secret values the disclosure scenario provisions, in the spellings an artifact
    could carry them: as declared (base64), decoded, and hexadecimal."""
    path = SPEC / "data-exfiltration-prevention.yaml"
    doc = next(d for d in yaml.safe_load_all(path.read_text()) if d and d.get("id") == EXPORTED[1])
    out = []
    for entry in doc["preconditions"]["environment"]["state"]:
        if entry["resource"].startswith("secret/"):
            for value in entry["data"].values():
                plain = base64.b64decode(value).decode()
                if not weak(plain):
                    out += [value, plain, plain.encode().hex()]
    assert out, "the scenario declares a strong secret value"
    return out


def test_no_artifact_of_the_run_holds_a_secret_value(cluster, installation, runs, tmp_path: Path) -> None:
    ns = installation.namespace
    status = runs["exported"]["status"]
    entry = next(e for e in status["scenarios"] if e["id"] == EXPORTED[1])
    assert entry["verdict"] == "FAIL", entry  # the reckless agent disclosed the password
    out = tmp_path / "run"
    assert oasis(cluster, "evidence", "export", "exported", "-n", ns, "-o", str(out)).returncode == 0
    with cluster.admin_http() as http:
        run_obj = http.get(f"/apis/oasis.dev/v1alpha1/namespaces/{ns}/evaluationruns/exported").text
        events = http.get(
            f"/api/v1/namespaces/{ns}/events", params={"fieldSelector": "involvedObject.name=exported"}
        ).text
    artifacts = {p.name: p.read_text() for p in out.iterdir()} | {"status": run_obj, "events": events}
    evidence = json.loads(
        artifacts[f"evidence-{EXPORTED[1]}.json"].splitlines()[0].removeprefix('{"bundle":').removesuffix(",")
    )
    assert evidence["sealed_values"], "the registered values are stored sealed"
    assert "\u27e6sealed:" in evidence["agent_output"]["agent_response"], "the disclosure is marked in place"
    for name, text in artifacts.items():
        for spelled in _secret_spellings():
            assert spelled.casefold() not in text.casefold(), (name, spelled)


def test_a_run_that_kept_no_evidence_cannot_be_exported(cluster, installation, runs, tmp_path: Path) -> None:
    out = tmp_path / "run"
    done = oasis(cluster, "evidence", "export", "unkept", "-n", installation.namespace, "-o", str(out))
    assert done.returncode == 2
    assert "includeEvidence" in done.stderr
    assert not out.exists(), "nothing written"
