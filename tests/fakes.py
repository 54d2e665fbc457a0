"""In-memory fakes of every port of ``oasis_operator/core/ports.py``, for workflow tests that need no
control plane.

They are small, honest models of what the real adapters promise, never of how Kubernetes behaves:
the store applies JSON merge patches to a run's status as the API server does; the environment keeps
each scenario's objects as declared (a snapshot reads them back) and lets the agent change them; the
audit stream delivers what it is given in order, and the sentinel sender publishes the sentinel's
completed event unless the stream is down; the agent acts by a script (audit events of its own
principal, and changes of the fake state). Anything Kubernetes itself decides (admission, RBAC, pod
states, the audit log's content) is tested against the real control plane elsewhere; these fakes
exist so that the run's lifecycle (abort, cancel, exclusive scenarios, parallelism, resume, waiting,
timeouts) is tested in seconds.

Every fake records what was asked of it, so tests assert on calls, not on timing.
"""

from __future__ import annotations

import asyncio
import copy
import datetime as dt
import hashlib
import json
import uuid
from collections.abc import Awaitable, Callable, Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import jsonschema

from oasis_operator.core import stored_parts
from oasis_operator.core.contract.agent import (
    REQUEST_SCHEMA_PATH,
    AgentResponse,
    IdentityAndConfiguration,
    ScenarioRequest,
)
from oasis_operator.core.contract.outcome import AgentOutcome, outcome_from_response
from oasis_operator.core.environment.plan import EnvironmentPlan, Injection
from oasis_operator.core.errors import AgentUnavailable
from oasis_operator.core.evidence.sentinel import Sentinel
from oasis_operator.core.model.run import LabelSelector
from oasis_operator.core.ports import AgentAccess, Revocation

HARNESS = "system:serviceaccount:oasis-system:oasis-operator"
SENTINEL_URI = "/api/v1/namespaces/default/configmaps/oasis-sentinel"


def merge_patch(target: Any, patch: Any) -> Any:
    """RFC 7386: what the API server does with ``application/merge-patch+json``."""
    if not isinstance(patch, dict):
        return copy.deepcopy(patch)
    out = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            out.pop(key, None)
        else:
            out[key] = merge_patch(out.get(key), value)
    return out


class Clock:
    """A clock the test moves (``advance``); it starts at a fixed instant and never moves by itself."""

    def __init__(self, start: dt.datetime = dt.datetime(2026, 12, 1, 12, 0, tzinfo=dt.UTC)) -> None:
        self.t = start

    def __call__(self) -> dt.datetime:
        return self.t

    def advance(self, seconds: float) -> None:
        self.t += dt.timedelta(seconds=seconds)


# -- the store --------------------------------------------------------------------------------------
@dataclass
class Event:
    etype: str
    reason: str
    message: str


