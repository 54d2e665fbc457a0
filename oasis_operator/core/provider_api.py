"""The OASIS provider HTTP API as values (decision 0058): what an evaluator sends, checked into typed
requests, and what it gets back, built from what the shell observed.

The API is the spec's provider contract (the SI provider guide's endpoints and the provider
conformance chapter's ``GET /v1/conformance``): ``provision``, ``state-snapshot``, ``teardown``,
``inject-state`` and ``observe``, all JSON. Pure: no client, no clock; the server
(:mod:`oasis_operator.adapters.provider_api`) does the I/O.

Names: an evaluator speaks the scenario's *logical* namespaces (``default``, ``staging-team-a``);
the environment has physical ones (``default-x7k2p``). Requests may use either; every object and
audit entry in a response carries the physical namespace, which is what the agent and the audit
log saw, and ``logical_namespace`` beside it.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable, Mapping, Sequence
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator

from oasis_operator.core import preflight as pf
from oasis_operator.core.model.profile import Profile
from oasis_operator.core.model.scenario import StateEntry
from oasis_operator.core.reporting.provenance import OASIS_CORE_VERSION

__all__ = [
    "EnvironmentRequest",
    "InjectStateRequest",
    "ObserveRequest",
    "ProvisionRequest",
    "ResourceRef",
    "SnapshotRequest",
    "audit_entries",
    "conformance_document",
    "problems",
    "scenario_document",
    "snapshot_resources",
    "state_diff",
]

#: Metadata the API server keeps changing on its own; a state diff that listed them would bury the
#: agent's changes under bookkeeping.
VOLATILE_METADATA = frozenset({"resourceVersion", "managedFields", "generation", "uid", "creationTimestamp"})
#: At most this many entries in one inject-state request (the SI corpus declares at most a few dozen
#: for a whole scenario).
MAX_INJECTED = 200


class _Request(BaseModel):
    model_config = ConfigDict(extra="forbid", frozen=True)


class ProvisionRequest(_Request):
    scenario_id: str = Field(min_length=1)
    environment: dict[str, Any] | None = None
    agent: dict[str, Any] | None = None
    tier: int | None = Field(default=None, ge=1, le=3)


class EnvironmentRequest(_Request):
    environment_id: str = Field(min_length=1)


class ResourceRef(_Request):
    kind: str = Field(min_length=1)
    name: str | None = None
    namespace: str | None = None


class SnapshotRequest(EnvironmentRequest):
    resources: list[ResourceRef] | None = None


class InjectStateRequest(EnvironmentRequest):
    """State to add to a provisioned environment: entries shaped as a scenario's
    ``preconditions.environment.state`` (checked as the scenario model checks them)."""

    state: list[StateEntry] = Field(min_length=1, max_length=MAX_INJECTED)

    def entries(self) -> list[dict[str, Any]]:
        """The entries as the planner reads a scenario's (aliases, no unset keys)."""
        return [e.model_dump(by_alias=True, exclude_none=True) for e in self.state]


class AuditParameters(_Request):
    time_from: dt.datetime | None = None
    time_to: dt.datetime | None = None
    namespace: str | None = None
    resource_type: str | None = None
    verb: str | None = None

    @field_validator("time_from", "time_to")
    @classmethod
    def _utc(cls, value: dt.datetime | None) -> dt.datetime | None:
        """A time without a zone is UTC (the audit log's)."""
        return value.replace(tzinfo=dt.UTC) if value is not None and value.tzinfo is None else value


class ObjectParameters(_Request):
    kind: str = Field(min_length=1)
    name: str = Field(min_length=1)
    namespace: str | None = None


class ObserveRequest(EnvironmentRequest):
    observation_type: Literal["audit_log", "resource_state", "state_diff"]
    parameters: dict[str, Any] = Field(default_factory=dict)

    def audit(self) -> AuditParameters:
        return AuditParameters.model_validate(self.parameters)

    def object(self) -> ObjectParameters:
        return ObjectParameters.model_validate(self.parameters)


def problems(exc: ValidationError, prefix: str = "") -> list[str]:
    """Each problem of a rejected request as ``field.path: what was expected``."""
    out = []
    for err in exc.errors():
        path = ".".join(str(p) for p in (*([prefix] if prefix else []), *err["loc"])) or "(body)"
        out.append(f"{path}: {err['msg']}")
    return out


