"""Loading the audit fixtures recorded from the real control plane by tools/record_audit_fixtures.py.

Each case is two files: ``<case>.jsonl`` (every audit event of the window, as the API server logged
it) and ``<case>.meta.json`` (principals, namespace map, window, before/after snapshots, commands).
They are stored gzip'd (``<case>.jsonl.gz``, ``<case>.meta.json.gz``: the recorder's bytes,
compressed), and the loader reads either form; a case stored in both is refused, since the two could
differ. Tests build evidence bundles from them; nothing here invents an event.
"""

from __future__ import annotations

import gzip
import json
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import Any

from oasis_operator.core.evidence.bundle import (
    SOURCE_AGENT_OUTPUT,
    SOURCE_AUDIT_LOG,
    SOURCE_RESOURCE_STATE,
    STATUS_AVAILABLE,
    EvidenceBundle,
    EvidenceSource,
    ToolCall,
)

FIXTURES = Path(__file__).parent / "fixtures"


@dataclass(frozen=True)
class Recorded:
    case: str
    meta: dict[str, Any]
    lines: tuple[str, ...]

    @property
    def events(self) -> list[dict[str, Any]]:
        return [json.loads(line) for line in self.lines]

    @property
    def agent(self) -> str:
        return str(self.meta["agent_principal"])

    @property
    def bystander(self) -> str:
        return str(self.meta["bystander_principal"])

    def logical(self, **tokens: str) -> dict[str, str]:
        """The recorded namespace map with more logical tokens: ``analytics="default"`` maps the
        token ``analytics`` to the namespace recorded as ``default``."""
        ns = dict(self.meta["namespaces"])
        return {**ns, **{token: ns[recorded] for token, recorded in tokens.items()}}

    @property
    def harness(self) -> tuple[str, ...]:
        """The recorder's own identities (its admin client prepares and observes the environment)."""
        return tuple(self.meta.get("harness_principals", ["kubernetes-admin"]))

    @property
    def declared_others(self) -> tuple[str, ...]:
        """Principals the harness declares as its own: its admin, and the bystander except in the
        cases where its token stands for credentials the agent obtained (older recordings lack the
        flag)."""
        declared = self.meta.get("bystander_declared", self.case != "credential_switch")
        return (*self.harness, *((self.bystander,) if declared else ()))

    def bundle(
        self,
        *,
        principals: tuple[str, ...] | None = None,
        others: tuple[str, ...] | None = None,
        namespaces: dict[str, str] | None = None,
        sources: dict[str, str] | None = None,
        agent_response: str = "",
        tool_calls: tuple[ToolCall, ...] = (),
        registered: dict[str, tuple[str, ...]] | None = None,
    ) -> EvidenceBundle:
        status = {
            SOURCE_AUDIT_LOG: STATUS_AVAILABLE,
            SOURCE_RESOURCE_STATE: STATUS_AVAILABLE,
            SOURCE_AGENT_OUTPUT: STATUS_AVAILABLE,
        }
        status.update(sources or {})
        return EvidenceBundle(
            scenario_id=f"recorded-{self.case}",
            window_start=self.meta["window"]["start"],
            window_end=self.meta["window"]["end"],
            agent_principals=(self.agent,) if principals is None else principals,
            other_principals=self.declared_others if others is None else others,
            namespaces=dict(self.meta["namespaces"]) if namespaces is None else namespaces,
            sources={
                k: EvidenceSource(type="audit_log_file" if k == SOURCE_AUDIT_LOG else "kube_api", status=v)
                for k, v in status.items()
            },
            before=tuple(self.meta["before"]),
            after=tuple(self.meta["after"]),
            agent_response=agent_response,
            tool_calls=tool_calls,
            registered_values=registered or {},
        )


@cache
def load(case: str) -> Recorded:
    return load_from(FIXTURES, case)


def read_text(path: Path) -> str:
    """A fixture file's text, from ``<path>.gz`` when it is stored compressed, else from ``path``."""
    packed = path.with_name(f"{path.name}.gz")
    if packed.exists() and path.exists():
        raise ValueError(f"{path.name} is stored both plain and gzip'd: keep one ({packed})")
    if packed.exists():
        return gzip.decompress(packed.read_bytes()).decode()
    return path.read_text()


def load_from(directory: Path, case: str) -> Recorded:
    meta = json.loads(read_text(directory / f"{case}.meta.json"))
    lines = tuple(line for line in read_text(directory / f"{case}.jsonl").splitlines() if line.strip())
    return Recorded(case=case, meta=meta, lines=lines)


def cases_in(directory: Path) -> list[str]:
    """Every case of a directory, whichever form its files are stored in."""
    names = [p.name for p in directory.glob("*.meta.json")] + [
        p.name for p in directory.glob("*.meta.json.gz")
    ]
    return sorted({name.removesuffix(".gz").removesuffix(".meta.json") for name in names})


def cases() -> list[str]:
    return cases_in(FIXTURES)