class FakeStore:
    """Runs, Profiles and Scenarios of one API, the blobs runs own, and Events."""

    def __init__(self) -> None:
        self.runs: dict[tuple[str, str], dict[str, Any]] = {}
        self.profiles: dict[tuple[str, str], dict[str, Any]] = {}
        self.scenarios: dict[tuple[str, str], dict[str, Any]] = {}
        self.blobs: dict[str, tuple[str, str, list[dict[str, Any]]]] = {}  # name -> (run uid, kind, parts)
        self.events: list[Event] = []
        self.status_patches: list[dict[str, Any]] = []
        #: Called with each status patch before it is applied (a test can crash the "operator" there).
        self.on_patch: Callable[[dict[str, Any]], None] | None = None

    # what a user does
    def apply_run(
        self,
        namespace: str,
        name: str,
        spec: Mapping[str, Any],
        *,
        annotations: Mapping[str, str] | None = None,
    ) -> dict[str, Any]:
        key = (namespace, name)
        old = self.runs.get(key)
        uid = str(uuid.uuid5(uuid.NAMESPACE_URL, f"{namespace}/{name}"))  # the same in every test run
        meta = {
            "name": name,
            "namespace": namespace,
            "uid": old["metadata"]["uid"] if old else uid,
            "generation": (old["metadata"]["generation"] + (old["spec"] != dict(spec)) if old else 1),
            "annotations": dict(annotations or (old or {}).get("metadata", {}).get("annotations") or {}),
        }
        self.runs[key] = {
            "metadata": meta,
            "spec": copy.deepcopy(dict(spec)),
            "status": copy.deepcopy((old or {}).get("status") or {}),
        }
        return self.runs[key]

    def edit_spec(self, namespace: str, name: str, **changes: Any) -> None:
        run = self.runs[(namespace, name)]
        self.apply_run(namespace, name, {**run["spec"], **changes})

    def apply(self, namespace: str, manifest: Mapping[str, Any]) -> None:
        """A Profile or Scenario manifest."""
        store = self.profiles if manifest["kind"] == "Profile" else self.scenarios
        store[(namespace, manifest["metadata"]["name"])] = copy.deepcopy(
            {**manifest, "metadata": {**manifest["metadata"], "namespace": namespace}}
        )

    def status(self, namespace: str, name: str) -> dict[str, Any]:
        return copy.deepcopy(self.runs[(namespace, name)].get("status") or {})

    def reasons(self) -> list[str]:
        return [e.reason for e in self.events]

    # RunStore
    async def get_run(self, namespace: str, name: str) -> dict[str, Any] | None:
        await asyncio.sleep(0)
        run = self.runs.get((namespace, name))
        return copy.deepcopy(run) if run is not None else None

    async def patch_run_status(self, namespace: str, name: str, status: dict[str, Any]) -> None:
        await asyncio.sleep(0)
        if self.on_patch is not None:
            self.on_patch(status)
        self.status_patches.append(copy.deepcopy(status))
        run = self.runs.get((namespace, name))
        if run is None:
            raise LookupError(f"EvaluationRun {namespace}/{name} not found")
        run["status"] = merge_patch(run.get("status") or {}, json.loads(json.dumps(status)))

    async def delete_run(self, namespace: str, name: str) -> None:
        self.runs.pop((namespace, name), None)

    async def get_profile(self, namespace: str, name: str) -> dict[str, Any] | None:
        found = self.profiles.get((namespace, name))
        return copy.deepcopy(found) if found is not None else None

    async def list_scenarios(
        self, namespace: str, selector: LabelSelector | None = None
    ) -> list[dict[str, Any]]:
        return [
            copy.deepcopy(o)
            for (ns, _), o in sorted(self.scenarios.items())
            if ns == namespace and _selects(selector, o["metadata"].get("labels") or {})
        ]

    async def put_blob(self, run: dict[str, Any], kind: str, key: str, data: bytes) -> list[str]:
        name = f"{run['metadata']['name']}-{kind}-{hashlib.sha256(key.encode()).hexdigest()[:10]}-0"
        parts = [{"data": p.data, "binaryData": p.binary_data} for p in stored_parts.layout(key, data)]
        self.blobs[name] = (run["metadata"]["uid"], kind, parts)  # the ConfigMaps' payloads, one name
        return [name]

    async def delete_blobs(self, run: dict[str, Any], kind: str) -> int:
        gone = [n for n, (uid, k, _) in self.blobs.items() if uid == run["metadata"]["uid"] and k == kind]
        for n in gone:
            del self.blobs[n]
        return len(gone)

    async def get_blob(self, namespace: str, names: list[str]) -> bytes:
        return b"".join(stored_parts.read(self.blobs[n][2]) for n in names)

    async def event(
        self, run: dict[str, Any], etype: str, reason: str, message: str, now: dt.datetime
    ) -> None:
        self.events.append(Event(etype, reason, message))


def _selects(selector: LabelSelector | None, labels: Mapping[str, str]) -> bool:
    if selector is None:
        return True
    if any(labels.get(k) != v for k, v in (selector.match_labels or {}).items()):
        return False
    for req in selector.match_expressions or []:
        has, value = req.key in labels, labels.get(req.key)
        ok = {
            "In": has and value in (req.values or []),
            "NotIn": not has or value not in (req.values or []),
            "Exists": has,
            "DoesNotExist": not has,
        }[req.operator]
        if not ok:
            return False
    return True


# -- the audit stream -------------------------------------------------------------------------------
@dataclass
class FakeSubscription:
    needles: tuple[str, ...] | None
    stream: FakeAudit
    events: list[dict[str, Any]] = field(default_factory=list)
    closed: bool = False
    losses: list[str] = field(default_factory=list)

    def wants(self, event: Mapping[str, Any]) -> bool:
        text = json.dumps(event)
        return self.needles is None or any(n in text for n in self.needles)

    def close(self) -> None:
        self.closed = True
        self.stream.subscriptions.remove(self)


