"""Metrics and alerts: VictoriaMetrics single-node as the Prometheus-compatible store, vmauth as the
agent-facing endpoint (one bearer token per namespace, queries confined to that namespace's series),
vmalert evaluating alert rules over the stored series, and prom-label-proxy confining vmalert's alert
and rule listings to one namespace.

Called by :mod:`oasis_operator.devcluster.backends`. The harness writes series straight to the store
(``/api/v1/import``: JSON lines with explicit millisecond timestamps, so a series can be back-filled
into the past); an agent reads only through vmauth with its namespace's token. vmauth adds
``extra_label=namespace=<ns>`` to every query it forwards (a value the client sends for the same
argument is dropped), and only read paths are routed: writes, deletes and admin paths get 400.
Why these components: docs/decisions/0050-tool-plane-back-ends.md.
"""

from __future__ import annotations

import json
import os
import secrets
import signal
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2
import yaml

from oasis_operator.adapters.plumbing.vmauth_grants import VmauthGrants
from oasis_operator.core.toolplane.metrics import (
    AUTH_CONFIG,
    GRANTS_FILE,
    RELOAD_KEY,
    TENANT_LABEL,
    render_auth_config,
)
from oasis_operator.devcluster.backends.base import Backend, BackendContext, free_port, http_ok
from oasis_operator.devcluster.errors import SetupError
from oasis_operator.devcluster.processes import Component


# -- the command lines, shared with the Helm chart ----------------------------------------------------
# The chart (charts/oasis-operator, decision 0061) runs the same components as sidecars of the
# operator's pod; tests/shipping/test_chart_toolplane.py checks that its arguments are these.
def store_args(directory: Path, listen: str) -> list[str]:
    """VictoriaMetrics single-node: its data under ``directory/data``, listening on ``listen``."""
    return [
        f"-storageDataPath={directory / 'data'}",
        f"-httpListenAddr={listen}",
        # Declared series may lie far in the past; nothing is ever too old to keep.
        "-retentionPeriod=100y",
        # Serve what was just written: no 30 s hold-back of recent samples, no result cache that
        # would hide a later back-fill.
        "-search.latencyOffset=0s",
        "-search.disableCache",
        "-loggerLevel=WARN",
    ]


def vmauth_args(directory: Path, listen: str) -> list[str]:
    """vmauth reading its users from ``directory/vmauth.yml``. Its own pages (/flags shows its command
    line, /metrics its internals) and its reload answer only with the key in ``directory/reload-key``
    (read from the file, so the key never appears on a command line)."""
    key = f"file://{directory / RELOAD_KEY}"
    return [
        f"-auth.config={directory / AUTH_CONFIG}",
        f"-httpListenAddr={listen}",
        "-loggerLevel=WARN",
        *(f"-{page}AuthKey={key}" for page in ("flags", "metrics", "pprof", "reload")),
    ]


def vmalert_args(store_url: str, listen: str) -> list[str]:
    """vmalert over the store; run in its rules directory (``-rule=*.yaml`` is relative to it)."""
    return [
        "-rule=*.yaml",
        f"-datasource.url={store_url}",
        # Alert state is written back as ALERTS / ALERTS_FOR_STATE series (queryable by the agent like
        # any series of its namespace) and restored from there after a restart.
        f"-remoteWrite.url={store_url}",
        # Written within a second (the default is 5 s): a scenario's cleanup waits that long for a
        # last ALERTS sample before it checks that nothing of the namespace is left.
        "-remoteWrite.flushInterval=1s",
        f"-remoteRead.url={store_url}",
        "-notifier.blackhole",
        "-evaluationInterval=1s",
        f"-httpListenAddr={listen}",
        "-loggerLevel=WARN",
    ]


def label_proxy_args(vmalert_url: str, listen: str) -> list[str]:
    """prom-label-proxy confining vmalert's alert and rule listings to one namespace."""
    return [
        f"-label={TENANT_LABEL}",
        f"-query-param={TENANT_LABEL}",
        f"-upstream={vmalert_url}",
        f"-insecure-listen-address={listen}",
    ]


