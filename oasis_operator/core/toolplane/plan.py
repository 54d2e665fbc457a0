"""What each tool-plane back-end must hold for one scenario, planned from the scenario alone.

Called by :func:`oasis_operator.core.environment.plan.plan_environment`; turns a typed scenario, its
namespace mapping and its planned Kubernetes objects into a :class:`ToolPlanePlan`: the container log
lines per workload (times relative to the scenario's start: the handover to the agent), the dashboards
(as the Kubernetes objects that carry them), the timed environmental changes, and what cannot be
planned (each an :class:`~oasis_operator.core.environment.support.Unsupported`, so the scenario is not
run without it). The adapters of ``adapters/toolplane/`` carry the plan out. Pure: values in, values out.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from oasis_operator.core.model.scenario import Scenario
from oasis_operator.core.stimuli.changes import NodeCondition
from oasis_operator.core.stimuli.environmental import quoted_text
from oasis_operator.core.toolplane import registry
from oasis_operator.core.toolplane.database import PlannedDatabase, plan_database
from oasis_operator.core.toolplane.memory import OomLeak, plan_leak
from oasis_operator.core.toolplane.metrics import (
    AlertRule,
    MetricSeries,
    ingress_series,
    plan_alert,
    plan_metrics,
)
from oasis_operator.core.toolplane.traces import PlannedSpan, plan_traces
from oasis_operator.core.toolplane.usage import (
    ContainerUsage,
    NodeUsage,
    plan_nodes,
    plan_usage,
    shared_containers,
    shares_of_nodes,
)

#: Seconds between two declared log lines (a declared list has an order, not times); the last line
#: of a list is this many seconds before the handover.
LINE_SPACING = 3.0
#: Where an untimed environmental change lands: just before the handover (it is part of the world the
#: agent is handed, and an agent that reads with ``--since`` sees it).
UNTIMED_OFFSET = -1.0
#: The label Grafana's dashboard sidecar (kube-prometheus-stack) discovers dashboard ConfigMaps by.
DASHBOARD_LABEL = "grafana_dashboard"
#: The well-known label a runbook's ConfigMap carries (what it is, not who made it).
RUNBOOK_LABEL = "app.kubernetes.io/component"

#: How often the GitOps controller re-applies the repository (and so reverts drift), as Flux's
#: examples set it.
GITOPS_INTERVAL = "1m"

_LOG_LINE = re.compile(r"log line\b", re.IGNORECASE)


def _injected_line(description: str) -> str | None:
    """The text quoted after "log line" in a stimulus's description (the environmental stimuli's reader)."""
    at = _LOG_LINE.search(description)
    return None if at is None else quoted_text(description[at.end() :])


@dataclass(frozen=True)
class Unsupported:
    """Something declared for a back-end that cannot be planned, and why (the environment plan turns
    it into its own refusal)."""

    resource: str
    reason: str


@dataclass(frozen=True)
class LogLine:
    """One line of a container log, ``offset`` seconds after the scenario's start (negative: before)."""

    offset: float
    text: str
    stream: str = "stdout"


@dataclass(frozen=True)
class WorkloadLogs:
    """The log of every container of a workload's pods (a Deployment's, selected by ``selector``, or
    one Pod's, named by ``pod``) in the physical ``namespace``."""

    source: str  # what declared it: "logs/web-app", "deployment/x last_log", "stimuli[0]"
    namespace: str
    workload: str
    selector: tuple[tuple[str, str], ...]
    pod: str | None
    lines: tuple[LogLine, ...]
    #: The one container whose log this is (an init container's); None: every main container's.
    container: str | None = None


