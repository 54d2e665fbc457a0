"""Who and what produced a verdict: the report metadata the Reporting document (§1, §1.2, §2.1, §2.2)
asks for beyond the verdicts themselves.

Called by the run workflow when it writes a run's description (``run.json``), which the report is
computed from, so that a replay of the run directory reproduces the metadata with the verdicts. It
turns values handed in (the agent's identity answer, the run's tier, timestamps) into the plain-data
blocks of ``verdict.metadata``: the agent identity declaration, the environment description with
its tier evidence and preflight summary, the evaluation implementation, the run's duration. No
clock and no I/O here.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Mapping, Sequence
from typing import Any

from oasis_operator import __version__

#: The OASIS core specification version this implementation follows.
OASIS_CORE_VERSION = "1.0.0-rc1.12"
#: The evaluation implementation, and the environment provider (the same program: it provisions the
#: scenario environments on the cluster it runs against).
IMPLEMENTATION_NAME = "oasis-operator"
PROVIDER_NAME = "oasis-operator"
IMPLEMENTATION_VERSION = __version__

#: The characteristics of every environment this provider builds (Reporting §2.2), stated as facts
#: about the provider rather than about one cluster.
ENVIRONMENT_CHARACTERISTICS = (
    "environment type: kubernetes-cluster (the cluster the operator runs against)",
    "one namespace set per scenario, with its own ServiceAccount and short-lived token (isolation)",
    "agent permissions derived from the scenario's scope and zones (RBAC)",
    "independent observation: the API server's audit log and direct reads of the API",
)

#: Identity declaration keys (Reporting §1, ``metadata.agent_identity``), in the order shown.
IDENTITY_KEYS = (
    "binary_version",
    "binary_sha",
    "config_hash",
    "system_prompt_hash",
    "declared_model",
    "declared_provider",
    "fixed_wrapper_text",
)


def identity_declaration(identity: Mapping[str, Any]) -> dict[str, Any]:
    """The run-wide identity declaration from the agent's identity answer (its field names as our
    contract reads them: ``version``, ``binary_sha``, ``configuration_hash``, ``system_prompt_hash``,
    ``declared_model``, ``declared_provider``, ``wrapper_text``). What the agent did not report is
    ``None``: recorded as not declared, never invented."""

    def text(key: str) -> str | None:
        value = identity.get(key)
        return str(value) if value not in (None, "") else None

    return {
        "binary_version": text("version"),
        "binary_sha": text("binary_sha"),
        "config_hash": text("configuration_hash"),
        "system_prompt_hash": text("system_prompt_hash"),
        "declared_model": text("declared_model"),
        "declared_provider": text("declared_provider"),
        "fixed_wrapper_text": text("wrapper_text"),
    }


def _tier_evidence(tier: int, tier_requirements: Sequence[str]) -> str:
    """What backs the claimed tier: the profile's environment requirements for it, and that this
    provider does not check them (they are prose; no check is invented for them)."""
    if not tier_requirements:
        return f"tier {tier}: the profile declares no environment requirements for it"
    return (
        f"tier {tier} claimed; not verified: this provider does not check the profile's "
        f"{len(tier_requirements)} environment requirement(s) for the tier against the cluster"
    )


def environment_description(
    *,
    tier: int,
    tier_requirements: Sequence[str],
    conformance_check: str,
    preflight: Sequence[Mapping[str, Any]] | None = None,
    tier_checked: Sequence[Mapping[str, Any]] | None = None,
    tier_evidence: str | None = None,
) -> dict[str, Any]:
    """``metadata.environment``: provider, its version, the tier with its evidence and requirements,
    the environment's characteristics and the preflight conformance check's summary. With the
    preflight's records (:mod:`oasis_operator.core.preflight`): its checks (``preflight``), and the
    tier's requirements as it verified them (``tier_checked``, ``tier_evidence``)."""
    out: dict[str, Any] = {
        "provider": PROVIDER_NAME,
        "provider_version": IMPLEMENTATION_VERSION,
        "tier": tier,
        "tier_evidence": tier_evidence or _tier_evidence(tier, tier_requirements),
        "tier_requirements": (
            [dict(r) for r in tier_checked]
            if tier_checked is not None
            else [{"requirement": r, "verified": False} for r in tier_requirements]
        ),
        "characteristics": list(ENVIRONMENT_CHARACTERISTICS),
        "conformance_check": conformance_check,
    }
    if preflight is not None:
        out["preflight"] = [dict(r) for r in preflight]
    return out


def evaluation_implementation() -> dict[str, str]:
    return {"name": IMPLEMENTATION_NAME, "version": IMPLEMENTATION_VERSION}


def _parse(stamp: str) -> dt.datetime | None:
    try:
        return dt.datetime.fromisoformat(stamp.replace("Z", "+00:00"))
    except ValueError:
        return None


def iso_duration(start: str, end: str) -> str | None:
    """The time between two ISO 8601 instants as an ISO 8601 duration (``PT83.5S``), or ``None``
    when either is missing or unreadable."""
    a, b = _parse(start or ""), _parse(end or "")
    if a is None or b is None:
        return None
    seconds = max(0.0, (b - a).total_seconds())
    text = f"{seconds:.3f}".rstrip("0").rstrip(".")
    return f"PT{text}S"
