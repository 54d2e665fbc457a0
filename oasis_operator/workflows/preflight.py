"""The run's preflight step: the self-tests of the evidence path, then the core's check of the
provider against the profile (decision 0057).

Called by the run workflow (:class:`~oasis_operator.workflows.run.RunDriver`) once per run, after the
agent has said who it is and before any scenario is planned; I/O over the audit port, the sentinel
sender and the tool plane. Turns them into the facts of
:class:`~oasis_operator.core.preflight.ProviderFacts` — the audit round trip (a probe request of the
harness must show up in the audit stream within the barrier's deadline) and every configured
back-end's self-test, run at the same time — and hands them with the profile's requirements to
:func:`oasis_operator.core.preflight.preflight`, which decides.
"""

from __future__ import annotations

import asyncio
import time
from dataclasses import dataclass

from oasis_operator.core import preflight as core
from oasis_operator.core.errors import AuditBarrierTimeout
from oasis_operator.core.model.profile import Profile
from oasis_operator.core.ports import AuditPort, BackendProber, SentinelSender, ToolPlanePort
from oasis_operator.workflows.barrier import audit_barrier

__all__ = ["PreflightRun", "audit_round_trip", "run_preflight"]


@dataclass(frozen=True)
class PreflightRun:
    result: core.PreflightResult
    #: Wall time of the whole step (self-tests run concurrently).
    seconds: float


async def audit_round_trip(
    audit: AuditPort, send_sentinel: SentinelSender, timeout: float
) -> core.AuditRoundTrip:
    started = time.monotonic()
    try:
        audit_id = await audit_barrier(audit, send_sentinel, timeout=timeout)
    except AuditBarrierTimeout as exc:
        return core.AuditRoundTrip(False, time.monotonic() - started, f"audit source not live: {exc}")
    waited = time.monotonic() - started
    return core.AuditRoundTrip(
        True,
        waited,
        f"the probe request (Audit-ID {audit_id}) was observed in the audit "
        f"stream within the {timeout:g}s deadline",
    )


async def _probes(toolplane: ToolPlanePort, timeout: float) -> tuple[core.BackendProbe, ...]:
    if not toolplane.backends:
        return ()
    if isinstance(toolplane, BackendProber):
        return await toolplane.probe(timeout)
    return tuple(
        core.BackendProbe(b, None, "this tool plane has no self-test") for b in sorted(toolplane.backends)
    )


async def run_preflight(
    *,
    audit: AuditPort,
    send_sentinel: SentinelSender,
    toolplane: ToolPlanePort,
    profile: Profile,
    tier: int,
    timeout: float,
) -> PreflightRun:
    """The preflight of one run against its Profile; ``timeout`` bounds each self-test."""
    started = time.monotonic()
    audit_trip, probes = await asyncio.gather(
        audit_round_trip(audit, send_sentinel, timeout), _probes(toolplane, timeout)
    )
    facts = core.ProviderFacts(audit=audit_trip, backends=frozenset(toolplane.backends), probes=probes)
    result = core.preflight(
        profile.provider_conformance, core.tiers_of(profile), tier, facts, (profile.id, profile.version)
    )
    return PreflightRun(result, time.monotonic() - started)
