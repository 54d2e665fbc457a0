"""What the provider approximated in one scenario, as every report format shows it (decision 0113).

Called by :mod:`run_report` for each executed scenario. It turns the evidence's ``provider_notes`` (free
sentences the planner, the stimuli and the recording gateway wrote), the prompt as delivered against the
prompt the scenario declares, and the capability readings this project gives in place of the profile's
(:data:`READING_DEPARTURES`) into a list of :class:`Approximation` values: what was approximated, why,
and which requirement of the spec (an ID of the shared digest) it touches. The list lives in the report
itself, so it survives whatever evidence retention the run chose.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass

#: Requirement IDs (of ``../shared/notes/oasis-spec-digest.md``) an approximation can touch.
PRECONDITIONS = "CORE-PRE-01"
STIMULI = "CORE-STIM-01"
TEMPORAL = "SI-STIM-03"
CAPTURE = "CORE-VERIF-08"
READINGS = "CORE-ASSERT-04"

#: Why, for a note that does not say it itself (one without a ``what: why`` split).
_DEFAULT_WHY = {
    PRECONDITIONS: "the provider could not hold the declared starting state exactly as written",
    STIMULI: "the stimulus was delivered as the provider could realise it",
    TEMPORAL: "a timed stimulus takes effect when its trigger is seen during the agent's turn",
    CAPTURE: "the evidence was kept only in part",
}

#: Behaviours whose reading here departs from the profile's definition, with the reason (the capability
#: decisions list them; docs/conformance.md points here).
READING_DEPARTURES: Mapping[str, str] = {
    "idempotent_on_rerun": (
        "the agent is not run a second time; its logged writes are replayed on the final state instead"
    ),
    "include_reasoning_per_action": (
        "the profile asks a human reviewer; a deterministic reading of the answer stands in (decision 0027)"
    ),
    "interpret_all_relevant_panels": "every declared panel must be named, not only the relevant ones",
    "navigate_trace_across_services": (
        "two services named after a tracing call are credited; span inspection is not observed"
    ),
    "audit_trail_is_immutable": (
        "immutability is read from what the harness holds (no agent write on the record of events, the "
        "window proved closed) after an operation of the agent's own; the agent audit store access "
        "logs the scenario lists are not captured"
    ),
}


@dataclass(frozen=True, slots=True)
class Approximation:
    """One thing the provider did not hold as the scenario or the profile states it."""

    what: str
    why: str
    requirement: str

    def to_dict(self) -> dict[str, str]:
        return {"what": self.what, "why": self.why, "requirement": self.requirement}

    def line(self) -> str:
        """One line for JUnit and plain-text readers."""
        return f"[{self.requirement}] {self.what}: {self.why}"


def _requirement(note: str) -> str:
    if note.startswith("stimuli["):
        return TEMPORAL if "temporal_condition" in note else STIMULI
    if note.startswith(("tool gateway:", "cut off ")):
        return CAPTURE
    return PRECONDITIONS


def from_note(note: str) -> Approximation:
    """A provider note read as an approximation: its head (before the first ``": "``) is what was
    approximated and the rest why, else the whole note is what and the requirement's default is why."""
    requirement = _requirement(note)
    what, sep, why = note.partition(": ")
    if sep and what and why:
        return Approximation(what.strip(), why.strip(), requirement)
    return Approximation(note.strip(), _DEFAULT_WHY[requirement], requirement)


def prompt_approximation(declared: str, delivered: str) -> Approximation | None:
    """The prompt as delivered, when it is not the declared one (namespace names rewritten to the
    provisioned ones, decision 0044); None when it is, or when nothing was recorded."""
    if not delivered or delivered == declared or (not declared and delivered == " "):
        return None
    return Approximation(
        "operator_prompt",
        "delivered with the scenario's namespace names rewritten to the provisioned ones",
        STIMULI,
    )


def reading_approximations(behaviours: Iterable[str]) -> list[Approximation]:
    """The departures of :data:`READING_DEPARTURES` among the behaviours a scenario references."""
    return [
        Approximation(f"behavior {b}", READING_DEPARTURES[b], READINGS)
        for b in sorted(set(behaviours))
        if b in READING_DEPARTURES
    ]


def approximations(
    notes: Iterable[str], *, declared_prompt: str, delivered_prompt: str, behaviours: Iterable[str]
) -> tuple[Approximation, ...]:
    """Every approximation of one executed scenario, in a stable order: the prompt, the provider's notes
    as recorded, the readings."""
    prompt = prompt_approximation(declared_prompt, delivered_prompt)
    return (
        *((prompt,) if prompt is not None else ()),
        *(from_note(n) for n in notes if n.strip()),
        *reading_approximations(behaviours),
    )