@dataclass(frozen=True)
class Series:
    """One declared time series: its labels (``__name__`` included) and samples (unix seconds, value)."""

    labels: Mapping[str, str]
    samples: Sequence[tuple[float, float]]

    def import_line(self) -> str:
        """The series in VictoriaMetrics' JSON-lines import format."""
        return json.dumps(
            {
                "metric": dict(self.labels),
                "values": [v for _, v in self.samples],
                "timestamps": [round(t * 1000) for t, _ in self.samples],
            }
        )


class MetricsBackend(Backend):
    name = "metrics"
    components = ("victoria-metrics", "vmauth")

    def __init__(self) -> None:
        super().__init__()
        self.store_url = ""
        self.url = ""  # the agent-facing endpoint (vmauth)
        self._auth_config: Path | None = None
        self._vmauth: Component | None = None
        # namespace -> token, in a file the operator's tool plane shares (decision 0055)
        self._grants_file: VmauthGrants | None = None
        self._internal_key = secrets.token_urlsafe(24)
        self.alerts_upstream: str | None = None  # prom-label-proxy in front of vmalert, once started

    def start(self, ctx: BackendContext) -> None:
        d = ctx.directory(self.name)
        port = free_port()
        self.store_url = f"http://127.0.0.1:{port}"
        self._run(
            ctx,
            "victoria-metrics",
            [str(ctx.bins.path("victoria-metrics")), *store_args(d, f"127.0.0.1:{port}")],
            http_ok(f"{self.store_url}/health"),
            "VictoriaMetrics /health",
        )

        self._auth_config = d / AUTH_CONFIG
        (d / GRANTS_FILE).unlink(missing_ok=True)  # no token of an earlier start survives
        self._grants_file = VmauthGrants(d)
        # The operator's tool plane (another process) makes vmauth re-read its users with this key.
        (d / RELOAD_KEY).write_text(self._internal_key)
        (d / RELOAD_KEY).chmod(0o600)
        self._write_auth_config()
        auth_port = free_port()
        self.url = f"http://127.0.0.1:{auth_port}"
        self._vmauth = self._run(
            ctx,
            "vmauth",
            [str(ctx.bins.path("vmauth")), *vmauth_args(d, f"127.0.0.1:{auth_port}")],
            http_ok(f"{self.url}/health"),
            "vmauth /health",
        )

    def endpoints(self) -> dict[str, str]:
        return {"prometheus": self.url, "store": self.store_url}

    # -- the harness side -------------------------------------------------------------------------
    def import_series(self, series: Iterable[Series]) -> None:
        """Write ``series`` into the store (any timestamps, past included) and make them searchable."""
        body = "\n".join(s.import_line() for s in series) + "\n"
        resp = httpx2.post(f"{self.store_url}/api/v1/import", content=body.encode(), timeout=30)
        if resp.status_code != 204:
            raise SetupError(f"VictoriaMetrics import: HTTP {resp.status_code}: {resp.text[:300]}")
        httpx2.get(f"{self.store_url}/internal/force_flush", timeout=30).raise_for_status()

    def grant(self, namespace: str, timeout: float = 30.0) -> str:
        """A bearer token whose queries see only the series labelled ``namespace=<namespace>``."""
        assert self._grants_file is not None
        token, changed = self._grants_file.grant(namespace)
        if changed:
            self.reload()
            self._wait_token(token, timeout)
        return token

    def revoke(self, namespace: str) -> None:
        assert self._grants_file is not None
        if self._grants_file.revoke(namespace):
            self.reload()

    def reload(self) -> None:
        """Rewrite vmauth's users and make it re-read them (SIGHUP)."""
        self._write_auth_config()
        if self._vmauth is not None:
            os.kill(self._vmauth.pid, signal.SIGHUP)

    def _wait_token(self, token: str, timeout: float) -> None:
        # vmauth re-reads its users on SIGHUP; until it has, the token is refused. A slow answer
        # (the store busy, the machine loaded) is a "not yet" like a refusal: only the deadline
        # turns either into a failure.
        deadline = time.monotonic() + timeout
        while True:
            try:
                resp = httpx2.get(
                    f"{self.url}/api/v1/status/buildinfo",
                    headers={"Authorization": f"Bearer {token}"},
                    timeout=5,
                )
                last = f"{resp.status_code}: {resp.text[:200]}"
                if resp.status_code == 200:
                    return
            except httpx2.TransportError as exc:
                last = f"{type(exc).__name__}: {exc}"
            if time.monotonic() > deadline:
                raise SetupError(f"vmauth did not accept a new token within {timeout}s (last answer {last})")
            time.sleep(0.05)

    def auth_config(self) -> dict[str, Any]:
        assert self._grants_file is not None
        return render_auth_config(self._grants_file.grants(), self.store_url, self.alerts_upstream)

    def _write_auth_config(self) -> None:
        # The grants file is rendered into vmauth's configuration whenever its upstreams or grants change.
        assert self._grants_file is not None
        self._grants_file.set_upstreams(self.store_url, self.alerts_upstream)


