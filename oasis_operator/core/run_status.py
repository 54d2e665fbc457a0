"""The EvaluationRun's status as a state table: its phases, its scenarios' steps, and kstatus conditions.

Called by the run workflow after every step and by the operator's daemon filter; turns the run's
progress into the status document the API stores: typed (:class:`RunStatus`, :class:`ScenarioEntry`;
camelCase on the wire), summary counts for the printer columns, and the conditions ``kubectl wait``,
Argo CD, Flux and Helm read. Pure: no clock (``now`` is an argument), no client.

The rules, in one place (h11 keeps its state machine the same way):

1. A run's phase and a scenario's step change only through the tables below
   (:data:`RUN_TRANSITIONS`, :data:`SCENARIO_TRANSITIONS`): the workflow names the event, the table
   names the next state and the reason. Anything else is :class:`InvalidTransition`, a bug.
2. One precedence decides every verdict above a scenario (:func:`oasis_operator.core.verdicts.strongest`):
   FAIL beats PROVIDER_FAILURE beats UNEVALUABLE beats PASS.
3. A run ends Succeeded only with a safety PASS of a complete evaluation; a PASS of an incomplete one
   ends Incomplete (decision 0105: no conformance claim, no gate opens); any other end (FAIL, PROVIDER_FAILURE, UNEVALUABLE,
   nothing judged, a run that could not start or timed out, a cancelled run) is Failed or Cancelled.
4. An aborted run (a scenario ended in PROVIDER_FAILURE, or ``timeouts.run`` passed) has incomplete
   evidence: PROVIDER_FAILURE, unless a FAIL was already certain.
5. Conditions (kstatus reads only ``Reconciling`` and ``Stalled``: True means InProgress and Failed;
   anything else is Current, which opens a gate):

   - ``Reconciling=True`` while the run is not finished: running, waiting for something that does
     not exist yet (a Profile, a Scenario of its suite, the agent), or suspended (reason
     ``Suspended``: a suspended run is not done). Before the operator writes anything, the CRD's
     status default says the same (reason ``Pending``).
   - ``Stalled=True`` for a finished run that did not pass, an Incomplete one included.
   - ``Completed=True`` once the run is finished, whatever the verdict (so ``kubectl wait
     --for=condition=Completed`` returns for a failed run too); ``Succeeded=True`` only for a
     finished PASS; ``Ready`` mirrors Succeeded for tools that only read Ready.
   - Every condition carries the generation it was computed for; the run's ``observedGeneration``
     follows every spec edit, finished or not; a condition's ``lastTransitionTime`` moves only when
     its status flips.

6. A finished run costs nothing: :func:`needs_driver` says when the operator must look at a run.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from enum import StrEnum
from typing import Any, Final

from pydantic import BaseModel, ConfigDict, field_validator
from pydantic.alias_generators import to_camel

from oasis_operator.core import reasons
from oasis_operator.core.verdicts import PROVIDER_FAILURE, UNEVALUABLE, SettledVerdict, strongest

RERUN_ANNOTATION: Final = "oasis.dev/rerun"


class Phase(StrEnum):
    PENDING = "Pending"
    RUNNING = "Running"
    SUCCEEDED = "Succeeded"
    FAILED = "Failed"
    CANCELLED = "Cancelled"
    #: Finished: what ran passed, but the evaluation is incomplete (decision 0105).
    INCOMPLETE = "Incomplete"


TERMINAL: Final = frozenset({Phase.SUCCEEDED, Phase.FAILED, Phase.CANCELLED, Phase.INCOMPLETE})


class Step(StrEnum):
    """Where one scenario of the run is."""

    PENDING = "Pending"
    RUNNING = "Running"
    DONE = "Done"
    #: Without a verdict of its own: not applicable, not supported, not verifiable, or not run.
    EXCLUDED = "Excluded"


class InvalidTransition(RuntimeError):
    """A step or phase change the tables do not allow: a bug in the workflow, never a verdict."""


# -- the run's phase ------------------------------------------------------------------------------------
class RunEvent(StrEnum):
    WAITING = "waiting"  # something the run needs does not exist yet (the reason says what)
    SUSPENDED = "suspended"
    PREPARED = "prepared"  # every scenario planned: the run starts
    INVALID_SPEC = "invalid-spec"
    ADAPTER_REFUSED = "adapter-refused"
    PREFLIGHT_FAILED = "preflight-failed"
    #: The preflight found provider-conformance requirements unmet, and the spec does not opt in to an
    #: incomplete evaluation: the run does not start (decision 0105).
    REQUIREMENTS_UNMET = "requirements-unmet"
    GAVE_UP = "gave-up"  # timeouts.run passed before the run could start
    CANCELLED = "cancelled"
    FINISHED = "finished"  # the report is stored: the phase follows from the verdict (FINISHED_BY)
    RERUN = "rerun"  # the rerun annotation asks for a new run


_ANY: Final = tuple(Phase)
_OPEN: Final = (Phase.PENDING, Phase.RUNNING)

#: (phase, event) -> (next phase, condition reason). None as the reason: the event's own (a waiting
#: reason) or, for FINISHED, the one :data:`FINISHED_BY` gives.
RUN_TRANSITIONS: Final[dict[tuple[Phase, RunEvent], tuple[Phase, str | None]]] = {
    **{(p, RunEvent.WAITING): (Phase.PENDING, None) for p in _OPEN},
    (Phase.PENDING, RunEvent.SUSPENDED): (Phase.PENDING, reasons.SUSPENDED),
    (Phase.RUNNING, RunEvent.SUSPENDED): (Phase.RUNNING, reasons.SUSPENDED),  # a started run stays started
    (Phase.PENDING, RunEvent.PREPARED): (Phase.RUNNING, reasons.PROGRESSING),
    **{(p, RunEvent.INVALID_SPEC): (Phase.FAILED, reasons.INVALID_SPEC) for p in _OPEN},
    (Phase.PENDING, RunEvent.ADAPTER_REFUSED): (Phase.FAILED, reasons.ADAPTER_NOT_ALLOWED),
    (Phase.PENDING, RunEvent.PREFLIGHT_FAILED): (Phase.FAILED, reasons.PREFLIGHT_FAILED),
    (Phase.PENDING, RunEvent.REQUIREMENTS_UNMET): (Phase.FAILED, reasons.REQUIREMENTS_UNMET),
    (Phase.PENDING, RunEvent.GAVE_UP): (Phase.FAILED, reasons.TIMED_OUT),
    **{(p, RunEvent.CANCELLED): (Phase.CANCELLED, reasons.CANCELLED) for p in _OPEN},
    (Phase.RUNNING, RunEvent.FINISHED): (Phase.FAILED, None),  # or SUCCEEDED: FINISHED_BY
    **{(p, RunEvent.RERUN): (Phase.PENDING, reasons.PROGRESSING) for p in _ANY},
}

#: A finished run's verdict -> (phase, condition reason).
FINISHED_BY: Final[dict[SettledVerdict, tuple[Phase, str]]] = {
    SettledVerdict.PASS: (Phase.SUCCEEDED, reasons.PASSED),
    SettledVerdict.FAIL: (Phase.FAILED, reasons.SAFETY_FAILED),
    SettledVerdict.PROVIDER_FAILURE: (Phase.FAILED, reasons.PROVIDER_FAILURE),
    # The agent failed where the evidence showed nothing: safety is not established, so the gate is
    # not passed (Stalled for GitOps), and the run makes no claim.
    SettledVerdict.UNEVALUABLE: (Phase.FAILED, reasons.UNEVALUABLE),
}


def finished_phase(
    verdict: str | None, *, timed_out: bool = False, incomplete: bool = False
) -> tuple[Phase, str]:
    """The terminal phase and condition reason for a run that ended with ``verdict`` (nothing judged:
    PROVIDER_FAILURE); a run stopped by ``timeouts.run`` that did not pass says TimedOut; a PASS of an
    ``incomplete`` evaluation is Incomplete, never Succeeded (decision 0105)."""
    phase, reason = FINISHED_BY[
        SettledVerdict(verdict) if verdict in set(SettledVerdict) else PROVIDER_FAILURE
    ]
    if timed_out and verdict != SettledVerdict.PASS:
        reason = reasons.TIMED_OUT
    if incomplete and phase is Phase.SUCCEEDED:
        phase, reason = Phase.INCOMPLETE, reasons.INCOMPLETE
    return phase, reason


# -- a scenario's step ----------------------------------------------------------------------------------
class ScenarioEvent(StrEnum):
    EXCLUDED = "excluded"  # at preparation: not applicable, unsupported or invalid (verdict and reason given)
    STARTED = "started"
    FINISHED = "finished"  # a verdict (given)
    TIMED_OUT = "timed-out"  # timeouts.scenario: PROVIDER_FAILURE (reason given)
    HARNESS_ERROR = "harness-error"  # the harness itself raised: PROVIDER_FAILURE (reason given)
    CUT_OFF = "cut-off"  # found running after a restart: torn down, to run again from scratch
    #: Found running after a restart, and a violation was proven on what survived: its verdict (FAIL)
    #: stands, it does not run again (decision 0097).
    CUT_OFF_JUDGED = "cut-off-judged"
    #: Found running after a restart once more than :data:`MAX_ATTEMPTS` allow: PROVIDER_FAILURE.
    CUT_OFF_FINAL = "cut-off-final"
    CANCELLED = "cancelled"
    ABORTED = "aborted"  # the run aborted before it started
    RUN_TIMED_OUT = "run-timed-out"  # timeouts.run passed while it ran
    SAFETY_NOT_PASSED = "safety-not-passed"  # a capability scenario, when Phase 1 did not pass


#: (step, event) -> (next step, reason). None as the reason: the event gives it (or there is none).
SCENARIO_TRANSITIONS: Final[dict[tuple[Step, ScenarioEvent], tuple[Step, str | None]]] = {
    (Step.PENDING, ScenarioEvent.EXCLUDED): (Step.EXCLUDED, None),
    (Step.PENDING, ScenarioEvent.STARTED): (Step.RUNNING, None),
    (Step.RUNNING, ScenarioEvent.FINISHED): (Step.DONE, None),
    (Step.RUNNING, ScenarioEvent.TIMED_OUT): (Step.DONE, None),
    (Step.RUNNING, ScenarioEvent.HARNESS_ERROR): (Step.DONE, None),
    # Fail closed: a harness error after the verdict was recorded (its Event, its metrics) voids it.
    (Step.DONE, ScenarioEvent.HARNESS_ERROR): (Step.DONE, None),
    (Step.RUNNING, ScenarioEvent.CUT_OFF): (Step.PENDING, None),
    (Step.RUNNING, ScenarioEvent.CUT_OFF_JUDGED): (Step.DONE, None),
    (Step.RUNNING, ScenarioEvent.CUT_OFF_FINAL): (Step.DONE, None),
    (Step.PENDING, ScenarioEvent.CANCELLED): (Step.EXCLUDED, reasons.NOT_RUN_CANCELLED),
    (Step.RUNNING, ScenarioEvent.CANCELLED): (Step.EXCLUDED, reasons.NOT_FINISHED_CANCELLED),
    (Step.PENDING, ScenarioEvent.ABORTED): (Step.EXCLUDED, reasons.NOT_RUN_ABORTED),
    (Step.RUNNING, ScenarioEvent.RUN_TIMED_OUT): (Step.EXCLUDED, reasons.NOT_FINISHED_RUN_TIMEOUT),
    (Step.PENDING, ScenarioEvent.SAFETY_NOT_PASSED): (Step.EXCLUDED, reasons.NOT_RUN_SAFETY_NOT_PASSED),
}

#: Events that end a scenario in PROVIDER_FAILURE whatever the caller says.
_PROVIDER_FAILURE_EVENTS: Final = frozenset(
    {ScenarioEvent.TIMED_OUT, ScenarioEvent.HARNESS_ERROR, ScenarioEvent.CUT_OFF_FINAL}
)

#: Attempts of one scenario a run makes when restarts cut it off (decision 0097): the agent gets no
#: unbounded retries, and a harness that keeps restarting ends the scenario PROVIDER_FAILURE.
MAX_ATTEMPTS: Final = 3


# -- the status document ----------------------------------------------------------------------------------
class _Wire(BaseModel):
    """camelCase on the wire, snake_case here; keys nobody set are never written (a status is merge-
    patched: an absent key is left alone, a None removes it); keys of other versions are kept."""

    model_config = ConfigDict(
        alias_generator=to_camel,
        populate_by_name=True,
        extra="allow",
        validate_assignment=False,
        use_attribute_docstrings=True,
    )

    def wire(self) -> dict[str, Any]:
        return self.model_dump(by_alias=True, exclude_unset=True, mode="json")

    def unset(self, name: str) -> None:
        """Forget a field, so that it is not written at all (not even as null)."""
        setattr(self, name, None)
        self.__pydantic_fields_set__.discard(name)


class ScenarioEntry(_Wire):
    """One scenario of the run, as its status lists it."""

    name: str
    """Name of the Scenario object."""
    id: str | None = None
    """The scenario's OASIS id."""
    category: str | None = None
    """The scenario's category in the profile."""
    classification: str | None = None
    """safety or capability."""
    step: Step = Step.PENDING
    """Where the scenario is: Pending, Running, Done or Excluded."""
    attempt: int = 0
    """How many times the scenario has been started (restarts included)."""
    verdict: str | None = None
    """A settled verdict (Done) or an exclusion (Excluded at preparation); none for what was not run."""
    reason: str | None = None
    """Why the scenario has its step or verdict, in a few words."""
    exclusive: bool | None = None
    """The scenario runs alone: nothing else runs beside it."""
    owner: str | None = None
    """Ownership value of the current attempt's environment; recorded before anything exists, so a
    restarted operator can tear it down."""
    namespaces: list[str] | None = None
    """Namespaces the current attempt's environment uses."""
    vacuity: list[str] | None = None
    """Checks of the scenario that passed without evidence to judge (vacuous), named."""
    evidence: list[str] | None = None
    """Where the scenario's evidence is kept."""
    duration_seconds: float | None = None
    """How long the scenario ran, in seconds."""

    def advance(self, event: ScenarioEvent, *, verdict: str | None = None, reason: str | None = None) -> None:
        """Move by the table; ``verdict`` and ``reason`` only where the event brings them."""
        target = SCENARIO_TRANSITIONS.get((self.step, event))
        if target is None:
            raise InvalidTransition(f"scenario {self.name}: no transition from {self.step} on {event}")
        step, fixed = target
        self.step = step
        if event in _PROVIDER_FAILURE_EVENTS:
            verdict = PROVIDER_FAILURE
        if verdict is not None:
            self.verdict = verdict
        if fixed is not None or reason is not None:
            self.reason = reasons.clip(fixed or reason or "", reasons.ENTRY_REASON_LIMIT)


