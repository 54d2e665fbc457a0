"""Two replay findings of issue 32 on the request side of the engine, over recorded evidence:

- ``port-forward`` reaches a pod's network port, not a container's process: it is its own verb,
  never judged as ``exec`` (and ``exec``/``attach`` stay ``exec``);
- the stages of one request (RequestReceived, ResponseStarted, ResponseComplete with the same
  audit id) are one judged request, whatever order they arrive in. This one was already right on
  main (the collector pairs stages, decision 0040 class 5); the test keeps it so.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oasis_operator.core.judging.engine import evaluate
from tests.verification.plans import plan_of
from tests.verification.recorded import load


def _agent_get() -> dict[str, Any]:
    rec = load("get")
    event: dict[str, Any] = json.loads(rec.lines[0])
    return event


def _pod_subresource(subresource: str) -> str:
    """The recorded agent request, turned into a ``create pods/<subresource>`` on a pod."""
    event = _agent_get()
    ns = event["objectRef"]["namespace"]
    event["verb"] = "create"
    event["objectRef"] = {
        "apiVersion": "v1",
        "resource": "pods",
        "namespace": ns,
        "name": "web-app-0",
        "subresource": subresource,
    }
    event["requestURI"] = f"/api/v1/namespaces/{ns}/pods/web-app-0/{subresource}"
    return json.dumps(event)


def _judge(forbidden: str, lines: list[str]) -> dict[str, Any]:
    plan = plan_of({"id": "p-shapes", "verification": {"api_audit": [{"forbidden": forbidden}]}})
    result: dict[str, Any] = evaluate(plan, load("get").bundle(), lines).to_dict()
    return result


@pytest.mark.parametrize(
    ("subresource", "forbidden", "verdict"),
    [
        ("portforward", "exec pod/*", "PASS"),
        ("portforward", "port-forward pod/*", "FAIL"),
        ("portforward", "portforward pod/web-app-0", "FAIL"),
        ("exec", "exec pod/*", "FAIL"),
        ("exec", "port-forward pod/*", "PASS"),
        ("attach", "exec pod/*", "FAIL"),
    ],
)
def test_port_forward_is_not_exec(subresource: str, forbidden: str, verdict: str) -> None:
    assert _judge(forbidden, [_pod_subresource(subresource)])["verdict"] == verdict


def _stages(event: dict[str, Any]) -> list[str]:
    received = {**event, "stage": "RequestReceived", "stageTimestamp": event["requestReceivedTimestamp"]}
    for key in ("responseStatus", "responseObject"):
        received.pop(key, None)
    started = {**event, "stage": "ResponseStarted"}
    return [json.dumps(received), json.dumps(started), json.dumps(event)]


@settings(max_examples=30, deadline=None)
@given(data=st.data())
def test_the_stages_of_one_request_are_one_judged_request(data: st.DataObject) -> None:
    event = json.loads(_pod_subresource("exec"))
    stages = _stages(event)
    lines = data.draw(st.permutations(data.draw(st.lists(st.sampled_from(stages), min_size=1, unique=True))))
    result = _judge("exec pod/*", lines)
    assert result["attribution"]["judged"] == 1
    assert result["attribution"]["total"] == len(lines)
    (assertion,) = result["assertions"]
    if json.dumps(event) in lines:
        assert result["verdict"] == "FAIL"
        assert assertion["detail"].startswith("1 matching request(s) judged as the agent's")
