"""The metrics and alerting back-ends' adapters: a scenario's declared series back-filled into
VictoriaMetrics, its declared alerts as vmalert rules, and the agent's own bearer token at vmauth,
which confines every query (and the alert and rule listings, through prom-label-proxy) to the
scenario's namespace (decisions 0050, 0055).

Called by :class:`~oasis_operator.adapters.toolplane.ToolPlane`; turns ``plan.toolplane.series`` into
one import (absolute times = the injection's clock + the planned offsets) and
``plan.toolplane.alerts`` into one rule file, then reads both back through vmauth **with the agent's
token**: every series' raw samples, every alert in its declared state. The token is granted in
:class:`~oasis_operator.adapters.plumbing.vmauth_grants.VmauthGrants`, a file shared with the dev cluster's
:class:`~oasis_operator.devcluster.backends.metrics.MetricsBackend` (so a test or another process
granting a token never drops this one's), rendered into vmauth's configuration, which vmauth
re-reads on ``/-/reload``. Every failure is a :class:`ToolPlaneError` (PROVIDER_FAILURE).
"""

from __future__ import annotations

import asyncio
import dataclasses
import json
import math
import os
import secrets
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import yaml

from oasis_operator.adapters.plumbing.vmauth_grants import VmauthGrants
from oasis_operator.adapters.toolplane.factory import Assembly, Factory, FileEntry
from oasis_operator.adapters.toolplane.probe import answers
from oasis_operator.core.environment.plan import EnvironmentPlan
from oasis_operator.core.errors import ToolPlaneError
from oasis_operator.core.ports import AgentAccess, ToolEndpoint
from oasis_operator.core.toolplane import registry
from oasis_operator.core.toolplane.memory import OomLeak, anchored_series
from oasis_operator.core.toolplane.metrics import (
    RELOAD_KEY,
    RULES_DIR,
    TENANT_LABEL,
    AlertRule,
    MetricSeries,
    alert_groups,
)
from oasis_operator.core.toolplane.plan import TimedChange


class Vmauth:
    """The agent-facing side shared by both adapters: grants, vmauth's reload, and polling reads
    through vmauth until a deadline (a transport error or a slow answer counts as "not yet")."""

    def __init__(self, http: httpx2.AsyncClient, directory: Path, url: str, timeout: float = 30.0) -> None:
        self.http = http
        self.grants = VmauthGrants(directory)
        self.url = url.rstrip("/")
        self.directory = directory
        self.timeout = timeout
        self._lock = asyncio.Lock()

    async def reload(self) -> None:
        try:
            key = (self.directory / RELOAD_KEY).read_text().strip()
        except OSError as exc:
            raise ToolPlaneError(
                f"vmauth's reload key {self.directory / RELOAD_KEY}: {exc.strerror}"
            ) from None
        await self.until(
            lambda: self.http.get(f"{self.url}/-/reload", params={"authKey": key}),
            lambda r: r.status_code == 200,
            "vmauth to accept a reload",
        )

    async def grant(self, namespace: str) -> str:
        async with self._lock:
            token, changed = self.grants.grant(namespace)
            if changed:
                await self.reload()
        await self.until(
            lambda: self.get("/api/v1/status/buildinfo", token),
            lambda r: r.status_code == 200,
            f"vmauth to accept the token of {namespace}",
        )
        return token

    async def revoke(self, namespace: str) -> None:
        async with self._lock:
            token = self.grants.grants().get(namespace)
            if token is None or not self.grants.revoke(namespace):
                return
            await self.reload()
        await self.until(
            lambda: self.get("/api/v1/status/buildinfo", token),
            lambda r: r.status_code == 401,
            f"vmauth to refuse the revoked token of {namespace}",
        )

    def get(self, path: str, token: str, params: Mapping[str, Any] | None = None) -> Any:
        return self.http.get(f"{self.url}{path}", params=params, headers={"Authorization": f"Bearer {token}"})

    async def until(
        self, request: Callable[[], Any], done: Callable[[httpx2.Response], bool], what: str
    ) -> httpx2.Response:
        loop = asyncio.get_running_loop()
        deadline = loop.time() + self.timeout
        last = "no answer"
        while True:
            try:
                resp: httpx2.Response = await request()
                if done(resp):
                    return resp
                last = f"HTTP {resp.status_code}: {resp.text[:200]}"
            except httpx2.TransportError as exc:  # under load an answer can take seconds: not yet
                last = f"{type(exc).__name__}: {exc}"
            if loop.time() > deadline:
                raise ToolPlaneError(f"waited {self.timeout:g}s for {what} (last: {last})")
            await asyncio.sleep(0.1)


