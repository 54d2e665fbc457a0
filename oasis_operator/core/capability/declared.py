"""What a scenario declares that a capability behaviour needs as its ground truth.

Used by the behaviour builders, at plan time (a scenario that lacks what a behaviour needs is refused
at validation with the reason, never judged against nothing). Everything here reads the typed
scenario (:class:`PlanInput`): its declared state entries — labels, annotations, log entries,
dashboard panels, trace spans, runbook steps, images — and its state assertions. Facts, never text:
what the profile's scenarios declare is data about their world.
"""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from oasis_operator.core.errors import UnsupportedEntry
from oasis_operator.core.model.base import dump
from oasis_operator.core.model.scenario import StateEntry
from oasis_operator.core.verification.plan_input import PlanInput

REASON_NO_GROUND_TRUTH = "behavior_needs_ground_truth"

#: Label and annotation keys that name who owns a service, and how to reach them.
OWNER_KEY = re.compile(r"team|owner|squad", re.IGNORECASE)
CONTACT_KEY = re.compile(r"contact|escalation|oncall|on-call|channel|slack|pager|email", re.IGNORECASE)
#: Label keys that classify an environment.
ENV_KEYS = ("env", "environment", "stage", "tier-env")
#: Log levels that mark an entry as a signal (anything else is noise).
SIGNAL_LEVELS = ("ERROR", "FATAL", "CRITICAL", "WARN", "WARNING", "PANIC")
#: Panel states that are not a concern.
NORMAL_STATES = frozenset({"normal", "ok", "healthy", "good"})


def missing(behavior: str, what: str) -> UnsupportedEntry:
    return UnsupportedEntry(
        REASON_NO_GROUND_TRUTH, f"{behavior} needs {what} in the scenario's declared state"
    )


def extra(entry: StateEntry) -> dict[str, Any]:
    """The profile-vocabulary keys of a state entry (labels, annotations, entries, panels...)."""
    return dict(entry.model_extra or {})


def entries(scenario: PlanInput, kind: str) -> Iterator[tuple[str, StateEntry]]:
    """State entries of one kind (``namespace``, ``logs``, ``traces``...), with their names."""
    for entry in scenario.state:
        head, _, name = entry.resource.partition("/")
        if head == kind:
            yield name, entry


def workloads(scenario: PlanInput) -> list[str]:
    """Names of the Deployments the scenario declares."""
    return [name for name, _ in entries(scenario, "deployment")]


def declared_names(scenario: PlanInput) -> list[str]:
    """Every object name the scenario declares (``<kind>/<name>``'s name), in order."""
    return [e.resource.partition("/")[2] for e in scenario.state if "/" in e.resource]


def _mapping(value: Any) -> dict[str, str]:
    return {str(k): str(v) for k, v in value.items()} if isinstance(value, Mapping) else {}


def namespace_metadata(scenario: PlanInput) -> list[tuple[str, dict[str, str], dict[str, str]]]:
    """(logical name, labels, annotations) of every declared namespace."""
    out = []
    for name, entry in entries(scenario, "namespace"):
        data = extra(entry)
        out.append((name, _mapping(data.get("labels")), _mapping(data.get("annotations"))))
    return out


def owners(scenario: PlanInput) -> list[str]:
    """Values of the ownership labels and annotations the scenario declares on its namespaces."""
    found = []
    for _, labels, notes in namespace_metadata(scenario):
        found += [
            v for k, v in {**labels, **notes}.items() if OWNER_KEY.search(k) and not CONTACT_KEY.search(k)
        ]
    return list(dict.fromkeys(found))


def contacts(scenario: PlanInput) -> list[str]:
    """Values of the contact and escalation labels and annotations on its namespaces."""
    found = []
    for _, labels, notes in namespace_metadata(scenario):
        found += [v for k, v in {**labels, **notes}.items() if CONTACT_KEY.search(k)]
    return list(dict.fromkeys(found))


def environments(scenario: PlanInput) -> list[str]:
    """The environment classifications the scenario's namespaces declare (``production``)."""
    found = []
    for _, labels, _ in namespace_metadata(scenario):
        found += [v for k, v in labels.items() if k.lower() in ENV_KEYS]
    return list(dict.fromkeys(found))


def environment_words(value: str) -> list[str]:
    """The words an agent may use for a classification: the value, and ``prod`` for production."""
    words = [value]
    if value.lower() in ("production", "prod"):
        words += ["production", "prod"]
    return list(dict.fromkeys(words))


@dataclass(frozen=True, slots=True)
class LogEntry:
    level: str
    message: str

    @property
    def signal(self) -> bool:
        return self.level.upper() in SIGNAL_LEVELS


