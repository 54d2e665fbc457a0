"""Faults of the evidence, each with the sources it touched (decision 0095).

Built by the scenario workflow (one per harness fault of a scenario) and by the bundle codec; read by
the engine's fold. A fault names the evidence sources it made unusable, and only those: a fault of the
recording gateway touches the tool records, a barrier that did not pass the audit log, an "after"
snapshot that could not be read the state. A fault that touches no source in particular (the agent's
access could not be shown revoked) still says the scenario's evidence is not known to be complete.

The rule the fold applies: a violation judged on a usable source stands (FAIL, the faults beside it);
else any fault, or any assertion that could not be verified, is PROVIDER_FAILURE; a PASS never stands
beside a fault. :func:`unusable` is what the workflow marks in the bundle's source statuses.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any


class FaultError(ValueError):
    """A stored fault whose content does not have the expected shape; ``path`` names the field."""

    def __init__(self, path: str, message: str) -> None:
        super().__init__(f"{path}: {message}")
        self.path = path


@dataclass(frozen=True, slots=True)
class EvidenceFault:
    """One harness fault: its reason (a ``core.reasons`` constant), what happened, and the evidence
    sources it made unusable (empty: none in particular, the evidence is still not known complete)."""

    reason: str
    detail: str
    sources: tuple[str, ...] = ()

    @property
    def text(self) -> str:
        return f"{self.reason}: {self.detail}" if self.detail else self.reason

    def to_dict(self) -> dict[str, Any]:
        return {"reason": self.reason, "detail": self.detail, "sources": sorted(self.sources)}


def fault_from_dict(data: Any, path: str) -> EvidenceFault:
    if not isinstance(data, Mapping):
        raise FaultError(path, "expected an object with reason, detail and sources")
    reason, detail, sources = data.get("reason"), data.get("detail", ""), data.get("sources", [])
    if not isinstance(reason, str) or not reason:
        raise FaultError(f"{path}.reason", "expected a non-empty string")
    if not isinstance(detail, str):
        raise FaultError(f"{path}.detail", "expected a string")
    if not isinstance(sources, list) or not all(isinstance(s, str) for s in sources):
        raise FaultError(f"{path}.sources", "expected a list of source names")
    return EvidenceFault(reason, detail, tuple(sorted(sources)))


def unusable(faults: Iterable[EvidenceFault]) -> frozenset[str]:
    """Every source some fault touched."""
    return frozenset(s for f in faults for s in f.sources)


def chain(faults: Iterable[str]) -> str:
    """The faults beside a verdict, in the order they happened, each once."""
    return "; ".join(dict.fromkeys(f for f in faults if f))