#: How much of an agent's declared name, version or model the run's status keeps.
IDENTITY_LIMIT: Final = 256


class AgentRecord(_Wire):
    name: str | None = None
    """The agent's declared name (escaped and bounded)."""
    version: str | None = None
    """The agent's declared version."""
    declared_model: str | None = None
    """The model the agent declares it runs on."""
    configuration: dict[str, Any] | None = None
    """The agent's declared configuration, by the profile's configuration dimensions."""
    identity: dict[str, Any] | None = None
    """The run-wide identity declaration of the agent, as the report carries it."""

    @field_validator("name", "version", "declared_model")
    @classmethod
    def _shown(cls, value: str | None) -> str | None:
        # The agent's own words, printed by `kubectl describe` and `oasis wait`: escaped and bounded.
        return None if value is None else reasons.bounded(value, IDENTITY_LIMIT)


class ProfileRecord(_Wire):
    name: str | None = None
    """The profile's name."""
    id: str | None = None
    """The profile's OASIS id."""
    version: str | None = None
    """The profile's version."""


class ReportRecord(_Wire):
    """Where the report is stored (ConfigMaps owned by the run) and in which formats."""

    config_maps: list[str] | None = None
    """ConfigMaps, owned by the run, that hold the report."""
    incomplete: bool | None = None
    """True when the evidence is incomplete (the run was aborted or timed out): the verdict is not a
    full evaluation."""
    formats: dict[str, list[str]] | None = None
    """Format (json, yaml, html, junit) -> the ConfigMaps holding the report in it."""
    evidence_kept: bool | None = None
    """Whether the raw evidence was kept with the report."""
    run_description: list[str] | None = None
    """ConfigMaps holding the run directory's run.json (what the report was computed from)."""
    scenario_documents: list[str] | None = None
    """ConfigMaps holding the run directory's scenarios.yaml."""


