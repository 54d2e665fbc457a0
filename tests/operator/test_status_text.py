"""Status messages, conditions and Events carry no agent-controlled byte as it was sent (decision 0099,
review finding L-2): an agent's stderr, its failure cause, its declared name reach ``kubectl
describe`` and ``oasis wait``; a terminal escape there repaints the reader's screen, a carriage
return rewrites a line, a lone surrogate cannot even be encoded. Each test here failed before."""

from __future__ import annotations

import datetime as dt
import json
import sys
import textwrap
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oasis_operator.adapters.agents.command import SubprocessAgent, SubprocessAgentSettings
from oasis_operator.core import reasons
from oasis_operator.core.contract import (
    AgentOutcome,
    AgentScope,
    ScenarioRequest,
    outcome_from_response,
    parse_response,
)
from oasis_operator.core.run_status import AgentRecord

NASTY = ["\x1b[2J", "\x1b]0;owned\x07", "\r", "\n", "\x00", "\x9b31m", "\ud800", "\u202e", "\ufffe", "ok"]
text = st.lists(st.one_of(st.sampled_from(NASTY), st.text(max_size=4)), max_size=10).map("".join)


def shown_raw(value: str) -> set[str]:
    """Characters that would reach a terminal as they are and steer it."""
    return {c for c in value if ord(c) < 0x20 or 0x7F <= ord(c) < 0xA0 or 0xD800 <= ord(c) < 0xE000} | (
        set(value) & {"\u202e", "\ufffe"}
    )


@settings(max_examples=300, deadline=None)
@given(text, st.integers(1, 3000))
def test_every_message_is_clipped_printable(value: str, limit: int) -> None:
    for out in (reasons.clip(value, limit), reasons.bounded(value, max(limit, 40))):
        assert not shown_raw(out)
        out.encode("utf-8")
    assert len(reasons.clip(value, limit)) <= limit


@settings(max_examples=200, deadline=None)
@given(st.text(alphabet=st.characters(min_codepoint=0x20, max_codepoint=0x7E)))
def test_plain_text_is_left_as_it_is(value: str) -> None:
    assert reasons.printable(value) == value
    assert reasons.clip(value, 10_000) == value


def test_the_agent_s_declared_identity_is_escaped_and_bounded_in_the_status() -> None:
    record = AgentRecord(name="evil\x1b[2J\rPASS", version="1\u202e0", declared_model="m" * 5000)
    assert record.name == "evil\\x1b[2J\\x0dPASS"
    assert record.version == "1\\u202e0"
    assert record.declared_model is not None
    assert len(record.declared_model) <= 256


def test_an_agent_s_own_failure_cause_is_escaped() -> None:
    body = json.dumps(
        {
            "actions": [],
            "reasoning": "",
            "final_answer": "",
            "agent_failure": {"cause": "model down\x1b[2J\rALL PASS"},
        }
    )
    outcome: AgentOutcome = outcome_from_response(parse_response(body))
    assert "\x1b" not in outcome.detail
    assert "\r" not in outcome.detail
    assert "\\x1b[2J" in outcome.detail


async def test_a_local_agent_s_stderr_reaches_the_status_escaped(tmp_path: Path) -> None:
    script = tmp_path / "agent.py"
    script.write_text(
        textwrap.dedent("""
        import sys
        sys.stdin.read()
        sys.stderr.write("crashed\\x1b]0;owned\\x07\\r\\x1b[2KPASS")
        sys.exit(3)
        """)
    )
    request = ScenarioRequest(prompt="p", tools=("t",), mode="read-only", scope=AgentScope())
    outcome = await SubprocessAgent(
        SubprocessAgentSettings(command=[sys.executable, str(script)])
    ).run_scenario(request)
    assert outcome.exit_code == 3
    assert not shown_raw(outcome.detail)
    assert "crashed\\x1b]0;owned\\x07\\x0d\\x1b[2KPASS" in outcome.detail


@pytest.mark.cluster
async def test_an_event_s_message_is_stored_escaped(cluster) -> None:
    from lightkube.resources.core_v1 import Event

    from oasis_operator.adapters.k8s.client import async_client
    from oasis_operator.adapters.k8s.store import Store
    from oasis_operator.devcluster import kube, stack

    ns = f"status-text-{kube.random_suffix()}"
    with cluster.admin_http() as http:
        stack.ensure_namespace(http, ns)
    client = async_client(cluster.kubeconfig)
    try:
        run = {"metadata": {"name": "r", "namespace": ns, "uid": "00000000-0000-0000-0000-000000000001"}}
        message = "agent evil\x1b[2J\r\ud800 1.0: 3 of 3 scenarios to run"
        await Store(client).event(run, "Normal", "RunStarted", message, dt.datetime.now(dt.UTC))
        events = [e async for e in client.list(Event, namespace=ns)]
    finally:
        await client.close()
    assert [e.message for e in events] == ["agent evil\\x1b[2J\\x0d\\ud800 1.0: 3 of 3 scenarios to run"]
