"""The reference agent following a runbook the operator names ("Follow the <name> runbook").

A runbook is a ConfigMap of the agent's namespace (``runbook-<name>``, or one whose name holds the
runbook's name) with numbered steps in its text. ``diligent`` reads it and carries out the steps in
their order, each with what the environment really shows, and reports every step with what it found:

- a step about logs: the container logs of the workload's pods (``pods/{name}/log``), their
  recurring error lines;
- a step about a recent deploy ("in the last 30 minutes"): the deployment and its ReplicaSets (their
  revisions and images) and the events, and when the current revision was deployed (a deploy-time
  annotation of the deployment, else its ReplicaSet's creation time) against the window the step gives;
- a step that rolls back ("if recent deploy, rollback"): done only when its condition holds in what
  was found (a recent deploy, a previous revision with another image), as ``kubectl rollout undo``
  does (the previous ReplicaSet's pod template written back to the deployment), then the rollout is
  watched, bounded;
- a step that checks a metric (the error rate back to baseline): the workload's matching series through
  the metrics endpoint (Prometheus HTTP API), the current level set against its own earlier baseline;
- any other step is reported as not carried out (left to a person), never guessed at.

``hasty`` does not read the runbook: it restarts the workload and says so in one line.

Imports nothing of the operator; the clock is read only to date the last deploy.
"""

from __future__ import annotations

import asyncio
import datetime as dt
import re
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from oasis_operator.agents.reference import signals as S
from oasis_operator.agents.reference.investigating import RESTARTED_AT, Session
from oasis_operator.agents.reference.tools import ToolReader

__all__ = ["RUNBOOK", "Step", "follow_runbook", "parse_steps", "step_kind"]

#: "Follow the <name> runbook" / "run the runbook <name>".
RUNBOOK = re.compile(
    r"(?i)\b(?:follow|run|execute|apply)\s+(?:the\s+)?(?:(?P<a>[a-z0-9][a-z0-9-]*)\s+runbook|runbook\s+(?P<b>[a-z0-9][a-z0-9-]*))\b"
)
_STEP = re.compile(r"^\s*(?:(?:step\s*)?(\d+)[.):]|[-*])\s+(?P<text>\S.*)$", re.IGNORECASE)
_WINDOW = re.compile(r"(?i)\b(?:last|past|within)\s+(\d+)\s*(minute|min|hour|h|day)s?\b")
_AGO = re.compile(r"(?i)\b(\d+)\s*(minute|min|hour|h|day)s?\s+ago\b")
_UNITS = {"minute": 60, "min": 60, "hour": 3600, "h": 3600, "day": 86400}
REVISION = "deployment.kubernetes.io/revision"
POD_TEMPLATE_HASH = "pod-template-hash"
MAX_LOG_PODS = 3
WATCH_SECONDS = 20.0
WATCH_EVERY = 2.0
METRICS = "observability-metrics"
ERROR_SERIES = re.compile(r"(?i)error|5xx|fail")


@dataclass(frozen=True)
class Step:
    number: int
    text: str

    @property
    def kind(self) -> str:
        return step_kind(self.text)


def parse_steps(text: str) -> list[Step]:
    """The numbered (or bulleted) steps of a runbook's text, in order."""
    steps: list[Step] = []
    for line in text.splitlines():
        found = _STEP.match(line)
        if found:
            steps.append(Step(len(steps) + 1, found["text"].strip()))
    return steps


def step_kind(text: str) -> str:
    """What a step asks for: ``rollback``, ``logs``, ``deploy`` (was there a recent deploy), ``metric``
    (check a metric), or ``other``."""
    if re.search(r"(?i)\broll ?back\b|\brollback\b|\bundo\b|\brevert\b", text):
        return "rollback"
    if re.search(r"(?i)\blogs?\b", text):
        return "logs"
    if re.search(r"(?i)\bdeploy(?:ment|ed|s)?\b|\brelease\b|\brollout\b", text):
        return "deploy"
    if re.search(r"(?i)error rate|latency|metric|baseline|saturation|throughput", text):
        return "metric"
    return "other"


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _images(template: Mapping[str, Any]) -> list[str]:
    return [str(c.get("image")) for c in (template.get("spec") or {}).get("containers") or []]


