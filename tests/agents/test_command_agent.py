"""The subprocess (local command) agent adapter against scripts that behave and scripts that misbehave.

Each misbehaving script is bounded on its own (no infinite loop runs longer than a minute even if the
adapter failed to kill it), and each test checks the processes it started are gone.
"""

from __future__ import annotations

import asyncio
import json
import sys
import textwrap
import time
from pathlib import Path
from typing import Any

import pytest

from oasis_operator.adapters.agents.command import SubprocessAgent, SubprocessAgentSettings
from oasis_operator.core.contract import (
    AGENT_REPORTED,
    LAUNCH_FAILED,
    MALFORMED_RESPONSE,
    OUTPUT_TOO_LARGE,
    PROCESS_FAILED,
    TIMEOUT,
    AgentEnvironment,
    AgentOutcome,
    AgentOutcomeStatus,
    AgentScope,
    ScenarioRequest,
    ToolEndpoint,
)
from oasis_operator.core.errors import AgentUnavailable
from oasis_operator.core.ports import AgentPort

REQUEST = ScenarioRequest(
    prompt="Delete the failing pods in shop-k3x9.",
    tools=("container-orchestration",),
    mode="supervised",
    scope=AgentScope(namespaces=("shop-k3x9",)),
    environment=AgentEnvironment(kubeconfig="apiVersion: v1\nkind: Config\n# mine\n", namespace="shop-k3x9"),
)

GOOD = """
import json, os, sys
if sys.argv[1:] == ["identity-and-configuration"]:
    print(json.dumps({"identity": {"name": "local", "version": "0.1.0"}, "configuration": {"zone_model": False}}))
    sys.exit(0)
request = json.load(sys.stdin)
with open(os.environ["KUBECONFIG"]) as f:
    kubeconfig = f.read()
print(json.dumps({
    "actions": [{"tool": "kubectl", "arguments": {"argv": sys.argv[1:]}, "result": "[]"}],
    "reasoning": json.dumps(sorted(os.environ)),
    "final_answer": request["prompt"],
    "model": kubeconfig,
}))
"""


def write(tmp_path: Path, body: str) -> list[str]:
    script = tmp_path / "agent.py"
    script.write_text(textwrap.dedent(body))
    return [sys.executable, str(script)]


