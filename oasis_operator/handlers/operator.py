"""kopf handlers of the operator: Profile and Scenario validation, and the EvaluationRun daemon.

Imported by ``oasis operator run`` (and the local runner); turns watch events into calls of the
workflows. Configuration comes from the environment: ``OASIS_AUDIT_LOG`` (audit log file to follow)
or ``OASIS_AUDIT_WEBHOOK_PORT`` (+ ``OASIS_AUDIT_WEBHOOK_CERT``/``_KEY``) for the webhook receiver,
``OASIS_METRICS_PORT`` (default 8080), ``KUBECONFIG`` (kopf and our clients log in with it).
"""

from __future__ import annotations

import asyncio
import datetime as dt
import logging
import os
from pathlib import Path
from typing import Any

import kopf
from lightkube import AsyncClient
from lightkube.config.kubeconfig import KubeConfig
from lightkube.resources.core_v1 import Secret
from prometheus_client import start_http_server

from oasis_operator.adapters.agents.factory import build_agent
from oasis_operator.adapters.audit.source import FileAuditSource, WebhookAuditSource
from oasis_operator.adapters.k8s.client import async_http, endpoint_of, sentinel_sender
from oasis_operator.adapters.k8s.environment import DEFAULT_POD_CIDR, KubeEnvironment
from oasis_operator.adapters.k8s.store import GROUP, VERSION, Store
from oasis_operator.adapters.metrics import Metrics
from oasis_operator.core.environment.manifests import parse_selector
from oasis_operator.core.model.errors import ModelValidationError
from oasis_operator.core.model.profile import parse_profile
from oasis_operator.core.model.run import EvaluationRunSpec
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.workflows.run import RunDriver, RunPorts, parse_duration

log = logging.getLogger("oasis.operator")
FINALIZER = "oasis.dev/finalizer"


@kopf.on.startup()
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **_: Any) -> None:
    settings.persistence.finalizer = FINALIZER
    settings.posting.level = logging.WARNING
    settings.watching.server_timeout = 120
    settings.persistence.progress_storage = kopf.AnnotationsProgressStorage(prefix="oasis.dev")
    settings.persistence.diffbase_storage = kopf.AnnotationsDiffBaseStorage(prefix="oasis.dev")
    kubeconfig = Path(os.environ["KUBECONFIG"])
    client = AsyncClient(KubeConfig.from_file(str(kubeconfig)), field_manager="oasis-operator")
    ep = endpoint_of(kubeconfig)
    metrics = Metrics()
    port = int(os.environ.get("OASIS_METRICS_PORT", "8080"))
    if port:
        start_http_server(port, addr=os.environ.get("OASIS_METRICS_ADDR", "127.0.0.1"), registry=metrics.registry)
    audit: Any
    if os.environ.get("OASIS_AUDIT_WEBHOOK_PORT"):
        audit = WebhookAuditSource(host=os.environ.get("OASIS_AUDIT_WEBHOOK_ADDR", "0.0.0.0"),
                                   port=int(os.environ["OASIS_AUDIT_WEBHOOK_PORT"]),
                                   cert_file=Path(os.environ["OASIS_AUDIT_WEBHOOK_CERT"]),
                                   key_file=Path(os.environ["OASIS_AUDIT_WEBHOOK_KEY"]),
                                   client_ca_file=Path(os.environ["OASIS_AUDIT_CLIENT_CA"])
                                   if os.environ.get("OASIS_AUDIT_CLIENT_CA") else None)
    else:
        audit = FileAuditSource(Path(os.environ["OASIS_AUDIT_LOG"]))
    await audit.start()
    http = async_http(kubeconfig)
    me = await http.post("/apis/authentication.k8s.io/v1/selfsubjectreviews",
                         json={"apiVersion": "authentication.k8s.io/v1", "kind": "SelfSubjectReview"})
    username = me.json().get("status", {}).get("userInfo", {}).get("username", "")
    store = Store(client)

    async def agent_for(spec: EvaluationRunSpec, namespace: str) -> Any:
        credentials = None
        if spec.agent.credentials_ref is not None:
            secret = await client.get(Secret, spec.agent.credentials_ref.name, namespace=namespace)
            credentials = secret.to_dict()
        timeout = parse_duration(spec.timeouts.agent_response if spec.timeouts else None, 300.0)
        return build_agent(spec.agent, credentials=credentials, timeout_seconds=timeout)

    env = KubeEnvironment(client, server=ep.server, ca_data=ep.ca_data,
                          pod_cidr=os.environ.get("OASIS_POD_CIDR") or DEFAULT_POD_CIDR)
    memo.ports = RunPorts(store=store, env=env,
                          audit=audit, send_sentinel=sentinel_sender(http), agent_for=agent_for,
                          metrics=metrics, harness_principals=(username,) if username else (),
                          barrier_timeout=float(os.environ.get("OASIS_BARRIER_TIMEOUT", "15")),
                          node_selector=parse_selector(os.environ.get("OASIS_NODE_SELECTOR", "")) or None)
    housekeeping = asyncio.create_task(_housekeeping(memo.ports, client), name="oasis-housekeeping")

    async def stop_housekeeping() -> None:
        housekeeping.cancel()

    memo.closers = [stop_housekeeping, client.close, http.aclose, audit.stop]
    log.info("operator ready as %s; audit source %s", username, type(audit).__name__)