class FakeAudit:
    """Delivers published events, in order, to subscriptions and to waiters for an Audit-ID.

    ``live = False`` makes the stream stop delivering (the barrier then times out)."""

    def __init__(self) -> None:
        self.subscriptions: list[FakeSubscription] = []
        self.waiters: dict[str, asyncio.Queue[dict[str, Any]]] = {}
        self.live = True
        #: Whether what was published survives a restart (a log file; a webhook's does not).
        self.keeps_history = True
        self.published: list[dict[str, Any]] = []
        self.sentinels = 0

    def subscribe(self, needles: tuple[str, ...] | None = None) -> FakeSubscription:
        sub = FakeSubscription(needles, self)
        self.subscriptions.append(sub)
        return sub

    def expect(self, audit_id: str) -> asyncio.Queue[dict[str, Any]]:
        return self.waiters.setdefault(audit_id, asyncio.Queue())

    def history(self, needles: tuple[str, ...]) -> tuple[list[dict[str, Any]], int] | None:
        """Everything published that names one of ``needles`` (a file kept across restarts)."""
        if not self.keeps_history:
            return None
        return [e for e in self.published if any(n in json.dumps(e) for n in needles)], 0

    def forget(self, audit_id: str) -> None:
        self.waiters.pop(audit_id, None)

    def publish(self, *events: dict[str, Any]) -> None:
        if not self.live:
            return
        for event in events:
            self.published.append(event)
            for sub in self.subscriptions:
                if sub.wants(event):
                    sub.events.append(event)
            queue = self.waiters.get(str(event.get("auditID")))
            if queue is not None and event.get("stage") == "ResponseComplete":
                queue.put_nowait(event)

    def sentinel_sender(self, clock: Callable[[], dt.datetime]) -> Callable[[str], Awaitable[Sentinel]]:
        async def send(audit_id: str) -> Sentinel:
            self.sentinels += 1
            self.publish(
                audit_event(
                    clock(),
                    HARNESS,
                    "get",
                    "configmaps",
                    "default",
                    "oasis-sentinel",
                    404,
                    audit_id=audit_id,
                    uri=SENTINEL_URI,
                )
            )
            return Sentinel(username=HARNESS, request_uri=SENTINEL_URI)

        return send


def audit_event(
    when: dt.datetime,
    username: str,
    verb: str,
    resource: str,
    namespace: str,
    name: str | None,
    code: int = 200,
    *,
    audit_id: str | None = None,
    uri: str | None = None,
) -> dict[str, Any]:
    """A completed audit event in the shape the API server writes (fields as in tests/verification/fixtures)."""
    ts = when.astimezone(dt.UTC).isoformat(timespec="microseconds").replace("+00:00", "Z")
    path = f"/api/v1/namespaces/{namespace}/{resource}" + (f"/{name}" if name else "")
    ref: dict[str, Any] = {"apiVersion": "v1", "namespace": namespace, "resource": resource}
    if name:
        ref["name"] = name
    return {
        "apiVersion": "audit.k8s.io/v1",
        "kind": "Event",
        "level": "Metadata",
        "auditID": audit_id or str(uuid.uuid4()),
        "stage": "ResponseComplete",
        "requestURI": uri or path,
        "verb": verb,
        "user": {"username": username, "groups": ["system:serviceaccounts", "system:authenticated"]},
        "objectRef": ref,
        "responseStatus": {"metadata": {}, "code": code},
        "requestReceivedTimestamp": ts,
        "stageTimestamp": ts,
        "annotations": {"authorization.k8s.io/decision": "allow" if code < 400 else "forbid"},
    }


# -- the environment --------------------------------------------------------------------------------
class FakeInjector:
    def __init__(self, env: FakeEnvironment, owner: str) -> None:
        self.env, self.owner = env, owner

    async def start(self) -> None:
        self.env.calls.append("inject")

    async def settle(self, timeout: float = 10.0) -> None:
        self.env.calls.append("settle")
        await self.env.maybe_fail("settle", self.owner)

    async def stop(self) -> None:
        self.env.calls.append("stop-injector")


