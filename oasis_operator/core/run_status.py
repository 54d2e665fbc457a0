"""The EvaluationRun's status: its phases, its per-scenario steps, and kstatus conditions.

Called by the run workflow after every step; turns the run's progress (phase, verdict, the compact
scenario list) plus the time and generation handed in into the status document the API stores:
summary counts and the conditions ``kubectl wait``, Argo CD and Flux read. The rules, in one place:

- ``Completed=True`` once the run is finished, whatever the verdict (so ``kubectl wait
  --for=condition=Completed`` returns for a failed run too).
- ``Succeeded=True`` only for a finished PASS; ``Stalled=True`` for FAIL and PROVIDER_FAILURE and for
  a run that cannot start (bad reference, preflight unmet).
- ``Reconciling=True`` while work is left; ``Ready`` mirrors Succeeded for tools that only read Ready.
Pure: no clock (``now`` is an argument), no client.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

# Run phases.
PENDING = "Pending"
RUNNING = "Running"
SUCCEEDED = "Succeeded"
FAILED = "Failed"
CANCELLED = "Cancelled"
TERMINAL = (SUCCEEDED, FAILED, CANCELLED)

# Scenario steps.
STEP_PENDING = "Pending"
STEP_RUNNING = "Running"
STEP_DONE = "Done"
STEP_EXCLUDED = "Excluded"  # not applicable, not supported by this provider, or not run (abort)

# Verdicts.
PASS, FAIL, PROVIDER_FAILURE = "PASS", "FAIL", "PROVIDER_FAILURE"
#: Not a verdict: the agent failed and the evidence shows no violation (decision 0030).
UNEVALUABLE = "UNEVALUABLE"

# Condition reasons.
R_PROGRESSING = "Progressing"
R_SUSPENDED = "Suspended"
R_PASSED = "Passed"
R_FAILED = "SafetyFailed"
R_PROVIDER_FAILURE = "ProviderFailure"
R_CANCELLED = "Cancelled"
R_INVALID = "InvalidSpec"
R_PREFLIGHT = "PreflightFailed"
R_AGENT_UNAVAILABLE = "AgentUnavailable"
R_UNEVALUABLE = "Unevaluable"


def _cond(ctype: str, status: bool, reason: str, message: str, generation: int, now: str,
          previous: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    value = "True" if status else "False"
    old = previous.get(ctype)
    changed = old is None or old.get("status") != value
    return {
        "type": ctype,
        "status": value,
        "reason": reason,
        "message": message[:32000],
        "observedGeneration": generation,
        "lastTransitionTime": now if changed else str((old or {}).get("lastTransitionTime") or now),
    }


def conditions(*, phase: str, verdict: str | None, reason: str, message: str, generation: int, now: str,
               suspended: bool = False, previous: Sequence[Mapping[str, Any]] = ()) -> list[dict[str, Any]]:
    prev = {str(c.get("type")): c for c in previous}
    finished = phase in TERMINAL
    passed = finished and phase == SUCCEEDED
    stalled = finished and phase == FAILED
    working = not finished and not suspended
    if suspended and not finished:
        reason = R_SUSPENDED
    return [
        _cond("Ready", passed, reason, message, generation, now, prev),
        _cond("Reconciling", working, reason, message, generation, now, prev),
        _cond("Stalled", stalled, reason, message, generation, now, prev),
        _cond("Succeeded", passed, reason, message, generation, now, prev),
        _cond("Completed", finished, reason, message, generation, now, prev),
    ]


def summary(scenarios: Sequence[Mapping[str, Any]]) -> dict[str, int]:
    """Counts for printer columns. passed/failed are safety verdicts (the gate); a capability
    scenario's PASS/FAIL feeds a score and is counted apart."""
    done = [s for s in scenarios if s.get("step") == STEP_DONE]
    verdicts = [s.get("verdict") for s in done if s.get("classification") != "capability"]
    capability = [s.get("verdict") for s in done if s.get("classification") == "capability"]
    return {
        "total": len(scenarios),
        "passed": verdicts.count(PASS),
        "failed": verdicts.count(FAIL),
        "capabilityPassed": capability.count(PASS),
        "capabilityFailed": capability.count(FAIL),
        "providerFailures": verdicts.count(PROVIDER_FAILURE) + capability.count(PROVIDER_FAILURE),
        "unevaluable": verdicts.count(UNEVALUABLE) + capability.count(UNEVALUABLE),
        "excluded": sum(1 for s in scenarios if s.get("step") == STEP_EXCLUDED),
        "pending": sum(1 for s in scenarios if s.get("step") in (STEP_PENDING, STEP_RUNNING)),
    }


def finished_phase(verdict: str | None, *, cancelled: bool = False) -> tuple[str, str]:
    """The terminal phase and condition reason for a run that ended with ``verdict``."""
    if cancelled:
        return CANCELLED, R_CANCELLED
    if verdict == PASS:
        return SUCCEEDED, R_PASSED
    if verdict == FAIL:
        return FAILED, R_FAILED
    if verdict == UNEVALUABLE:
        # The agent failed where the evidence showed nothing: safety is not established, so the gate
        # is not passed (Stalled for GitOps), and the run makes no claim.
        return FAILED, R_UNEVALUABLE
    return FAILED, R_PROVIDER_FAILURE


def next_scenarios(scenarios: Sequence[Mapping[str, Any]], classification: str, capacity: int) -> list[str]:
    """Which pending scenarios of ``classification`` to start now, given free ``capacity``.

    A scenario marked exclusive runs alone: it starts only when nothing runs, and nothing starts
    beside it.
    """
    running = [s for s in scenarios if s.get("step") == STEP_RUNNING]
    if any(s.get("exclusive") for s in running) or capacity <= 0:
        return []
    pending = [s for s in scenarios if s.get("step") == STEP_PENDING and s.get("classification") == classification]
    out: list[str] = []
    for s in pending:
        if s.get("exclusive"):
            if not running and not out:
                return [str(s["name"])]
            continue
        if len(out) < capacity:
            out.append(str(s["name"]))
    return out


def phase_verdict(scenarios: Sequence[Mapping[str, Any]], classification: str) -> str | None:
    """FAIL beats PROVIDER_FAILURE beats UNEVALUABLE beats PASS over the done scenarios of one
    classification (a phase with an unevaluable scenario has not passed)."""
    vs = {s.get("verdict") for s in scenarios if s.get("classification") == classification and s.get("step") == STEP_DONE}
    for v in (FAIL, PROVIDER_FAILURE, UNEVALUABLE, PASS):
        if v in vs:
            return v
    return None
