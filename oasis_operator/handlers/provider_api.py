"""The OASIS provider HTTP API, served (decision 0058): another evaluator (the spec's reference runner,
another provider's harness) provisions the profile's scenarios here and observes them independently.

``GET /v1/conformance``, and ``POST`` ``provision``, ``state-snapshot``, ``inject-state``, ``teardown``
and ``observe`` (both with and without the ``/v1`` prefix: the spec writes them both ways). Every request carries
``Authorization: Bearer <token>`` (the server's own, from a file; compared in constant time); bodies
are bounded and checked into the typed requests of :mod:`oasis_operator.core.provider_api`, a bad one
is 400 with one line per field. Environments are the operator's own (:class:`KubeEnvironment`): the
same plan, grant, admission policy and teardown as an EvaluationRun's scenario, and at most
``max_environments`` at once.

``observe`` with ``audit_log`` first closes an audit barrier (a request of our own must come back
through the audit stream), so the entries are complete up to the request; when the barrier fails the
answer says ``evidence_source.status: unreachable`` and carries no entries rather than a partial list.

``inject-state`` plans the entries into the environment already there (its names, owner and pod bound:
:func:`~oasis_operator.core.environment.plan.plan_injection`), refuses the whole request with 422 when
any entry cannot be injected, and otherwise applies them with this provider's own credentials (never the
agent's), answering ``applied`` only once what they declare is observed. The environment's ``before``
snapshot stays the one taken at provisioning: ``state_diff`` shows every change since then, injected or
not, and the audit log tells the injections (this provider's principal) from the agent's writes.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import hmac
import json
import logging
import secrets
from collections.abc import Awaitable, Callable, Mapping
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from pydantic import ValidationError

from oasis_operator.core import provider_api as api
from oasis_operator.core.environment.naming import owner_value, suffix_for
from oasis_operator.core.environment.plan import EnvironmentPlan, plan_environment, plan_injection
from oasis_operator.core.errors import AuditBarrierTimeout, StateRefused
from oasis_operator.core.model.errors import ModelValidationError
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.core.ports import (
    AgentAccess,
    AuditPort,
    AuditSubscription,
    EnvironmentPort,
    InjectorPort,
    SentinelSender,
)
from oasis_operator.workflows.barrier import audit_barrier

log = logging.getLogger(__name__)

__all__ = ["ProviderApi", "Provisioned"]

MAX_BODY = 1 << 20
#: Whoever created the environments (an ownership value needs a run id: this API's own).
API_RUN = "provider-api"


@dataclass
class Provisioned:
    plan: EnvironmentPlan
    access: AgentAccess
    audit: AuditSubscription
    before: dict[str, Any]
    created: str
    #: The plan's declared failures, armed from the hand-over (a restarted pod fails again, as the
    #: scenario says it would), stopped at teardown; None when the plan declares none.
    injector: InjectorPort | None = None
    #: Held while state is injected or the environment torn down (one change at a time).
    lock: asyncio.Lock = field(default_factory=asyncio.Lock)

    async def settled(self) -> str | None:
        """Why the injected failures have not settled (None: they have, or there are none): a snapshot
        taken while a restarted pod's failure is still being written would show it healthy."""
        if self.injector is None:
            return None
        try:
            await self.injector.settle()
        except Exception as exc:
            return f"{type(exc).__name__}: {exc}"
        return None

    async def disarm(self) -> None:
        if self.injector is not None:
            await self.injector.stop()
            self.injector = None


#: ``evidence_source.type`` of an observation, as the SI provider guide names the sources (its §4.5): the
#: API server's audit log file, and live reads of the Kubernetes API.
AUDIT_SOURCE = "audit_log_file"
STATE_SOURCE = "kube_api"


def _json(status: int, body: Mapping[str, Any]) -> web.Response:
    return web.Response(
        status=status, text=json.dumps(body, sort_keys=True, default=str), content_type="application/json"
    )


def _error(status: int, *lines: str) -> web.Response:
    return _json(status, {"status": "error", "error": "; ".join(lines), "problems": list(lines)})


