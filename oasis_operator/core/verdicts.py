"""How a scenario, a phase or a run ended: the verdicts, the exclusions, and the one precedence rule.

Used by every layer that writes or reads an outcome: the verification engine and aggregation
(:class:`Verdict`), the agent contract (:func:`~oasis_operator.core.contract.outcome.settle_verdict`
turns a verdict into a :class:`SettledVerdict`), the run's status table, the reports and the CLI.
The words, in one place:

- **Verdicts** (OASIS Core §3.6) are only ``PASS``, ``FAIL`` and ``PROVIDER_FAILURE``.
- **UNEVALUABLE** is not a verdict: the agent failed and the evidence shows no violation
  (decision 0030). A :class:`SettledVerdict` is a verdict or UNEVALUABLE: what a scenario ends with
  once the agent's outcome is taken into account, and what the run's status shows.
- **Exclusions** say why a scenario has no verdict at all: it does not apply to the agent's
  configuration (``NOT_APPLICABLE``), this provider cannot realise it (``UNSUPPORTED``), the engine
  cannot judge it deterministically (``INVALID``), or it never ran (``NOT_EXECUTED``: cancelled,
  aborted, or its phase was not reached; the report's word since its first version).
- **Precedence**: FAIL beats PROVIDER_FAILURE beats UNEVALUABLE beats PASS, at every level (a phase,
  a category, a run). Exclusions take no part. :func:`strongest` is the rule; aggregation and the run
  status both use it.
"""

from __future__ import annotations

from collections.abc import Iterable
from enum import StrEnum
from typing import Final


class Verdict(StrEnum):
    """The three verdicts of OASIS Core §3.6."""

    PASS = "PASS"
    FAIL = "FAIL"
    PROVIDER_FAILURE = "PROVIDER_FAILURE"


class SettledVerdict(StrEnum):
    """A verdict, or UNEVALUABLE (not a verdict: decision 0030)."""

    PASS = "PASS"
    FAIL = "FAIL"
    PROVIDER_FAILURE = "PROVIDER_FAILURE"
    UNEVALUABLE = "UNEVALUABLE"


class Exclusion(StrEnum):
    """Why a scenario has no verdict."""

    #: It does not apply to the configuration the agent reported (``applicability``).
    NOT_APPLICABLE = "NOT_APPLICABLE"
    #: This provider cannot realise its environment (or may not write what it needs).
    UNSUPPORTED = "UNSUPPORTED"
    #: The verification engine cannot judge it deterministically; running it could only end in a
    #: verdict that rests on nothing.
    INVALID = "INVALID"
    #: It was not run: the run was cancelled or aborted, or its phase was never reached.
    NOT_EXECUTED = "NOT_EXECUTED"


PASS: Final = SettledVerdict.PASS
FAIL: Final = SettledVerdict.FAIL
PROVIDER_FAILURE: Final = SettledVerdict.PROVIDER_FAILURE
UNEVALUABLE: Final = SettledVerdict.UNEVALUABLE
NOT_APPLICABLE: Final = Exclusion.NOT_APPLICABLE
UNSUPPORTED: Final = Exclusion.UNSUPPORTED
INVALID: Final = Exclusion.INVALID
NOT_EXECUTED: Final = Exclusion.NOT_EXECUTED

#: Strongest first: the first of these present decides.
PRECEDENCE: Final = (
    SettledVerdict.FAIL,
    SettledVerdict.PROVIDER_FAILURE,
    SettledVerdict.UNEVALUABLE,
    SettledVerdict.PASS,
)

#: Exclusions the provider decided (it could not run the scenario): the report lists them as not
#: executed, and the run is incomplete.
NOT_EXECUTED_BY_PROVIDER: Final = frozenset({Exclusion.UNSUPPORTED, Exclusion.INVALID})


def strongest(values: Iterable[str | None]) -> SettledVerdict | None:
    """The value that decides, by :data:`PRECEDENCE`; None when no value is a (settled) verdict.
    Exclusions and None take no part."""
    seen = set(values)
    return next((v for v in PRECEDENCE if v in seen), None)
