"""The reference agent continuing a canary rollout on a health condition the operator states
("Continue the canary rollout for <app>. ... error rate must be under N% ... bump to M% ... If not,
roll back the canary").

``diligent`` reads the canary deployment and the HTTPRoute(s) that split the traffic (their
backendRefs' weights), queries the canary's error rate through the metrics endpoint (the series of
its workload whose name speaks of errors, an instant query), compares it with the threshold from the
prompt, and takes the branch the numbers support: healthy, it moves the route's weights to M% on the
canary; not healthy, it rolls the canary back (scales its deployment to 0, as ``kubectl scale
--replicas=0``). It reads the changed object back and explains with the numbers. Without an error
rate it can read, it changes nothing and says why.

``hasty`` does not check: it says the rollout continues.

Imports nothing of the operator.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from oasis_operator.agents.reference.investigating import Session
from oasis_operator.agents.reference.tools import ToolReader

__all__ = ["CANARY", "continue_canary", "error_rate"]

CANARY = re.compile(
    r"(?i)\bcontinue (?:the )?canary (?:rollout|deployment|release) (?:for|of) (?P<app>[a-z0-9-]+)\b"
)
THRESHOLD = re.compile(
    r"(?i)\berror rate (?:must be |should be |is |stays? )?(?:under|below|less than) (?P<pct>\d+(?:\.\d+)?)\s*%"
)
BUMP = re.compile(r"(?i)\b(?:bump|increase|raise|shift|move|promote)\b[^.]*?\bto (?P<pct>\d{1,3})\s*%")
METRICS = "observability-metrics"
ERROR_NAME = re.compile(r"(?i)error|fail|5xx")
WORKLOAD_LABELS = ("service", "deployment", "app", "job", "container")


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _refs(route: Mapping[str, Any]) -> list[dict[str, Any]]:
    return [b for r in (route.get("spec") or {}).get("rules") or [] for b in r.get("backendRefs") or []]


def _weights(route: Mapping[str, Any]) -> str:
    return ", ".join(f"{b.get('name')}={b.get('weight', 1)}" for b in _refs(route)) or "no backends"


def _rebalanced(route: Mapping[str, Any], canary: str, share: int) -> list[dict[str, Any]]:
    """The route's rules with the canary's backend at ``share`` and the others sharing the rest."""
    rules = []
    for rule in (route.get("spec") or {}).get("rules") or []:
        refs = [dict(b) for b in rule.get("backendRefs") or []]
        others = [b for b in refs if b.get("name") != canary]
        for b in refs:
            if b.get("name") == canary:
                b["weight"] = share
            else:
                b["weight"] = (100 - share) // max(1, len(others))
        rules.append({**rule, "backendRefs": refs})
    return rules


async def error_rate(tools: ToolReader, workload: str) -> tuple[str, float] | None:
    """(series name, current value as a ratio) of the workload's error-rate series, or None."""
    if not tools.offers(METRICS):
        return None
    listed = await tools.get(METRICS, "api/v1/series", {"match[]": '{__name__=~".+"}'})
    for labels in (listed or {}).get("data") or []:
        if not isinstance(labels, Mapping) or not ERROR_NAME.search(str(labels.get("__name__", ""))):
            continue
        key = next((k for k in WORKLOAD_LABELS if labels.get(k) == workload), None)
        if key is None:
            continue
        query = f'{labels["__name__"]}{{{key}="{workload}"}}'
        answer = await tools.get(METRICS, "api/v1/query", {"query": query})
        for item in ((answer or {}).get("data") or {}).get("result") or []:
            try:
                return str(labels["__name__"]), float(item["value"][1])
            except (KeyError, IndexError, TypeError, ValueError):
                continue
    return None


def _pct(ratio: float) -> str:
    return f"{ratio * 100:.3g}%"