class FakeEnvironment:
    """Each scenario's objects as its plan declares them, keyed by the plan's owner value.

    ``faults[step]`` (or ``faults[f"{step}:{scenario id}"]``, for one scenario) is raised when that
    step runs: ``provision``, ``verify``, ``snapshot`` (every one), ``after-snapshot`` (only those after
    the first), ``revoke``, ``verify_revoked``, ``settle``, ``teardown``, ``inject``. ``problems`` is what ``verify`` reports (declared state not observed); ``gate``
    (when set) holds every provisioning until it is set. ``timeline`` records ``("up", id, others
    alive)`` at each provisioning and ``("down", id)`` at each teardown."""

    def __init__(self) -> None:
        self.objects: dict[str, list[dict[str, Any]]] = {}
        self.faults: dict[str, BaseException] = {}
        self.problems: list[str] = []
        self.calls: list[str] = []
        self.provisioned: list[str] = []  # owner values, in order
        self.torn_down: list[str] = []  # owner values, in order
        self.live: dict[str, str] = {}  # owner -> scenario id
        self.most_live = 0
        self.timeline: list[tuple[Any, ...]] = []
        self.gate: asyncio.Event | None = None
        self._ids: dict[str, str] = {}
        self._snapshots: dict[str, int] = {}
        self._provisioning = asyncio.Event()

    async def until_live(self, count: int) -> None:
        """Wait until ``count`` environments are being provisioned or alive."""
        while len(self.live) < count:
            self._provisioning.clear()
            await self._provisioning.wait()

    async def maybe_fail(self, step: str, owner: str = "") -> None:
        await asyncio.sleep(0)
        fault = self.faults.get(f"{step}:{self._ids.get(owner, '')}") or self.faults.get(step)
        if fault is not None:
            raise fault

    async def provision(
        self, plan: EnvironmentPlan, *, token_seconds: int = 900, ready_timeout: float = 30.0
    ) -> AgentAccess:
        self.calls.append("provision")
        self.provisioned.append(plan.owner)
        self._ids[plan.owner] = plan.scenario_id
        self.timeline.append(("up", plan.scenario_id, tuple(sorted(self.live.values()))))
        self.live[plan.owner] = plan.scenario_id
        self.most_live = max(self.most_live, len(self.live))
        self._provisioning.set()
        if self.gate is not None:
            await self.gate.wait()
        await self.maybe_fail("provision", plan.owner)
        self.objects[plan.owner] = [copy.deepcopy(m) for m in plan.manifests]
        return AgentAccess(
            username=agent_username(plan),
            namespace=plan.home_namespace,
            kubeconfig="apiVersion: v1\nkind: Config\n",
            token_expires_at="",
        )

    async def verify(self, plan: EnvironmentPlan) -> list[str]:
        self.calls.append("verify")
        await self.maybe_fail("verify", plan.owner)
        return list(self.problems)

    async def inject(self, injection: Injection, *, ready_timeout: float = 30.0) -> list[str]:
        """The injection's objects replace the owner's objects of the same kind, namespace and name."""
        self.calls.append("inject")
        await self.maybe_fail("inject", injection.plan.owner)
        new = {
            (m["kind"], m["metadata"].get("namespace"), m["metadata"]["name"]) for m in injection.manifests
        }
        kept = [
            o
            for o in self.objects.get(injection.plan.owner, [])
            if (o["kind"], o["metadata"].get("namespace"), o["metadata"]["name"]) not in new
        ]
        self.objects[injection.plan.owner] = kept + [copy.deepcopy(m) for m in injection.manifests]
        return list(self.problems)

    async def snapshot(self, plan: EnvironmentPlan) -> dict[str, Any]:
        self.calls.append("snapshot")
        await self.maybe_fail("snapshot", plan.owner)
        self._snapshots[plan.owner] = self._snapshots.get(plan.owner, 0) + 1
        if self._snapshots[plan.owner] > 1:
            await self.maybe_fail("after-snapshot", plan.owner)
        out: dict[str, Any] = {"namespaces": {ns: {} for ns in plan.namespaces.values()}, "cluster": {}}
        for obj in self.objects.get(plan.owner, []):
            ns = (obj.get("metadata") or {}).get("namespace")
            where = out["namespaces"].setdefault(ns, {}) if ns else out["cluster"]
            where.setdefault(obj["kind"], []).append(copy.deepcopy(obj))
        return out

    async def revoke(self, plan: EnvironmentPlan) -> Revocation:
        self.calls.append("revoke")
        await self.maybe_fail("revoke", plan.owner)
        return Revocation()

    async def verify_revoked(
        self,
        plan: EnvironmentPlan,
        revocation: Revocation,
        *,
        seen: Iterable[Mapping[str, Any]] = (),
        harness: Iterable[str] = (),
    ) -> Revocation:
        self.calls.append("verify_revoked")
        await self.maybe_fail("verify_revoked", plan.owner)
        principals = tuple(
            sorted(
                {agent_username(plan)}
                | {str((e.get("user") or {}).get("username")) for e in seen} - set(harness)
            )
        )
        return Revocation(removed=revocation.removed, principals=principals, reviews=len(principals))

    def failure_injector(self, plan: EnvironmentPlan) -> FakeInjector:
        return FakeInjector(self, plan.owner)

    def agent_principal(self, plan: EnvironmentPlan) -> str:
        return agent_username(plan)

    async def teardown(self, namespaces: Iterable[str], owner: str, *, timeout: float = 60.0) -> list[str]:
        self.calls.append("teardown")
        self.torn_down.append(owner)
        self.timeline.append(("down", self._ids.get(owner, "")))
        self.live.pop(owner, None)
        self.objects.pop(owner, None)
        await self.maybe_fail("teardown", owner)
        return sorted(namespaces)

    async def sweep_orphans(self, live_owners: Any, *, timeout: float = 60.0) -> list[str]:
        candidates = set(self.objects)
        live = await live_owners() if callable(live_owners) else live_owners
        gone = sorted(candidates - live)
        for owner in gone:
            self.objects.pop(owner)
        return gone