class PreflightRecord(_Wire):
    """The preflight's outcome (decision 0057): ``outcome`` is the Preflight condition's reason; the
    checks as the report carries them (``metadata.environment.preflight``)."""

    outcome: str | None = None
    """The Preflight condition's reason: passed, or why not."""
    summary: str | None = None
    """One line on the preflight's result."""
    seconds: float | None = None
    """How long the preflight took, in seconds."""
    checks: list[dict[str, Any]] | None = None
    """Each preflight check and its result, as the report carries them."""
    tier_requirements: list[dict[str, Any]] | None = None
    """What the run's tier requires of the environment, and whether each is met."""
    tier_evidence: str | None = None
    """Whether the environment gives the evidence the tier needs, in a few words."""

    @property
    def passed(self) -> bool:
        return self.outcome == reasons.PREFLIGHT_PASSED


class CapabilityRecord(_Wire):
    """Compact: the core dimension scores and coverage; the full breakdown is in the report."""

    tier: Any = None
    """The capability tier the agent reached."""
    coverage_complete: bool | None = None
    """Whether the capability scenarios covered what the tier requires."""
    dimensions: dict[str, Any] | None = None
    """Core dimension -> its score."""


class RunStatus(_Wire):
    """The run's status document."""

    phase: Phase | None = None
    """Lifecycle phase: Pending, Running, Succeeded, Failed or Cancelled."""
    verdict: str | None = None
    """The run's verdict: PASS, FAIL, PROVIDER_FAILURE or UNEVALUABLE; none until settled."""
    message: str | None = None
    """A human-readable line on the run's state."""
    observed_generation: int | None = None
    """The metadata.generation of the spec the operator last acted on."""
    conditions: list[dict[str, Any]] | None = None
    """kstatus conditions: Reconciling, Stalled, Completed, Succeeded, Ready, Preflight."""
    summary: dict[str, int] | None = None
    """Counts of the run's scenarios: total, passed, failed, capabilityPassed, capabilityFailed,
    providerFailures, unevaluable, excluded, pending."""
    start_time: str | None = None
    """When the run started (RFC 3339)."""
    completion_time: str | None = None
    """When the run finished (RFC 3339)."""
    rerun_token: str | None = None
    """Value of the oasis.dev/rerun annotation the run last restarted for."""
    aborted: bool | None = None
    """True when the run was cut short (a provider failure or timeouts.run)."""
    abort_reason: str | None = None
    """Why the run was aborted."""
    timed_out: bool | None = None
    """True when timeouts.run passed before the run finished."""
    agent: AgentRecord | None = None
    """The agent under test, as it declared itself."""
    profile: ProfileRecord | None = None
    """The profile the run evaluated against."""
    scenarios: list[ScenarioEntry] | None = None
    """The run's scenarios with their steps and verdicts."""
    report: ReportRecord | None = None
    """Where the report is stored, and whether its evidence is complete."""
    capability: CapabilityRecord | None = None
    """The capability result in brief; the full breakdown is in the report."""
    preflight: PreflightRecord | None = None
    """The result of the checks made before any scenario ran."""

    @property
    def current(self) -> Phase:
        return self.phase or Phase.PENDING

    @property
    def finished(self) -> bool:
        return self.phase in TERMINAL

    @property
    def entries(self) -> list[ScenarioEntry]:
        return self.scenarios or []

    def entry(self, name: str) -> ScenarioEntry:
        return next(s for s in self.entries if s.name == name)

    def condition(self, kind: str) -> Mapping[str, Any]:
        return next((c for c in self.conditions or [] if c.get("type") == kind), {})

    def transition(
        self,
        event: RunEvent,
        *,
        verdict: str | None = None,
        reason: str | None = None,
        incomplete: bool = False,
    ) -> str:
        """Move the phase by the table; returns the condition reason to write with it (``incomplete``:
        the finished run's report is, decision 0105)."""
        target = RUN_TRANSITIONS.get((self.current, event))
        if target is None:
            raise InvalidTransition(f"run: no transition from {self.current} on {event}")
        phase, fixed = target
        if event is RunEvent.FINISHED:
            phase, fixed = finished_phase(verdict, timed_out=bool(self.timed_out), incomplete=incomplete)
            self.verdict = verdict
        self.phase = phase
        return fixed or reason or reasons.PROGRESSING

    def abort(self, why: str, *, timed_out: bool = False) -> None:
        """Nothing new starts; the evidence of the run is incomplete (rule 4). The first reason stays."""
        if not self.aborted:
            self.aborted = True
            self.abort_reason = reasons.clip(why, reasons.ABORT_REASON_LIMIT)
            if timed_out:
                self.timed_out = True

    def exclude_pending(self, event: ScenarioEvent, classification: str | None = None) -> None:
        """Every pending scenario (of ``classification``) out, by ``event``."""
        for s in self.entries:
            if s.step is Step.PENDING and (classification is None or s.classification == classification):
                s.advance(event)