@dataclass(frozen=True)
class Dashboard:
    """A dashboard, carried by a ConfigMap in the scenario's home namespace (decision 0050)."""

    source: str
    namespace: str
    name: str
    title: str
    panels: tuple[Mapping[str, Any], ...]

    def model(self) -> dict[str, Any]:
        """The dashboard in Grafana's JSON model: the declared title and panels, nothing else."""
        panels = []
        for i, p in enumerate(self.panels, start=1):
            panels.append(
                {"id": i, **p, "gridPos": {"h": 8, "w": 12, "x": 12 * ((i - 1) % 2), "y": 8 * ((i - 1) // 2)}}
            )
        return {
            "uid": self.name,
            "title": self.title,
            "panels": panels,
            "schemaVersion": 39,
            "version": 1,
            "time": {"from": "now-6h", "to": "now"},
        }

    def configmap(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": self.name, "namespace": self.namespace, "labels": {DASHBOARD_LABEL: "1"}},
            "data": {f"{self.name}.json": json.dumps(self.model(), indent=2, ensure_ascii=False)},
        }


@dataclass(frozen=True)
class Runbook:
    """A runbook: numbered steps in a ConfigMap ``runbook-<name>`` of the scenario's home namespace, read
    through the API server like any object (decision 0059)."""

    source: str
    namespace: str
    name: str
    steps: tuple[str, ...]

    @property
    def object_name(self) -> str:
        return f"runbook-{self.name}"

    def text(self) -> str:
        lines = [f"# Runbook: {self.name}", ""]
        lines += [f"{i}. {step}" for i, step in enumerate(self.steps, start=1)]
        return "\n".join(lines) + "\n"

    def configmap(self) -> dict[str, Any]:
        return {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {
                "name": self.object_name,
                "namespace": self.namespace,
                "labels": {RUNBOOK_LABEL: "runbook"},
            },
            "data": {"runbook.md": self.text()},
        }


@dataclass(frozen=True)
class GitOpsApp:
    """A GitOps application: ``objects`` (planned manifests of the entries declared ``managed_by:
    gitops``) kept in the git repository ``repo`` under ``path`` and applied into ``namespace`` by the
    GitOps controller, which corrects any direct edit (drift) at every ``interval``."""

    source: str
    name: str
    namespace: str
    repo: str
    path: str
    objects: tuple[Mapping[str, Any], ...]
    interval: str = GITOPS_INTERVAL


@dataclass(frozen=True)
class TimedChange:
    """An environmental change at ``at`` seconds after the handover (applied during the agent's turn):
    log lines (the log back-end), a node condition or a declared pending alert that starts firing (a
    temporal condition's change, decision 0056)."""

    at: float
    backend: str
    logs: WorkloadLogs | None = None
    node: NodeCondition | None = None
    alert: str | None = None


@dataclass(frozen=True)
class ToolPlanePlan:
    backends: frozenset[str] = frozenset()  # every back-end the scenario needs
    logs: tuple[WorkloadLogs, ...] = ()  # before the turn
    dashboards: tuple[Dashboard, ...] = ()
    runbooks: tuple[Runbook, ...] = ()
    gitops: tuple[GitOpsApp, ...] = ()
    series: tuple[MetricSeries, ...] = ()  # back-filled before the turn (decision 0055)
    #: Workloads leaking memory until OOM killed: their pods' series, made once the pods' recorded
    #: terminations are read (decision 0067).
    leaks: tuple[OomLeak, ...] = ()
    alerts: tuple[AlertRule, ...] = ()
    spans: tuple[PlannedSpan, ...] = ()  # loaded into the scenario's own trace store
    usage: tuple[ContainerUsage, ...] = ()  # what the simulated containers use (decision 0059)
    nodes: tuple[NodeUsage, ...] = ()  # what the scenario's own nodes report beyond it (decision 0065)
    databases: tuple[PlannedDatabase, ...] = ()  # the scenario's own database (decision 0066)
    schedule: tuple[TimedChange, ...] = ()  # during the turn, by time
    problems: tuple[Unsupported, ...] = field(default=())
    notes: tuple[str, ...] = ()  # approximations the plan makes, for the provider notes

    @property
    def empty(self) -> bool:
        return not (
            self.logs
            or self.dashboards
            or self.runbooks
            or self.gitops
            or self.series
            or self.leaks
            or self.alerts
            or self.spans
            or self.usage
            or self.nodes
            or self.databases
            or self.schedule
        )


def needed_backends(scenario: Scenario) -> frozenset[str]:
    """The back-ends a scenario needs: for its interface types, its non-Kubernetes state, the
    attributes a back-end realises, and its environmental log lines."""
    out: set[str] = set()
    for tool in scenario.preconditions.agent.tools or ():
        out.update(registry.INTERFACE_BACKENDS.get(tool, ()))
    for e in _entries(scenario):
        kind, _ = _kind_name(e["resource"])
        if kind in registry.STATE_KIND_BACKENDS:
            out.add(registry.STATE_KIND_BACKENDS[kind])
        out.update(b for b in (registry.attribute_backend(kind, a) for a in e) if b is not None)
        if kind == "deployment" and _init_logs(e):
            out.add(registry.LOGS)
    for s in scenario.stimuli:
        if s.type == "environmental_state" and _is_log_target(s.target):
            out.add(registry.LOGS)
    return frozenset(out)


def plan_toolplane(
    scenario: Scenario, mapping: Mapping[str, str], home: str, objects: Sequence[Mapping[str, Any]]
) -> ToolPlanePlan:
    """``mapping``: logical -> physical namespace; ``home``: the physical home namespace; ``objects``:
    the planned Kubernetes objects (where a log finds its workload's pods)."""
    acc = _Planned(
        objects=objects,
        workloads=_declared_workloads(scenario, mapping, home),
        mapping=mapping,
        home=home,
        configmaps={
            (o["metadata"].get("namespace"), o["metadata"]["name"])
            for o in objects
            if o.get("kind") == "ConfigMap"
        },
        metrics=registry.METRICS in needed_backends(scenario),
    )
    for e in _entries(scenario):
        _plan_entry(e, acc)
    problems = acc.problems
    problems += [Unsupported(u.resource, u.reason) for u in shared_containers(acc.usages, objects)]
    node_entries = [e for e in _entries(scenario) if _kind_name(e["resource"])[0] == "node"]
    nodes, node_problems = plan_nodes(node_entries, acc.usages, objects)
    problems += [Unsupported(u.resource, u.reason) for u in node_problems]
    gitops, gitops_problems = _gitops(_entries(scenario), mapping, home, objects)
    problems += gitops_problems
    for where, workload, line in _injected_log_lines(scenario, objects, home, problems):
        acc.add_logs(where, home, workload, [line])

    return ToolPlanePlan(
        backends=needed_backends(scenario),
        logs=tuple(acc.logs.values()),
        dashboards=tuple(acc.dashboards),
        runbooks=tuple(acc.runbooks),
        gitops=tuple(gitops),
        series=tuple(acc.series),
        leaks=tuple(acc.leaks),
        alerts=tuple(acc.alerts),
        spans=tuple(acc.spans),
        usage=tuple(acc.usages),
        nodes=tuple(nodes),
        databases=tuple(acc.databases),
        notes=tuple(shares_of_nodes(acc.usages, objects)),
        schedule=(),
        problems=tuple(problems),
    )


def _plan_entry(e: Mapping[str, Any], acc: _Planned) -> None:
    """One declared state entry: the usage it declares, and what a back-end holds of it."""
    kind, name = _kind_name(e["resource"])
    ns_logical = e.get("namespace") if isinstance(e.get("namespace"), str) else None
    namespace = acc.mapping.get(ns_logical or "", acc.home)
    usage = plan_usage(e, kind, name, namespace, acc.objects)
    if isinstance(usage, ContainerUsage):
        acc.usages.append(usage)
    elif usage is not None:
        acc.problems.append(Unsupported(usage.resource, usage.reason))
    if kind == "logs":
        _plan_logs(e, name, namespace, acc)
    elif kind in ("deployment", "pod") and (isinstance(e.get("last_log"), str) or _init_logs(e)):
        if isinstance(e.get("last_log"), str):
            acc.add_logs(f"{e['resource']} last_log", namespace, name, _spaced([e["last_log"]]))
        for where, container, lines in _init_logs(e):
            acc.add_logs(where, namespace, name, _spaced(lines), container)
    elif kind == "ingress" and acc.metrics and namespace == acc.home:
        acc.series += ingress_series(e, name, namespace, acc.objects)
    else:
        _plan_observability(e, kind, name, namespace, acc.home, acc.configmaps, acc)


def _plan_logs(e: Mapping[str, Any], name: str, namespace: str, acc: _Planned) -> None:
    """A ``logs/<workload>`` entry: its lines, spaced before the start, in the workload's log."""
    entries = e.get("entries")
    if not isinstance(entries, list) or not all(isinstance(x, str) for x in entries):
        acc.problems.append(Unsupported(e["resource"], "a logs entry needs `entries`, a list of log lines"))
    elif unknown := sorted(set(e) - {"resource", "namespace", "entries"}):
        acc.problems.append(Unsupported(e["resource"], f"unknown attributes {unknown} of a logs entry"))
    else:
        acc.add_logs(e["resource"], namespace, name, _spaced(entries))


@dataclass
class _Planned:
    """What the entries of the back-ends plan to (and what they cannot), and what planning them reads:
    the namespace mapping, the home namespace, the planned objects, the declared ConfigMaps (a dashboard
    or runbook must not take one's name), whether the scenario needs the metrics back-end."""

    problems: list[Unsupported] = field(default_factory=list)
    #: (namespace, workload, container or "") -> its log, lines merged in time order.
    logs: dict[tuple[str, str, str], WorkloadLogs] = field(default_factory=dict)
    dashboards: list[Dashboard] = field(default_factory=list)
    runbooks: list[Runbook] = field(default_factory=list)
    series: list[MetricSeries] = field(default_factory=list)
    alerts: list[AlertRule] = field(default_factory=list)
    spans: list[PlannedSpan] = field(default_factory=list)
    databases: list[PlannedDatabase] = field(default_factory=list)
    leaks: list[OomLeak] = field(default_factory=list)
    usages: list[ContainerUsage] = field(default_factory=list)
    #: The declared deployments and pods by physical namespace and name (a leak's workload).
    workloads: dict[str, dict[str, Mapping[str, Any]]] = field(default_factory=dict)
    objects: Sequence[Mapping[str, Any]] = ()
    mapping: Mapping[str, str] = field(default_factory=dict)
    home: str = ""
    configmaps: set[tuple[Any, Any]] = field(default_factory=set)
    metrics: bool = False

    def add_logs(
        self,
        source: str,
        namespace: str,
        workload: str,
        lines: Iterable[LogLine],
        container: str | None = None,
    ) -> None:
        """``lines`` in the log of ``workload``'s containers (or of its one ``container``), namespaces in
        their text made physical; a workload that is not declared is a problem."""
        lines = [LogLine(x.offset, rewrite_namespaces(x.text, self.mapping), x.stream) for x in lines]
        target = _workload(self.objects, namespace, workload)
        if target is None:
            self.problems.append(
                Unsupported(
                    source,
                    f"no declared deployment or pod {workload} in its namespace "
                    "whose containers could write this log",
                )
            )
            return
        selector, pod = target
        key = (namespace, workload, container or "")
        before = self.logs.get(key)
        merged = tuple(sorted([*(before.lines if before else ()), *lines], key=lambda x: x.offset))
        self.logs[key] = WorkloadLogs(
            before.source if before else source, namespace, workload, selector, pod, merged, container
        )


def _plan_database(e: Mapping[str, Any], name: str, acc: _Planned) -> None:
    planned = plan_database(e, name)
    if not isinstance(planned, PlannedDatabase):
        acc.problems.append(Unsupported(planned.resource, planned.reason))
    elif acc.databases:
        acc.problems.append(
            Unsupported(planned.source, "one database-migration entry per scenario (its one database)")
        )
    else:
        acc.databases.append(planned)


def _declared_workloads(
    scenario: Scenario, mapping: Mapping[str, str], home: str
) -> dict[str, dict[str, Mapping[str, Any]]]:
    """The declared deployments and pods, by physical namespace and name."""
    out: dict[str, dict[str, Mapping[str, Any]]] = {}
    for e in _entries(scenario):
        kind, name = _kind_name(e["resource"])
        if kind in ("deployment", "pod"):
            ns = mapping.get(e["namespace"] if isinstance(e.get("namespace"), str) else "", home)
            out.setdefault(ns, {})[name] = e
    return out


def _plan_observability(
    e: Mapping[str, Any],
    kind: str,
    name: str,
    namespace: str,
    home: str,
    declared_configmaps: set[tuple[Any, Any]],
    acc: _Planned,
) -> None:
    """One dashboard, runbook, metrics, alert or traces entry (anything else is not the tool plane's)."""
    if kind == "runbook":
        _plan_runbook(e, name, home, declared_configmaps, acc)
    elif kind == "database-migration":
        _plan_database(e, name, acc)
    elif kind == "dashboard":
        built = _dashboard(e, name, home)
        if isinstance(built, Unsupported):
            acc.problems.append(built)
        elif (home, name) in declared_configmaps:
            acc.problems.append(
                Unsupported(e["resource"], f"a declared ConfigMap {name} already has the dashboard's name")
            )
        else:
            acc.dashboards.append(built)
    elif kind in ("metrics", "alert") and namespace != home:
        acc.problems.append(
            Unsupported(
                e["resource"],
                "the agent's metrics endpoint is confined to the scenario's "
                "home namespace; series or alerts of another namespace "
                "could not be read",
            )
        )
    elif kind == "traces":
        planned_spans, span_problems = plan_traces(e, name)
        acc.spans += planned_spans
        acc.problems.extend(Unsupported(p.resource, p.reason) for p in span_problems)
    elif kind == "metrics":
        leak = plan_leak(e, namespace, acc.workloads.get(namespace, {}), acc.objects)
        if isinstance(leak, OomLeak):
            acc.leaks.append(leak)
        elif leak is not None:
            acc.problems.append(Unsupported(leak.resource, leak.reason))
        planned, metric_problems = plan_metrics(e, namespace)
        acc.series += planned
        acc.problems.extend(Unsupported(p.resource, p.reason) for p in metric_problems)
    elif kind == "alert":
        rule = plan_alert(e, name, namespace)
        if isinstance(rule, AlertRule):
            acc.alerts.append(rule)
        else:
            acc.problems.append(Unsupported(rule.resource, rule.reason))


def _injected_log_lines(
    scenario: Scenario, objects: Sequence[Mapping[str, Any]], home: str, problems: list[Unsupported]
) -> list[tuple[str, str, LogLine]]:
    """The log lines ``environmental_state`` stimuli inject into a pod's log: (where, workload, line)."""
    out: list[tuple[str, str, LogLine]] = []
    for i, s in enumerate(scenario.stimuli):
        if s.type != "environmental_state" or not _is_log_target(s.target):
            continue
        where = f"stimuli[{i}] ({s.type})"
        text = _injected_line(str(getattr(s, "description", "") or ""))
        if text is None:
            problems.append(
                Unsupported(
                    where,
                    "the injected log line is not quoted in the description "
                    '(expected: log line ... "<text>")',
                )
            )
            continue
        _, name = _kind_name(str(s.target).rsplit("/", 1)[0])
        workload = _owning_workload(objects, home, name)
        if workload is None:
            problems.append(
                Unsupported(
                    where,
                    f"target {s.target}: no declared deployment or pod in the home "
                    "namespace whose pod that is",
                )
            )
            continue
        out.append((where, workload, LogLine(UNTIMED_OFFSET, text, _stream(text))))
    return out


def rewrite_namespaces(text: str, mapping: Mapping[str, str]) -> str:
    """Logical namespace names in declared data replaced by the physical ones, where they name a
    namespace: a whole word (as in the prompt) or the namespace part of a service's DNS name
    (``orders-service.orders.svc.cluster.local``). ``default`` is an English word: only its DNS form
    is rewritten. Without this, an agent following a log to another namespace would reach a name
    that does not exist, and a forbidden crossing could never be seen."""
    for logical in sorted(mapping, key=len, reverse=True):
        physical = mapping[logical]
        text = re.sub(rf"(?<=\.){re.escape(logical)}(?=\.svc\b)", physical, text)
        if logical != "default":
            text = re.sub(rf"(?<![\w/.-]){re.escape(logical)}(?![\w-])", physical, text)
    return text


# -- helpers ------------------------------------------------------------------------------------------
def _entries(scenario: Scenario) -> list[dict[str, Any]]:
    return [e.model_dump(by_alias=True, exclude_none=True) for e in scenario.preconditions.environment.state]


def _kind_name(resource: str) -> tuple[str, str]:
    kind, _, name = resource.partition("/")
    return kind.strip().lower(), name.strip()


def _is_log_target(target: str | None) -> bool:
    return bool(target) and str(target).startswith("pod/") and str(target).endswith("/logs")


def _init_logs(e: Mapping[str, Any]) -> list[tuple[str, str, list[str]]]:
    """The declared log of each init container of a workload: (where declared, container, lines); a log
    that is not text is refused by the planner (:func:`~oasis_operator.core.environment.support.init_log_problems`)."""
    out = []
    for i, c in enumerate(e.get("init_containers") or []):
        if not isinstance(c, Mapping) or not isinstance(c.get("name"), str):
            continue
        logs = c.get("logs")
        lines = [logs] if isinstance(logs, str) else logs
        if isinstance(lines, list) and lines and all(isinstance(x, str) for x in lines):
            out.append((f"{e['resource']} init_containers[{i}] logs", c["name"], lines))
    return out


def _spaced(entries: Sequence[str]) -> list[LogLine]:
    """Declared lines in order, ``LINE_SPACING`` seconds apart, the last one that long before the start.
    A line starting with ERROR or FATAL goes to stderr, as an application's logger would write it."""
    n = len(entries)
    return [
        LogLine(-LINE_SPACING * (n - i), text.rstrip("\n"), _stream(text)) for i, text in enumerate(entries)
    ]


def _stream(text: str) -> str:
    return "stderr" if text.lstrip().upper().startswith(("ERROR", "FATAL")) else "stdout"


def _workload(
    objects: Sequence[Mapping[str, Any]], namespace: str, name: str
) -> tuple[tuple[tuple[str, str], ...], str | None] | None:
    for o in objects:
        meta = o.get("metadata") or {}
        if meta.get("namespace") != namespace or meta.get("name") != name:
            continue
        if o.get("kind") == "Deployment":
            labels = ((o.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
            return tuple(sorted((str(k), str(v)) for k, v in labels.items())), None
        if o.get("kind") == "Pod":
            return (), name
    return None


def _owning_workload(objects: Sequence[Mapping[str, Any]], namespace: str, pod: str) -> str | None:
    """The declared workload a pod name belongs to: the pod itself, or the Deployment whose generated
    pod names it follows (``<deployment>-...``); the longest such name wins."""
    names = sorted(
        (
            str(o["metadata"]["name"])
            for o in objects
            if o.get("kind") in ("Deployment", "Pod") and o["metadata"].get("namespace") == namespace
        ),
        key=len,
        reverse=True,
    )
    if pod in names:
        return pod
    return next((n for n in names if pod.startswith(f"{n}-")), None)


def _gitops(
    entries: Sequence[Mapping[str, Any]],
    mapping: Mapping[str, str],
    home: str,
    objects: Sequence[Mapping[str, Any]],
) -> tuple[list[GitOpsApp], list[Unsupported]]:
    """One application per ``gitops-application`` entry, holding the objects of its namespace that
    are declared ``managed_by: gitops``."""
    problems: list[Unsupported] = []
    managed: dict[str, list[Mapping[str, Any]]] = {}  # physical namespace -> objects
    apps = []
    for e in entries:
        kind, name = _kind_name(str(e["resource"]))
        namespace = mapping.get(str(e.get("namespace") or ""), home)
        if kind == "gitops-application":
            apps.append((e, name, namespace))
        elif "managed_by" in e:
            _managed(e, kind, name, namespace, objects, managed, problems)
    out = []
    for e, name, namespace in apps:
        app = _gitops_app(e, name, namespace, managed)
        if isinstance(app, GitOpsApp):
            out.append(app)
        else:
            problems.append(app)
    problems += [
        Unsupported(
            f"{o['kind'].lower()}/{o['metadata']['name']} managed_by",
            "no gitops-application entry manages its namespace",
        )
        for objs in managed.values()
        for o in objs
    ]
    return out, problems


def _managed(
    e: Mapping[str, Any],
    kind: str,
    name: str,
    namespace: str,
    objects: Sequence[Mapping[str, Any]],
    managed: dict[str, list[Mapping[str, Any]]],
    problems: list[Unsupported],
) -> None:
    """An entry declared ``managed_by``: a deployment managed by gitops joins its namespace's objects."""
    if e["managed_by"] != "gitops" or kind != "deployment":
        problems.append(
            Unsupported(f"{e['resource']} managed_by", "only a deployment managed_by gitops is realised")
        )
        return
    found = [
        o
        for o in objects
        if o.get("kind") == "Deployment"
        and o["metadata"].get("name") == name
        and o["metadata"].get("namespace") == namespace
    ]
    managed.setdefault(namespace, []).extend(found)


def _gitops_app(
    e: Mapping[str, Any], name: str, namespace: str, managed: dict[str, list[Mapping[str, Any]]]
) -> GitOpsApp | Unsupported:
    """A ``gitops-application`` entry's application, taking its namespace's managed objects."""
    resource = str(e["resource"])
    if unknown := sorted(set(e) - {"resource", "namespace", "sync_status", "source_repo", "source_path"}):
        return Unsupported(resource, f"unknown attributes {unknown} of a gitops-application entry")
    if str(e.get("sync_status", "synced")).lower() != "synced":
        return Unsupported(
            resource,
            "only a synced application is realised (the controller applies what the repository holds)",
        )
    if not managed.get(namespace):
        return Unsupported(resource, "no object of its namespace is declared managed_by: gitops")
    repo = re.sub(r"\.git$", "", str(e.get("source_repo") or name).rstrip("/").rsplit("/", 1)[-1]) or name
    path = str(e.get("source_path") or ".").strip("/") or "."
    return GitOpsApp(resource, name, namespace, repo, path, tuple(managed.pop(namespace)))


def _dashboard(entry: Mapping[str, Any], name: str, home: str) -> Dashboard | Unsupported:
    resource = str(entry["resource"])
    if unknown := sorted(set(entry) - {"resource", "title", "panels", "namespace"}):
        return Unsupported(resource, f"unknown attributes {unknown} of a dashboard entry")
    panels: list[Mapping[str, Any]] = []
    for i, p in enumerate(entry.get("panels") or []):
        if isinstance(p, str):
            panels.append({"title": p, "type": "timeseries"})
        elif isinstance(p, Mapping) and isinstance(p.get("title"), str):
            panels.append({"type": "stat", **{str(k): v for k, v in p.items()}})
        else:
            return Unsupported(f"{resource} panels[{i}]", "a panel is a name or a mapping with a title")
    title = entry.get("title")
    title = " ".join(str(title).split()) if isinstance(title, str) else name
    return Dashboard(resource, home, name, title, tuple(panels))


def _plan_runbook(
    entry: Mapping[str, Any], name: str, home: str, declared_configmaps: set[tuple[Any, Any]], acc: _Planned
) -> None:
    resource = str(entry["resource"])
    steps = entry.get("steps")
    if unknown := sorted(set(entry) - {"resource", "steps", "namespace"}):
        acc.problems.append(Unsupported(resource, f"unknown attributes {unknown} of a runbook entry"))
    elif not isinstance(steps, list) or not steps or not all(isinstance(x, str) for x in steps):
        acc.problems.append(Unsupported(resource, "a runbook entry needs `steps`, a list of sentences"))
    elif (home, f"runbook-{name}") in declared_configmaps:
        acc.problems.append(
            Unsupported(resource, f"a declared ConfigMap runbook-{name} already has the runbook's name")
        )
    else:
        acc.runbooks.append(Runbook(resource, home, name, tuple(" ".join(x.split()) for x in steps)))
