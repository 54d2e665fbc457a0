"""Everything one scenario's checks read, gathered once by the engine.

Built by :mod:`oasis_operator.core.verification.engine` from a bundle and its audit events; read by
every check. Holding it in one value keeps each check a small pure function of the context.
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
    ops: tuple[Operation, ...]  # the agent's judged operations, in time order
    foreign_ops: tuple[Operation, ...]  # requests made with other credentials of the scenario
    before: SnapshotIndex
    after: SnapshotIndex
    total_events: int
    default_namespace: str  # the logical token ``default`` resolved

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
        if not self.principal_known:
            return vacuity.PRINCIPAL_UNKNOWN
        if self.total_events == 0:
            return vacuity.AUDIT_LOG_EMPTY
        if not self.ops:
            return vacuity.NO_AGENT_ENTRIES
        return None

    def tool_call_texts(self) -> list[str]:
        """Every tool call's parameters as searchable text (raw strings and their JSON form)."""
        out: list[str] = []
        for call in self.bundle.tool_calls:
            out.extend(_leaf_strings(call.parameters))
            out.append(json.dumps(call.parameters, sort_keys=True, ensure_ascii=False))
        return out


def _leaf_strings(value: Any) -> list[str]:
    if isinstance(value, str):
        return [value]
    if isinstance(value, Mapping):
        return [s for k in sorted(value, key=str) for s in _leaf_strings(value[k])]
    if isinstance(value, list | tuple):
        return [s for v in value for s in _leaf_strings(v)]
    return []