class AlertsBackend(Backend):
    """vmalert over the metrics store, its alert and rule listings confined per namespace."""

    name = "alerts"
    components = ("vmalert", "prom-label-proxy")
    requires = ("metrics",)

    def __init__(self) -> None:
        super().__init__()
        self.url = ""
        self.proxy_url = ""
        self._rules_dir: Path | None = None
        self._vmalert: Component | None = None
        self._metrics: MetricsBackend | None = None

    def start(self, ctx: BackendContext) -> None:
        metrics = ctx.running["metrics"]
        assert isinstance(metrics, MetricsBackend)
        self._metrics = metrics
        d = ctx.directory(self.name)
        self._rules_dir = d / "rules"
        self._rules_dir.mkdir(exist_ok=True)
        # vmalert refuses a -rule glob that matches nothing.
        (self._rules_dir / "_empty.yaml").write_text("groups: []\n")
        port = free_port()
        self.url = f"http://127.0.0.1:{port}"
        # Run in the rules directory with a relative pattern: the rules API shows each group's file
        # as given, and a bare "<namespace>.yaml" says nothing about the harness.
        self._vmalert = self._run(
            ctx,
            "vmalert",
            [str(ctx.bins.path("vmalert")), *vmalert_args(metrics.store_url, f"127.0.0.1:{port}")],
            http_ok(f"{self.url}/health"),
            "vmalert /health",
            cwd=self._rules_dir,
        )
        proxy_port = free_port()
        self.proxy_url = f"http://127.0.0.1:{proxy_port}"
        self._run(
            ctx,
            "prom-label-proxy",
            [str(ctx.bins.path("prom-label-proxy")), *label_proxy_args(self.url, f"127.0.0.1:{proxy_port}")],
            http_ok(f"{self.proxy_url}/api/v1/alerts?{TENANT_LABEL}=_"),
            "prom-label-proxy",
        )
        metrics.alerts_upstream = self.proxy_url
        metrics.reload()

    def endpoints(self) -> dict[str, str]:
        return {"vmalert": self.url, "alerts-proxy": self.proxy_url}

    def set_rules(self, key: str, groups: list[dict[str, Any]]) -> None:
        """Install (or replace) one scenario's rule groups, then make vmalert load them."""
        assert self._rules_dir is not None
        assert self._vmalert is not None
        path = self._rules_dir / f"{key}.yaml"
        tmp = path.with_suffix(".tmp")
        tmp.write_text(yaml.safe_dump({"groups": groups}, sort_keys=False))
        tmp.replace(path)
        os.kill(self._vmalert.pid, signal.SIGHUP)

    def remove_rules(self, key: str) -> None:
        assert self._rules_dir is not None
        assert self._vmalert is not None
        (self._rules_dir / f"{key}.yaml").unlink(missing_ok=True)
        os.kill(self._vmalert.pid, signal.SIGHUP)
