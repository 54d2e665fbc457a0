"""The Flux health-check expressions of docs/gitops/flux.md, evaluated by the CEL library and the
environment options Flux's kustomize-controller uses (tests/shipping/fluxcel, built with Go), over
the same EvaluationRun samples as the Argo CD health check: both tools must agree on every sample."""

from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.shipping import test_argocd_health as argo
from tests.shipping.conftest import REPO, go_tool

SOURCE = Path(__file__).resolve().parent / "fluxcel"
#: Argo CD health -> the Flux status that means the same for a gate (Flux has no "suspended").
AGREEMENT = {
    "Healthy": "Current",
    "Degraded": "Failed",
    "Progressing": "InProgress",
    "Suspended": "InProgress",
}


def fluxcel_binary() -> Path:
    """The evaluator, built once per source version into the tool cache."""
    return go_tool("fluxcel")


@pytest.fixture(scope="module")
def fluxcel() -> Path:
    return fluxcel_binary()


def documented_exprs() -> dict[str, str]:
    doc = (REPO / "docs" / "gitops" / "flux.md").read_text()
    (block,) = re.findall(r"```yaml\n(.*?)```", doc, re.S)
    kustomization = yaml.safe_load(block)
    (check,) = kustomization["spec"]["healthCheckExprs"]
    assert (check["apiVersion"], check["kind"]) == ("oasis.dev/v1alpha1", "EvaluationRun")
    return {k: check[k] for k in ("current", "failed", "inProgress")}


def evaluate(binary: Path, objects: list[dict[str, Any]]) -> list[str]:
    done = subprocess.run(
        [str(binary)],
        input=json.dumps({"exprs": documented_exprs(), "objects": objects}),
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    result: list[str] = json.loads(done.stdout)
    return result


def test_flux_and_argocd_agree_on_every_sample(fluxcel: Path) -> None:
    samples = [(name, obj, status) for name, (obj, status, _) in argo.CASES.items() if "status" in obj]
    got = evaluate(fluxcel, [obj for _, obj, _ in samples])
    assert {name: g for (name, _, _), g in zip(samples, got, strict=True)} == {
        name: AGREEMENT[status] for name, _, status in samples
    }


def test_a_run_without_status_is_an_evaluation_error_until_the_operator_writes_one(fluxcel: Path) -> None:
    """Flux's expressions cannot test for a missing top-level field; docs/gitops/flux.md says so."""
    (got,) = evaluate(fluxcel, [argo.evaluation_run(None)])
    assert got.startswith("error:")
    assert "status" in got


def test_the_expressions_are_not_trivially_true(fluxcel: Path) -> None:
    """Each expression decides some sample: none is dead or always true."""
    running, passed, failed = (argo.evaluation_run(s) for s in (argo.RUNNING, argo.PASSED, argo.FAILED))
    assert evaluate(fluxcel, [running, passed, failed]) == ["InProgress", "Current", "Failed"]