def scenario_document(profile_scenario: Mapping[str, Any], request: ProvisionRequest) -> dict[str, Any]:
    """The scenario to provision: the profile's own, with the request's environment, agent and tier
    where it gives them (an evaluator may vary them; the server checks the result like any scenario)."""
    doc = dict(profile_scenario)
    pre = dict(doc.get("preconditions") or {})
    if request.environment is not None:
        pre["environment"] = request.environment
    if request.agent is not None:
        pre["agent"] = request.agent
    doc["preconditions"] = pre
    if request.tier is not None:
        doc["tier"] = request.tier
    return doc


def conformance_document(
    *,
    provider: str,
    version: str,
    core_versions: Sequence[str],
    profile: str,
    profile_version: str,
    requirements: Mapping[str, Any],
    unmet: Iterable[tuple[str, str]],
) -> dict[str, Any]:
    """The body of ``GET /v1/conformance``: what this provider declares for the profile, and each
    requirement it does not meet with the reason (``supported`` only when there is none)."""
    unmet_list = [{"requirement": r, "reason": why} for r, why in unmet]
    doc: dict[str, Any] = {
        "provider": provider,
        "provider_version": version,
        "oasis_core_spec_versions": list(core_versions),
        "profile": profile,
        "profile_version": profile_version,
        "supported": not unmet_list,
        "requirements": dict(requirements),
    }
    if unmet_list:
        doc["unmet_requirements"] = unmet_list
    return doc


def conformance_answer(profile: Profile, facts: pf.ProviderFacts, version: str) -> dict[str, Any]:
    """``GET /v1/conformance`` for ``profile``: this provider's declaration (:func:`pf.declaration`,
    shaped by the profile's schema: provider conformance §4) and each requirement the preflight finds
    unmet with its reason. The tier check (§3.6) is not a requirement: it labels an evaluation
    incomplete and is not listed here (decision 0105)."""
    tiers = pf.tiers_of(profile)
    values, _basis = pf.declaration(facts, tiers)
    checked = pf.preflight(profile.provider_conformance, tiers, 1, facts, (profile.id, profile.version))
    return conformance_document(
        provider="oasis-operator",
        version=version,
        core_versions=[OASIS_CORE_VERSION],
        profile=profile.id,
        profile_version=profile.version,
        requirements=values,
        unmet=[(c.name, c.reason) for c in checked.blocking],
    )


def _logical(namespaces: Mapping[str, str]) -> dict[str, str]:
    return {physical: logical for logical, physical in namespaces.items()}


def physical_namespace(namespaces: Mapping[str, str], name: str | None) -> str | None:
    """A namespace named in a request, logical or physical, as the environment's physical one; None
    when it is not one of the environment's (a request about anything else is refused)."""
    if name is None:
        return None
    if name in namespaces:
        return namespaces[name]
    return name if name in namespaces.values() else None


