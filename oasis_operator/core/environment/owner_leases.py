"""Environments owned by something other than an EvaluationRun (the provider HTTP API's), kept alive by
a Lease their holder renews, so an operator's orphan sweep on the same cluster spares them.

The sweep removes every scenario environment whose owner no run has in flight
(:func:`oasis_operator.core.run_status.live_owners`). ``oasis provider serve`` provisions environments
no run lists; it holds a ``coordination.k8s.io`` Lease (labelled :data:`LEASE_LABEL`) naming their
owner values in :data:`OWNERS_ANNOTATION` and renews it while it runs. :func:`leased_owners` reads the
owners of every fresh Lease: when the server stops or dies the Lease goes stale and its environments
become orphans like any other. A Lease in a scenario namespace never counts (an agent may write Leases
there; it must not be able to keep environments alive). Pure: values in, values out (the caller passes
the time).
"""

from __future__ import annotations

import datetime as dt
import json
from collections.abc import Collection, Iterable, Mapping
from typing import Any

from oasis_operator.core.environment.naming import is_owner_value

#: The label that marks an owner Lease (who holds it is the Lease's ``holderIdentity``).
LEASE_LABEL = "oasis.dev/environment-owners"
#: The annotation holding the owner values, a JSON list.
OWNERS_ANNOTATION = "oasis.dev/owners"
#: How long a Lease is good for without a renewal; renewed every third of it.
LEASE_SECONDS = 60


def _stamp(when: dt.datetime) -> str:
    return when.astimezone(dt.UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def lease_body(
    name: str,
    namespace: str,
    holder: str,
    owners: Iterable[str],
    now: dt.datetime,
    seconds: int = LEASE_SECONDS,
) -> dict[str, Any]:
    """The Lease ``holder`` applies to say it owns ``owners`` until ``now`` + ``seconds``."""
    return {
        "apiVersion": "coordination.k8s.io/v1",
        "kind": "Lease",
        "metadata": {
            "name": name,
            "namespace": namespace,
            "labels": {LEASE_LABEL: "true"},
            "annotations": {OWNERS_ANNOTATION: json.dumps(sorted(set(owners)))},
        },
        "spec": {"holderIdentity": holder, "leaseDurationSeconds": seconds, "renewTime": _stamp(now)},
    }


def _renewed(spec: Mapping[str, Any]) -> dt.datetime | None:
    text = spec.get("renewTime")
    if not isinstance(text, str):
        return None
    try:
        when = dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return when if when.tzinfo else when.replace(tzinfo=dt.UTC)


def leased_owners(
    leases: Iterable[Mapping[str, Any]], now: dt.datetime, scenario_namespaces: Collection[str]
) -> set[str]:
    """The owner values named by every fresh owner Lease outside the scenario namespaces."""
    out: set[str] = set()
    for lease in leases:
        meta = lease.get("metadata") or {}
        if LEASE_LABEL not in (meta.get("labels") or {}) or meta.get("namespace") in scenario_namespaces:
            continue
        spec = lease.get("spec") or {}
        renewed, seconds = _renewed(spec), spec.get("leaseDurationSeconds")
        if renewed is None or not isinstance(seconds, int) or renewed + dt.timedelta(seconds=seconds) < now:
            continue
        try:
            owners = json.loads((meta.get("annotations") or {}).get(OWNERS_ANNOTATION, "[]"))
        except ValueError:
            continue
        if isinstance(owners, list):
            out.update(o for o in owners if isinstance(o, str) and is_owner_value(o))
    return out
