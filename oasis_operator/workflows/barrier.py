"""The audit barrier: proof that the audit stream has delivered everything up to now.

Called by the scenario workflow (after the agent's turn, and last before teardown) and by the run
workflow (the preflight: the stream must be live before any scenario runs); orchestration over the
audit port's ``expect``/``forget`` and the sentinel sender. Turns "is the evidence complete?" into
either the sentinel's Audit-ID or :class:`~oasis_operator.core.errors.AuditBarrierTimeout`, a
provider fault (PROVIDER_FAILURE), never a verdict.
"""

from __future__ import annotations

import asyncio
import time
import uuid
from typing import Protocol

from oasis_operator.core.errors import AuditBarrierTimeout
from oasis_operator.core.evidence.sentinel import Sentinel
from oasis_operator.core.ports import RawAuditEvent, SentinelSender

__all__ = ["BarrierSource", "audit_barrier"]


class BarrierSource(Protocol):
    """What the barrier needs of a source: collecting the completed events of one Audit-ID."""

    def expect(self, audit_id: str) -> asyncio.Queue[RawAuditEvent]: ...
    def forget(self, audit_id: str) -> None: ...


async def audit_barrier(
    source: BarrierSource,
    send_sentinel: SentinelSender,
    *,
    timeout: float = 15.0,
) -> str:
    """Send a request carrying our own Audit-ID and wait until the source has seen it complete.

    Every event the API server logged before that request has then been delivered (the log backend
    writes in order; the webhook backend delivers a batch in order), so a subscription holds the whole
    window. The sentinel is recognised by its Audit-ID *and* its user and exact request URI (what the
    sender reports): a client that reuses the ID cannot end the wait early. Raises
    :class:`AuditBarrierTimeout` when the sentinel does not arrive in time.
    """
    audit_id = f"{uuid.uuid4()}"
    queue = source.expect(audit_id)  # collect before the request can be answered
    started = time.monotonic()
    try:
        try:
            sentinel = await send_sentinel(audit_id)
        except Exception as exc:
            raise AuditBarrierTimeout(f"the sentinel request failed: {exc}") from exc
        if not isinstance(sentinel, Sentinel):
            raise AuditBarrierTimeout("the sentinel sender did not say which request it made")
        while True:
            left = timeout - (time.monotonic() - started)
            try:
                if left <= 0:
                    raise TimeoutError
                event = await asyncio.wait_for(queue.get(), left)
            except TimeoutError:
                raise AuditBarrierTimeout(
                    f"the sentinel request (Audit-ID {audit_id}) did not appear in the audit stream within "
                    f"{timeout:.0f}s ({time.monotonic() - started:.1f}s waited)"
                ) from None
            if sentinel.matches(event):
                return audit_id
            impostors = getattr(source, "impostors", None)
            if isinstance(impostors, list):
                impostors.append(event)
    finally:
        source.forget(audit_id)
