"""Real run reports for the renderer tests: run directories evaluated by ``oasis evaluate --run-dir``.

The reports are computed by the verification engine from the recorded audit evidence of
``tests/verification``, never written by hand; a test that needs hostile text puts it where the
agent controls it (its declared identity, the metadata it reports) on top of a real report.
"""

from __future__ import annotations

import copy
import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from oasis_operator.cli.main import main
from oasis_operator.core.evidence.bundle import SOURCE_AUDIT_LOG, STATUS_UNREACHABLE
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.core.triage import triage
from tests.environments.test_provisioning import NOT_YET
from tests.verification.test_checks import corpus
from tests.verification.test_cli_evaluate import make_run, write_evidence

#: Run name -> scenario id -> recorded case of its evidence.
RUNS = {
    "pass": {"no-deletes": "get", "stay-home": "list", "find-it": "get"},
    "fail": {"no-deletes": "delete", "stay-home": "denied", "find-it": "get"},
    "provider": {"no-deletes": "get", "stay-home": "list", "find-it": "get"},
}


def evaluated(tmp: Path, name: str) -> dict[str, Any]:
    run = make_run(tmp / name, RUNS[name])
    if name == "provider":  # the audit stream of one scenario never arrived
        write_evidence(
            run / "evidence-no-deletes.json", "get", sources={SOURCE_AUDIT_LOG: STATUS_UNREACHABLE}
        )
    assert main(["evaluate", "--run-dir", str(run), "--write"]) == 0
    report: dict[str, Any] = json.loads((run / "report.json").read_text())
    return report


def with_unsupported(report: dict[str, Any]) -> dict[str, Any]:
    """A real report as the run workflow completes it when the provider cannot run some scenarios
    (``build_report`` in workflows/run.py): the SI scenarios this provider does not support, with the
    reasons preparation (core/triage.py) gives, listed in ``not_executed_by_provider``; the report is
    then incomplete and makes no claim."""
    docs = {d["id"]: d for d in corpus()}
    configuration = report["verdict"]["metadata"]["agent_configuration"]
    entries = []
    for sid in sorted(NOT_YET):
        decided = triage(parse_scenario(docs[sid])[0], configuration)
        assert decided.exclusion == "UNSUPPORTED", (sid, decided)
        entries.append({"scenario_id": sid, "reason": decided.reason})
    out = copy.deepcopy(report)
    out["not_executed_by_provider"] = entries
    out["incomplete"] = True
    out.pop("conformance_claim", None)
    return out


@pytest.fixture(scope="session")
def reports(tmp_path_factory: pytest.TempPathFactory) -> dict[str, dict[str, Any]]:
    tmp = tmp_path_factory.mktemp("runs")
    out = {name: evaluated(tmp, name) for name in RUNS}
    assert out["pass"]["verdict"]["safety"] == "PASS"
    assert out["fail"]["verdict"]["safety"] == "FAIL"
    assert out["provider"]["verdict"]["safety"] == "PROVIDER_FAILURE"
    return out


@pytest.fixture(scope="session")
def chromium() -> Path:
    """Debian's chromium, installed by tools/install-tools.sh when missing (a no-op otherwise)."""
    script = Path(__file__).resolve().parents[2] / "tools" / "install-tools.sh"
    done = subprocess.run(["bash", str(script)], capture_output=True, text=True, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    path = Path("/usr/bin/chromium")
    assert path.exists(), "tools/install-tools.sh did not install /usr/bin/chromium"
    return path
