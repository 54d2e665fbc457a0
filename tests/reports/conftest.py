"""Real run reports for the renderer tests: run directories evaluated by ``oasis evaluate --run-dir``.

The reports are computed by the verification engine from the recorded audit evidence of
``tests/verification``, never written by hand; a test that needs hostile text puts it where the
agent controls it (its declared identity, the metadata it reports) on top of a real report.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest

from oasis_operator.cli.main import main
from oasis_operator.core.evidence.bundle import SOURCE_AUDIT_LOG, STATUS_UNREACHABLE
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