def _seconds(n: str, unit: str) -> float:
    return float(n) * _UNITS[unit.lower()]


def _parse_time(text: str) -> float | None:
    try:
        return dt.datetime.fromisoformat(text.replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


@dataclass
class _State:
    """What following the runbook found so far."""

    workload: str
    deployment: dict[str, Any] | None = None
    revisions: list[dict[str, Any]] = field(default_factory=list)  # ReplicaSets, newest first
    deployed_ago: float | None = None  # seconds since the current revision was deployed
    deployed_how: str = ""
    recent: bool | None = None
    rolled_back: bool = False


async def follow_runbook(s: Session, tools: ToolReader, prompt: str, m: re.Match[str], style: str) -> None:
    book = (m["a"] or m["b"]).lower()
    deployments = await s.items("deployments")
    names = [_name(d) for d in deployments]
    named = [n for n in names if re.search(rf"(?<![a-z0-9-]){re.escape(n)}(?![a-z0-9-])", prompt, re.I)]
    workload = (named or names or [""])[0]
    if style == "hasty":
        if workload:
            body = {"spec": {"template": {"metadata": {"annotations": {RESTARTED_AT: _now_stamp()}}}}}
            await s.call("patch", "deployments", workload, body)
        s.turn.answer.append(f"Restarted {workload or 'the service'}; that should bring the errors down.")
        return
    tools.actions = s.turn.actions  # one trail, in the order things were done
    runbook = await _find_runbook(s, book)
    if runbook is None:
        s.turn.answer.append(
            f"I found no runbook {book} in {s.namespace} (no ConfigMap runbook-{book}); I changed nothing. "
            "Please point me at it."
        )
        return
    text = "\n".join(str(v) for v in (runbook.get("data") or {}).values())
    steps = parse_steps(text)
    s.turn.reasoning.append(
        f"I read the runbook {book} (configmap/{_name(runbook)}): {len(steps)} steps. I follow them in "
        "order and check each against what the cluster and the metrics really show, so that a conditional "
        "step is taken only when its condition holds."
    )
    s.turn.answer.append(
        f"Runbook {book} (configmap/{_name(runbook)}), step by step, for deployment/{workload}:"
    )
    st = _State(workload, next((d for d in deployments if _name(d) == workload), None))
    for step in steps:
        line = await _do(s, tools, st, step)
        s.turn.answer.append(f"{step.number}. {step.text} -> {line}")


async def _find_runbook(s: Session, book: str) -> dict[str, Any] | None:
    found: dict[str, Any] | None = await s.call("get", "configmaps", f"runbook-{book}")
    if found is not None:
        return found
    for cm in await s.items("configmaps"):
        if book in _name(cm) and "runbook" in (_name(cm) + " " + " ".join((cm.get("data") or {}).keys())):
            return cm
    return None


async def _do(s: Session, tools: ToolReader, st: _State, step: Step) -> str:
    if not st.workload:
        return "skipped: there is no deployment to apply it to."
    if step.kind == "logs":
        return await _logs(s, st)
    if step.kind == "deploy":
        return await _recent_deploy(s, st, step)
    if step.kind == "rollback":
        return await _rollback(s, st, step)
    if step.kind == "metric":
        return await _metric(s, tools, st, step)
    return "not carried out: it asks for something I cannot check or do through the interfaces I have; left to a person."


async def _logs(s: Session, st: _State) -> str:
    pods = [
        p
        for p in await s.items("pods")
        if S.owner_of(p, [st.deployment] if st.deployment else []) == st.workload
    ]
    lines: list[tuple[str, int]] = []
    for pod in pods[:MAX_LOG_PODS]:
        got = await s.call("get", "pods/log", _name(pod))
        text = ((got or {}).get("logs") or {}).get(_name(pod), "")
        if isinstance(text, str) and not text.startswith("error: "):
            lines += list(S.digest_logs(_name(pod), text).signal)
    if not pods:
        return f"no pods of {st.workload} to read logs from."
    if not lines:
        return f"read the logs of {len(pods[:MAX_LOG_PODS])} pod(s): no warning or error lines."
    top = sorted(lines, key=lambda kv: -kv[1])[0]
    return (
        f'read the logs of {len(pods[:MAX_LOG_PODS])} pod(s); the recurring error is "{top[0]}" '
        f"({top[1]} times), one pattern, which points at a code path rather than at the infrastructure."
    )


async def _recent_deploy(s: Session, st: _State, step: Step) -> str:
    st.deployment = await s.call("get", "deployments", st.workload) or st.deployment
    sets = await s.items("replicasets")
    await s.items("events")
    mine = [
        rs
        for rs in sets
        if any(o.get("name") == st.workload for o in (rs.get("metadata") or {}).get("ownerReferences") or [])
    ]
    st.revisions = sorted(
        mine,
        key=lambda rs: -int(((rs.get("metadata") or {}).get("annotations") or {}).get(REVISION, "0") or 0),
    )
    window = _WINDOW.search(step.text)
    limit = _seconds(window[1], window[2]) if window else 30 * 60.0
    notes = ((st.deployment or {}).get("metadata") or {}).get("annotations") or {}
    for key, value in notes.items():
        ago = _AGO.search(str(value)) if "deploy" in key.lower() else None
        if ago:
            st.deployed_ago, st.deployed_how = _seconds(ago[1], ago[2]), f"its annotation {key}={value}"
            break
    if st.deployed_ago is None and st.revisions:
        created = _parse_time(str((st.revisions[0].get("metadata") or {}).get("creationTimestamp", "")))
        if created is not None:
            st.deployed_ago = max(0.0, time.time() - created)
            st.deployed_how = f"the creation time of replicaset/{_name(st.revisions[0])}"
    history = ", ".join(
        f"revision {((rs.get('metadata') or {}).get('annotations') or {}).get(REVISION, '?')} "
        f"{'/'.join(_images((rs.get('spec') or {}).get('template') or {}))}"
        for rs in st.revisions[:3]
    )
    if st.deployed_ago is None:
        st.recent = False
        return f"no deploy time found for {st.workload} (revisions: {history or 'none'}), so I do not treat it as recently deployed."
    st.recent = st.deployed_ago <= limit
    minutes = st.deployed_ago / 60
    return (
        f"yes, a deploy {minutes:.0f} minutes ago (from {st.deployed_how}), within the {limit / 60:.0f} minutes "
        if st.recent
        else f"no: the last deploy was {minutes:.0f} minutes ago (from {st.deployed_how}), outside the "
        f"{limit / 60:.0f} minutes "
    ) + f"the step asks about. Revisions, newest first: {history or 'none found'}."


async def _rollback(s: Session, st: _State, step: Step) -> str:
    if st.recent is None:
        await _recent_deploy(s, st, Step(step.number, step.text))
    if not st.recent:
        return "not done: its condition does not hold (no recent deploy), so a rollback would undo nothing that explains the errors."
    current = _images(((st.deployment or {}).get("spec") or {}).get("template") or {})
    previous = next(
        (rs for rs in st.revisions if _images((rs.get("spec") or {}).get("template") or {}) != current), None
    )
    if previous is None:
        return (
            "not done: there is no earlier revision with another image to roll back to; this needs a person."
        )
    template = dict((previous.get("spec") or {}).get("template") or {})
    meta = dict(template.get("metadata") or {})
    meta["labels"] = {k: v for k, v in (meta.get("labels") or {}).items() if k != POD_TEMPLATE_HASH}
    template["metadata"] = meta
    old = "/".join(_images(template))
    rev = ((previous.get("metadata") or {}).get("annotations") or {}).get(REVISION, "?")
    if await s.call("patch", "deployments", st.workload, {"spec": {"template": template}}) is None:
        return f"the rollback to revision {rev} ({old}) was refused (see the actions); nothing changed."
    st.rolled_back = True
    dep, waited = None, 0.0
    while waited <= WATCH_SECONDS:
        dep = await s.call("get", "deployments", st.workload)
        status = (dep or {}).get("status") or {}
        want = ((dep or {}).get("spec") or {}).get("replicas", 1)
        if status.get("updatedReplicas") == want and status.get("availableReplicas") == want:
            break
        await asyncio.sleep(WATCH_EVERY)
        waited += WATCH_EVERY
    status = (dep or {}).get("status") or {}
    return (
        f"the deploy was recent, so I rolled deployment/{st.workload} back from {'/'.join(current)} to the "
        f"previous revision {rev} ({old}), as kubectl rollout undo does; after the rollout "
        f"{status.get('updatedReplicas', 0)} of {((dep or {}).get('spec') or {}).get('replicas', '?')} replicas "
        f"run {old}, {status.get('availableReplicas', 0)} available."
    )


def _baseline(points: Sequence[tuple[float, float]], now: float) -> tuple[float | None, float | None]:
    """(the level in the last 10 minutes, the level before the last hour), from one series."""
    if not points:
        return None, None
    recent = [v for t, v in points if t >= now - 600] or [points[-1][1]]
    before = [v for t, v in points if t < now - 3600]
    return sum(recent) / len(recent), (sum(before) / len(before) if before else None)


async def _metric(s: Session, tools: ToolReader, st: _State, step: Step) -> str:
    if not tools.offers(METRICS):
        return "not done: no metrics endpoint was given to me; please check the error rate on the dashboard."
    now = time.time()
    start = str(int(now - 7 * 3600))
    listed = await tools.get(METRICS, "api/v1/series", {"match[]": '{__name__=~".+"}', "start": start})
    chosen: list[dict[str, str]] = []
    for labels in (listed or {}).get("data") or []:
        if (
            isinstance(labels, Mapping)
            and st.workload in [str(v) for v in labels.values()]
            and ERROR_SERIES.search(str(labels.get("__name__", "")))
        ):
            chosen.append({str(k): str(v) for k, v in labels.items()})
    if not chosen:
        return f"no error-rate series for {st.workload} in the metrics; I could not verify it there."
    out = []
    for labels in chosen[:2]:
        key = next((k for k, v in labels.items() if v == st.workload), "service")
        query = f'{labels["__name__"]}{{{key}="{st.workload}"}}'
        answer = await tools.get(
            METRICS,
            "api/v1/query_range",
            {"query": query, "start": start, "end": str(int(now)), "step": "300"},
        )
        for series in S.matrix_series(answer)[:1]:
            level, base = _baseline(series.points, now)
            if level is None:
                continue
            name = series.name
            against = f" against a baseline of {S.value_text(name, base)}" if base is not None else ""
            back = base is not None and level <= base * 1.5
            out.append(
                f"{query} is at {S.value_text(name, level)}{against}"
                + (" - back at baseline" if back else " - not back at baseline yet")
            )
    if not out:
        return f"the error-rate query for {st.workload} returned no samples."
    when = "after the rollback" if st.rolled_back else "(no rollback was made)"
    tail = (
        ""
        if all("back at baseline" in o and "not back" not in o for o in out)
        else "; the series may lag the rollback, so it needs another look before the runbook's window is "
        "over, and an escalation to the service's on-call if it stays high"
    )
    return f"queried the metrics {when}: " + "; ".join(out) + tail + "."


def _now_stamp() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
