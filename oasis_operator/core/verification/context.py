"""Everything one scenario's checks read, gathered once by the engine.

Built by :mod:`oasis_operator.core.judging.engine` from a bundle and its audit events; read by
every check. Holding it in one value keeps each check a small pure function of the context.

Three views of the judged operations, by what a check may conclude from them:

- :attr:`EvalContext.attempts` — everything judged as the agent's: its own requests, requests of
  other identities acting on the scenario, unaudited state changes, implied restarts, dry runs.
  Prohibitions search here (a pattern decides whether a dry run counts).
- :attr:`EvalContext.ops` — the attempts without dry runs: what changed or tried to change state,
  and reads. State-changing rules read this; behaviours about the agent's conduct read
  :attr:`EvalContext.own_ops`, the same without what controllers did on the agent's behalf.
- :attr:`EvalContext.proven` — the agent's own requests that succeeded with a known outcome: the
  only evidence that may *satisfy* a requirement (a presumption never makes a PASS).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from oasis_operator.core.evidence.bundle import EvidenceBundle
from oasis_operator.core.verification import vacuity
from oasis_operator.core.verification.matching import MatchContext, Operation
from oasis_operator.core.verification.snapshots import SnapshotIndex


@dataclass(frozen=True, slots=True)
class EvalContext:
    bundle: EvidenceBundle
    attempts: tuple[Operation, ...]  # every judged operation, in time order
    before: SnapshotIndex
    after: SnapshotIndex
    total_events: int
    default_namespace: str  # the logical token ``default`` resolved

    @property
    def ops(self) -> tuple[Operation, ...]:
        """Judged operations that are not dry runs."""
        return tuple(op for op in self.attempts if not op.dry_run)

    @property
    def own_ops(self) -> tuple[Operation, ...]:
        """Judged operations that are not dry runs, without those a controller carried out on the
        agent's behalf (:mod:`deputies`): what behaviours about the agent's own conduct read."""
        return tuple(op for op in self.ops if op.cause is None)

    @property
    def proven(self) -> tuple[Operation, ...]:
        """The agent's own successful requests (what may satisfy a requirement)."""
        return tuple(op for op in self.attempts if op.proven)

    @property
    def match(self) -> MatchContext:
        return MatchContext(before=self.before, physical=self.physical)

    @property
    def principal_known(self) -> bool:
        return bool(self.bundle.agent_principals)

    def physical(self, logical: str) -> str:
        return self.bundle.physical_namespace(logical)

    def audit_vacuity(self) -> str | None:
        """Why an audit-based check had nothing of the agent's to examine, if it had nothing."""
        if self.attempts:
            return None
        if not self.principal_known:
            return vacuity.PRINCIPAL_UNKNOWN
        if self.total_events == 0:
            return vacuity.AUDIT_LOG_EMPTY
        return vacuity.NO_AGENT_ENTRIES

    def tool_call_texts(self) -> list[str]:
        """Every tool call's parameters as searchable text (raw strings and their JSON form)."""
        out: list[str] = []
        for parameters in self.bundle.call_parameters():
            out.extend(leaf_strings(parameters))
            out.append(json.dumps(parameters, sort_keys=True, ensure_ascii=False))
        return out


def leaf_strings(value: Any) -> list[str]:
    """Every string in a JSON-like value: keys and leaves, depth first, in a stable order."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for k in sorted(value, key=str) for s in (str(k), *leaf_strings(value[k]))]
    if isinstance(value, list | tuple):
        return [s for v in value for s in leaf_strings(v)]
    return []


def leaf_values(value: Any) -> list[str]:
    """Every string value (not key) of a JSON-like value, in document order."""
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for v in value.values() for s in leaf_values(v)]
    if isinstance(value, list | tuple):
        return [s for v in value for s in leaf_values(v)]
    return []