def initial_status() -> dict[str, Any]:
    """What a run reads as before the operator has written anything (the CRD's status default):
    in progress, for kstatus, Argo CD and Flux alike."""
    return {
        "phase": Phase.PENDING.value,
        "conditions": [
            {
                "type": "Reconciling",
                "status": "True",
                "reason": reasons.PENDING,
                "message": "waiting for the operator to pick up the run",
            }
        ],
    }


def _cond(
    ctype: str,
    status: bool,
    reason: str,
    message: str,
    generation: int,
    now: str,
    previous: Mapping[str, Mapping[str, Any]],
) -> dict[str, Any]:
    value = "True" if status else "False"
    old = previous.get(ctype)
    changed = old is None or old.get("status") != value
    return {
        "type": ctype,
        "status": value,
        "reason": reason,
        "message": reasons.clip(message, reasons.CONDITION_MESSAGE_LIMIT),
        "observedGeneration": generation,
        "lastTransitionTime": now if changed else str((old or {}).get("lastTransitionTime") or now),
    }


def conditions(
    *,
    phase: str,
    verdict: str | None,
    reason: str,
    message: str,
    generation: int,
    now: str,
    suspended: bool = False,
    previous: Sequence[Mapping[str, Any]] = (),
    preflight: PreflightRecord | None = None,
) -> list[dict[str, Any]]:
    """The five conditions of rule 5, all carrying ``reason``; and, once the preflight has run, the
    Preflight condition (True: every check met; its reason says which way it went otherwise)."""
    prev = {str(c.get("type")): c for c in previous}
    finished = phase in TERMINAL
    passed = finished and phase == Phase.SUCCEEDED and verdict == SettledVerdict.PASS
    stalled = finished and not passed
    working = not finished
    if suspended and not finished:
        reason = reasons.SUSPENDED
    return [
        _cond("Ready", passed, reason, message, generation, now, prev),
        _cond("Reconciling", working, reason, message, generation, now, prev),
        _cond("Stalled", stalled, reason, message, generation, now, prev),
        _cond("Succeeded", passed, reason, message, generation, now, prev),
        _cond("Completed", finished, reason, message, generation, now, prev),
    ] + (
        [
            _cond(
                "Preflight",
                preflight.passed,
                preflight.outcome or reasons.PREFLIGHT_FAILED,
                preflight.summary or "",
                generation,
                now,
                prev,
            )
        ]
        if preflight is not None
        else []
    )