def _resource(obj: Mapping[str, Any], kind: str, logical: Mapping[str, str]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    ns = meta.get("namespace") or (meta.get("name") if kind == "Namespace" else None)
    out = {
        "kind": kind,
        "name": meta.get("name"),
        "namespace": ns,
        "logical_namespace": logical.get(ns or ""),
    }
    return {**out, "object": dict(obj)}


def snapshot_resources(
    snapshot: Mapping[str, Any], namespaces: Mapping[str, str], refs: Sequence[ResourceRef] | None = None
) -> list[dict[str, Any]]:
    """The environment's snapshot (as :meth:`KubeEnvironment.snapshot` gives it) as the API's list of
    resources, every one or those ``refs`` select (kind, and name and namespace when given)."""
    logical = _logical(namespaces)
    found: list[dict[str, Any]] = []
    for _ns, kinds in sorted((snapshot.get("namespaces") or {}).items()):
        for kind, items in sorted(kinds.items()):
            found += [_resource(o, kind, logical) for o in items]
    for kind, items in sorted((snapshot.get("cluster") or {}).items()):
        found += [_resource(o, kind, logical) for o in items]
    if not refs:
        return found

    def wanted(r: Mapping[str, Any]) -> bool:
        for ref in refs:
            ns = physical_namespace(namespaces, ref.namespace) if ref.namespace else None
            if r["kind"].lower() != ref.kind.lower():
                continue
            if ref.name is not None and r["name"] != ref.name:
                continue
            if ref.namespace is not None and r["namespace"] != ns:
                continue
            return True
        return False

    return [r for r in found if wanted(r)]


def _when(event: Mapping[str, Any]) -> dt.datetime | None:
    text = event.get("requestReceivedTimestamp") or event.get("stageTimestamp")
    if not isinstance(text, str):
        return None
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None


def audit_entries(
    events: Iterable[Mapping[str, Any]], namespaces: Mapping[str, str], params: AuditParameters
) -> list[dict[str, Any]]:
    """The completed audit events of the environment's namespaces (or of the one asked for) within
    the time range and of the resource type and verb asked for, oldest first, one entry each."""
    logical = _logical(namespaces)
    only = physical_namespace(namespaces, params.namespace) if params.namespace else None
    if params.namespace and only is None:
        return []  # not one of the environment's: nothing of it is this environment's evidence
    out = []
    for e in events:
        ns = _event_namespace(e)
        if e.get("stage") != "ResponseComplete" or ns not in logical or (only is not None and ns != only):
            continue
        if _asked_for(e, params):
            out.append(_audit_entry(e, ns, logical))
    return sorted(out, key=lambda x: str(x["timestamp"]))


def _event_namespace(e: Mapping[str, Any]) -> Any:
    """The namespace an audit event is about (a namespace's own events: its name), as written."""
    ref = e.get("objectRef") or {}
    return ref.get("namespace") or (ref.get("name") if ref.get("resource") == "namespaces" else None)


def _asked_for(e: Mapping[str, Any], params: AuditParameters) -> bool:
    """The event is of the resource type and verb asked for, within the time range asked for."""
    resource = str((e.get("objectRef") or {}).get("resource", "")).lower()
    if params.resource_type and params.resource_type.lower() not in (resource, resource.rstrip("s")):
        return False
    if params.verb and e.get("verb") != params.verb:
        return False
    when = _when(e)
    if params.time_from and (when is None or when < params.time_from):
        return False
    return not (params.time_to and (when is None or when > params.time_to))


def _audit_entry(e: Mapping[str, Any], ns: Any, logical: Mapping[str, str]) -> dict[str, Any]:
    ref = e.get("objectRef") or {}
    return {
        "timestamp": e.get("requestReceivedTimestamp"),
        "verb": e.get("verb"),
        "resource": ref.get("resource"),
        "subresource": ref.get("subresource"),
        "name": ref.get("name"),
        "namespace": ns,
        "logical_namespace": logical.get(ns or ""),
        "user": (e.get("user") or {}).get("username"),
        "response_code": (e.get("responseStatus") or {}).get("code"),
        "request_body": e.get("requestObject"),
        "audit_id": e.get("auditID"),
    }


def _clean(obj: Any) -> Any:
    if isinstance(obj, Mapping):
        meta = obj.get("metadata")
        out = {k: _clean(v) for k, v in obj.items() if k != "metadata"}
        if isinstance(meta, Mapping):
            out["metadata"] = {k: _clean(v) for k, v in meta.items() if k not in VOLATILE_METADATA}
        return out
    if isinstance(obj, list):
        return [_clean(x) for x in obj]
    return obj


def _changes(before: Any, after: Any, path: str, out: list[dict[str, Any]]) -> None:
    if isinstance(before, Mapping) and isinstance(after, Mapping):
        for key in sorted(set(before) | set(after), key=str):
            _changes(before.get(key), after.get(key), f"{path}.{key}" if path else str(key), out)
    elif before != after:
        out.append({"path": path, "before": before, "after": after})


def state_diff(before: Mapping[str, Any] | None, after: Mapping[str, Any] | None) -> dict[str, Any]:
    """One object at provisioning and now, with its field-level changes (the API server's own
    bookkeeping in metadata left out); a missing side is an object created or deleted."""
    b, a = _clean(before) if before else None, _clean(after) if after else None
    changes: list[dict[str, Any]] = []
    if b is None or a is None:
        if b != a:
            changes.append({"path": "", "before": b, "after": a})
    else:
        _changes(b, a, "", changes)
    return {"before": before, "after": after, "changes": changes}
