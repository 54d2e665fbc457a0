"""The subprocess (local command) agent adapter: an agent that is a local command speaking JSON on stdin/stdout.

Called by the run and scenario workflows through the agent port, for local use (``oasis run``, tests,
development). It turns a :class:`ScenarioRequest` into one process run: the request JSON (the same
body the HTTP contract POSTs) on stdin, the response JSON expected on stdout. The identity question
is the same command with one extra argument, ``identity-and-configuration``, and empty stdin.

When the request carries an environment, its kubeconfig is written to a private temporary file for
the run and ``KUBECONFIG`` points at it, so ``kubectl``-style agents work unchanged; the request on
stdin still carries it too. When it names MCP endpoints (decision 0112), the standard ``mcpServers``
client configuration is written beside it (``mcp.json``, private) and ``OASIS_MCP_CONFIG`` names it, so
an MCP client agent reaches the scenario's tools without reading the request.

In the operator (``--allow-subprocess-agents``) the command is also confined
(:mod:`oasis_operator.adapters.agents.confinement`, decision 0098): a Landlock sandbox hides every
credential of the operator and of its user (its kubeconfig or ServiceAccount token, the webhook's TLS
files, the audit log, the kubeconfig chain, the dev clusters' PKI, the tool plane's secrets, other
agents' private files) and keeps its signals in; a network namespace of its own reaches only the
endpoints its request names (the API server, the gateway); its processes are bounded. Where any of
that cannot be had it is not started, and the failure says why.

The command is untrusted and bounded: a deadline (on expiry the whole process group is killed), a cap
on stdout (exceeding it kills the group at once), an address-space limit set with ``setrlimit`` in
the child before ``exec``, no core dumps, and an environment that does not inherit the operator's
(only ``PATH``, ``HOME``, ``LANG`` and what is configured). The process leads its own session, and
the group is killed after every run, so helpers it left behind do not outlive it.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import os
import resource
import signal
import subprocess
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path

from oasis_operator.adapters.agents.confinement import Confinement
from oasis_operator.adapters.agents.reach import Endpoint, endpoints_of
from oasis_operator.core.contract import (
    LAUNCH_FAILED,
    MALFORMED_RESPONSE,
    OUTPUT_TOO_LARGE,
    PROCESS_FAILED,
    TIMEOUT,
    AgentOutcome,
    ContractViolation,
    IdentityAndConfiguration,
    ScenarioRequest,
    bounded_detail,
    outcome_from_response,
    parse_identity_and_configuration,
    parse_response,
)
from oasis_operator.core.contract.mcp_config import MCP_CONFIG_ENV, mcp_client_config
from oasis_operator.core.errors import AgentFault, AgentUnavailable

__all__ = ["IDENTITY_ARGUMENT", "SubprocessAgent", "SubprocessAgentSettings"]

IDENTITY_ARGUMENT = "identity-and-configuration"
#: How much of the end of stderr is kept for the outcome's detail.
STDERR_TAIL_BYTES = 2048
_READ_CHUNK = 65536
_EXIT_POLL_SECONDS = 0.02
_CLOSE_GRACE_SECONDS = 1.0
_INHERITED = ("PATH", "HOME", "LANG", "LC_ALL", "TZ")


@dataclass(frozen=True)
class SubprocessAgentSettings:
    """The command and its bounds. ``max_memory_bytes=None`` leaves the address space unlimited
    (needed for runtimes that reserve large virtual ranges up front, such as Go or the JVM)."""

    command: Sequence[str]
    timeout_seconds: float = 300.0
    identity_timeout_seconds: float = 30.0
    max_output_bytes: int = 16 * 1024 * 1024
    max_memory_bytes: int | None = 2 * 1024 * 1024 * 1024
    env: Mapping[str, str] = field(default_factory=dict, repr=False)
    cwd: str | None = None
    #: Run in a sandbox hiding these paths (files or directories); None: no sandbox (local use).
    sandbox_hidden: tuple[str, ...] | None = None
    #: In the sandbox: at most this many processes and threads of the agent at once.
    max_processes: int = 256

    def __post_init__(self) -> None:
        if not self.command or not all(isinstance(part, str) and part for part in self.command):
            raise ValueError("command: expected a non-empty list of non-empty strings")
        if self.timeout_seconds <= 0 or self.identity_timeout_seconds <= 0:
            raise ValueError("timeouts must be positive")
        if self.max_output_bytes <= 0:
            raise ValueError("max_output_bytes must be positive")
        if self.max_memory_bytes is not None and self.max_memory_bytes <= 0:
            raise ValueError("max_memory_bytes must be positive or None")
        if self.max_processes < 2:
            raise ValueError("max_processes: expected at least 2")


@dataclass(frozen=True)
class _Finished:
    exit_code: int
    stdout: bytes
    stderr_tail: bytes


def _limits(max_memory_bytes: int | None, confined: Confinement | None = None) -> Callable[[], None]:
    """What the child runs between fork and exec: resource limits, then the sandbox, if any."""

    def apply() -> None:
        resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
        if max_memory_bytes is not None:
            resource.setrlimit(resource.RLIMIT_AS, (max_memory_bytes, max_memory_bytes))
        if confined is not None:
            confined.enter()

    return apply


def _kill_group(pgid: int) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, signal.SIGKILL)


class SubprocessAgent:
    """An :class:`AgentPort` that runs a local command once per question."""

    def __init__(self, settings: SubprocessAgentSettings) -> None:
        self.settings = settings

    async def identify(self) -> IdentityAndConfiguration:
        command = [*self.settings.command, IDENTITY_ARGUMENT]
        try:
            with tempfile.TemporaryDirectory(prefix="agent-") as private:
                finished = await self._run(
                    command,
                    b"",
                    self.settings.identity_timeout_seconds,
                    1024 * 1024,
                    self._environment(None, private),
                    private,
                )
        except AgentFault as fault:
            raise AgentUnavailable(fault.reason, fault.detail) from None
        if finished.exit_code != 0:
            raise AgentUnavailable(PROCESS_FAILED, _exit_detail(finished))
        try:
            return parse_identity_and_configuration(finished.stdout)
        except ContractViolation as exc:
            raise AgentUnavailable(MALFORMED_RESPONSE, str(exc)) from None

    async def run_scenario(
        self, request: ScenarioRequest, *, timeout_seconds: float | None = None
    ) -> AgentOutcome:
        budget = self.settings.timeout_seconds if timeout_seconds is None else timeout_seconds
        started = time.monotonic()
        with tempfile.TemporaryDirectory(prefix="agent-") as private:
            kubeconfig: str | None = None
            if request.environment is not None:
                kubeconfig = os.path.join(private, "kubeconfig")
                descriptor = os.open(kubeconfig, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
                with os.fdopen(descriptor, "w") as file:
                    file.write(request.environment.kubeconfig)
            mcp_config = _write_mcp_config(request, private)
            try:
                finished = await self._run(
                    list(self.settings.command),
                    request.to_wire_bytes(),
                    budget,
                    self.settings.max_output_bytes,
                    self._environment(kubeconfig, private, mcp_config),
                    private,
                    endpoints_of(request),
                )
            except AgentFault as fault:
                return AgentOutcome.failure(
                    fault.reason,
                    fault.detail,
                    exit_code=fault.exit_code,
                    elapsed_seconds=time.monotonic() - started,
                )
        elapsed = time.monotonic() - started
        try:
            response = parse_response(finished.stdout)
        except ContractViolation as exc:
            if finished.exit_code != 0:
                return AgentOutcome.failure(
                    PROCESS_FAILED,
                    _exit_detail(finished),
                    exit_code=finished.exit_code,
                    elapsed_seconds=elapsed,
                )
            return AgentOutcome.failure(MALFORMED_RESPONSE, str(exc), exit_code=0, elapsed_seconds=elapsed)
        if finished.exit_code != 0:
            # A readable answer beside a failed exit: what it reports is kept, but it is no answer.
            return AgentOutcome.failure(
                PROCESS_FAILED,
                _exit_detail(finished),
                response=response,
                exit_code=finished.exit_code,
                elapsed_seconds=elapsed,
            )
        return outcome_from_response(response, exit_code=0, elapsed_seconds=elapsed)

    # -- one bounded process run -------------------------------------------------------------------

    def _environment(
        self, kubeconfig: str | None, private: str, mcp_config: str | None = None
    ) -> dict[str, str]:
        env = {name: os.environ[name] for name in _INHERITED if name in os.environ}
        if self.settings.sandbox_hidden is not None:
            env["HOME"] = private  # the operator's home may hold what the sandbox hides
            env["TMPDIR"] = private
        env.update(self.settings.env)
        if kubeconfig is not None:
            env["KUBECONFIG"] = kubeconfig
        if mcp_config is not None:
            env[MCP_CONFIG_ENV] = mcp_config
        return env

    async def _run(
        self,
        command: list[str],
        stdin: bytes,
        budget: float,
        cap: int,
        env: dict[str, str],
        private: str,
        endpoints: tuple[Endpoint, ...] = (),
    ) -> _Finished:
        confined: Confinement | None = None
        if self.settings.sandbox_hidden is not None:
            try:
                confined = Confinement.prepare(
                    [Path(p) for p in self.settings.sandbox_hidden],
                    Path(private),
                    endpoints,
                    self.settings.max_processes,
                )
            except OSError as exc:  # no Landlock, no user namespace, no process bound
                raise AgentFault(LAUNCH_FAILED, f"cannot confine {command[0]!r}: {exc}") from None
        try:
            return await self._run_confined(command, stdin, budget, cap, env, private, confined)
        finally:
            if confined is not None:
                await confined.close()

    async def _run_confined(
        self,
        command: list[str],
        stdin: bytes,
        budget: float,
        cap: int,
        env: dict[str, str],
        private: str,
        confined: Confinement | None,
    ) -> _Finished:
        cwd = self.settings.cwd or (private if confined is not None else None)
        try:
            process = await asyncio.create_subprocess_exec(
                *command,
                stdin=asyncio.subprocess.PIPE,
                stdout=asyncio.subprocess.PIPE,
                stderr=asyncio.subprocess.PIPE,
                env=env,
                cwd=cwd,
                start_new_session=True,
                preexec_fn=_limits(self.settings.max_memory_bytes, confined),
            )
        except (
            OSError,
            ValueError,
            subprocess.SubprocessError,
        ) as exc:  # not found, not executable, limits or sandbox refused
            why = confined.why_not_started() if confined is not None else None
            if why:  # the child could not make the agent's namespace: said by the child itself
                raise AgentFault(LAUNCH_FAILED, f"cannot confine {command[0]!r}: {why}") from None
            raise AgentFault(LAUNCH_FAILED, f"cannot start {command[0]!r}: {exc}") from None
        finally:
            if confined is not None:
                confined.spawned()
        if process.stdin is None or process.stdout is None or process.stderr is None:  # pragma: no cover
            raise RuntimeError("asyncio did not give the child pipes")
        pgid = process.pid  # the child leads its own session, so its pid is its group id
        stderr_tail = bytearray()
        try:
            if confined is not None:
                try:
                    await confined.connect()
                except OSError as exc:
                    raise AgentFault(LAUNCH_FAILED, f"cannot relay {command[0]!r}'s network: {exc}") from None
            async with asyncio.timeout(budget):
                results = await asyncio.gather(
                    _feed(process.stdin, stdin),
                    _read_capped(process.stdout, cap, pgid),
                    _drain_tail(process.stderr, stderr_tail),
                    _reap(process, pgid),
                )
            stdout: bytes = results[1]
            exit_code: int = results[3]
        except TimeoutError:
            raise AgentFault(
                TIMEOUT, f"no answer within {budget:g} s; the process group was killed"
            ) from None
        finally:
            _kill_group(pgid)
            await _close(process)
        return _Finished(exit_code, stdout, bytes(stderr_tail))


def _write_mcp_config(request: ScenarioRequest, private: str) -> str | None:
    """The request's MCP client configuration as a private file (its path), or None when it has none."""
    if request.environment is None or not request.environment.mcp_endpoints:
        return None
    path = os.path.join(private, "mcp.json")
    descriptor = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL, 0o600)
    with os.fdopen(descriptor, "w") as file:
        json.dump(mcp_client_config(request.environment.mcp_endpoints), file, indent=2, sort_keys=True)
    return path


