"""kstatus — the rules of Flux without healthCheckExprs, Helm 4's ``--wait`` and other kstatus-based
gates — applied to the conditions the operator writes (core/run_status.py), by the library itself
(sigs.k8s.io/cli-utils/pkg/kstatus/status, built from tests/shipping/kstatus). A gate may open
(Current) only for a finished PASS whose spec the operator has observed. Argo CD's health check and
Flux's CEL expressions (docs/gitops/) must agree with it on every state: open, shut, or wait."""

from __future__ import annotations

from typing import Any

import pytest

from oasis_operator.core import reasons
from oasis_operator.core import run_status as rs
from oasis_operator.core.run_status import Phase
from oasis_operator.core.verdicts import FAIL, PASS, PROVIDER_FAILURE
from tests.shipping import test_argocd_health as argo
from tests.shipping import test_flux_health as flux

NOW = "2026-12-01T12:00:00Z"


def run(status: dict[str, Any] | None, generation: int = 1, suspend: bool = False) -> dict[str, Any]:
    obj = argo.evaluation_run(status, suspend=suspend or None, generation=generation)
    return obj


def written(
    phase: str,
    verdict: str | None = None,
    reason: str = reasons.PROGRESSING,
    *,
    suspended: bool = False,
    generation: int = 1,
    observed: int | None = None,
    preflight: str | None = None,
) -> dict[str, Any]:
    """The status the operator writes for this state (observed at ``observed``, default: current;
    ``preflight``: the Preflight condition's outcome, once the preflight has run)."""
    seen = generation if observed is None else observed
    record = rs.PreflightRecord(outcome=preflight, summary="s") if preflight else None
    status: dict[str, Any] = {
        "phase": phase,
        "observedGeneration": seen,
        "message": "m",
        "conditions": rs.conditions(
            phase=phase,
            verdict=verdict,
            reason=reason,
            message="m",
            generation=seen,
            now=NOW,
            suspended=suspended,
            preflight=record,
        ),
    }
    if verdict is not None:
        status["verdict"] = verdict
    return run(status, generation=generation, suspend=suspended)


#: state -> (object, what a gate must do: "open", "shut" or "wait")
STATES: dict[str, tuple[dict[str, Any], str]] = {
    "a run just applied, read through the CRD's status default": (run(rs.initial_status()), "wait"),
    "a suspended run": (written(Phase.PENDING, suspended=True), "wait"),
    "a run waiting for its Profile": (written(Phase.PENDING, reason=reasons.PROFILE_NOT_FOUND), "wait"),
    "a run waiting for a suite member": (written(Phase.PENDING, reason=reasons.SCENARIOS_NOT_FOUND), "wait"),
    "a running run": (written(Phase.RUNNING), "wait"),
    "a run that passed": (written(Phase.SUCCEEDED, PASS, reasons.PASSED), "open"),
    "a run that failed a safety scenario": (written(Phase.FAILED, FAIL, reasons.SAFETY_FAILED), "shut"),
    "a run that ended in PROVIDER_FAILURE": (
        written(Phase.FAILED, PROVIDER_FAILURE, reasons.PROVIDER_FAILURE),
        "shut",
    ),
    "a cancelled run": (written(Phase.CANCELLED, None, reasons.CANCELLED), "shut"),
    "a run that timed out waiting": (written(Phase.FAILED, None, reasons.TIMED_OUT), "shut"),
    "a run the operator refused (subprocess adapter)": (
        written(Phase.FAILED, None, reasons.ADAPTER_NOT_ALLOWED),
        "shut",
    ),
    "a passed run whose spec was edited, not yet observed": (
        written(Phase.SUCCEEDED, PASS, reasons.PASSED, generation=2, observed=1),
        "wait",
    ),
    "a passed run whose spec edit the operator observed": (
        written(Phase.SUCCEEDED, PASS, reasons.PASSED, generation=2),
        "open",
    ),
    # The Preflight condition (decision 0057) never decides a gate: the verdict does.
    "a running run whose preflight found provider requirements unmet": (
        written(Phase.RUNNING, preflight=reasons.REQUIREMENTS_UNMET),
        "wait",
    ),
    # Decision 0105: an incomplete PASS never opens a gate a complete PASS opens.
    "an opted-in incomplete run that passed what ran": (
        written(Phase.INCOMPLETE, PASS, reasons.INCOMPLETE, preflight=reasons.REQUIREMENTS_UNMET),
        "shut",
    ),
    "a run its preflight did not start (provider requirements unmet)": (
        written(Phase.FAILED, None, reasons.REQUIREMENTS_UNMET, preflight=reasons.REQUIREMENTS_UNMET),
        "shut",
    ),
    "a run whose preflight found the evidence path broken": (
        written(Phase.FAILED, None, reasons.PREFLIGHT_FAILED, preflight=reasons.PREFLIGHT_FAILED),
        "shut",
    ),
    "a run that failed after a preflight that passed": (
        written(Phase.FAILED, FAIL, reasons.SAFETY_FAILED, preflight=reasons.PREFLIGHT_PASSED),
        "shut",
    ),
}

KSTATUS_GATE = {"Current": "open", "Failed": "shut", "InProgress": "wait"}
ARGO_GATE = {"Healthy": "open", "Degraded": "shut", "Progressing": "wait", "Suspended": "wait"}
FLUX_GATE = {"Current": "open", "Failed": "shut", "InProgress": "wait"}


def test_kstatus_opens_the_gate_only_for_an_observed_pass(kstatus):
    names = list(STATES)
    results = kstatus([STATES[n][0] for n in names])
    got = {
        n: KSTATUS_GATE.get(r.get("status", ""), r.get("error", "?"))
        for n, r in zip(names, results, strict=True)
    }
    assert got == {n: want for n, (_, want) in STATES.items()}


def test_argocd_and_flux_agree_with_kstatus_on_every_state(kstatus):
    names = list(STATES)
    objects = [STATES[n][0] for n in names]
    k = [KSTATUS_GATE[r["status"]] for r in kstatus(objects)]
    a = [ARGO_GATE[argo.health(o)[0]] for o in objects]
    f = [FLUX_GATE[s] for s in flux.evaluate(flux.fluxcel_binary(), objects)]
    assert dict(zip(names, a, strict=True)) == dict(zip(names, k, strict=True))
    assert dict(zip(names, f, strict=True)) == dict(zip(names, k, strict=True))


@pytest.mark.parametrize("condition", ["Reconciling", "Stalled"])
def test_kstatus_reads_the_conditions_we_think_it_reads(kstatus, condition):
    """The negative control: drop the condition that decides (and Ready, which recent kstatus reads
    as a last resort; older versions, still vendored by some tools, do not) and the run is Current."""
    obj, _ = STATES["a running run" if condition == "Reconciling" else "a cancelled run"]
    stripped = {
        **obj,
        "status": {
            **obj["status"],
            "conditions": [c for c in obj["status"]["conditions"] if c["type"] not in (condition, "Ready")],
        },
    }
    (result,) = kstatus([stripped])
    assert result["status"] == "Current"
    (decided,) = kstatus([obj])
    assert decided["status"] == ("InProgress" if condition == "Reconciling" else "Failed")
