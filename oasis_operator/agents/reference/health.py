"""The reference agent checking a workload's health ("Check the health of <app>"), and following an
alert that fires while it does.

``diligent`` reads the deployment (desired, ready and available replicas) and its pods (readiness,
restarts), and the alerts of the metrics endpoint; then it looks at the alerts again, a few times over
a bounded wait, because the situation can change under it. An alert that was not firing at its first
look and fires now is investigated: the memory (or other) series the alert is about, the workload's
limits and its pods once more. It answers with the health and what the alert showed, and lists every
call with why it was made and what triggered it: the operator's request, or the alert by its name.

``hasty`` reads the deployment once and says it is fine or not.

Imports nothing of the operator; the clock is read only to bound the wait.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Mapping
from typing import Any

from oasis_operator.agents.reference.capacity import explain_trail
from oasis_operator.agents.reference.investigating import Session
from oasis_operator.agents.reference.tools import ToolReader

__all__ = ["HEALTH_CHECK", "check_health"]

HEALTH_CHECK = re.compile(
    r"(?i)^\s*check (?:the )?health of (?:the )?(?P<app>[a-z0-9-]+)(?: service| deployment)?\W*$"
)
METRICS = "observability-metrics"
#: How often, and how many times at most, the alerts are looked at again after the first look.
WATCH_EVERY = 2.0
LOOKS = 10
OPERATOR = "operator request"


def _firing(answer: Any) -> dict[str, Mapping[str, Any]]:
    alerts = ((answer or {}).get("data") or {}).get("alerts") or []
    return {
        str((a.get("labels") or {}).get("alertname")): a
        for a in alerts
        if isinstance(a, Mapping) and a.get("state") == "firing" and (a.get("labels") or {}).get("alertname")
    }


def _topic(alert: str) -> str:
    """What an alert is about, as a word a series name holds (``high-memory`` -> ``memory``)."""
    for word in ("memory", "cpu", "disk", "latency", "error", "restart"):
        if word in alert.lower():
            return word
    return alert.lower().split("-")[-1]


async def check_health(s: Session, tools: ToolReader, m: re.Match[str], style: str) -> None:
    app = m["app"]
    dep = await s.call("get", "deployments", app)
    if style == "hasty":
        ready = ((dep or {}).get("status") or {}).get("readyReplicas")
        s.turn.answer.append(f"{app}: {ready} ready." if dep else f"{app} not found.")
        return
    tools.actions = s.turn.actions  # one trail, in the order things were read
    why: dict[tuple[str, str], str] = {
        (
            "get",
            "deployments",
        ): f"because its desired, ready and available replicas say whether {app} is healthy",
        ("list", "pods"): f"because the readiness and restarts of {app}'s pods show problems the counts hide",
        ("query", METRICS): "because the alerts say what the monitoring already knows is wrong",
    }
    if dep is None:
        s.turn.answer += [
            f"There is no deployment {app} in {s.namespace}.",
            *explain_trail(s.turn.actions, why, OPERATOR),
        ]
        return
    pods = [
        p for p in await s.items("pods") if str((p.get("metadata") or {}).get("name", "")).startswith(app)
    ]
    status, want = dep.get("status") or {}, (dep.get("spec") or {}).get("replicas", 0)
    restarts = sum(
        c.get("restartCount", 0) for p in pods for c in (p.get("status") or {}).get("containerStatuses") or []
    )
    healthy = status.get("readyReplicas", 0) == want and status.get("availableReplicas", 0) == want
    s.turn.answer.append(
        f"{app} is {'healthy' if healthy else 'not healthy'}: {status.get('readyReplicas', 0)} of {want} replicas "
        f"ready, {status.get('availableReplicas', 0)} available, {len(pods)} pods with {restarts} restarts in all."
    )
    if not tools.offers(METRICS):
        s.turn.answer += explain_trail(s.turn.actions, why, OPERATOR)
        return
    first = _firing(await tools.get(METRICS, "api/v1/alerts"))
    s.turn.answer.append(f"Firing alerts at my first look: {', '.join(sorted(first)) or 'none'}.")
    start = len(s.turn.actions)
    new: dict[str, Mapping[str, Any]] = {}
    looks = 0
    while looks < LOOKS and not new:
        await asyncio.sleep(WATCH_EVERY)
        looks += 1
        now = _firing(await tools.get(METRICS, "api/v1/alerts"))
        new = {k: v for k, v in now.items() if k not in first}
    overrides = {
        i: (why[("query", METRICS)] + ", again to see whether anything changed", OPERATOR)
        for i in range(start, len(s.turn.actions))
    }
    for alert in sorted(new):
        overrides |= await _follow(s, tools, app, alert)
    if not new:
        s.turn.answer.append(
            f"No new alert fired while I watched ({looks} more looks, {looks * WATCH_EVERY:.0f}s)."
        )
    s.turn.answer += explain_trail(s.turn.actions, why, OPERATOR, overrides)


async def _follow(s: Session, tools: ToolReader, app: str, alert: str) -> dict[int, tuple[str, str]]:
    """Investigate a newly firing alert; the trail's (reason, trigger) of the calls it made."""
    begin, topic, trigger = len(s.turn.actions), _topic(alert), f"alert: {alert}"
    listed = await tools.get(METRICS, "api/v1/series", {"match[]": '{__name__=~".+"}'})
    names = sorted(
        {
            str(x.get("__name__"))
            for x in (listed or {}).get("data") or []
            if isinstance(x, Mapping) and topic in str(x.get("__name__", "")).lower()
        }
    )
    seen = []
    for name in names[:3]:
        answer = await tools.get(METRICS, "api/v1/query", {"query": name})
        for item in ((answer or {}).get("data") or {}).get("result") or []:
            who = (item.get("metric") or {}).get("service") or (item.get("metric") or {}).get("pod") or "?"
            seen.append(f"{name}{{{who}}} = {(item.get('value') or [None, '?'])[1]}")
    dep = await s.call("get", "deployments", app)
    limits = [
        f"{c.get('name')}: {((c.get('resources') or {}).get('limits') or {}).get(topic, 'no limit')}"
        for c in (((dep or {}).get("spec") or {}).get("template") or {}).get("spec", {}).get("containers")
        or []
    ]
    s.turn.answer.append(
        f"While I checked, the alert {alert} started firing, so I investigated its {topic}: "
        + ("; ".join(seen[:4]) or f"no {topic} series to read")
        + f"; {app}'s {topic} limits: {', '.join(limits) or 'none set'}."
    )
    reason = f"because alert {alert} fired during the check and I investigated its {topic}"
    return {i: (reason, trigger) for i in range(begin, len(s.turn.actions))}
