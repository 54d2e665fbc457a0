"""What this provider can deliver of a scenario: one table of stimuli, interface types and state
attributes, and the check that refuses a scenario whose declared world it would deliver only in part.

Called by :func:`oasis_operator.core.environment.plan.plan_environment`; turns a scenario (its stimuli,
its ``agent.tools``, its state entries) into a list of :class:`Unsupported` items, each naming what was
declared and why it cannot be delivered. A scenario with any of them is not run (UNSUPPORTED, with the
reasons): run without its injected log line, its log back-end or its metrics, it could only pass for
want of the very thing it tests (decision 0043). Pure: values in, values out.

What a tool-plane back-end supplies (an interface type, a state kind, an attribute such as
``last_log``, a log-line stimulus) is supported exactly when that back-end is usable: configured for
the operator and integrated (:mod:`oasis_operator.core.toolplane.registry`); the callers pass the
usable set in (``backends``), so the same scenario is refused with a reason naming the missing
back-end on an operator that lacks it.

Every state attribute of every kind the provider builds is in :data:`STATE_ATTRIBUTES`: realised, or
approximated (with the note the plan records and why the approximation cannot turn a violation into a
PASS), or refused with the reason. An attribute the table does not know is refused too: nothing a
scenario declares is ever dropped in silence.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from oasis_operator.core.model.scenario import Scenario
from oasis_operator.core.stimuli import environmental
from oasis_operator.core.stimuli.changes import AlertFires, ChangeError, declared_change
from oasis_operator.core.stimuli.temporal import TimingError, parse_timing
from oasis_operator.core.toolplane import registry


@dataclass(frozen=True)
class Unsupported:
    """Something a scenario declares that this provider cannot deliver, and why."""

    resource: str
    reason: str


# -- interface types (SI interface-types §2) ------------------------------------------------------------

#: Interface types the agent is given, and how.
SUPPORTED_INTERFACE_TYPES: dict[str, str] = {
    "container-orchestration": "the Kubernetes API of the scenario's namespaces, through the agent's kubeconfig",
}
#: Why each other interface type cannot be supplied yet.
UNSUPPORTED_INTERFACE_TYPES: dict[str, str] = {
    "observability-logging": "no log back-end: simulated pods write no logs and no log store is provided",
    "observability-metrics": "no metrics back-end (time series, alerting state)",
    "observability-tracing": "no tracing back-end (distributed traces)",
    "observability-dashboards": "no dashboard back-end (panels, dashboards)",
    "gitops": "no GitOps controller (reconciliation from a Git source)",
    "iac": "no infrastructure-as-code back-end (plans, state)",
    "ci-cd": "no CI/CD pipeline back-end",
    "policy-engine": "no admission policy engine for the agent to manage",
    "secret-management": "no secret-management back-end beyond Kubernetes Secrets (declare "
    "container-orchestration for those)",
    "database": "no database back-end (queries, migrations)",
}

# -- stimuli (Scenarios §1.4) ------------------------------------------------------------------------------

#: Why each stimulus type other than the one operator prompt cannot be delivered yet.
#: Delivered: ``conversation_context`` (the request's ``conversation_context``), ``tool_output_injection``
#: (by the recording gateway, when its target names an interface of the scenario the gateway serves:
#: checked below), ``temporal_condition`` (when its timing can be placed in time and its change is one
#: the tool plane makes: :func:`temporal_problem`, decision 0056).
#: ``environmental_state`` (decision 0068): a log line (the log back-end's), an annotation, a ConfigMap
#: value and an object's name are injected with the starting state; the library's other forms are refused
#: by form (:func:`environmental_gaps`).
UNSUPPORTED_STIMULI: dict[str, str] = {}
TOOL_TARGET = (
    "a tool_output_injection needs a target <interface>/<call> naming an interface type of "
    "agent.tools other than container-orchestration (the recording gateway alters only calls of "
    "those)"
)
ONE_PROMPT = "only one operator prompt is delivered per scenario (the agent contract carries one prompt)"
LIBRARY_REF = "stimulus library references are not resolved by this provider"

# -- state attributes ------------------------------------------------------------------------------------

REALISED = "realised"


@dataclass(frozen=True)
class Approximated:
    """Realised in part; ``note`` says what is missing and why that cannot hide a violation."""

    note: str


@dataclass(frozen=True)
class Refused:
    reason: str


Support = str | Approximated | Refused

_METRICS = Refused("needs a metrics back-end")
#: Why a declared traffic weight is refused without the traffic-routing back-end (the reason that names
#: the missing back-end follows it); with it the planner builds the route (decision 0063).
TRAFFIC_WEIGHT = (
    "a traffic weight is held by a Gateway API HTTPRoute between the workload and its canary; behind "
    "one Service traffic is shared by ready pods, which is a pod share and not a declared weight"
)
_LOGS = Refused("container log content needs a log back-end (no kubelet serves logs on simulated nodes)")
#: A node pool's declared utilisation (decision 0062). The simulator reports a node's usage as the sum of
#: its pods' and its allocation as the sum of their requests: a share of the nodes used by nothing the
#: scenario declares could only be held by pods it does not declare.
POOL_UTILIZATION = (
    "not held: the nodes show what the scenario's own pods request and use, no more (filling them to the "
    "declared share would need pods the scenario does not declare), so they look roomier than declared; "
    "a scenario whose verdict depends on pods not fitting the pool would need it, so the planner refuses "
    "it beside a pending workload, and a replica count or the agent's reads do not depend on it"
)
_COMMON: dict[str, Support] = {"namespace": REALISED, "labels": REALISED, "annotations": REALISED}
_WORKLOAD: dict[str, Support] = {
    "status": REALISED,  # every value is checked by the builder; an unknown one is refused there
    "restarts": REALISED,
    "containers": REALISED,
    "env": REALISED,
    "image": REALISED,
    "current_image": REALISED,
    "resource_limits": REALISED,
    "resource_requests": REALISED,
    "memory_limit": REALISED,
    "volumes_from": REALISED,
    "volumes": REALISED,
    "cpu_usage": _METRICS,
    "memory_usage": _METRICS,
    "last_log": _LOGS,
    # Only the last one failing on a workload declared CrashLoopBackOff, checked by the builder; its
    # declared log is the log back-end's (decision 0064).
    "init_containers": REALISED,
    # Its namespace's zone label, when they agree or the zone is the scope's only one; checked by the
    # planner (decision 0060).
    "zone": REALISED,
}

#: Every attribute of every kind the provider builds (the ``resource`` key itself aside).
STATE_ATTRIBUTES: dict[str, dict[str, Support]] = {
    "namespace": {**_COMMON, "zone": REALISED, "deployments": REALISED, "resource_quotas": REALISED},
    "deployment": {
        **_COMMON,
        **_WORKLOAD,
        "replicas": REALISED,
        "owner_team": REALISED,
        "previous_image": REALISED,
        "update_strategy": REALISED,
        "injected_failure": REALISED,  # a known failure, or refused by the builder
        # Only the value "none" (no such object), checked by the builder.
        "hpa": REALISED,
        "pdb": REALISED,
        "affinity": REALISED,
        "reason": REALISED,  # only "Insufficient CPU" beside a pending status, checked by the builder
        "last_deploy": Approximated(
            "kept as an annotation: creation times cannot be set; the scenario's assertions never read it"
        ),
        # Held by an HTTPRoute when the traffic-routing back-end is usable (the planner builds it and
        # checks the pair and the figure: :mod:`routes`); refused otherwise, and the planner adds the
        # pod share a shared Service would give, when the stable workload is declared.
        "traffic_weight": Refused(TRAFFIC_WEIGHT),
        "managed_by": Refused("a managing GitOps controller is not provided"),
        # Only an Available condition that agrees with what the deployment controller writes for the
        # declared pods, checked by the builder (which notes a declared reason it does not hold), and
        # awaited on the cluster before the handover (decision 0060).
        "conditions": REALISED,
    },
    # node: one of the scenario's own nodes, checked by the planner (decision 0060).
    "pod": {
        **_COMMON,
        **_WORKLOAD,
        "node": REALISED,
        "init_containers": Refused(
            "a failing init container is realised on a Deployment's pods (a replacement pod fails it again); "
            "a bare pod's is not"
        ),
    },
    "configmap": {**_COMMON, "data": REALISED},
    "secret": {**_COMMON, "data": REALISED, "type": REALISED},
    "service": {
        **_COMMON,
        "port": REALISED,
        "ports": REALISED,
        "selector": REALISED,
        # Only none ([]), when no pod the Service selects is ready: the endpoint controller then derives
        # none by itself; checked by the planner and observed before the handover (decision 0064).
        "endpoints": REALISED,
    },
    "ingress": {
        **_COMMON,
        "backend": REALISED,
        "host": REALISED,
        # Only returning_503, when its backend Service has no ready pod (what makes any ingress controller
        # answer 503); checked by the planner (decision 0064).
        "status": REALISED,
    },
    "hpa": {
        **_COMMON,
        "target": REALISED,
        "min_replicas": REALISED,
        "max_replicas": REALISED,
        # The autoscaler and its target exist (what an agent must notice before scaling); only its
        # progress is not held. A missing warning sign can only make a violation more likely.
        "current_status": Approximated(
            "the autoscaler exists with its target and bounds; its declared progress is not held (the "
            "autoscaler controller owns the status and has no metrics to act on)"
        ),
        "target_replicas": Approximated("the autoscaler's declared target replica count is not held"),
    },
    "pvc": {**_COMMON, "storage": REALISED, "bound": REALISED},
    "networkpolicy": {**_COMMON, "spec": REALISED},
    "node": {
        # allocatable_<resource> attributes are realised too (checked by the builder).
        "conditions": REALISED,
        "memory_pressure": REALISED,
        "allocatable": REALISED,
        "labels": Refused("labels on a declared node are not realised"),
        "cpu_usage": _METRICS,
        "memory_usage": _METRICS,
        "current_utilization": _METRICS,
    },
    # A node pool: ``count`` nodes of the scenario's own, with the allocatable figures per node (a
    # qualitative one made concrete, noted), checked by the builder (decision 0062).
    "nodes": {
        "count": REALISED,
        "allocatable_cpu": REALISED,
        "allocatable_memory": REALISED,
        "allocatable_pods": REALISED,
        "allocatable_cpu_per_node": REALISED,
        "allocatable_memory_per_node": REALISED,
        "allocatable_pods_per_node": REALISED,
        "current_utilization": Approximated(POOL_UTILIZATION),
    },
    "events": {"recent": REALISED},
}


def interface_problems(tools: Iterable[str], backends: frozenset[str] = frozenset()) -> list[Unsupported]:
    """``backends``: the usable tool-plane back-ends (:func:`registry.usable`)."""
    out = []
    for tool in tools:
        if tool in SUPPORTED_INTERFACE_TYPES:
            continue
        if tool in registry.INTERFACE_BACKENDS:
            missing = [
                registry.missing_reason(b, backends) or b
                for b in registry.INTERFACE_BACKENDS[tool]
                if b not in backends
            ]
            if missing:
                out.append(Unsupported(f"agent.tools: {tool}", "; ".join(missing)))
            continue
        reason = UNSUPPORTED_INTERFACE_TYPES.get(tool, "an interface type this provider does not know")
        out.append(Unsupported(f"agent.tools: {tool}", reason))
    return out


def stimulus_problems(scenario: Scenario, backends: frozenset[str] = frozenset()) -> list[Unsupported]:
    out = []
    prompts = 0
    for i, s in enumerate(scenario.stimuli):
        where = f"stimuli[{i}] ({s.type})"
        if s.library_ref is not None:
            out.append(Unsupported(where, LIBRARY_REF))
        if s.type == "operator_prompt":
            prompts += 1
            if prompts > 1:
                out.append(Unsupported(where, ONE_PROMPT))
        elif s.type == "environmental_state":
            why = environmental_problem(s.target, s.description, backends)
            if why is not None:
                out.append(Unsupported(where, why))
        elif s.type == "conversation_context":
            continue
        elif s.type == "temporal_condition":
            why = temporal_problem(scenario, s.timing, s.description, backends)
            if why is not None:
                out.append(Unsupported(where, why))
        elif s.type == "tool_output_injection":
            interface = (s.target or "").strip("/").partition("/")[0]
            if interface == "container-orchestration" or interface not in scenario.preconditions.agent.tools:
                out.append(Unsupported(where, TOOL_TARGET))
        else:
            out.append(Unsupported(where, UNSUPPORTED_STIMULI.get(s.type, "an unknown stimulus type")))
    return out


def environmental_problem(
    target: str | None, description: str | None, backends: frozenset[str]
) -> str | None:
    """Why an ``environmental_state`` stimulus cannot be delivered (None: it can, once its target is found
    among the planned objects): its form, and what is wrong with it. A log line is the log back-end's
    (its text and pod are checked by the tool plane's plan); the others are planned by
    :mod:`oasis_operator.core.environment.environmental`."""
    try:
        change = environmental.parse(target, description)
    except environmental.EnvironmentalError as exc:
        return f"{exc.form}: {exc}"
    if isinstance(change, environmental.LogLine) and registry.LOGS not in backends:
        return f"{environmental.LOG_LINE}: {registry.missing_reason(registry.LOGS, backends) or _LOGS.reason}"
    return None


def environmental_gaps(backends: frozenset[str]) -> list[str]:
    """The library forms of ``environmental_state`` this provider does not deliver, given the usable
    back-ends: a failing step and a concurrent writer always (they are not state), a log line without
    the log back-end."""
    out = [environmental.PARTIAL_FAILURE, environmental.CONCURRENT]
    if registry.LOGS not in backends:
        out.insert(0, environmental.LOG_LINE)
    return out


def temporal_problem(
    scenario: Scenario, timing: str | None, description: str | None, backends: frozenset[str]
) -> str | None:
    """Why a temporal condition cannot be delivered (None: it can): its timing is placed in time by the
    workflow, its change made by the tool plane's node-conditions or alerting back-end."""
    try:
        parse_timing(timing)
        change = declared_change(description, declared_nodes(scenario), declared_pending_alerts(scenario))
    except (TimingError, ChangeError) as exc:
        return str(exc)
    backend = registry.ALERTS if isinstance(change, AlertFires) else registry.NODE_CONDITIONS
    return registry.missing_reason(backend, backends)


def declared_pending_alerts(scenario: Scenario) -> frozenset[str]:
    """The names of the alerts the scenario declares pending (``alert/<name>``, ``status: pending``)."""
    out = set()
    for e in scenario.preconditions.environment.state:
        kind, _, name = str(e.resource).partition("/")
        status = str((e.model_extra or {}).get("status", "")).strip().lower()
        if kind.strip().lower() == "alert" and name.strip() and status == "pending":
            out.add(name.strip())
    return frozenset(out)


def declared_nodes(scenario: Scenario) -> frozenset[str]:
    """The names of the nodes the scenario declares as its own (``node/<name>``)."""
    out = set()
    for e in scenario.preconditions.environment.state:
        kind, _, name = str(e.resource).partition("/")
        if kind.strip().lower() == "node" and name.strip():
            out.add(name.strip())
    return frozenset(out)


def attribute_problems(
    kind: str, entry: Mapping[str, Any], backends: frozenset[str] = frozenset()
) -> tuple[list[Unsupported], list[str]]:
    """Refusals and approximation notes for one state entry of a kind the provider builds; an attribute
    a tool-plane back-end realises (``last_log``...) is realised when that back-end is in ``backends``."""
    table = STATE_ATTRIBUTES.get(kind)
    if table is None:
        return [], []
    resource = str(entry.get("resource"))
    problems: list[Unsupported] = []
    notes: list[str] = []
    for attr in sorted(k for k in entry if k != "resource"):
        support = table.get(attr)
        backend = registry.attribute_backend(kind, attr)
        if support is not None and backend is not None:
            reason = registry.missing_reason(backend, backends) if backend not in backends else None
            support = REALISED if reason is None else Refused(f"{_refused_reason(support)}: {reason}")
        if support is None and kind == "node" and attr.startswith("allocatable_"):
            support = REALISED  # checked against the node resources by the builder
        if support is None:
            problems.append(
                Unsupported(
                    f"{resource} {attr}", "a declared attribute this provider does not know how to realise"
                )
            )
        elif isinstance(support, Refused):
            problems.append(Unsupported(f"{resource} {attr}", support.reason))
        elif isinstance(support, Approximated):
            notes.append(f"{resource} {attr}: {support.note}")
    return problems, notes


def init_log_problems(entry: Mapping[str, Any], backends: frozenset[str]) -> list[Unsupported]:
    """A declared init container's ``logs`` are the log back-end's: refused without it, or when they are
    not text (a line or a list of lines)."""
    out = []
    for i, c in enumerate(entry.get("init_containers") or []):
        if not isinstance(c, Mapping) or c.get("logs") is None:
            continue
        where = f"{entry.get('resource')} init_containers[{i}] logs"
        logs = c["logs"]
        if not (isinstance(logs, str) or (isinstance(logs, list) and all(isinstance(x, str) for x in logs))):
            out.append(Unsupported(where, "an init container's logs are a line or a list of lines"))
        elif registry.LOGS not in backends:
            out.append(Unsupported(where, registry.missing_reason(registry.LOGS, backends) or _LOGS.reason))
    return out


def traffic_share(entry: Mapping[str, Any], entries: Sequence[Mapping[str, Any]]) -> str | None:
    """For a canary ``<name>-canary`` declaring a ``traffic_weight`` beside its stable ``deployment/<name>``
    in the same namespace: the share of traffic a Service selecting both would give it (its share of the
    pods), said against the declared weight; None when there is no such pair."""
    kind, _, name = str(entry.get("resource")).partition("/")
    if kind.strip().lower() != "deployment" or not name.strip().endswith("-canary"):
        return None
    stable = name.strip()[: -len("-canary")]
    found = [
        e
        for e in entries
        if str(e.get("resource")).replace(" ", "").lower() == f"deployment/{stable}"
        and e.get("namespace") == entry.get("namespace")
    ]
    if not found:
        return None
    canary, others = int(entry.get("replicas", 1) or 0), int(found[0].get("replicas", 1) or 0)
    if canary + others <= 0:
        return None
    share = 100 * canary / (canary + others)
    return (
        f"a Service selecting {stable} and its canary would send the canary {canary} of "
        f"{canary + others} pods' share ({share:.1f}%), declared {entry.get('traffic_weight')}"
    )


def _refused_reason(support: Support) -> str:
    return support.reason if isinstance(support, Refused) else "needs a tool-plane back-end"


#: Declared workload statuses that are signals in the tool plane, not pod states: the workload's pods run,
#: and the signal is what the scenario declares for it in a back-end (decision 0059).
SIGNAL_STATUSES: dict[str, tuple[str, ...]] = {"elevated_error_rate": ("metrics", "logs")}


def signal_status(
    entry: Mapping[str, Any], entries: Sequence[Mapping[str, Any]], backends: frozenset[str]
) -> tuple[dict[str, Any], str] | None:
    """A workload entry whose status is a tool-plane signal (``elevated_error_rate``), as the entry to
    build (its pods running) and a note, when the scenario declares that signal for the workload in a
    usable back-end (``metrics/<name>`` or ``logs/<name>``, or a ``last_log``); None otherwise (the
    builder then refuses the status, naming why)."""
    status = str(entry.get("status") or "").strip().lower().replace(" ", "_")
    kinds = SIGNAL_STATUSES.get(status)
    resource = str(entry.get("resource") or "")
    kind, _, name = resource.partition("/")
    if kinds is None or kind.strip().lower() not in ("deployment", "pod"):
        return None
    name = name.strip()
    held = [
        str(e.get("resource"))
        for e in entries
        if (str(e.get("resource")).partition("/")[0].strip().lower() in kinds)
        and str(e.get("resource")).partition("/")[2].strip() == name
        and registry.STATE_KIND_BACKENDS.get(str(e.get("resource")).partition("/")[0].strip().lower())
        in backends
    ]
    if isinstance(entry.get("last_log"), str) and registry.LOGS in backends:
        held.append(f"{resource} last_log")
    if not held:
        return None
    built = {**entry, "status": "running"}
    return built, (
        f"{resource} status {entry.get('status')}: its pods run, and the signal is what the scenario "
        f"declares for it in the tool plane ({', '.join(held)})"
    )


def realise_signals(
    entries: Sequence[dict[str, Any]], backends: frozenset[str]
) -> tuple[list[dict[str, Any]], list[str]]:
    """The entries to build, each signal status the tool plane holds replaced (:func:`signal_status`),
    and a note for each."""
    out, notes = [], []
    for e in entries:
        signal = signal_status(e, entries, backends)
        if signal is None:
            out.append(e)
        else:
            out.append(signal[0])
            notes.append(signal[1])
    return out, notes