def needs_driver(run: Mapping[str, Any]) -> bool:
    """Whether the operator must look at this run at all (the raw object, as kopf hands it). A finished
    run needs nothing until its spec changes (observedGeneration behind), it is asked to run again
    (the rerun annotation), or an opt-in TTL will delete it; otherwise it costs no request."""
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


def live_owners(runs: Iterable[Mapping[str, Any]]) -> set[str]:
    """The ownership values of every scenario environment some run has in flight (the raw objects):
    a scenario records its owner, while Running, before it creates anything, so the orphan sweep
    spares exactly these. A run's other entries (finished, pending, an earlier attempt) own nothing
    that must be kept."""
    live: set[str] = set()
    for run in runs:
        for entry in (run.get("status") or {}).get("scenarios") or []:
            owner = entry.get("owner") if isinstance(entry, Mapping) else None
            if owner and entry.get("step") == Step.RUNNING:
                live.add(str(owner))
    return live


def summary(scenarios: Sequence[ScenarioEntry]) -> dict[str, int]:
    """Counts for printer columns. passed/failed are safety verdicts (the gate); a capability
    scenario's PASS/FAIL feeds a score and is counted apart."""
    done = [s for s in scenarios if s.step is Step.DONE]
    verdicts = [s.verdict for s in done if s.classification != "capability"]
    capability = [s.verdict for s in done if s.classification == "capability"]
    return {
        "total": len(scenarios),
        "passed": verdicts.count(SettledVerdict.PASS),
        "failed": verdicts.count(SettledVerdict.FAIL),
        "capabilityPassed": capability.count(SettledVerdict.PASS),
        "capabilityFailed": capability.count(SettledVerdict.FAIL),
        "providerFailures": verdicts.count(PROVIDER_FAILURE) + capability.count(PROVIDER_FAILURE),
        "unevaluable": verdicts.count(UNEVALUABLE) + capability.count(UNEVALUABLE),
        "excluded": sum(1 for s in scenarios if s.step is Step.EXCLUDED),
        "pending": sum(1 for s in scenarios if s.step in (Step.PENDING, Step.RUNNING)),
    }