def alive(pid: int) -> bool:
    """A process is alive if it exists and is not a zombie waiting for a reaper."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except FileNotFoundError:
        return False
    return stat.rsplit(")", 1)[1].split()[0] != "Z"


def pids(path: Path) -> list[int]:
    return [int(line) for line in path.read_text().split()] if path.exists() else []


async def run(command: list[str], **settings: Any) -> AgentOutcome:
    return await SubprocessAgent(SubprocessAgentSettings(command=command, **settings)).run_scenario(REQUEST)


def failed(outcome: AgentOutcome, reason: str) -> None:
    assert outcome.status is AgentOutcomeStatus.AGENT_FAILURE, outcome
    assert outcome.reason == reason, outcome


async def test_a_well_behaved_command_gets_the_request_and_its_own_kubeconfig(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("OPERATOR_SECRET_TOKEN", "must-not-leak")
    agent = SubprocessAgent(SubprocessAgentSettings(command=write(tmp_path, GOOD), env={"EXTRA": "1"}))
    assert isinstance(agent, AgentPort)
    outcome = await agent.run_scenario(REQUEST)
    assert outcome.status is AgentOutcomeStatus.ANSWERED, outcome
    assert outcome.exit_code == 0
    assert outcome.response is not None
    assert outcome.response.final_answer == REQUEST.prompt
    assert outcome.response.observed_model == REQUEST.environment.kubeconfig  # type: ignore[union-attr]
    seen_env = json.loads(outcome.response.reasoning)
    assert "OPERATOR_SECRET_TOKEN" not in seen_env
    assert "EXTRA" in seen_env
    assert "KUBECONFIG" in seen_env


async def test_identity_is_the_same_command_with_one_argument(tmp_path: Path) -> None:
    agent = SubprocessAgent(SubprocessAgentSettings(command=write(tmp_path, GOOD)))
    answer = await agent.identify()
    assert answer.identity.name == "local"
    assert answer.configuration == {"zone_model": False}


async def test_a_command_that_sleeps_forever_is_killed_with_its_children(tmp_path: Path) -> None:
    record = tmp_path / "pids"
    command = write(
        tmp_path,
        f"""
        import os, subprocess, time
        child = subprocess.Popen(["sleep", "60"])
        with open({str(record)!r}, "w") as f:
            f.write(f"{{os.getpid()}} {{child.pid}}")
        time.sleep(60)
        """,
    )
    started = time.monotonic()
    outcome = await run(command, timeout_seconds=1.0)
    failed(outcome, TIMEOUT)
    assert time.monotonic() - started < 3
    started_pids = pids(record)
    assert len(started_pids) == 2
    for _ in range(50):  # the orphaned child is reaped by whoever adopts it; give it a moment
        if not any(alive(pid) for pid in started_pids):
            break
        await asyncio.sleep(0.02)
    assert not any(alive(pid) for pid in started_pids)


async def test_helpers_left_behind_by_a_finished_command_are_ended(tmp_path: Path) -> None:
    record = tmp_path / "pids"
    command = write(
        tmp_path,
        f"""
        import json, subprocess
        child = subprocess.Popen(["sleep", "60"])  # inherits stdout, so it would keep the pipe open
        with open({str(record)!r}, "w") as f:
            f.write(str(child.pid))
        print(json.dumps({{"final_answer": "done"}}), flush=True)
        """,
    )
    started = time.monotonic()
    outcome = await run(command, timeout_seconds=10)
    assert outcome.status is AgentOutcomeStatus.ANSWERED, outcome
    assert time.monotonic() - started < 5
    for _ in range(50):
        if not alive(pids(record)[0]):
            break
        await asyncio.sleep(0.02)
    assert not alive(pids(record)[0])


async def test_huge_stdout_is_cut_at_the_cap(tmp_path: Path) -> None:
    command = write(
        tmp_path,
        """
        import sys
        chunk = b"x" * 65536
        for _ in range(100_000):
            sys.stdout.buffer.write(chunk)
        """,
    )
    started = time.monotonic()
    outcome = await run(command, max_output_bytes=1024 * 1024, timeout_seconds=20)
    failed(outcome, OUTPUT_TOO_LARGE)
    assert outcome.response is None
    assert time.monotonic() - started < 5


async def test_huge_stderr_does_not_block_the_answer(tmp_path: Path) -> None:
    command = write(
        tmp_path,
        """
        import json, sys
        sys.stderr.write("noise " * 2_000_000)
        print(json.dumps({"final_answer": "ok"}))
        """,
    )
    outcome = await run(command, max_output_bytes=1024 * 1024, timeout_seconds=20)
    assert outcome.status is AgentOutcomeStatus.ANSWERED, outcome


async def test_invalid_json_is_malformed(tmp_path: Path) -> None:
    outcome = await run(write(tmp_path, "print('I scaled it down, all good')"))
    failed(outcome, MALFORMED_RESPONSE)
    assert outcome.exit_code == 0


async def test_a_non_zero_exit_is_a_process_failure_with_stderr(tmp_path: Path) -> None:
    outcome = await run(write(tmp_path, "import sys\nsys.stderr.write('model quota exhausted')\nsys.exit(3)"))
    failed(outcome, PROCESS_FAILED)
    assert outcome.exit_code == 3
    assert "exited with status 3" in outcome.detail
    assert "model quota exhausted" in outcome.detail


async def test_a_readable_answer_beside_a_failed_exit_is_kept_but_is_no_answer(tmp_path: Path) -> None:
    command = write(
        tmp_path,
        """
        import json, sys
        print(json.dumps({"actions": [{"tool": "kubectl", "arguments": {}}], "final_answer": "half"}))
        sys.exit(1)
        """,
    )
    outcome = await run(command)
    failed(outcome, PROCESS_FAILED)
    assert outcome.response is not None
    assert len(outcome.response.actions) == 1


async def test_a_killed_process_names_the_signal(tmp_path: Path) -> None:
    outcome = await run(write(tmp_path, "import os, signal\nos.kill(os.getpid(), signal.SIGSEGV)"))
    failed(outcome, PROCESS_FAILED)
    assert "SIGSEGV" in outcome.detail


async def test_a_memory_hog_is_stopped_by_the_address_space_limit(tmp_path: Path) -> None:
    command = write(
        tmp_path,
        """
        import json
        hog = bytearray(2 * 1024 * 1024 * 1024)
        print(json.dumps({"final_answer": str(len(hog))}))
        """,
    )
    started = time.monotonic()
    outcome = await run(command, max_memory_bytes=256 * 1024 * 1024, timeout_seconds=20)
    failed(outcome, PROCESS_FAILED)
    assert "MemoryError" in outcome.detail
    assert time.monotonic() - started < 5


async def test_a_well_behaved_command_fits_in_the_same_limit(tmp_path: Path) -> None:
    outcome = await run(write(tmp_path, GOOD), max_memory_bytes=256 * 1024 * 1024)
    assert outcome.status is AgentOutcomeStatus.ANSWERED, outcome


async def test_a_failure_report_on_stdout(tmp_path: Path) -> None:
    outcome = await run(write(tmp_path, 'print(\'{"agent_failure": {"cause": "rate limited"}}\')'))
    failed(outcome, AGENT_REPORTED)
    assert outcome.detail == "rate limited"


async def test_a_missing_command_cannot_be_launched(tmp_path: Path) -> None:
    failed(await run([str(tmp_path / "no-such-agent")]), LAUNCH_FAILED)


async def test_identity_from_a_failing_command_makes_the_agent_unavailable(tmp_path: Path) -> None:
    agent = SubprocessAgent(SubprocessAgentSettings(command=write(tmp_path, "import sys\nsys.exit(2)")))
    with pytest.raises(AgentUnavailable) as caught:
        await agent.identify()
    assert caught.value.reason == PROCESS_FAILED


def test_the_kubeconfig_file_is_gone_after_the_run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # The private directory is created under the temp dir; none of ours may remain. The temp dir is this
    # test's own: under the shared one, other processes' agents come and go meanwhile.
    import tempfile

    private = tmp_path / "tmp"
    private.mkdir()
    monkeypatch.setattr(tempfile, "tempdir", str(private))
    asyncio.run(run(write(tmp_path, GOOD)))
    assert list(private.glob("agent-*")) == []


@pytest.mark.parametrize(
    ("sentence", "settings", "message"),
    [
        ("an empty command", {"command": []}, "command"),
        ("a zero timeout", {"command": ["x"], "timeout_seconds": 0}, "timeouts"),
        ("a negative memory cap", {"command": ["x"], "max_memory_bytes": -1}, "max_memory_bytes"),
    ],
)
def test_settings_refuse_nonsense(sentence: str, settings: dict[str, Any], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        SubprocessAgentSettings(**settings)


MCP_READER = """
import json, os, stat, sys
path = os.environ["OASIS_MCP_CONFIG"]
request = json.load(sys.stdin)
with open(path) as f:
    config = json.load(f)
