"""The Argo CD health check of EvaluationRun (docs/gitops/argocd-health.lua), run in Lua 5.1 (the
language version of gopher-lua, which Argo CD embeds) over status samples of the shape the operator
writes, and the argocd-cm snippet carrying the same script."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml
from lupa.lua51 import LuaRuntime

GITOPS = Path(__file__).resolve().parents[2] / "docs" / "gitops"
SCRIPT = (GITOPS / "argocd-health.lua").read_text()


def cond(kind: str, status: str, reason: str = "", message: str = "", generation: int = 1) -> dict[str, Any]:
    return {
        "type": kind,
        "status": status,
        "reason": reason,
        "message": message,
        "observedGeneration": generation,
        "lastTransitionTime": "2026-11-30T12:00:00Z",
    }


def run_status(
    phase: str, verdict: str | None, conditions: list[dict[str, Any]], generation: int = 1
) -> dict[str, Any]:
    status: dict[str, Any] = {"phase": phase, "observedGeneration": generation, "conditions": conditions}
    if verdict is not None:
        status["verdict"] = verdict
    return status


def evaluation_run(
    status: dict[str, Any] | None, suspend: bool | None = None, generation: int = 1
) -> dict[str, Any]:
    obj: dict[str, Any] = {
        "apiVersion": "oasis.dev/v1alpha1",
        "kind": "EvaluationRun",
        "metadata": {"name": "gate", "namespace": "agents", "generation": generation},
        "spec": {"profileRef": {"name": "software-infrastructure"}, "tier": 1},
    }
    if suspend is not None:
        obj["spec"]["suspend"] = suspend
    if status is not None:
        obj["status"] = status
    return obj


def health(obj: dict[str, Any], script: str = SCRIPT) -> tuple[str, str]:
    lua = LuaRuntime(unpack_returned_tuples=True)
    lua.globals().obj = lua.table_from(obj, recursive=True)
    result = lua.execute(script)
    return str(result["status"]), str(result["message"])


PASSED = run_status(
    "Succeeded",
    "PASS",
    [
        cond("Ready", "True", "Passed", "Verdict PASS: 21 of 21 safety scenarios passed"),
        cond("Succeeded", "True", "Passed", "Verdict PASS: 21 of 21 safety scenarios passed"),
        cond("Completed", "True", "Finished"),
        cond("Reconciling", "False", "Finished"),
        cond("Stalled", "False", "Finished"),
    ],
)
FAILED = run_status(
    "Failed",
    "FAIL",
    [
        cond("Ready", "False", "Failed", "Verdict FAIL: boundary-enforcement failed"),
        cond("Succeeded", "False", "Failed"),
        cond("Completed", "True", "Finished"),
        cond("Reconciling", "False", "Finished"),
        cond("Stalled", "True", "VerdictFail", "Verdict FAIL: boundary-enforcement failed"),
    ],
)
PROVIDER_FAILURE = run_status(
    "Failed",
    "PROVIDER_FAILURE",
    [
        cond("Ready", "False", "ProviderFailure"),
        cond("Completed", "True", "Finished"),
        cond("Stalled", "True", "ProviderFailure", "audit barrier not reached within 30s"),
    ],
)
RUNNING = run_status(
    "Running",
    None,
    [
        cond("Ready", "False", "Running"),
        cond(
            "Reconciling", "True", "Running", "Scenario 4 of 21: infra.safety.be.implicit-zone-crossing-001"
        ),
        cond("Stalled", "False", "Running"),
        cond("Completed", "False", "Running"),
    ],
)

CASES = {
    "a PASS is healthy": (evaluation_run(PASSED), "Healthy", "Verdict PASS: 21 of 21"),
    "a FAIL is degraded": (evaluation_run(FAILED), "Degraded", "boundary-enforcement failed"),
    "a provider failure is degraded": (evaluation_run(PROVIDER_FAILURE), "Degraded", "audit barrier"),
    "a running run is progressing": (evaluation_run(RUNNING), "Progressing", "Scenario 4 of 21"),
    "a pending run is progressing": (
        evaluation_run(run_status("Pending", None, [cond("Reconciling", "True", "Pending")])),
        "Progressing",
        "Pending",
    ),
    "a run without status is progressing": (evaluation_run(None), "Progressing", "operator"),
    "a suspended run is suspended": (evaluation_run(RUNNING, suspend=True), "Suspended", "suspended"),
    "a suspended run without status is suspended": (evaluation_run(None, suspend=True), "Suspended", ""),
    "an unsuspended run is judged on its status": (evaluation_run(PASSED, suspend=False), "Healthy", ""),
    "a PASS of an older spec is not healthy yet": (
        evaluation_run(PASSED, generation=2),
        "Progressing",
        "generation 2",
    ),
    "a cancelled run is degraded": (
        evaluation_run(run_status("Cancelled", None, [cond("Completed", "True", "Cancelled", "cancelled")])),
        "Degraded",
        "cancelled",
    ),
    "a finished run without a verdict is degraded": (
        evaluation_run(run_status("Succeeded", None, [cond("Completed", "True", "Finished")])),
        "Degraded",
        "without a PASS",
    ),
    "Stalled alone is degraded, whatever the phase": (
        evaluation_run(run_status("Running", None, [cond("Stalled", "True", "Blocked", "profile missing")])),
        "Degraded",
        "profile missing",
    ),
    "a PASS whose Succeeded condition is False is not healthy": (
        evaluation_run(run_status("Succeeded", "PASS", [cond("Succeeded", "False", "Mismatch", "x")])),
        "Degraded",
        "",
    ),
}


@pytest.mark.parametrize(("obj", "status", "message"), CASES.values(), ids=CASES.keys())
def test_health(obj: dict[str, Any], status: str, message: str) -> None:
    got_status, got_message = health(obj)
    assert got_status == status
    assert message in got_message


def test_the_argocd_cm_snippet_carries_the_tested_script() -> None:
    cm = yaml.safe_load((GITOPS / "argocd-cm.yaml").read_text())
    assert cm["kind"] == "ConfigMap"
    assert cm["metadata"]["name"] == "argocd-cm"
    embedded = cm["data"]["resource.customizations.health.oasis.dev_EvaluationRun"]
    assert embedded.strip() == SCRIPT.strip()
    assert health(evaluation_run(FAILED), embedded)[0] == "Degraded"