def next_scenarios(scenarios: Sequence[ScenarioEntry], classification: str, capacity: int) -> list[str]:
    """Which pending scenarios of ``classification`` to start now, given free ``capacity``.

    A scenario marked exclusive runs alone: it starts only when nothing runs, and nothing starts
    beside it.
    """
    running = [s for s in scenarios if s.step is Step.RUNNING]
    if any(s.exclusive for s in running) or capacity <= 0:
        return []
    pending = [s for s in scenarios if s.step is Step.PENDING and s.classification == classification]
    out: list[str] = []
    for s in pending:
        if s.exclusive:
            if not running and not out:
                return [s.name]
            continue
        if len(out) < capacity:
            out.append(s.name)
    return out


def phase_verdict(scenarios: Iterable[ScenarioEntry], classification: str) -> SettledVerdict | None:
    """The done scenarios of one classification, by the one precedence (a phase with an unevaluable
    scenario has not passed)."""
    return strongest(
        s.verdict for s in scenarios if s.classification == classification and s.step is Step.DONE
    )


def run_verdict(safety: str | None, *, aborted: bool, scenarios: Sequence[ScenarioEntry]) -> SettledVerdict:
    """What a finished run reads: the report's safety verdict, PROVIDER_FAILURE when the run aborted
    (rule 4), UNEVALUABLE when a safety scenario was (decision 0030), and PROVIDER_FAILURE when
    nothing could be judged: never a PASS by default."""
    unevaluable = phase_verdict(scenarios, "safety") == UNEVALUABLE
    decided = strongest([safety, PROVIDER_FAILURE if aborted else None, UNEVALUABLE if unevaluable else None])
    return decided or PROVIDER_FAILURE


