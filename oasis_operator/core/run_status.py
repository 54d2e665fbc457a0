"""The EvaluationRun's status: its phases, its per-scenario steps, and kstatus conditions.

Called by the run workflow after every step, and by the operator's daemon filter; turns the run's
progress (phase, verdict, the compact scenario list) plus the time and generation handed in into the
status document the API stores: summary counts and the conditions ``kubectl wait``, Argo CD, Flux and
Helm read. The rules, in one place (kstatus reads only ``Reconciling`` and ``Stalled``: True means
InProgress and Failed; anything else is Current, which opens a gate):

- ``Reconciling=True`` while the run is not finished: running, waiting for something that does not
  exist yet (a Profile, a Scenario of its suite, the agent), or suspended (reason ``Suspended``: a
  suspended run is not done). Before the operator writes anything, the CRD's status default says the
  same (reason ``Pending``).
- ``Stalled=True`` for a finished run that did not pass: FAIL, PROVIDER_FAILURE, a run that could not
  start or timed out, and a cancelled run (reason ``Cancelled``).
- ``Completed=True`` once the run is finished, whatever the verdict (so ``kubectl wait
  --for=condition=Completed`` returns for a failed run too); ``Succeeded=True`` only for a finished
  PASS; ``Ready`` mirrors Succeeded for tools that only read Ready.
- Every condition carries the generation it was computed for; the run's ``observedGeneration`` follows
  every spec edit, finished or not.

A finished run costs nothing: :func:`needs_driver` says when the operator must look at a run at all.
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
R_ADAPTER_REFUSED = "AdapterNotAllowed"
R_TIMED_OUT = "TimedOut"
R_PENDING = "Pending"
# Waiting for something that does not exist yet (Reconciling=True; Stalled once timeouts.run passes).
R_PROFILE_NOT_FOUND = "ProfileNotFound"
R_SCENARIOS_NOT_FOUND = "ScenariosNotFound"
R_AGENT_NOT_READY = "AgentNotReady"
WAITING_REASONS = (R_PROFILE_NOT_FOUND, R_SCENARIOS_NOT_FOUND, R_AGENT_NOT_READY)

RERUN_ANNOTATION = "oasis.dev/rerun"


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
    passed = finished and phase == SUCCEEDED and verdict == PASS
    stalled = finished and not passed
    working = not finished
    if suspended and not finished:
        reason = R_SUSPENDED
    return [
        _cond("Ready", passed, reason, message, generation, now, prev),
        _cond("Reconciling", working, reason, message, generation, now, prev),
        _cond("Stalled", stalled, reason, message, generation, now, prev),
        _cond("Succeeded", passed, reason, message, generation, now, prev),
        _cond("Completed", finished, reason, message, generation, now, prev),
    ]


def initial_status() -> dict[str, Any]:
    """What a run reads as before the operator has written anything (the CRD's status default):
    in progress, for kstatus, Argo CD and Flux alike."""
    return {"phase": PENDING, "conditions": [
        {"type": "Reconciling", "status": "True", "reason": R_PENDING,
         "message": "waiting for the operator to pick up the run"}]}


def needs_driver(run: Mapping[str, Any]) -> bool:
    """Whether the operator must look at this run at all. A finished run needs nothing until its
    spec changes (observedGeneration behind), it is asked to run again (the rerun annotation), or an
    opt-in TTL will delete it; otherwise it costs no request."""
    status = run.get("status") or {}
    meta = run.get("metadata") or {}
    if status.get("phase") not in TERMINAL:
        return True
    rerun = (meta.get("annotations") or {}).get(RERUN_ANNOTATION)
    if rerun and rerun != status.get("rerunToken"):
        return True
    if status.get("observedGeneration") != meta.get("generation", 1):
        return True
    return (run.get("spec") or {}).get("ttlSecondsAfterFinished") is not None


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