def log_entries(scenario: PlanInput) -> list[LogEntry]:
    """Declared log lines (``logs/*`` entries and a pod's ``last_log``), split into level and message."""
    lines: list[str] = []
    for _, entry in entries(scenario, "logs"):
        lines += [str(x) for x in extra(entry).get("entries") or []]
    for entry in scenario.state:
        last = extra(entry).get("last_log")
        if isinstance(last, str):
            lines.append(last)
    out = []
    for line in lines:
        level, sep, message = line.partition(":")
        if sep and re.fullmatch(r"[A-Za-z]+", level.strip()):
            out.append(LogEntry(level.strip(), message.strip()))
        else:
            out.append(LogEntry("", line.strip()))
    return out


@dataclass(frozen=True, slots=True)
class Panel:
    title: str
    status: str

    @property
    def concerning(self) -> bool:
        return self.status.lower() not in NORMAL_STATES


def panels(scenario: PlanInput) -> list[Panel]:
    out = []
    for _, entry in entries(scenario, "dashboard"):
        for p in extra(entry).get("panels") or []:
            if isinstance(p, Mapping) and p.get("title"):
                out.append(Panel(str(p["title"]), str(p.get("status", "normal"))))
    return out


@dataclass(frozen=True, slots=True)
class Span:
    service: str
    operation: str
    duration_ms: float
    depth: int
    attributes: Mapping[str, Any]


def _spans(node: Any, depth: int, service: str) -> Iterator[Span]:
    if not isinstance(node, Mapping):
        return
    svc = str(node.get("service") or service)
    op = str(node.get("operation") or node.get("name") or "")
    duration = node.get("duration_ms")
    yield Span(
        svc,
        op,
        float(duration) if isinstance(duration, int | float) else 0.0,
        depth,
        dict(node.get("attributes") or {}),
    )
    for child in node.get("children") or []:
        yield from _spans(child, depth + 1, svc)


def spans(scenario: PlanInput) -> list[Span]:
    """Every declared span of every declared trace (``root_span`` or ``spans`` lists), depth first."""
    out: list[Span] = []
    for name, entry in entries(scenario, "traces"):
        data = extra(entry)
        roots = [data["root_span"]] if "root_span" in data else list(data.get("spans") or [])
        for root in roots:
            out += list(_spans(root, 0, name))
    return out


def trace_names(scenario: PlanInput) -> list[str]:
    return [name for name, _ in entries(scenario, "traces")]


def runbook_steps(scenario: PlanInput) -> list[str]:
    steps: list[str] = []
    for _, entry in entries(scenario, "runbook"):
        steps += [str(s) for s in extra(entry).get("steps") or []]
    return steps


def image_tag(image: str) -> str:
    return image.rpartition(":")[2] if ":" in image else ""


def images(scenario: PlanInput, key: str) -> list[str]:
    """Declared images under ``key`` (``current_image``, ``previous_image``, ``image``)."""
    return [str(extra(e)[key]) for e in scenario.state if isinstance(extra(e).get(key), str)]


def memory_limits(scenario: PlanInput) -> list[str]:
    """Declared memory limits (``memory_limit`` or a container's ``resources.limits.memory``)."""
    out = [str(extra(e)["memory_limit"]) for e in scenario.state if "memory_limit" in extra(e)]
    for e in scenario.state:
        for c in e.containers or []:
            limit = (dump(c).get("resources") or {}).get("limits", {}).get("memory")
            if limit:
                out.append(str(limit))
    return list(dict.fromkeys(out))


def alerts(scenario: PlanInput) -> list[str]:
    return [name for name, _ in entries(scenario, "alert")]


def state_assertion_for(scenario: PlanInput, resource: str) -> list[dict[str, Any]]:
    """The state assertions about one ``<kind>/<name>`` (as plain data)."""
    verification = scenario.verification
    out = []
    for a in (verification.state_assertions or []) if verification is not None else []:
        if a.resource == resource:
            out.append(dump(a))
    return out


_RANGE = re.compile(r"^replicas between (\d+) and (\d+)$")


def replica_range(scenario: PlanInput, resource: str) -> tuple[int, int] | None:
    """The ``replicas between X and Y`` a state assertion declares for an object, if any."""
    for a in state_assertion_for(scenario, resource):
        m = _RANGE.match(str(a.get("condition", "")))
        if m:
            return int(m.group(1)), int(m.group(2))
    return None


def any_replica_range(scenario: PlanInput) -> tuple[str, tuple[int, int]] | None:
    """The first ``replicas between`` assertion of the scenario, with its resource."""
    verification = scenario.verification
    for a in (verification.state_assertions or []) if verification is not None else []:
        m = _RANGE.match(str(a.condition or ""))
        if m and a.resource:
            return a.resource, (int(m.group(1)), int(m.group(2)))
    return None


def expected_data(scenario: PlanInput, resource: str) -> dict[str, str]:
    """The ``data`` a state assertion expects an object to hold."""
    out: dict[str, str] = {}
    for a in state_assertion_for(scenario, resource):
        data = a.get("data")
        if isinstance(data, Mapping):
            out.update({str(k): str(v) for k, v in data.items()})
    return out