def completion_message(
    verdict: str,
    counts: Mapping[str, int],
    *,
    aborted: bool,
    abort_reason: str,
    incomplete: bool = False,
) -> str:
    """The run's last message (and its RunCompleted Event)."""
    message = (
        f"{verdict}: {counts['passed']} passed, {counts['failed']} failed, "
        f"{counts['providerFailures']} provider failures, {counts['excluded']} excluded of {counts['total']}"
    )
    if counts.get("unevaluable"):
        message += f"; {counts['unevaluable']} unevaluable (agent failures): no conformance claim"
    if aborted:
        message += f"; aborted: {abort_reason}"
    if incomplete and verdict == SettledVerdict.PASS:
        message += "; incomplete evaluation: no conformance claim"
    return message


#: A scenario's verdict -> (Event type, Event reason).
SCENARIO_EVENTS: Final[dict[str, tuple[str, str]]] = {
    SettledVerdict.PASS: ("Normal", reasons.EVENT_SCENARIO_PASSED),
    SettledVerdict.FAIL: ("Warning", reasons.EVENT_SCENARIO_FAILED),
    SettledVerdict.PROVIDER_FAILURE: ("Warning", reasons.EVENT_PROVIDER_FAILURE),
    SettledVerdict.UNEVALUABLE: ("Warning", reasons.EVENT_SCENARIO_UNEVALUABLE),
}


def scenario_event(verdict: str) -> tuple[str, str]:
    return SCENARIO_EVENTS.get(verdict, ("Normal", reasons.EVENT_SCENARIO_EXCLUDED))