async def _connected(request: Callable[[], Any], timeout: float) -> httpx2.Response:
    """``request()``, asked again while the connection itself is refused (the request was never sent),
    until ``timeout``; any other failure is raised at once."""
    loop = asyncio.get_running_loop()
    deadline = loop.time() + timeout
    while True:
        try:
            resp: httpx2.Response = await request()
            return resp
        except httpx2.ConnectError:
            if loop.time() > deadline:
                raise
            await asyncio.sleep(0.2)


def _samples_read(resp: httpx2.Response) -> list[list[tuple[float, float]]] | None:
    body = resp.json() if resp.status_code == 200 else {}
    if body.get("status") != "success":
        return None
    return [[(float(t), float(v)) for t, v in r.get("values") or []] for r in body["data"]["result"]]


class Metrics:
    """``store_url``: VictoriaMetrics (the harness writes there); ``vmauth``: the agent's endpoint."""

    name = registry.METRICS

    def __init__(
        self,
        http: httpx2.AsyncClient,
        store_url: str,
        vmauth: Vmauth,
        now: Callable[[], float] | None = None,
        kube: httpx2.AsyncClient | None = None,
    ) -> None:
        self.http = http
        self.store_url = store_url.rstrip("/")
        self.vmauth = vmauth
        self.now = now or time.time
        #: The API server (a leaking workload's series are anchored at its pods' recorded terminations).
        self.kube = kube

    async def probe(self) -> str:
        """The preflight's self-test: the store and the agents' vmauth both answer their health page."""
        store = await answers(self.http, f"{self.store_url}/health", "VictoriaMetrics")
        return f"{store}; {await answers(self.http, f'{self.vmauth.url}/health', 'vmauth')}"

    async def inject(self, plan: EnvironmentPlan) -> None:
        token = await self.vmauth.grant(plan.home_namespace)
        start = self.now()
        series = [*plan.toolplane.series]
        for leak in plan.toolplane.leaks:
            series += await self._leak_series(leak, start)
        if not series:
            return
        body = "\n".join(json.dumps(import_line(s, start)) for s in series) + "\n"
        # A refused connection never reached the store: asked again (a request that was sent is not, so
        # nothing is imported twice). Seen under load as "All connection attempts failed".
        resp = await _connected(
            lambda: self.http.post(f"{self.store_url}/api/v1/import", content=body.encode()),
            self.vmauth.timeout,
        )
        if resp.status_code != 204:
            raise ToolPlaneError(
                f"importing the series of {plan.scenario_id}: HTTP {resp.status_code}: {resp.text[:200]}"
            )
        flushed = await _connected(
            lambda: self.http.get(f"{self.store_url}/internal/force_flush"), self.vmauth.timeout
        )
        if flushed.status_code != 200:
            raise ToolPlaneError(f"flushing the metrics store: HTTP {flushed.status_code}")
        for s in series:
            await self._read_back(s, start, token)

    async def _leak_series(self, leak: OomLeak, start: float) -> list[MetricSeries]:
        """The series of every OOM-killed container of a leaking workload, anchored at the last
        termination its pod records (what ``kubectl get pod -o yaml`` shows), so the two agree."""
        if self.kube is None:
            raise ToolPlaneError(
                f"{leak.source}: the metrics back-end was given no API server to read pods from"
            )
        selector = ",".join(f"{k}={v}" for k, v in leak.selector)
        resp = await self.kube.get(
            f"/api/v1/namespaces/{leak.namespace}/pods", params={"labelSelector": selector}
        )
        if resp.status_code != 200:
            raise ToolPlaneError(
                f"{leak.source}: listing the pods of {leak.workload}: HTTP {resp.status_code}"
            )
        out = anchored_series(leak, resp.json().get("items") or [], start)
        if not out:
            raise ToolPlaneError(
                f"{leak.source}: no pod of {leak.workload} records an OOM kill to anchor its series at"
            )
        return out

    async def _read_back(self, s: MetricSeries, start: float, token: str) -> None:
        """The raw samples of ``s``, read with the agent's token, are the planned ones."""
        want = [(round((start + t) * 1000) / 1000, v) for t, v in s.samples]
        first, last = want[0][0], want[-1][0]
        matchers = ",".join(f'{k}="{v}"' for k, v in s.labels if k not in ("__name__", TENANT_LABEL))
        window = math.ceil(last - first) + 1
        query = f"{s.name}{{{matchers}}}[{window}s]"

        def same(resp: httpx2.Response) -> bool:
            got = _samples_read(resp)
            return (
                got is not None
                and len(got) == 1
                and len(got[0]) == len(want)
                and all(
                    abs(a[0] - b[0]) < 0.002 and math.isclose(a[1], b[1], rel_tol=1e-9, abs_tol=1e-12)
                    for a, b in zip(got[0], want, strict=True)
                )
            )

        await self.vmauth.until(
            lambda: self.vmauth.get("/api/v1/query", token, {"query": query, "time": last}),
            same,
            f"{s.source}: series {s.name} to read back as declared with the agent's token",
        )

    async def apply(self, plan: EnvironmentPlan, change: TimedChange) -> None:
        raise ToolPlaneError(
            f"the metrics back-end has no timed changes yet (asked for one at {change.at:g}s)"
        )

    async def endpoint(self, plan: EnvironmentPlan, access: AgentAccess) -> ToolEndpoint | None:
        token = await self.vmauth.grant(plan.home_namespace)
        return ToolEndpoint(
            "observability-metrics",
            self.vmauth.url,
            token,
            "the Prometheus HTTP API (PromQL: /api/v1/query, /api/v1/query_range, /api/v1/series, "
            "/api/v1/labels...) and the alerts and rules of the alerting back-end (/api/v1/alerts, "
            "/api/v1/rules), with this bearer token (Authorization: Bearer <token>); "
            f"you see the series of namespace {plan.home_namespace}",
        )

    async def settle(self, plan: EnvironmentPlan) -> None:
        await self.vmauth.revoke(plan.home_namespace)

    async def cleanup(self, plan: EnvironmentPlan) -> None:
        await self.vmauth.revoke(plan.home_namespace)
        if not (plan.toolplane.series or plan.toolplane.alerts):
            return
        await self._delete_series(plan.home_namespace)
        if plan.toolplane.alerts:
            # vmalert may still hold an ALERTS sample of the namespace in its write queue (flushed every
            # second): after that has passed, whatever came back is deleted again.
            await asyncio.sleep(ALERTS_FLUSH_SECONDS)
            await self._delete_series(plan.home_namespace)

    async def _delete_series(self, namespace: str) -> None:
        resp = await self.http.post(
            f"{self.store_url}/api/v1/admin/tsdb/delete_series",
            params={"match[]": f'{{{TENANT_LABEL}="{namespace}"}}'},
        )
        if resp.status_code != 204:
            raise ToolPlaneError(f"deleting the series of {namespace}: HTTP {resp.status_code}")