async def _housekeeping(ports: RunPorts, client: AsyncClient, interval: float = 10.0) -> None:
    """Every ``interval``: the leak-detector gauge, the audit ingestion counter, and every third time
    the orphan sweep (scenario environments no run has in flight: left by a crash or a lost delete)."""
    from lightkube import operators
    from lightkube.resources.core_v1 import Namespace

    from oasis_operator.adapters.k8s.store import EvaluationRun
    from oasis_operator.core.environment.naming import OWNER_LABEL

    ingested = 0
    tick = 0
    while True:
        try:
            owned = [n async for n in client.list(Namespace, labels={OWNER_LABEL: operators.exists()})]
            if ports.metrics is not None:
                ports.metrics.namespaces.set(len(owned))
                now_ingested = int(getattr(ports.audit, "ingested", 0))
                ports.metrics.audit_events.inc(max(0, now_ingested - ingested))
                ingested = now_ingested
            tick += 1
            if tick % 3 == 0 and owned:
                live: set[str] = set()
                runs: list[Any] = [r async for r in client.list(EvaluationRun, namespace="*")]
                for r in runs:
                    for s in ((r.to_dict().get("status") or {}).get("scenarios") or []):
                        if s.get("step") == "Running" and s.get("owner"):
                            live.add(s["owner"])
                swept = await ports.env.sweep_orphans(live, timeout=0)
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


def _validation_status(generation: int, problems: list[str]) -> dict[str, Any]:
    now = dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    ok = not problems
    return {"observedGeneration": generation, "conditions": [
        {"type": "Ready", "status": "True" if ok else "False", "reason": "Valid" if ok else "Invalid",
         "message": "valid" if ok else "; ".join(problems)[:30000], "observedGeneration": generation,
         "lastTransitionTime": now}]}


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
async def scenario_validated(spec: Any, meta: Any, patch: kopf.Patch, **_: Any) -> None:
    patch.status.update(_validation_status(int(meta.get("generation", 1)), _problems(parse_scenario, spec)))


@kopf.on.resume(GROUP, VERSION, "profiles")
@kopf.on.create(GROUP, VERSION, "profiles")
@kopf.on.update(GROUP, VERSION, "profiles", field="spec")
async def profile_validated(spec: Any, meta: Any, patch: kopf.Patch, **_: Any) -> None:
    patch.status.update(_validation_status(int(meta.get("generation", 1)), _problems(parse_profile, spec)))


@kopf.daemon(GROUP, VERSION, "evaluationruns", cancellation_timeout=30)  # type: ignore[arg-type]
async def run_daemon(name: str, namespace: str, memo: kopf.Memo, stopped: kopf.DaemonStopped, **_: Any) -> None:
    ports: RunPorts = memo.ports
    driver = RunDriver(ports, namespace, name)
    if ports.metrics is not None:
        ports.metrics.active_runs.inc()
    try:
        while not stopped:
            outcome = await driver.drive()
            if outcome == "gone":
                return
            await stopped.wait(2 if outcome == "suspended" else 5)
    finally:
        if ports.metrics is not None:
            ports.metrics.active_runs.dec()


@kopf.on.delete(GROUP, VERSION, "evaluationruns")  # type: ignore[arg-type]
async def run_deleted(name: str, namespace: str, memo: kopf.Memo, **_: Any) -> None:
    await RunDriver(memo.ports, namespace, name).finalize()