print(json.dumps({
    "actions": [],
    "reasoning": json.dumps({"mode": oct(stat.S_IMODE(os.stat(path).st_mode)), "request": request["environment"]}),
    "final_answer": json.dumps(config),
}))
"""


async def test_mcp_endpoints_are_handed_over_as_a_standard_mcp_servers_file(tmp_path: Path) -> None:
    """Decision 0112: a private ``mcpServers`` file named by OASIS_MCP_CONFIG, Streamable HTTP with the
    scenario's token as the bearer; the request on stdin carries the same endpoints."""
    endpoint = ToolEndpoint(url="http://127.0.0.1:9/r0ute/mcp", token="scenario-token")
    request = REQUEST.model_copy(
        update={
            "environment": AgentEnvironment(
                kubeconfig="apiVersion: v1\nkind: Config\n",
                namespace="shop-k3x9",
                tool_endpoints={
                    "metrics": ToolEndpoint(url="http://127.0.0.1:9/r0ute/metrics/", token="scenario-token")
                },
                mcp_endpoints={"tools": endpoint},
            )
        }
    )
    agent = SubprocessAgent(SubprocessAgentSettings(command=write(tmp_path, MCP_READER)))
    outcome = await agent.run_scenario(request)
    assert outcome.response is not None, outcome
    assert json.loads(outcome.response.final_answer) == {
        "mcpServers": {
            "tools": {
                "type": "http",
                "url": "http://127.0.0.1:9/r0ute/mcp",
                "headers": {"Authorization": "Bearer scenario-token"},
            }
        }
    }
    seen = json.loads(outcome.response.reasoning)
    assert seen["mode"] == "0o600"
    assert seen["request"]["mcp_endpoints"] == {"tools": {"url": endpoint.url, "token": "scenario-token"}}


async def test_without_mcp_endpoints_there_is_no_mcp_configuration(tmp_path: Path) -> None:
    outcome = await run(write(tmp_path, GOOD))
    assert outcome.response is not None
    assert "OASIS_MCP_CONFIG" not in json.loads(outcome.response.reasoning)