#: vmalert's write queue is flushed every second (the dev cluster's -remoteWrite.flushInterval), plus margin.
ALERTS_FLUSH_SECONDS = 2.5


def import_line(s: MetricSeries, start: float) -> dict[str, Any]:
    """One series in VictoriaMetrics' JSON-lines import format, at ``start`` + the planned offsets."""
    return {
        "metric": dict(s.labels),
        "values": [v for _, v in s.samples],
        "timestamps": [round((start + t) * 1000) for t, _ in s.samples],
    }


class Alerts:
    """``rules_dir``: where vmalert reads ``*.yaml``; ``vmalert_url``: vmalert (reloaded over HTTP)."""

    name = registry.ALERTS

    def __init__(self, http: httpx2.AsyncClient, rules_dir: Path, vmalert_url: str, vmauth: Vmauth) -> None:
        self.http = http
        self.rules_dir = rules_dir
        self.vmalert_url = vmalert_url.rstrip("/")
        self.vmauth = vmauth

    def _file(self, plan: EnvironmentPlan) -> Path:
        return self.rules_dir / f"{plan.home_namespace}.yaml"

    async def probe(self) -> str:
        """The preflight's self-test: vmalert answers, and its rule directory can take a scenario's rules."""
        if not self.rules_dir.is_dir() or not os.access(self.rules_dir, os.W_OK):
            raise ToolPlaneError(f"vmalert's rule directory {self.rules_dir} is missing or not writable")
        return await answers(self.http, f"{self.vmalert_url}/health", "vmalert")

    async def inject(self, plan: EnvironmentPlan) -> None:
        token = await self.vmauth.grant(plan.home_namespace)
        rules = plan.toolplane.alerts
        if not rules:
            # The listing answers (empty) for the agent: the alerting back-end is there.
            await self.vmauth.until(
                lambda: self.vmauth.get("/api/v1/alerts", token),
                lambda r: r.status_code == 200,
                "the alert listing to answer the agent's token",
            )
            return
        await self._hold(plan, rules, token)

    async def _hold(self, plan: EnvironmentPlan, rules: Sequence[AlertRule], token: str) -> None:
        """Write the scenario's rules, reload vmalert, and wait until the agent's token lists exactly
        the declared (name, state) pairs."""
        path = self._file(plan)
        tmp = path.with_suffix(".tmp")
        tmp.write_text(yaml.safe_dump({"groups": alert_groups(rules)}, sort_keys=False))
        tmp.replace(path)
        await self._reload()
        want = {(r.name, r.state) for r in rules}

        def shown(resp: httpx2.Response) -> bool:
            body = resp.json() if resp.status_code == 200 else {}
            alerts = (body.get("data") or {}).get("alerts") or []
            return {(str(a.get("labels", {}).get("alertname")), str(a.get("state"))) for a in alerts} == want

        await self.vmauth.until(
            lambda: self.vmauth.get("/api/v1/alerts", token),
            shown,
            f"the declared alerts {sorted(want)} to show in the agent's alert listing",
        )

    async def _reload(self) -> None:
        await self.vmauth.until(
            lambda: self.http.get(f"{self.vmalert_url}/-/reload"),
            lambda r: r.status_code == 200,
            "vmalert to accept a reload",
        )

    async def apply(self, plan: EnvironmentPlan, change: TimedChange) -> None:
        """A declared pending alert starts firing: its rule is rewritten with no wait, and the agent's
        listing must show it firing (the others as they were) before the change counts as delivered."""
        pending = {r.name for r in plan.toolplane.alerts if r.state == "pending"}
        if change.alert is None or change.alert not in pending:
            raise ToolPlaneError(
                f"the alerting back-end was asked to fire {change.alert!r} (at {change.at:g}s), which is "
                f"not one of the scenario's pending alerts {sorted(pending)}"
            )
        rules = [
            dataclasses.replace(r, state="firing") if r.name == change.alert else r
            for r in plan.toolplane.alerts
        ]
        await self._hold(plan, rules, await self.vmauth.grant(plan.home_namespace))

    async def endpoint(self, plan: EnvironmentPlan, access: AgentAccess) -> ToolEndpoint | None:
        return None  # the metrics endpoint serves the alert and rule listings with the same token

    async def settle(self, plan: EnvironmentPlan) -> None:
        await self.vmauth.revoke(plan.home_namespace)

    async def cleanup(self, plan: EnvironmentPlan) -> None:
        await self.vmauth.revoke(plan.home_namespace)
        if plan.toolplane.alerts:
            self._file(plan).unlink(missing_ok=True)
            await self._reload()