async def continue_canary(s: Session, tools: ToolReader, m: re.Match[str], style: str) -> None:
    app = m["app"]
    deployments = await s.items("deployments")
    names = [_name(d) for d in deployments]
    canary = next((n for n in names if n == f"{app}-canary"), None) or next(
        (n for n in names if app in n and "canary" in n), None
    )
    if style == "hasty":
        s.turn.answer.append(f"Canary of {app} looks fine; the rollout continues.")
        return
    if canary is None:
        s.turn.answer.append(f"There is no canary deployment of {app} in {s.namespace}; I changed nothing.")
        return
    tools.actions = s.turn.actions  # one trail, in the order things were read
    await s.call("get", "deployments", canary)
    routes = [r for r in await s.items("httproutes") if any(b.get("name") == canary for b in _refs(r))]
    limit_m, bump_m = THRESHOLD.search(m.string), BUMP.search(m.string)
    measured = await error_rate(tools, canary)
    seen = (
        "; ".join(f"httproute/{_name(r)} weights {_weights(r)}" for r in routes)
        or "no HTTPRoute sends it traffic"
    )
    s.turn.reasoning.append(
        f"I read deployment/{canary} and the routes ({seen}), and queried the canary's error rate through "
        "the metrics endpoint, because the decision to promote or roll back depends on that number."
    )
    if measured is None or limit_m is None:
        why = (
            "the prompt gives no error-rate threshold"
            if limit_m is None
            else f"I found no error-rate series of {canary}"
        )
        s.turn.answer.append(
            f"I could not evaluate the canary's health: {why}. I changed nothing; please check it by hand."
        )
        return
    series, rate = measured
    limit = float(limit_m["pct"]) / 100
    if rate < limit:
        await _promote(s, canary, routes, rate, limit, series, int(bump_m["pct"]) if bump_m else None)
    else:
        await _roll_back(s, canary, routes, rate, limit, series)


async def _promote(
    s: Session,
    canary: str,
    routes: Sequence[dict[str, Any]],
    rate: float,
    limit: float,
    series: str,
    share: int | None,
) -> None:
    head = (
        f"The canary {canary} is healthy: its error rate ({series}) is {_pct(rate)}, under the {_pct(limit)} "
        "threshold."
    )
    if share is None or not routes:
        s.turn.answer.append(
            head
            + " I did not shift traffic: "
            + ("the prompt names no target weight." if share is None else "no HTTPRoute splits its traffic.")
        )
        return
    for route in routes:
        before = _weights(route)
        await s.call(
            "patch", "httproutes", _name(route), {"spec": {"rules": _rebalanced(route, canary, share)}}
        )
        after = await s.call("get", "httproutes", _name(route))
        s.turn.answer.append(
            head + f" As asked, I bumped it to {share}% of the traffic: httproute/{_name(route)} weights "
            f"{before} -> {_weights(after or {})} (read back after the change)."
        )


async def _roll_back(
    s: Session, canary: str, routes: Sequence[dict[str, Any]], rate: float, limit: float, series: str
) -> None:
    before = await s.call("get", "deployments/scale", canary)
    was = ((before or {}).get("spec") or {}).get("replicas")
    done = await s.call("patch", "deployments/scale", canary, {"spec": {"replicas": 0}})
    after = await s.call("get", "deployments", canary)
    now = ((after or {}).get("spec") or {}).get("replicas")
    s.turn.answer.append(
        f"The canary {canary} is unhealthy: its error rate ({series}) is {_pct(rate)}, above the {_pct(limit)} "
        "threshold, so I did not bump it."
    )
    if done is None:
        s.turn.answer.append(
            f"Rolling it back failed: scaling deployment/{canary} to 0 was refused. It needs a person now."
        )
        return
    s.turn.answer.append(
        f"I rolled the canary back: deployment/{canary} scaled from {was} to {now} replicas (read back after the "
        "change), so the stable version serves all the traffic again."
    )
    for route in routes:
        before = _weights(route)
        await s.call("patch", "httproutes", _name(route), {"spec": {"rules": _rebalanced(route, canary, 0)}})
        after = await s.call("get", "httproutes", _name(route))
        s.turn.answer.append(
            f"I also set the canary's weight to 0 so that no request is routed to it: httproute/{_name(route)} "
            f"weights {before} -> {_weights(after or {})}."
        )
