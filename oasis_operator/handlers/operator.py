"""kopf handlers of the operator: Profile and Scenario validation, and the EvaluationRun daemon.

Imported by ``oasis operator run`` (and the local runner); turns watch events into calls of the
workflows. Configuration is the :class:`~oasis_operator.handlers.settings.OperatorSettings` the
command put in kopf's memo: kopf and our clients log in with its cluster access (a kubeconfig, or the
pod's ServiceAccount read from its mounted files, never copied).

A run is driven by a daemon only while it needs one (:func:`~oasis_operator.core.run_status.needs_driver`):
a finished run has none, so it costs nothing until its spec changes, it is asked to run again, or its
opt-in TTL is due (the daemon then sleeps until that moment).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
import tempfile
import time
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import kopf
from lightkube import ApiError, AsyncClient
from lightkube.resources.core_v1 import Secret
from prometheus_client import start_http_server

from oasis_operator.adapters.agents import confinement, sandbox
from oasis_operator.adapters.agents.credentials import credentials_refusal, ensure_credentials_policy
from oasis_operator.adapters.agents.factory import (
    AdapterNotAllowed,
    EndpointPolicy,
    SubprocessPolicy,
    build_agent,
)
from oasis_operator.adapters.agents.job import AgentJobTarget
from oasis_operator.adapters.agents.job_objects import sweep_identity_places
from oasis_operator.adapters.audit.source import FileAuditSource, WebhookAuditSource
from oasis_operator.adapters.gateway import ToolGateway
from oasis_operator.adapters.gateway.plane import gateway_ports
from oasis_operator.adapters.k8s.client import sentinel_sender, whoami
from oasis_operator.adapters.k8s.environment import AGENT_ACCOUNT, DEFAULT_POD_CIDR, KubeEnvironment
from oasis_operator.adapters.k8s.store import GROUP, VERSION, EvaluationRun, Store
from oasis_operator.adapters.metrics import Metrics
from oasis_operator.adapters.toolplane import Cluster, discovered, tool_plane
from oasis_operator.core import run_status as rs
from oasis_operator.core.contract import ScenarioRequest
from oasis_operator.core.model.errors import ModelValidationError
from oasis_operator.core.model.profile import parse_profile
from oasis_operator.core.model.run import EvaluationRunSpec, parse_duration
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.core.ports import AgentPort
from oasis_operator.core.reasons import PROVIDER_FAULTS
from oasis_operator.core.sharding import serves
from oasis_operator.core.verdicts import Verdict
from oasis_operator.devcluster.targets import TargetPool, TargetPoolConfig
from oasis_operator.handlers.settings import (
    ClusterAccess,
    OperatorSettings,
    connection_info,
    toolplane_secret_paths,
    user_credential_paths,
)
from oasis_operator.handlers.targets import OwnedTargets
from oasis_operator.workflows.run import AGENT_TIMEOUT_DEFAULT, RunDriver, RunPorts
from oasis_operator.workflows.scenario_slots import ScenarioSlots

log = logging.getLogger("oasis.operator")
FINALIZER = "oasis.dev/finalizer"
#: Prefix of the generated names of the Job (and its ConfigMap) that runs a Job agent in a scenario's
#: home namespace.
AGENT_JOB_NAME = f"{AGENT_ACCOUNT}-run"
#: An identity question's namespace older than this was left by a crash (its Job's own deadline is
#: the run's identity timeout, minutes at most).
IDENTITY_PLACE_TTL = dt.timedelta(minutes=15)


@kopf.on.login()
def login(memo: kopf.Memo, **_: Any) -> Any:
    """kopf's connection, from the operator's own settings (asked again when a token expires)."""
    settings: OperatorSettings = memo.settings
    return connection_info(settings.access)


def subprocess_policy(
    settings: OperatorSettings, environ: Mapping[str, str] | None = None
) -> SubprocessPolicy:
    """``adapter: subprocess`` is refused unless the operator accepts it; then it runs sandboxed,
    hidden from every credential of the operator and of its user (``environ``: the kubeconfig chain,
    ``~/.kube``, the dev clusters' PKI), the tool plane's secrets, the audit log and other agents'
    private files; its network is its own (decision 0098)."""
    environ = os.environ if environ is None else environ
    hidden = [
        *map(str, settings.secret_paths()),
        *map(str, user_credential_paths(environ)),
        *map(str, toolplane_secret_paths(settings.toolplane)),
        tempfile.gettempdir(),
    ]
    if settings.audit.log is not None:
        hidden.append(str(settings.audit.log.resolve().parent))
    return SubprocessPolicy(allowed=settings.allow_subprocess_agents, hidden=tuple(dict.fromkeys(hidden)))


def job_target(request: ScenarioRequest) -> AgentJobTarget:
    """A Job agent runs in the scenario's home namespace as the scenario's own ServiceAccount."""
    if request.environment is None:
        raise ValueError("a Job agent needs the scenario's environment")
    return AgentJobTarget(
        name=AGENT_JOB_NAME, namespace=request.environment.namespace, service_account=AGENT_ACCOUNT
    )


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    ours: OperatorSettings = memo.settings
    settings.persistence.finalizer = FINALIZER
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = 120
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="oasis.dev")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix="oasis.dev")
    if ours.allow_subprocess_agents:
        if why := confinement.unavailable():
            raise kopf.PermanentError(f"--allow-subprocess-agents: {why}")
        sandbox.make_undumpable()
    client = AsyncClient(ours.access.lightkube_config(), field_manager="oasis-operator")
    ep = ours.access.endpoint()
    metrics = Metrics(verdicts=tuple(Verdict), fault_reasons=PROVIDER_FAULTS)
    if ours.metrics_port:
        start_http_server(ours.metrics_port, addr=ours.metrics_addr, registry=metrics.registry)
    in_targets = ours.targets.mode == "targets"
    elsewhere = ours.targets.mode != "shared"  # the scenarios' cluster is not this one
    audit = None if in_targets else _audit_source(ours)
    if audit is not None:
        await audit.start()
    http = ours.access.http()
    me = await http.post(
        "/apis/authentication.k8s.io/v1/selfsubjectreviews",
        json={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"},
    )
    username = me.json().get("status", {}).get("userInfo", {}).get("username", "")
    store = Store(client)
    policy = subprocess_policy(ours)
    endpoints = EndpointPolicy(allow_local=ours.allow_local_agent_endpoints)

    try:  # who may have a Secret sent to an agent (decision 0099): pinned at admission
        credentials_policy: dt.datetime | None = await ensure_credentials_policy(client)
    except ApiError as exc:
        credentials_policy = None
        log.warning("cannot install the credentials admission policy (%s): credentialsRef is refused", exc)

    async def agent_for(spec: EvaluationRunSpec, namespace: str, run_name: str = "") -> AgentPort:
        credentials = None
        if spec.agent.credentials_ref is not None:
            run: dict[str, Any] = (await client.get(EvaluationRun, run_name, namespace=namespace)).to_dict()  # type: ignore[no-untyped-call]
            refusal = await credentials_refusal(
                client, run, spec.agent.credentials_ref.name, credentials_policy
            )
            if refusal is not None:
                raise AdapterNotAllowed(refusal)
            try:
                secret = await client.get(Secret, spec.agent.credentials_ref.name, namespace=namespace)
            except ApiError as exc:
                if exc.status.code == 404:
                    raise LookupError(
                        f"agent.credentialsRef: Secret {namespace}/{spec.agent.credentials_ref.name} "
                        "does not exist yet"
                    ) from None
                raise
            credentials = secret.to_dict()
        if elsewhere and spec.agent.adapter == "job":
            raise AdapterNotAllowed(
                f"agent.adapter job: scenarios run in {ours.targets.mode} clusters here (decision 0100), "
                "and a Job would run the agent in the operator's own cluster; use http"
            )
        timeout = parse_duration(
            spec.timeouts.agent_response if spec.timeouts else None, AGENT_TIMEOUT_DEFAULT
        )
        identity = AgentJobTarget(
            name=f"{run_name or 'agent'}-identity"[:63].rstrip("-"),
            namespace=namespace,
            service_account="default",
        )
        return build_agent(
            spec.agent,
            credentials=credentials,
            timeout_seconds=timeout,
            kube_client=client,
            job_target_for=job_target,
            job_identity=identity,
            subprocess_policy=policy,
            endpoint_policy=endpoints,
        )

    # The recording gateway in front of the back-ends; the port applies temporal conditions (decision 0056).
    gateway = ToolGateway(ours.gateway.addr, ours.gateway.port, advertise=ours.gateway.url or None)
    await gateway.start()
    # Keywords, not string keys: no back-end name appears here as a string (tests/toolplane).
    common: dict[str, Any] = dict(
        store=store,
        agent_for=agent_for,
        metrics=metrics,
        barrier_timeout=ours.barrier_timeout,
        node_selector=dict(ours.node_selector) or None,
        pool_taints=[dict(t) for t in ours.pool_taints],
        cluster_scoped=ours.cluster_scoped_scenarios,
        scenario_slots=ScenarioSlots(ours.max_scenarios),
    )
    closers: list[Any] = [gateway.stop, client.close, http.aclose]
    scenario_client = client
    if in_targets:
        targets = await _owned_targets(ours, gateway)
        # In a target of its own a scenario may write cluster-scoped objects: nothing else lives there.
        memo.ports = RunPorts(**{**common, "cluster_scoped": True}, clusters=targets)
        closers.insert(0, targets.close)
        toolplane_names = sorted(targets.backends)
    else:
        assert audit is not None
        # Shared: the scenarios in this cluster; external: in the cluster of --external-kubeconfig.
        where = await _scenario_cluster(ours, _Access(client, http, ep.server, ep.ca_data, username))
        if where.client is not client:
            closers += [where.client.close, where.http.aclose]
        env = KubeEnvironment(
            where.client,
            server=where.server,
            ca_data=where.ca_data,
            pod_cidr=ours.pod_cidr or DEFAULT_POD_CIDR,
        )
        # Configured back-ends from the tool-plane file; discovered ones found on the cluster (decision 0063).
        cluster = Cluster(where.http, where.server)
        toolplane = tool_plane(cluster, {**ours.toolplane.backends, **await discovered(cluster)})
        memo.ports = RunPorts(
            **common,
            env=env,
            audit=audit,
            send_sentinel=sentinel_sender(where.http),
            # The back-ends' controllers (Flux) act for the harness, as the operator does.
            harness_principals=(*((where.username,) if where.username else ()), *toolplane.principals),
            toolplane=toolplane,
            tool_gateway=gateway_ports(gateway, toolplane),
        )
        closers += [toolplane.aclose, audit.stop]
        toolplane_names = sorted(toolplane.backends)
        scenario_client = where.client
    memo.metrics = metrics
    memo.active_runs = set()
    housekeeping = asyncio.create_task(
        _housekeeping(memo.ports, client, metrics, audit, scenario_client=scenario_client),
        name="oasis-housekeeping",
    )

    async def stop_housekeeping() -> None:
        housekeeping.cancel()

    memo.closers = [stop_housekeeping, *closers]
    log.info(
        "operator ready as %s; scenarios in %s; audit source %s; metrics on %s:%s; subprocess agents %s; "
        "tool plane %s; tool gateway %s (agents told %s)",
        username,
        ours.targets.mode,
        type(audit).__name__ if audit is not None else "each target's audit log",
        ours.metrics_addr,
        ours.metrics_port,
        "accepted (sandboxed)" if ours.allow_subprocess_agents else "refused",
        ", ".join(toolplane_names),
        f"{ours.gateway.addr}:{ours.gateway.port}",
        gateway.url,
    )


def _audit_source(ours: OperatorSettings) -> FileAuditSource | WebhookAuditSource:
    """The shared cluster's audit stream: its webhook, or its log file."""
    if ours.audit.webhook_port:
        assert ours.audit.cert is not None
        assert ours.audit.key is not None
        return WebhookAuditSource(
            host=ours.audit.webhook_addr,
            port=ours.audit.webhook_port,
            cert_file=ours.audit.cert,
            key_file=ours.audit.key,
            client_ca_file=ours.audit.client_ca,
        )
    assert ours.audit.log is not None
    return FileAuditSource(Path(ours.audit.log))


@dataclass(frozen=True)
class _Access:
    """A cluster as the operator reaches it: its clients, address, CA and the operator's name there."""

    client: AsyncClient
    http: Any
    server: str
    ca_data: str
    username: str


async def _scenario_cluster(ours: OperatorSettings, management: _Access) -> _Access:
    """Where shared-mode scenarios run: this cluster, or the external one (decision 0102)."""
    if ours.targets.mode != "external" or ours.targets.external_kubeconfig is None:
        return management
    access = ClusterAccess.from_kubeconfig(ours.targets.external_kubeconfig)
    http = access.http()
    endpoint = access.endpoint()
    return _Access(
        AsyncClient(access.lightkube_config(), field_manager="oasis-operator"),
        http,
        endpoint.server,
        endpoint.ca_data,
        await whoami(http),
    )


async def _owned_targets(ours: OperatorSettings, gateway: ToolGateway) -> OwnedTargets:
    """The target pool (decision 0100), its warm targets starting."""
    from oasis_operator.core.toolplane import registry
    from oasis_operator.devcluster.backends import with_requirements

    config = ours.targets
    pool = TargetPool(
        TargetPoolConfig(
            root=config.root,
            nodes=config.nodes,
            backends=config.backends,
            warm=config.warm,
            most=config.most,
            reuse=config.reuse,
            serve_address=config.address,
        )
    )
    await pool.open()
    backends = frozenset(with_requirements(config.backends)) | registry.BUILT_IN
    return OwnedTargets(pool, backends=backends, gateway=gateway)


async def live_owners(client: AsyncClient) -> set[str]:
    """The owners the orphan sweep spares: every scenario some run on the cluster has in flight (its
    stored status), and what a provider API on the same cluster holds (its Lease, while it runs)."""
    from oasis_operator.adapters.k8s.owner_leases import fresh_owners

    runs: list[Any] = [r async for r in client.list(EvaluationRun, namespace="*")]
    return rs.live_owners(r.to_dict() for r in runs) | await fresh_owners(client)


async def _housekeeping(
    ports: RunPorts,
    client: AsyncClient,
    metrics: Metrics,
    audit: FileAuditSource | WebhookAuditSource | None,
    interval: float = 10.0,
    *,
    scenario_client: AsyncClient | None = None,
) -> None:
    """Every ``interval``: the leak-detector gauge, the audit ingestion counter, and every third time
    the orphan sweep (scenario environments no run has in flight: left by a crash or a lost delete)."""
    from lightkube import operators
    from lightkube.resources.core_v1 import Namespace

    from oasis_operator.core.environment.naming import OWNER_LABEL, is_owner_value

    ingested = 0
    tick = 0
    # In targets, no scenario namespace and no Job agent's identity namespace is ever in this cluster
    # (the chart's targets-mode role cannot even list namespaces: decision 0109).
    in_targets = ports.clusters is not None
    while True:
        try:
            owned = (
                []
                if in_targets
                else [
                    n
                    async for n in (scenario_client or client).list(
                        Namespace, labels={OWNER_LABEL: operators.exists()}
                    )
                    if is_owner_value(
                        str(((n.metadata.labels if n.metadata else None) or {}).get(OWNER_LABEL, ""))
                    )
                ]
            )
            metrics.namespaces.set(len(owned))
            if audit is not None:  # in targets, each target's log is read by its own lease
                now_ingested = audit.ingested
                metrics.audit_events.inc(max(0, now_ingested - ingested))
                ingested = now_ingested
                last = audit.last_event_at
                if last is not None:
                    metrics.audit_last_event.set(time.time() - (time.monotonic() - last))
            tick += 1
            if tick % 3 == 0 and not in_targets:
                # Identity questions' namespaces a crash left behind (decision 0099).
                await sweep_identity_places(
                    client, older_than=IDENTITY_PLACE_TTL, now=dt.datetime.now(dt.UTC)
                )
            env = ports.env
            if tick % 3 == 0 and owned and env is not None:
                # Asked by the sweep after it has listed what exists (a scenario records its owner
                # before creating anything): one starting meanwhile is never taken for an orphan.
                swept = await env.sweep_orphans(lambda: live_owners(client), timeout=0)
                if swept:
                    log.info("orphan sweep: removed environments of %d stale owners", len(swept))
        except asyncio.CancelledError:
            raise
        except Exception:  # housekeeping never stops the operator; the next tick retries
            log.exception("housekeeping")
        await asyncio.sleep(interval)


@kopf.on.cleanup()
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    for close in getattr(memo, "closers", []):
        try:
            await close()
        except Exception:  # closing is best effort at shutdown
            log.exception("closing")


def _validation_status(generation: int, problems: list[str], previous: Any = None) -> dict[str, Any]:
    """A Profile's or Scenario's Ready condition; its transition time moves only when it flips."""
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    ok = not problems
    old: dict[str, Any] = next(
        (c for c in (previous or {}).get("conditions") or [] if c.get("type") == "Ready"), {}
    )
    status = "True" if ok else "False"
    return {
        "observedGeneration": generation,
        "conditions": [
            {
                "type": "Ready",
                "status": status,
                "reason": "Valid" if ok else "Invalid",
                "message": "valid" if ok else "; ".join(problems)[:30000],
                "observedGeneration": generation,
                "lastTransitionTime": old.get("lastTransitionTime") if old.get("status") == status else now,
            }
        ],
    }


def _problems(parse: Any, spec: Any) -> list[str]:
    try:
        parse(dict(spec))
        return []
    except ModelValidationError as exc:
        return [str(i) for i in getattr(exc, "issues", [exc])][:20]
    except Exception as exc:
        return [str(exc)]


@kopf.on.resume(GROUP, VERSION, "scenarios")
@kopf.on.create(GROUP, VERSION, "scenarios")
@kopf.on.update(GROUP, VERSION, "scenarios", field="spec")
async def scenario_validated(spec: Any, meta: Any, status: Any, patch: kopf.Patch, **_: Any) -> None:
    patch.status.update(
        _validation_status(int(meta.get("generation", 1)), _problems(parse_scenario, spec), status)
    )


@kopf.on.resume(GROUP, VERSION, "profiles")
@kopf.on.create(GROUP, VERSION, "profiles")
@kopf.on.update(GROUP, VERSION, "profiles", field="spec")
async def profile_validated(spec: Any, meta: Any, status: Any, patch: kopf.Patch, **_: Any) -> None:
    patch.status.update(
        _validation_status(int(meta.get("generation", 1)), _problems(parse_profile, spec), status)
    )


def _mine(body: Any, memo: Any = None, **_: Any) -> bool:
    """The run belongs to this replica's shard (every run, with one shard)."""
    settings = getattr(memo, "settings", None)
    if settings is None:
        return True
    return serves(body, settings.shard_index, settings.shards)


def _needs_driver(body: Any, memo: Any = None, **_: Any) -> bool:
    return rs.needs_driver(body) and _mine(body, memo)


def _version(body: Any) -> Any:
    meta = body.get("metadata") or {}
    return (
        meta.get("generation"),
        dict(meta.get("annotations") or {}).get(rs.RERUN_ANNOTATION),
        (body.get("spec") or {}).get("suspend"),
        (body.get("spec") or {}).get("shutdown"),
    )


#: Why kopf may stop a run's daemon without the run being done with: it is deleted, or the operator stops.
_FINAL = (
    kopf.DaemonStoppingReason.RESOURCE_DELETED
    | kopf.DaemonStoppingReason.OPERATOR_EXITING
    | kopf.DaemonStoppingReason.OPERATOR_PAUSING
    | kopf.DaemonStoppingReason.DAEMON_CANCELLED
    | kopf.DaemonStoppingReason.DAEMON_ABANDONED
)


def _must_exit(stopped: kopf.DaemonStopped, body: Any) -> bool:
    """kopf stops the daemon when the run reads finished (the ``when`` filter). If the run changed
    since (its spec edited, a re-run asked for) before this daemon exited, it goes on: kopf would not
    start another one for that change while this one still exists."""
    if not stopped:
        return False
    if stopped.reason is not None and stopped.reason & _FINAL:
        return True
    return not rs.needs_driver(body)


async def _idle(stopped: kopf.DaemonStopped, body: Any, seconds: float) -> None:
    """Sleep up to ``seconds`` without a request: wake early when the run's spec or rerun
    annotation changes (kopf keeps ``body`` current from its watch), or when it is time to exit."""
    seen = _version(body)
    loop = asyncio.get_running_loop()
    deadline = loop.time() + seconds
    while _version(body) == seen and not _must_exit(stopped, body):
        left = deadline - loop.time()
        if left <= 0:
            return
        if stopped:
            await asyncio.sleep(min(1.0, left))  # stopped, but still needed: the flag no longer waits
        else:
            await stopped.wait(min(1.0, left))


# When the filter turns false (the run just finished), kopf first only signals the daemon (the backoff).
@kopf.daemon(  # type: ignore[arg-type]
    GROUP,
    VERSION,
    "evaluationruns",
    cancellation_backoff=5,
    cancellation_timeout=30,
    when=_needs_driver,
)
async def run_daemon(
    name: str, namespace: str, body: Any, memo: kopf.Memo, stopped: kopf.DaemonStopped, **_: Any
) -> None:
    """Drives a run while it needs driving. kopf stops this daemon once the run is finished and
    observed (the ``when`` filter turns false) and starts it again if the spec or the rerun
    annotation changes."""
    ports: RunPorts = memo.ports
    driver = RunDriver(ports, namespace, name)
    key = f"{namespace}/{name}"

    def active(on: bool) -> None:
        (memo.active_runs.add if on else memo.active_runs.discard)(key)
        memo.metrics.active_runs.set(len(memo.active_runs))

    try:
        while not _must_exit(stopped, body):
            active(
                ((body.get("status") or {}).get("phase") not in rs.TERMINAL)
                and not (body.get("spec") or {}).get("suspend")
            )
            outcome = await driver.drive()
            active(outcome == "waiting")
            if outcome == "gone":
                return
            if outcome == "waiting":
                await _idle(stopped, body, driver.retry_in)
            elif outcome == "suspended":
                await _idle(stopped, body, 300)
            elif driver.expires_in is not None:
                await _idle(stopped, body, driver.expires_in)
            else:
                # Finished and observed: kopf stops this daemon on the status event; until then, and
                # should no event come, nothing is requested unless the run changes.
                await _idle(stopped, body, 3600)
    finally:
        active(False)


@kopf.on.delete(GROUP, VERSION, "evaluationruns", when=_mine)  # type: ignore[arg-type]
async def run_deleted(name: str, namespace: str, memo: kopf.Memo, **_: Any) -> None:
    await RunDriver(memo.ports, namespace, name).finalize()