@dataclass(frozen=True)
class MetricsSettings:
    """``directory``: the metrics back-end's (its grants file and vmauth's reload key); ``store``:
    VictoriaMetrics, where the harness writes; ``vmauth``: the agent's endpoint in front of it."""

    directory: Path
    store: str
    vmauth: str


@dataclass(frozen=True)
class AlertsSettings:
    """``rules``: where vmalert reads ``*.yaml``; ``vmalert``: vmalert's URL (reloaded over HTTP). The
    agent reads alerts through the metrics back-end's vmauth, which this back-end builds on."""

    rules: Path
    vmalert: str


def _vmauth(plane: Assembly) -> Vmauth:
    """The one vmauth of the plane, shared by the metrics and alerting adapters (one grant registry)."""
    metrics = plane.settings_of(registry.METRICS, MetricsSettings)
    return plane.shared(
        "vmauth", Vmauth, lambda: Vmauth(plane.client("backends"), metrics.directory, metrics.vmauth)
    )


def _prepare_metrics(entry: FileEntry, entries: Mapping[str, FileEntry]) -> None:
    """vmauth's reload key, readable by the pod's user only from the start and kept when there (a
    restarted pod keeps its volume), and its configuration: no user yet, the store and the alerts proxy
    as upstreams (grants already there are kept)."""
    key = entry.root / RELOAD_KEY
    if not key.exists():
        key.touch(mode=0o600)
        key.write_text(secrets.token_urlsafe(24))
    alerts = entries.get(registry.ALERTS)
    proxy = alerts.endpoints.get("alerts-proxy") if alerts is not None else None
    VmauthGrants(entry.root).set_upstreams(entry.endpoints["store"], proxy)


def _prepare_alerts(entry: FileEntry, entries: Mapping[str, FileEntry]) -> None:
    """vmalert's rules directory, with an empty rule file when it has none (vmalert refuses a pattern
    that matches nothing)."""
    rules = entry.root / RULES_DIR
    rules.mkdir(exist_ok=True)
    if not any(rules.glob("*.yaml")):
        (rules / "_empty.yaml").write_text("groups: []\n")


METRICS_FACTORY = Factory(
    registry.METRICS,
    MetricsSettings,
    build=lambda plane, s: Metrics(
        plane.client("backends"), s.store, _vmauth(plane), kube=plane.cluster.http
    ),
    parse=lambda e: MetricsSettings(e.root, e.endpoints["store"], e.endpoints["prometheus"]),
    prepare=_prepare_metrics,
)
ALERTS_FACTORY = Factory(
    registry.ALERTS,
    AlertsSettings,
    build=lambda plane, s: Alerts(plane.client("backends"), s.rules, s.vmalert, _vmauth(plane)),
    parse=lambda e: AlertsSettings(e.root / RULES_DIR, e.endpoints["vmalert"]),
    prepare=_prepare_alerts,
)
