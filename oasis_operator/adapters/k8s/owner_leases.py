"""Owner Leases on the cluster (:mod:`oasis_operator.core.environment.owner_leases`): the provider API
holds one naming the environments it made; the operator's orphan sweep reads every fresh one.

Called by ``oasis provider serve`` (:func:`hold`) and by the operator's housekeeping
(:func:`fresh_owners`).
"""

from __future__ import annotations

import asyncio
import contextlib
import datetime as dt
from collections.abc import Callable, Iterable

from lightkube import AsyncClient, codecs, operators
from lightkube.core.exceptions import ApiError
from lightkube.resources.coordination_v1 import Lease
from lightkube.resources.core_v1 import Namespace

from oasis_operator.core.environment.naming import OWNER_LABEL
from oasis_operator.core.environment.owner_leases import LEASE_LABEL, LEASE_SECONDS, lease_body, leased_owners

FIELD_MANAGER = "oasis-provider-api"


def _now() -> dt.datetime:
    return dt.datetime.now(dt.UTC)


async def renew(
    client: AsyncClient,
    namespace: str,
    name: str,
    holder: str,
    owners: Iterable[str],
    seconds: int = LEASE_SECONDS,
) -> None:
    """Apply the Lease once (server-side), naming ``owners`` as of now."""
    body = lease_body(name, namespace, holder, owners, _now(), seconds)
    await client.apply(codecs.from_dict(body), field_manager=FIELD_MANAGER, force=True)


async def hold(
    client: AsyncClient,
    namespace: str,
    name: str,
    holder: str,
    owners: Callable[[], Iterable[str]],
    stop: asyncio.Event,
    seconds: int = LEASE_SECONDS,
) -> None:
    """Renew the Lease every third of its duration until ``stop``, then delete it (what it named is
    then an orphan for the next sweep; the provider tears its environments down itself first)."""
    try:
        while not stop.is_set():
            await renew(client, namespace, name, holder, owners(), seconds)
            with contextlib.suppress(TimeoutError):
                await asyncio.wait_for(stop.wait(), timeout=seconds / 3)
    finally:
        with contextlib.suppress(ApiError):
            await client.delete(Lease, name, namespace=namespace)


async def fresh_owners(client: AsyncClient) -> set[str]:
    """The owners every fresh owner Lease outside the scenario namespaces names."""
    scenario_namespaces = {
        ns.metadata.name
        async for ns in client.list(Namespace, labels={OWNER_LABEL: operators.exists()})
        if ns.metadata is not None and ns.metadata.name
    }
    leases = [
        lease.to_dict()
        async for lease in client.list(Lease, namespace="*", labels={LEASE_LABEL: operators.exists()})
    ]
    return leased_owners(leases, _now(), scenario_namespaces)
