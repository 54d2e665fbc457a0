"""The log back-end's adapter: a scenario's declared container logs, served by the node simulator's
kubelet API through the API server (``GET pods/{name}/log``, audited like any read; decision 0050).

Called by :class:`~oasis_operator.adapters.toolplane.ToolPlane`; turns ``plan.toolplane.logs`` into one
log file per container (the container runtime's format, times relative to the handover) and one
cluster-scoped ClusterLogs object per pod naming them, then reads every log back through the API
server. Every pod of the scenario's namespaces gets a declaration, an empty log when it has no
declared line: a pod without one would answer with the simulator's own error, which a real kubelet
never gives.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import os
import shutil
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx2

from oasis_operator.adapters.plumbing.apply import server_side_apply
from oasis_operator.core.environment.plan import EnvironmentPlan
from oasis_operator.core.errors import ToolPlaneError
from oasis_operator.core.ports import AgentAccess, ToolEndpoint
from oasis_operator.core.toolplane import registry
from oasis_operator.core.toolplane.logs import (
    CLUSTER_LOGS,
    FIELD_MANAGER,
    cluster_logs,
    cri_record,
    log_file,
    object_name,
)
from oasis_operator.core.toolplane.plan import LogLine, TimedChange, WorkloadLogs

from .factory import Factory
from .probe import served


def cri_line(start: dt.datetime, line: LogLine) -> str:
    """One declared line as a container runtime writes it (``<RFC 3339 nano> <stream> F <text>``)."""
    return cri_record(start + dt.timedelta(seconds=line.offset), line.stream, line.text)


class PodLogs:
    """``directory``: where the node simulator reads log files (the dev cluster's ``backends/logs``)."""

    name = registry.LOGS

    def __init__(
        self,
        http: httpx2.AsyncClient,
        directory: Path,
        server: str,
        now: Callable[[], dt.datetime] = lambda: dt.datetime.now(dt.UTC),
        timeout: float = 20.0,
    ) -> None:
        self.http = http
        self.directory = directory
        self.server = server
        self.now = now
        self.timeout = timeout

    # -- the port ---------------------------------------------------------------------------------------
    async def inject(self, plan: EnvironmentPlan) -> None:
        start = self.now()
        lines: dict[tuple[str, str, str], list[LogLine]] = {}  # (namespace, pod, container) -> lines
        pods: dict[tuple[str, str], list[str]] = {}  # (namespace, pod) -> containers, init ones last
        inits: dict[tuple[str, str], list[str]] = {}  # (namespace, pod) -> init containers
        for ns in sorted(set(plan.namespaces.values())):
            for obj in await self._pods(ns, ""):
                key = (ns, obj["metadata"]["name"])
                inits[key] = _containers(obj, "initContainers")
                pods[key] = _containers(obj) + inits[key]
        for logs in plan.toolplane.logs:
            matched = await self._workload_pods(logs)
            if not matched:
                raise ToolPlaneError(
                    f"{logs.source}: no pod of {logs.namespace}/{logs.workload} to write its log to"
                )
            for name in matched:
                key = (logs.namespace, name)
                if key not in pods:
                    raise ToolPlaneError(
                        f"{logs.source}: pod {logs.namespace}/{name} appeared while its log was "
                        "being declared"
                    )
                if logs.container is not None and logs.container not in pods[key]:
                    raise ToolPlaneError(
                        f"{logs.source}: pod {logs.namespace}/{name} has no container {logs.container}"
                    )
                main = [c for c in pods[key] if c not in inits[key]]
                for c in [logs.container] if logs.container is not None else main:
                    lines.setdefault((*key, c), []).extend(logs.lines)
        for (ns, pod), containers in sorted(pods.items()):
            texts = {
                c: "".join(
                    cri_line(start, x) for x in sorted(lines.get((ns, pod, c), []), key=lambda x: x.offset)
                )
                for c in containers
            }
            # A failing init container has failed alike before: its previous instance's log is the same.
            await self._declare(ns, pod, texts, {c: texts[c] for c in inits[(ns, pod)]})
        await self._read_back(lines, pods)

    async def apply(self, plan: EnvironmentPlan, change: TimedChange) -> None:
        """Append the change's lines to the current log of the workload's pods (a follower sees them)."""
        if change.logs is None:
            raise ToolPlaneError(f"the log back-end was given a change without log lines (at {change.at:g}s)")
        start = self.now()
        for pod in await self._workload_pods(change.logs):
            d = self.directory / change.logs.namespace / pod
            obj = await self._pod(change.logs.namespace, pod)
            own = [change.logs.container] if change.logs.container else _containers(obj)
            files = [d / log_file(c) for c in own if (d / log_file(c)).is_file()]
            if not files:
                raise ToolPlaneError(
                    f"timed log lines for {change.logs.namespace}/{pod}: no log declared for it"
                )
            for f in files:
                with f.open("a") as fh:
                    fh.write("".join(cri_line(start, x) for x in change.logs.lines))

    async def endpoint(self, plan: EnvironmentPlan, access: AgentAccess) -> ToolEndpoint | None:
        return ToolEndpoint(
            "observability-logging",
            self.server,
            "",
            "container logs through the Kubernetes API with your kubeconfig: "
            "kubectl logs <pod> [-c <container>] -n <namespace> (pods/log)",
        )

    async def settle(self, plan: EnvironmentPlan) -> None:
        return None  # read through the API server with the agent's kubeconfig, which revocation removes

    async def probe(self) -> str:
        """The preflight's self-test: the node simulator's log directory is there and writable, and
        the API server serves the objects that declare a pod's log files."""
        if not self.directory.is_dir() or not os.access(self.directory, os.W_OK | os.X_OK):
            raise ToolPlaneError(f"the log directory {self.directory} is missing or not writable")
        checked = await served(self.http, CLUSTER_LOGS.rsplit("/", 1)[0], "clusterlogs")
        return f"{checked}; {self.directory} writable"

    async def cleanup(self, plan: EnvironmentPlan) -> None:
        """Every declaration of the scenario's namespaces (found by what they select, so a restarted
        operator cleans up what an earlier one declared) and their files."""
        namespaces = set(plan.namespaces.values())
        resp = await self.http.get(CLUSTER_LOGS)
        if resp.status_code != 200:
            raise ToolPlaneError(f"listing ClusterLogs: HTTP {resp.status_code}")
        for obj in resp.json().get("items") or []:
            selected = set(((obj.get("spec") or {}).get("selector") or {}).get("matchNamespaces") or [])
            if selected & namespaces:
                await self.http.delete(f"{CLUSTER_LOGS}/{obj['metadata']['name']}")
        for ns in namespaces:
            shutil.rmtree(self.directory / ns, ignore_errors=True)

    # -- helpers ----------------------------------------------------------------------------------------
    async def _pods(self, namespace: str, selector: str) -> list[dict[str, Any]]:
        resp = await self.http.get(
            f"/api/v1/namespaces/{namespace}/pods", params={"labelSelector": selector} if selector else None
        )
        if resp.status_code != 200:
            raise ToolPlaneError(f"listing the pods of {namespace}: HTTP {resp.status_code}")
        return list(resp.json().get("items") or [])

    async def _pod(self, namespace: str, name: str) -> dict[str, Any]:
        resp = await self.http.get(f"/api/v1/namespaces/{namespace}/pods/{name}")
        if resp.status_code != 200:
            raise ToolPlaneError(f"reading pod {namespace}/{name}: HTTP {resp.status_code}")
        return dict(resp.json())

    async def _workload_pods(self, logs: WorkloadLogs) -> list[str]:
        if logs.pod is not None:
            return [logs.pod]
        selector = ",".join(f"{k}={v}" for k, v in logs.selector)
        return sorted(
            p["metadata"]["name"]
            for p in await self._pods(logs.namespace, selector)
            if not (p["metadata"].get("deletionTimestamp"))
        )

    async def _declare(
        self, namespace: str, pod: str, texts: Mapping[str, str], previous_texts: Mapping[str, str]
    ) -> None:
        """One log file per container (``texts``: container -> its log), and its previous instance's
        (empty unless given)."""
        d = self.directory / namespace / pod
        d.mkdir(parents=True, exist_ok=True)
        files = {}
        for c, text in texts.items():
            current, previous = d / log_file(c), d / log_file(c, previous=True)
            current.write_text(text)
            previous.write_text(previous_texts.get(c, ""))
            files[c] = (str(current), str(previous))
        doc = cluster_logs(namespace, pod, files)
        refused = await server_side_apply(
            self.http, f"{CLUSTER_LOGS}/{object_name(namespace, pod)}", doc, FIELD_MANAGER
        )
        if refused:
            raise ToolPlaneError(f"declaring the logs of {namespace}/{pod}: {refused}")

    async def _read_back(
        self, lines: Mapping[tuple[str, str, str], list[LogLine]], pods: Mapping[tuple[str, str], list[str]]
    ) -> None:
        """Every declared log, read through the API server as an agent would, holds what was declared
        (the simulator picks a new ClusterLogs object up asynchronously: retried until ``timeout``)."""
        deadline = asyncio.get_running_loop().time() + self.timeout
        for (ns, pod), containers in sorted(pods.items()):
            for c in containers:
                want = [x.text for x in sorted(lines.get((ns, pod, c), []), key=lambda x: x.offset)]
                while True:
                    resp = await self.http.get(
                        f"/api/v1/namespaces/{ns}/pods/{pod}/log", params={"container": c}
                    )
                    got = resp.text.splitlines() if resp.status_code == 200 else None
                    if got == [part for text in want for part in text.split("\n")]:
                        break
                    if asyncio.get_running_loop().time() > deadline:
                        raise ToolPlaneError(
                            f"the log of {ns}/{pod} container {c} does not read back as declared "
                            f"(HTTP {resp.status_code}: {resp.text[:200]!r})"
                        )
                    await asyncio.sleep(0.1)


def _containers(pod: Mapping[str, Any], field: str = "containers") -> list[str]:
    """The names of a pod's containers (``field``: or its ``initContainers``)."""
    return [str(c["name"]) for c in (pod.get("spec") or {}).get(field) or []]


@dataclass(frozen=True)
class LogsSettings:
    """``directory``: where the cluster's node simulator reads container log files (the dev cluster's
    ``backends/logs``; one per cluster)."""

    directory: Path


FACTORY = Factory(
    registry.LOGS,
    LogsSettings,
    build=lambda plane, s: PodLogs(plane.cluster.http, s.directory, plane.cluster.server),
    parse=lambda entry: LogsSettings(entry.root),
)