class ProviderApi:
    """``scenarios``: the profile's scenario documents by id; ``conformance``: the body of
    ``GET /v1/conformance`` for a profile id (None: the profile is not this provider's); ``principal``:
    the user this provider's own client acts as (what the audit log records for provisioning and
    injected state; told apart from the agent's), when known."""

    def __init__(
        self,
        *,
        env: EnvironmentPort,
        audit: AuditPort,
        send_sentinel: SentinelSender,
        scenarios: Mapping[str, Mapping[str, Any]],
        conformance: Callable[[str | None], Mapping[str, Any] | None],
        token: str,
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
        barrier_timeout: float = 15.0,
        max_environments: int = 16,
        ready_timeout: float = 60.0,
        token_seconds: int = 3600,
        principal: str | None = None,
    ) -> None:
        if len(token) < 16:
            raise ValueError("the provider API's token must be at least 16 characters")
        self.env, self.audit, self.send_sentinel = env, audit, send_sentinel
        self.scenarios, self.conformance, self.token, self.now = scenarios, conformance, token, now
        self.barrier_timeout, self.max_environments = barrier_timeout, max_environments
        self.ready_timeout, self.token_seconds = ready_timeout, token_seconds
        self.principal = principal
        self.environments: dict[str, Provisioned] = {}
        #: Environments being provisioned (their owner exists before their namespaces do).
        self._provisioning: set[str] = set()
        self._lock = asyncio.Lock()

    def owners(self) -> set[str]:
        """The owner value of every environment this API holds or is making (what its Lease names, so
        an operator's orphan sweep on the same cluster spares them)."""
        return {p.plan.owner for p in self.environments.values()} | self._provisioning

    # -- the application --------------------------------------------------------------------------------
    def app(self) -> web.Application:
        app = web.Application(client_max_size=MAX_BODY, middlewares=[self._auth])
        for prefix in ("/v1", ""):
            app.router.add_post(f"{prefix}/provision", self.provision)
            app.router.add_post(f"{prefix}/state-snapshot", self.state_snapshot)
            app.router.add_post(f"{prefix}/inject-state", self.inject_state)
            app.router.add_post(f"{prefix}/teardown", self.teardown)
            app.router.add_post(f"{prefix}/observe", self.observe)
        app.router.add_get("/v1/conformance", self.get_conformance)
        return app

    @web.middleware
    async def _auth(
        self, request: web.Request, handler: Callable[[web.Request], Awaitable[web.StreamResponse]]
    ) -> web.StreamResponse:
        given = request.headers.get("Authorization", "")
        if not hmac.compare_digest(given.encode(), f"Bearer {self.token}".encode()):
            return _error(401, "a bearer token is required (Authorization: Bearer <token>)")
        try:
            return await handler(request)
        except web.HTTPException:
            raise
        except Exception as exc:  # a fault of ours, never a silent success
            log.exception("provider API: %s %s", request.method, request.path)
            return _error(500, f"{type(exc).__name__}: {exc}")

    async def _body(
        self, request: web.Request, model: type[api.EnvironmentRequest] | type[api.ProvisionRequest]
    ) -> Any:
        try:
            data = await request.json()
        except (json.JSONDecodeError, UnicodeDecodeError):
            raise web.HTTPBadRequest(
                text=json.dumps({"status": "error", "error": "the body is not JSON"}),
                content_type="application/json",
            ) from None
        try:
            return model.model_validate(data)
        except ValidationError as exc:
            lines = api.problems(exc)
            raise web.HTTPBadRequest(
                text=json.dumps({"status": "error", "error": "; ".join(lines), "problems": lines}),
                content_type="application/json",
            ) from None

    def _environment(self, environment_id: str) -> Provisioned:
        found = self.environments.get(environment_id)
        if found is None:
            raise web.HTTPNotFound(
                text=json.dumps(
                    {"status": "error", "error": f"environment_id {environment_id!r}: no such environment"}
                ),
                content_type="application/json",
            )
        return found

    # -- endpoints --------------------------------------------------------------------------------------
    async def get_conformance(self, request: web.Request) -> web.StreamResponse:
        doc = self.conformance(request.query.get("profile"))
        if doc is None:
            return _error(404, f"profile {request.query.get('profile')!r}: not a profile of this provider")
        return _json(200, doc)

    async def provision(self, request: web.Request) -> web.StreamResponse:
        req: api.ProvisionRequest = await self._body(request, api.ProvisionRequest)
        known = self.scenarios.get(req.scenario_id)
        if known is None:
            return _error(404, f"scenario_id {req.scenario_id!r}: not a scenario of this provider's profile")
        try:
            scenario, _ = parse_scenario(api.scenario_document(known, req))
        except ModelValidationError as exc:
            return _error(400, *(issue.render() for issue in exc.issues))
        async with self._lock:
            if len(self.environments) >= self.max_environments:
                return _error(
                    429, f"{self.max_environments} environments are provisioned; tear one down first"
                )
            environment_id = owner_value(API_RUN, f"{req.scenario_id}#{secrets.token_hex(8)}")
            plan = plan_environment(scenario, suffix=suffix_for(environment_id), owner=environment_id)
            if not plan.supported:
                return _error(422, *(f"{u.resource}: {u.reason}" for u in plan.unsupported))
            subscription = self.audit.subscribe(plan.audit_needles())
            self._provisioning.add(environment_id)
            try:
                access = await self.env.provision(
                    plan, token_seconds=self.token_seconds, ready_timeout=self.ready_timeout
                )
                left = await self.env.verify(plan)
                if left:
                    raise RuntimeError("; ".join(left))
                before = await self.env.snapshot(plan)
                injector = await _armed(self.env, plan)
            except Exception as exc:
                subscription.close()
                await self.env.teardown(plan.namespaces.values(), plan.owner, timeout=0)
                self._provisioning.discard(environment_id)
                return _json(
                    200,
                    {
                        "environment_id": environment_id,
                        "status": "error",
                        "error": f"{type(exc).__name__}: {exc}",
                    },
                )
            self.environments[environment_id] = Provisioned(
                plan, access, subscription, before, self.now().isoformat(), injector
            )
            self._provisioning.discard(environment_id)
        return _json(
            200,
            {
                "environment_id": environment_id,
                "status": "ready",
                "agent_endpoint": _server_of(access.kubeconfig),
                "agent_credentials": {
                    "kubeconfig": access.kubeconfig,
                    "username": access.username,
                    "namespace": access.namespace,
                    "expires_at": access.token_expires_at,
                },
                # The SI provider guide's name for what each declared namespace became (a consumer
                # scopes and judges the agent by it); `namespaces` is the same map, kept for clients
                # written against this server before.
                "resolved_namespaces": dict(plan.namespaces),
                "namespaces": dict(plan.namespaces),
                "prompt": plan.prompt,
            },
        )

    async def state_snapshot(self, request: web.Request) -> web.StreamResponse:
        req: api.SnapshotRequest = await self._body(request, api.SnapshotRequest)
        env = self._environment(req.environment_id)
        unsettled = await env.settled()
        if unsettled is not None:
            return _error(503, f"the declared failures have not settled: {unsettled}")
        snap = await self.env.snapshot(env.plan)
        return _json(
            200,
            {
                "environment_id": req.environment_id,
                "timestamp": self.now().isoformat(),
                "resources": api.snapshot_resources(snap, env.plan.namespaces, req.resources),
            },
        )

    async def inject_state(self, request: web.Request) -> web.StreamResponse:
        req: api.InjectStateRequest = await self._body(request, api.InjectStateRequest)
        env = self._environment(req.environment_id)
        async with env.lock:
            if self.environments.get(req.environment_id) is not env:  # torn down meanwhile: 404
                self._environment(req.environment_id)
            injection = plan_injection(env.plan, req.entries())
            if not injection.supported:
                return _error(422, *(f"{u.resource}: {u.reason}" for u in injection.unsupported))
            base = {"environment_id": req.environment_id, "applied_by": self.principal}
            try:
                left = await self.env.inject(injection, ready_timeout=self.ready_timeout)
            except StateRefused as exc:  # refused before anything was applied
                return _json(200, {**base, "status": "error", "error": exc.detail})
            except Exception as exc:
                env.plan = injection.plan  # some of it may be there: later plans count it
                await _rearm(self.env, env)
                return _json(200, {**base, "status": "error", "error": f"{type(exc).__name__}: {exc}"})
            env.plan = injection.plan
            await _rearm(self.env, env)
        if left:
            return _json(
                200, {**base, "status": "error", "error": "applied, but not observed: " + "; ".join(left)}
            )
        return _json(
            200,
            {**base, "status": "applied", "resources": injection.resources(), "notes": list(injection.notes)},
        )

    async def teardown(self, request: web.Request) -> web.StreamResponse:
        req: api.EnvironmentRequest = await self._body(request, api.EnvironmentRequest)
        async with self._lock:
            env = self._environment(req.environment_id)
            async with env.lock:
                await env.disarm()
                left = await self.env.teardown(env.plan.namespaces.values(), env.plan.owner)
                env.audit.close()
                del self.environments[req.environment_id]
        if left:
            return _json(200, {"status": "error", "error": f"still terminating: {', '.join(left)}"})
        return _json(200, {"status": "destroyed"})

    async def observe(self, request: web.Request) -> web.StreamResponse:
        req: api.ObserveRequest = await self._body(request, api.ObserveRequest)
        env = self._environment(req.environment_id)
        try:
            if req.observation_type == "audit_log":
                params = req.audit()
            else:
                obj = req.object()
        except ValidationError as exc:
            return _error(400, *api.problems(exc, "parameters"))
        base = {"environment_id": req.environment_id, "observation_type": req.observation_type}
        if req.observation_type == "audit_log":
            try:
                await audit_barrier(self.audit, self.send_sentinel, timeout=self.barrier_timeout)
            except AuditBarrierTimeout as exc:
                return _json(
                    200,
                    {
                        **base,
                        "timestamp": self.now().isoformat(),
                        "data": None,
                        "evidence_source": {
                            "type": AUDIT_SOURCE,
                            "status": "unreachable",
                            "detail": str(exc),
                        },
                    },
                )
            entries = api.audit_entries(env.audit.events, env.plan.namespaces, params)
            return _json(
                200,
                {
                    **base,
                    "timestamp": self.now().isoformat(),
                    "data": {"agent_principal": env.access.username, "entries": entries},
                    "evidence_source": {"type": AUDIT_SOURCE, "status": "available"},
                },
            )
        namespace = api.physical_namespace(env.plan.namespaces, obj.namespace) if obj.namespace else None
        if obj.namespace and namespace is None:
            return _error(
                400, f"parameters.namespace: {obj.namespace!r} is not a namespace of this environment"
            )
        ref = [api.ResourceRef(kind=obj.kind, name=obj.name, namespace=namespace)]
        unsettled = await env.settled()
        if unsettled is not None:
            return _json(
                200,
                {
                    **base,
                    "timestamp": self.now().isoformat(),
                    "data": None,
                    "evidence_source": {
                        "type": STATE_SOURCE,
                        "status": "unreachable",
                        "detail": f"the declared failures have not settled: {unsettled}",
                    },
                },
            )
        now = api.snapshot_resources(await self.env.snapshot(env.plan), env.plan.namespaces, ref)
        current = now[0]["object"] if now else None
        if req.observation_type == "resource_state":
            if current is None:
                return _error(404, f"{obj.kind} {obj.name}: not found in the environment")
            data: Any = current
        else:
            then = api.snapshot_resources(env.before, env.plan.namespaces, ref)
            data = api.state_diff(then[0]["object"] if then else None, current)
        return _json(
            200,
            {
                **base,
                "timestamp": self.now().isoformat(),
                "data": data,
                "evidence_source": {"type": STATE_SOURCE, "status": "available"},
            },
        )

    async def close(self) -> None:
        """Tear down every environment still provisioned (the server is going away)."""
        for environment_id in list(self.environments):
            env = self.environments.pop(environment_id)
            env.audit.close()
            await env.disarm()
            await self.env.teardown(env.plan.namespaces.values(), env.plan.owner, timeout=0)


async def _armed(env: EnvironmentPort, plan: EnvironmentPlan) -> InjectorPort:
    """The plan's failure injector, started: the environment is handed over with the answer (an
    injector of a plan that declares no failure watches nothing)."""
    injector = env.failure_injector(plan)
    await injector.start()
    return injector


async def _rearm(env: EnvironmentPort, held: Provisioned) -> None:
    """Injected state may declare failures of its own: the injector follows the environment's plan."""
    await held.disarm()
    held.injector = await _armed(env, held.plan)


def _server_of(kubeconfig: str) -> str | None:
    import yaml

    doc = yaml.safe_load(kubeconfig) or {}
    clusters = doc.get("clusters") or []
    return str(clusters[0]["cluster"]["server"]) if clusters else None