def agent_username(plan: EnvironmentPlan) -> str:
    return f"system:serviceaccount:{plan.home_namespace}:agent"


# -- the agent --------------------------------------------------------------------------------------
@dataclass
class Turn:
    """What the fake agent does with one scenario: who it is there (its principal and namespace come
    from the request), and the environment it can change."""

    request: ScenarioRequest
    username: str
    namespace: str


Behaviour = Callable[[Turn], Awaitable[AgentOutcome]]


def answers(text: str = "I will not act without knowing which pods and why.") -> Behaviour:
    async def act(turn: Turn) -> AgentOutcome:
        return outcome_from_response(AgentResponse(final_answer=text))

    return act


_REQUEST_VALIDATOR = jsonschema.Draft202012Validator(json.loads(REQUEST_SCHEMA_PATH.read_text()))


def validate_request(wire: Any) -> None:
    """Raise ``jsonschema.ValidationError`` unless ``wire`` follows the published scenario-request schema."""
    _REQUEST_VALIDATOR.validate(wire)


class FakeAgent:
    """An agent whose turn is a :data:`Behaviour`: ``by_scenario[phrase]`` when the prompt contains the
    phrase, else ``default``.

    ``identity_error`` makes the identity question fail (the run waits for the agent)."""

    def __init__(
        self,
        audit: FakeAudit,
        env: FakeEnvironment,
        clock: Callable[[], dt.datetime],
        *,
        default: Behaviour | None = None,
        configuration: Mapping[str, Any] | None = None,
    ) -> None:
        self.audit, self.env, self.clock = audit, env, clock
        self.default = default or answers()
        self.by_scenario: dict[str, Behaviour] = {}
        self.configuration = dict(configuration or {})
        self.identity_error: AgentUnavailable | None = None
        #: The identity answer (a test may add the declaration's hashes, provider and wrapper text).
        self.identity: dict[str, Any] = {"name": "fake-agent", "version": "1.0.0", "declared_model": "none"}
        self.identified = 0
        self.turns: list[str] = []  # the prompts, in order
        self.requests: list[ScenarioRequest] = []
        self.running = 0
        self.most_running = 0

    async def identify(self) -> IdentityAndConfiguration:
        self.identified += 1
        if self.identity_error is not None:
            raise self.identity_error
        return IdentityAndConfiguration.model_validate(
            {"identity": self.identity, "configuration": self.configuration}
        )

    async def run_scenario(
        self, request: ScenarioRequest, *, timeout_seconds: float | None = None
    ) -> AgentOutcome:
        assert request.environment is not None
        validate_request(
            request.to_wire()
        )  # every request a workflow test sends follows the published schema
        self.requests.append(request)
        turn = Turn(
            request,
            f"system:serviceaccount:{request.environment.namespace}:agent",
            request.environment.namespace,
        )
        self.turns.append(request.prompt)
        behaviour = next(
            (b for prefix, b in self.by_scenario.items() if prefix in request.prompt), self.default
        )
        self.running += 1
        self.most_running = max(self.most_running, self.running)
        try:
            return await behaviour(turn)
        finally:
            self.running -= 1

    # behaviours that act on the environment
    def deletes_every_pod(self) -> Behaviour:
        async def act(turn: Turn) -> AgentOutcome:
            self.audit.publish(
                audit_event(self.clock(), turn.username, "deletecollection", "pods", turn.namespace, None)
            )
            return outcome_from_response(AgentResponse(final_answer="Deleted all pods."))

        return act
