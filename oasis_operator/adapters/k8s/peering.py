"""The guard against a second operator (decision 0114): kopf's peering, named for the replica's shard.

Called by ``oasis operator run --peering NAME`` before kopf starts; turns the name and the shard into
the peering object kopf keeps its keep-alives in, and creates that object when it is missing (kopf
only patches it). Operators that share the object see each other: one with a higher priority makes the
others pause; two with the same priority both pause, with a warning, until one goes. Either way no two
reconcile the same runs at once. Replicas of different shards use different objects, so sharding and
the guard go together.
"""

from __future__ import annotations

from collections.abc import Sequence
from importlib import resources
from typing import Any

import yaml

GROUP_VERSION = "kopf.dev/v1"
CRD_FILE = "kopf-peering-crds.yaml"


class PeeringError(Exception):
    """The peering cannot be set up: the CRDs are missing or the API refused the object."""


def peering_name(base: str, shard_index: int, shards: int) -> str:
    """The peering object of one shard: ``base`` with one shard, ``base-shard-I-of-N`` otherwise."""
    return base if shards <= 1 else f"{base}-shard-{shard_index}-of-{shards}"


def crds() -> list[dict[str, Any]]:
    """kopf's two peering CRDs (cluster-wide and namespaced), as the chart and the dev cluster install them."""
    text = resources.files("oasis_operator.adapters.k8s").joinpath(CRD_FILE).read_text(encoding="utf-8")
    return [d for d in yaml.safe_load_all(text) if d]


def ensure_peering(http: Any, name: str, namespaces: Sequence[str]) -> tuple[list[str], list[str]]:
    """Create the peering object(s) ``name`` when missing: one ClusterKopfPeering for a cluster-wide
    operator, one KopfPeering per namespace otherwise. Returns the paths it checked, and the served
    namespaces that do not exist yet (nothing to guard there until they do: the operator says so and
    starts; kopf runs unguarded in a namespace whose peering object is missing)."""
    targets: list[tuple[str, str, str | None]]
    if namespaces:
        targets = [
            (f"/apis/{GROUP_VERSION}/namespaces/{ns}/kopfpeerings", "KopfPeering", ns) for ns in namespaces
        ]
    else:
        targets = [(f"/apis/{GROUP_VERSION}/clusterkopfpeerings", "ClusterKopfPeering", None)]
    plural = "kopfpeerings" if namespaces else "clusterkopfpeerings"
    served = http.get(f"/apis/{GROUP_VERSION}")
    names = (
        {r.get("name") for r in (served.json().get("resources") or [])}
        if served.status_code == 200
        else set()
    )
    if plural not in names:
        raise PeeringError(
            f"--peering {name}: the API server does not serve {plural}.kopf.dev: install kopf's peering "
            f"CRDs (the chart does; `oasis dev-cluster up` does; or kubectl apply -f "
            f"oasis_operator/adapters/k8s/{CRD_FILE}), or run without --peering"
        )
    done: list[str] = []
    absent: list[str] = []
    for collection, kind, ns in targets:
        got = http.get(f"{collection}/{name}")
        if got.status_code == 200:
            done.append(f"{collection}/{name}")
            continue
        meta: dict[str, Any] = {"name": name, **({"namespace": ns} if ns else {})}
        made = http.post(collection, json={"apiVersion": GROUP_VERSION, "kind": kind, "metadata": meta})
        if ns and made.status_code == 404 and http.get(f"/api/v1/namespaces/{ns}").status_code == 404:
            absent.append(ns)
            continue
        if made.status_code not in (200, 201, 409):  # 409: another operator created it meanwhile
            where = f" in namespace {ns}" if ns else ""
            raise PeeringError(
                f"--peering {name}: creating {kind} {name}{where}: HTTP {made.status_code}: {_message(made)}"
            )
        done.append(f"{collection}/{name}")
    return done, absent


def _message(response: Any) -> str:
    try:
        return str(response.json().get("message") or response.text[:300])
    except ValueError:
        return str(response.text[:300])
