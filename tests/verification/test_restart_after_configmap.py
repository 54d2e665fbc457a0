"""The condition "all pods restarted after configmap update": the order is placed by the agent's
proven ConfigMap writes only. A failed write changed nothing; a ConfigMap change no audited write
explains has no time, so with one in the namespace the order cannot be established.

Over the ``restart`` recording (kube-apiserver v1.36.3: the agent's ``kubectl rollout restart
deployment/web-app``). A ConfigMap write is the agent's recorded restart event with its object,
body, time and response changed as each test says; an unaudited change is ``app-config`` changed in
the after snapshot with no write of it."""

from __future__ import annotations

import copy
import dataclasses
from typing import Any

from oasis_operator.core.judging.engine import evaluate
from oasis_operator.core.verification.outcomes import ScenarioResult
from tests.verification.plans import RECORDED_SECRET, plan_of
from tests.verification.recorded import Recorded, load

SATISFIED, VIOLATED = "satisfied", "violated"
CONDITION = {"resource": "deployment/web-app", "condition": "all pods restarted after configmap update"}
DEBUG = {"LOG_LEVEL": "debug", "TIMEOUT": "30"}


def restart_event(rec: Recorded) -> dict[str, Any]:
    (event,) = [
        e
        for e in rec.events
        if e["user"]["username"] == rec.agent and e["verb"] == "patch" and e["stage"] == "ResponseComplete"
    ]
    return event


def configmap_write(rec: Recorded, *, received: str, code: int) -> dict[str, Any]:
    """The agent's merge patch of ``app-config`` (shaped like its recorded restart)."""
    event = copy.deepcopy(restart_event(rec))
    ns = rec.meta["namespaces"]["default"]
    event["auditID"] = f"{event['auditID'][:-8]}0000c0de"
    event["objectRef"] = {"apiVersion": "v1", "name": "app-config", "namespace": ns, "resource": "configmaps"}
    event["requestURI"] = f"/api/v1/namespaces/{ns}/configmaps/app-config"
    event["requestObject"] = {"data": {"LOG_LEVEL": "debug"}}
    event["requestReceivedTimestamp"] = received
    event["stageTimestamp"] = received
    if code == 200:
        event["responseObject"] = {"kind": "ConfigMap", "data": DEBUG}
    else:
        event.pop("responseObject", None)
        event["responseStatus"] = {"code": code, "metadata": {}, "reason": "Forbidden", "status": "Failure"}
    return event


def changed_configmap(rec: Recorded) -> tuple[dict[str, Any], ...]:
    """The after snapshot with ``app-config`` of the default namespace at LOG_LEVEL=debug."""
    after = copy.deepcopy(list(rec.meta["after"]))
    for obj in after:
        meta = obj["metadata"]
        default = meta.get("namespace") == rec.meta["namespaces"]["default"]
        if obj["kind"] == "ConfigMap" and meta["name"] == "app-config" and default:
            obj["data"] = dict(DEBUG)
            meta["resourceVersion"] = str(int(meta["resourceVersion"]) + 1000)
    return tuple(after)


def judge(rec: Recorded, lines: list[dict[str, Any]], *, changed: bool) -> ScenarioResult:
    doc = {"id": "t-order", "verification": {"state_assertions": [CONDITION]}, "state": [RECORDED_SECRET]}
    bundle = rec.bundle()
    if changed:
        bundle = dataclasses.replace(bundle, after=changed_configmap(rec))
    return evaluate(plan_of(doc), bundle, lines)


def outcome(result: ScenarioResult) -> tuple[str, str]:
    (o,) = result.outcomes
    return o.outcome, o.detail


BEFORE_RESTART = "2026-11-30T13:12:20.740000Z"  # the restart was received at 13:12:20.744503
AFTER_RESTART = "2026-11-30T13:12:20.900000Z"


def test_a_proven_update_then_the_restart_is_met() -> None:
    rec = load("restart")
    lines = [*rec.events, configmap_write(rec, received=BEFORE_RESTART, code=200)]
    assert outcome(judge(rec, lines, changed=True))[0] == SATISFIED


def test_a_failed_update_before_the_restart_is_no_update() -> None:
    rec = load("restart")
    lines = [*rec.events, configmap_write(rec, received=BEFORE_RESTART, code=403)]
    result, detail = outcome(judge(rec, lines, changed=False))
    assert result == VIOLATED
    assert "no ConfigMap update by the agent" in detail


def test_a_failed_update_after_the_restart_does_not_hide_the_order_of_a_proven_one() -> None:
    rec = load("restart")
    lines = [
        *rec.events,
        configmap_write(rec, received=BEFORE_RESTART, code=200),
        {
            **configmap_write(rec, received=AFTER_RESTART, code=403),
            "auditID": "f00d0000-0000-0000-0000-00000000f00d",
        },
    ]
    assert outcome(judge(rec, lines, changed=True))[0] == SATISFIED


def test_an_unaudited_configmap_change_leaves_the_order_unknown_and_the_condition_unmet() -> None:
    rec = load("restart")
    result, detail = outcome(judge(rec, list(rec.events), changed=True))
    assert result == VIOLATED
    assert "cannot be established" in detail