async def _feed(pipe: asyncio.StreamWriter, data: bytes) -> None:
    try:
        if data:
            pipe.write(data)
            await pipe.drain()
    except (BrokenPipeError, ConnectionResetError):
        pass  # the agent need not read its input
    finally:
        pipe.close()
        with contextlib.suppress(BrokenPipeError, ConnectionResetError):
            await pipe.wait_closed()


async def _read_capped(pipe: asyncio.StreamReader, cap: int, pgid: int) -> bytes:
    buffer = bytearray()
    while chunk := await pipe.read(_READ_CHUNK):
        if len(buffer) + len(chunk) > cap:
            _kill_group(pgid)
            raise AgentFault(
                OUTPUT_TOO_LARGE, f"stdout exceeded the limit of {cap} bytes; the process group was killed"
            )
        buffer += chunk
    return bytes(buffer)


async def _drain_tail(pipe: asyncio.StreamReader, tail: bytearray) -> None:
    while chunk := await pipe.read(_READ_CHUNK):
        tail += chunk
        del tail[:-STDERR_TAIL_BYTES]


async def _reap(process: asyncio.subprocess.Process, pgid: int) -> int:
    """Wait for the agent process itself to exit, then end whatever it left in its group.

    ``Process.wait()`` would also wait for the pipes to close, which a helper holding stdout could
    delay to the deadline; the exit status is watched directly instead.
    """
    while process.returncode is None:  # noqa: ASYNC110 - no event exists for "the child exited"
        await asyncio.sleep(_EXIT_POLL_SECONDS)
    _kill_group(pgid)
    return process.returncode


async def _close(process: asyncio.subprocess.Process) -> None:
    """Let asyncio finish with the process; if a helper that left the group still holds a pipe,
    close the pipes ourselves rather than wait for it."""
    with contextlib.suppress(TimeoutError):
        async with asyncio.timeout(_CLOSE_GRACE_SECONDS):
            await process.wait()
            return
    process._transport.close()  # type: ignore[attr-defined]


def _exit_detail(finished: _Finished) -> str:
    code = finished.exit_code
    how = f"killed by signal {signal.Signals(-code).name}" if code < 0 else f"exited with status {code}"
    tail = finished.stderr_tail.decode("utf-8", errors="replace").strip()
    return bounded_detail(f"the agent process {how}" + (f"; stderr ends: {tail}" if tail else ""))
