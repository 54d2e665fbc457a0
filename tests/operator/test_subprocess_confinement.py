"""A local agent process has no path to credentials (decision 0098, review finding H-4).

Landlock alone hid the operator's own credential files. The agent also needs: its own network, where
only the endpoints its request names are reachable (not the loopback back-ends: etcd, PostgreSQL,
VictoriaMetrics, kwok), no view of its user's kubeconfigs or of a dev cluster's PKI, a bound on its
processes, and no way to signal the operator on any kernel the sandbox accepts. Each test here failed
on the code before that decision.
"""

from __future__ import annotations

import asyncio
import ipaddress
import json
import os
import shutil
import socket
import struct
import subprocess
import sys
import tempfile
import textwrap
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from oasis_operator.adapters.agents import netjail, sandbox
from oasis_operator.adapters.agents.command import SubprocessAgent, SubprocessAgentSettings
from oasis_operator.adapters.agents.pids import controller_directory
from oasis_operator.adapters.agents.reach import Endpoint, endpoints_of, url_endpoint
from oasis_operator.core.contract import (
    AgentEnvironment,
    AgentOutcomeStatus,
    AgentScope,
    ScenarioRequest,
    ToolEndpoint,
)
from oasis_operator.handlers.settings import user_credential_paths

#: The sandbox's own placeholder: a hidden path that does not exist (these tests hide nothing else).
NOTHING = ("/nonexistent-oasis-secret",)


@pytest.fixture
def shared_dir() -> Iterator[Path]:
    """A directory every user can read (pytest's own is private to its user): agent scripts go here."""
    path = Path(tempfile.mkdtemp(prefix="oasis-confinement-"))
    path.chmod(0o755)
    try:
        yield path
    finally:
        shutil.rmtree(path, ignore_errors=True)


def kubeconfig(server: str) -> str:
    return (
        "apiVersion: v1\nkind: Config\ncurrent-context: c\n"
        f"clusters: [{{name: k, cluster: {{server: '{server}'}}}}]\n"
        "contexts: [{name: c, context: {cluster: k, user: u}}]\nusers: [{name: u, user: {token: t}}]\n"
    )


def request(server: str, tools: dict[str, str] | None = None) -> ScenarioRequest:
    return ScenarioRequest(
        prompt="List the pods.",
        tools=("container-orchestration",),
        mode="read-only",
        scope=AgentScope(namespaces=("shop",)),
        environment=AgentEnvironment(
            kubeconfig=kubeconfig(server),
            namespace="shop",
            tool_endpoints={k: ToolEndpoint(url=u, token="tok") for k, u in (tools or {}).items()},
        ),
    )


CONNECTOR = textwrap.dedent("""
    import json, socket, sys
    def reach(host, port):
        try:
            with socket.create_connection((host, int(port)), timeout=3) as s:
                s.sendall(b"ping")
                return s.recv(64).decode()
        except OSError as exc:
            return type(exc).__name__
    targets = json.loads(sys.argv[1])
    found = {f"{h}:{p}": reach(h, p) for h, p in targets}
    if sys.argv[2:] == ["identity-and-configuration"]:
        print(json.dumps({"identity": {"name": "c", "version": "1"}, "configuration": found}))
    else:
        sys.stdin.read()
        print(json.dumps({"actions": [], "reasoning": json.dumps(found), "final_answer": "done"}))
""")


class Listeners:
    """Loopback servers standing for the API server, the gateway and a back-end; each answers
    ``<name>:<what it received>`` and records it."""

    def __init__(self) -> None:
        self.servers: dict[str, asyncio.Server] = {}
        self.received: dict[str, list[bytes]] = {}

    async def add(self, name: str, host: str = "127.0.0.1") -> int:
        self.received[name] = []

        async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
            data = await reader.read(64)
            self.received[name].append(data)
            writer.write(f"{name}:".encode() + data)
            await writer.drain()
            writer.close()

        self.servers[name] = await asyncio.start_server(answer, host, 0)
        return int(self.servers[name].sockets[0].getsockname()[1])


@pytest.fixture
async def listeners() -> AsyncIterator[Listeners]:
    found = Listeners()
    try:
        yield found
    finally:
        for server in found.servers.values():
            server.close()


def connector(shared_dir: Path, targets: list[tuple[str, int]]) -> list[str]:
    script = shared_dir / "connector.py"
    script.write_text(CONNECTOR)
    script.chmod(0o644)
    return [sys.executable, str(script), json.dumps(targets)]


async def test_a_sandboxed_agent_reaches_the_endpoints_its_request_names_and_nothing_else(
    shared_dir: Path, listeners: Listeners
) -> None:
    api = await listeners.add("api")
    gateway = await listeners.add("gateway")
    backend = await listeners.add("backend")  # etcd, PostgreSQL, VictoriaMetrics...: not named
    targets = [
        ("127.0.0.1", api),
        ("localhost", gateway),  # the gateway's URL names a host name: resolved in the agent's /etc/hosts
        ("127.0.0.1", backend),
        ("192.0.2.1", 443),  # anywhere else (TEST-NET-1)
    ]
    scenario = request(f"https://127.0.0.1:{api}", {"observability-metrics": f"http://localhost:{gateway}/m"})
    command = connector(shared_dir, targets)
    sandboxed = SubprocessAgent(SubprocessAgentSettings(command=command, sandbox_hidden=NOTHING))
    outcome = await sandboxed.run_scenario(scenario)
    assert outcome.status is AgentOutcomeStatus.ANSWERED, outcome
    found = json.loads(outcome.response.reasoning)  # type: ignore[union-attr]
    assert found == {
        f"127.0.0.1:{api}": "api:ping",
        f"localhost:{gateway}": "gateway:ping",
        f"127.0.0.1:{backend}": "ConnectionRefusedError",
        "192.0.2.1:443": "OSError",  # ENETUNREACH: the namespace has no route out
    }
    assert listeners.received["backend"] == []
    # The control: the same command outside the sandbox reaches the back-end.
    bare = await SubprocessAgent(SubprocessAgentSettings(command=command)).run_scenario(scenario)
    assert json.loads(bare.response.reasoning)[f"127.0.0.1:{backend}"] == "backend:ping"  # type: ignore[union-attr]


async def test_the_reachable_set_is_the_request_s_own(shared_dir: Path, listeners: Listeners) -> None:
    """Two scenarios, two relays (a target control plane each, issue 27): each agent reaches its own
    API server only."""
    first, second = await listeners.add("first"), await listeners.add("second")
    command = connector(shared_dir, [("127.0.0.1", first), ("127.0.0.1", second)])
    agent = SubprocessAgent(SubprocessAgentSettings(command=command, sandbox_hidden=NOTHING))
    one, two = await asyncio.gather(
        agent.run_scenario(request(f"https://127.0.0.1:{first}")),
        agent.run_scenario(request(f"https://127.0.0.1:{second}/")),
    )
    assert json.loads(one.response.reasoning) == {  # type: ignore[union-attr]
        f"127.0.0.1:{first}": "first:ping",
        f"127.0.0.1:{second}": "ConnectionRefusedError",
    }
    assert json.loads(two.response.reasoning) == {  # type: ignore[union-attr]
        f"127.0.0.1:{first}": "ConnectionRefusedError",
        f"127.0.0.1:{second}": "second:ping",
    }


async def test_a_non_loopback_endpoint_is_reached_at_its_own_address(shared_dir: Path) -> None:
    """The relay in front of a target control plane may be any address: the agent's namespace gets
    that address on its loopback, so TLS names and the kubeconfig stay as handed."""
    address = _non_loopback_address()
    if address is None:
        pytest.fail("this machine has no non-loopback IPv4 address to test with")
    got: list[bytes] = []

    async def answer(reader: asyncio.StreamReader, writer: asyncio.StreamWriter) -> None:
        got.append(await reader.read(64))
        writer.write(b"relay:ok")
        writer.close()

    server = await asyncio.start_server(answer, address, 0)
    port = server.sockets[0].getsockname()[1]
    try:
        command = connector(shared_dir, [(address, port)])
        agent = SubprocessAgent(SubprocessAgentSettings(command=command, sandbox_hidden=NOTHING))
        outcome = await agent.run_scenario(request(f"https://{address}:{port}"))
    finally:
        server.close()
    assert json.loads(outcome.response.reasoning) == {f"{address}:{port}": "relay:ok"}  # type: ignore[union-attr]
    assert got == [b"ping"]


def _non_loopback_address() -> str | None:
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as probe:
        try:
            probe.connect(("192.0.2.1", 9))  # no packet is sent: this only picks the outgoing address
        except OSError:
            return None
        address = str(probe.getsockname()[0])
    return None if ipaddress.ip_address(address).is_loopback else address


async def test_the_identity_question_runs_with_no_network_at_all(
    shared_dir: Path, listeners: Listeners
) -> None:
    api = await listeners.add("api")
    agent = SubprocessAgent(
        SubprocessAgentSettings(command=connector(shared_dir, [("127.0.0.1", api)]), sandbox_hidden=NOTHING)
    )
    answer = await agent.identify()
    assert answer.configuration == {f"127.0.0.1:{api}": "ConnectionRefusedError"}
    assert listeners.received["api"] == []


FORKER = textwrap.dedent("""
    import json, os, sys, time
    if sys.argv[1:] != ["identity-and-configuration"]:
        sys.stdin.read()
    children = []
    for _ in range(150):
        try:
            pid = os.fork()
        except OSError:
            break
        if pid == 0:
            time.sleep(5)
            os._exit(0)
        children.append(pid)
    print(json.dumps({"actions": [], "reasoning": str(len(children)), "final_answer": "done"}))
""")


def _forker(shared_dir: Path) -> list[str]:
    script = shared_dir / "forker.py"
    script.write_text(FORKER)
    script.chmod(0o644)
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    return [python, str(script)]


async def test_a_fork_bomb_stops_at_the_process_bound(shared_dir: Path) -> None:
    """As the operator's own user (root here: a pids cgroup, as the kernel exempts uid 0 from
    RLIMIT_NPROC; otherwise RLIMIT_NPROC counted in the agent's own user namespace)."""
    command = _forker(shared_dir)
    agent = SubprocessAgent(
        SubprocessAgentSettings(command=command, sandbox_hidden=NOTHING, max_processes=40)
    )
    outcome = await agent.run_scenario(request("https://127.0.0.1:1"))
    assert outcome.status is AgentOutcomeStatus.ANSWERED, outcome
    assert int(outcome.response.reasoning) < 40  # type: ignore[union-attr]
    unbounded = await SubprocessAgent(SubprocessAgentSettings(command=command)).run_scenario(
        request("https://127.0.0.1:1")
    )
    assert int(unbounded.response.reasoning) == 150  # type: ignore[union-attr]


AS_NOBODY = textwrap.dedent("""
    import asyncio, json, os, sys
    from oasis_operator.adapters.agents.command import SubprocessAgent, SubprocessAgentSettings
    from oasis_operator.core.contract import AgentEnvironment, AgentScope, ScenarioRequest
    import oasis_operator.adapters.agents.confinement, oasis_operator.adapters.agents.relay  # noqa
    import asyncio.unix_events, subprocess, tempfile, resource, socket  # noqa: loaded before the drop
    command, shared = json.loads(sys.argv[1]), sys.argv[2]
    os.setgroups([])
    os.setgid(65534)
    os.setuid(65534)
    os.environ["TMPDIR"] = shared
    tempfile.tempdir = shared
    request = ScenarioRequest(prompt="p", tools=("t",), mode="read-only", scope=AgentScope(),
                              environment=AgentEnvironment(kubeconfig="apiVersion: v1", namespace="shop"))
    agent = SubprocessAgent(SubprocessAgentSettings(command=command, sandbox_hidden=("/nonexistent",), max_processes=40))
    outcome = asyncio.run(agent.run_scenario(request))
    print(json.dumps([outcome.status.value, outcome.response.reasoning if outcome.response else outcome.detail]))
""")


@pytest.mark.skipif(
    os.geteuid() != 0, reason="needs root to become another user (the non-root case is the test above)"
)
def test_a_non_root_operator_bounds_its_agent_with_rlimit_nproc_in_the_agent_s_namespace(
    shared_dir: Path,
) -> None:
    """Counted per user namespace: the operator's own threads and the uid's other processes on the
    machine do not count against the agent, nor the agent against them."""
    shared_dir.chmod(0o1777)
    command = _forker(shared_dir)
    done = subprocess.run(
        [sys.executable, "-c", AS_NOBODY, json.dumps(command), str(shared_dir)],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=str(shared_dir),
    )
    assert done.returncode == 0, done.stderr[-2000:]
    status, forked = json.loads(done.stdout.strip().splitlines()[-1])
    assert status == "Answered", forked
    assert 30 <= int(forked) < 40


def test_a_landlock_without_signal_scoping_is_refused_naming_the_operator(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Below ABI 6 an agent of the operator's own user could kill the operator: the sandbox refuses."""
    assert sandbox.refusal(sandbox.MIN_ABI) is None
    for abi in range(1, sandbox.MIN_ABI):
        why = sandbox.refusal(abi)
        assert why is not None
        assert "kill the operator" in why
        assert f"ABI {abi}" in why
    monkeypatch.setattr(sandbox, "abi_version", lambda: 5)
    with pytest.raises(sandbox.SandboxError, match="kill the operator"):
        sandbox.prepare([Path("/nonexistent")], [])


REFUSED_HERE = textwrap.dedent("""
    import asyncio, json, sys
    from oasis_operator.adapters.agents import confinement
    from oasis_operator.adapters.agents.command import SubprocessAgent, SubprocessAgentSettings
    agent = SubprocessAgent(SubprocessAgentSettings(command=[sys.executable, "-c", "0"], sandbox_hidden=("/x",)))
    try:
        asyncio.run(agent.identify())
        launched = "started"
    except Exception as exc:
        launched = str(exc)
    print(json.dumps([confinement.unavailable(), launched]))
""")


def test_where_user_namespaces_are_unavailable_the_adapter_refuses_saying_why() -> None:
    """A user namespace whose limit of nested namespaces is 0 stands for a kernel or seccomp profile
    that refuses them: the operator's start-up check and the adapter both refuse, with the reason."""
    unshare = shutil.which("unshare")
    if unshare is None:
        pytest.fail("util-linux's unshare is needed to make a namespace without user namespaces")
    script = f'echo 0 > /proc/sys/user/max_user_namespaces && exec {sys.executable} -c "$0"'
    done = subprocess.run(
        [unshare, "--user", "--map-current-user", "sh", "-c", script, REFUSED_HERE],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr[-2000:]
    why, launched = json.loads(done.stdout.strip().splitlines()[-1])
    assert "private network namespace cannot be made" in why, why
    assert "No space left on device" in why, why
    assert "cannot confine" in launched, launched
    assert "No space left on device" in launched, launched


def test_the_operator_hides_its_user_s_kubeconfig_chain_and_the_dev_clusters(tmp_path: Path) -> None:
    environ = {
        "HOME": "/home/alice",
        "KUBECONFIG": f"/home/alice/work.kubeconfig{os.pathsep}/etc/rancher/k3s/k3s.yaml",
        "XDG_CACHE_HOME": "/var/cache/alice",
    }
    assert user_credential_paths(environ) == (
        Path("/home/alice/work.kubeconfig"),
        Path("/etc/rancher/k3s/k3s.yaml"),
        Path("/home/alice/.kube"),
        Path("/var/cache/alice/oasis-operator/clusters"),
    )
    assert user_credential_paths({"HOME": "/h", "OASIS_CACHE_DIR": "/c"})[-1] == Path("/c/clusters")


# --- the pure parts ---------------------------------------------------------------------------------

hosts = st.one_of(
    st.from_regex(r"[a-z][a-z0-9-]{0,20}(\.[a-z][a-z0-9-]{0,20}){0,3}", fullmatch=True),
    st.ip_addresses(v=4).map(str),
    st.ip_addresses(v=6).map(str),
)


def _url(scheme: str, host: str, port: int | None, path: str) -> str:
    shown = f"[{host}]" if ":" in host else host
    return f"{scheme}://{shown}{'' if port is None else f':{port}'}{path}"


@settings(max_examples=200, deadline=None)
@given(
    servers=st.lists(
        st.tuples(st.sampled_from(["http", "https", "HTTPS"]), hosts, st.none() | st.integers(1, 65535)),
        min_size=1,
        max_size=3,
    ),
    tools=st.lists(
        st.tuples(st.sampled_from(["http", "https"]), hosts, st.none() | st.integers(1, 65535)), max_size=3
    ),
    path=st.sampled_from(["", "/", "/prefix/x", "/a?b=c#d"]),
)
def test_the_endpoints_are_exactly_the_kubeconfig_servers_and_tool_urls(
    servers: list[tuple[str, str, int | None]], tools: list[tuple[str, str, int | None]], path: str
) -> None:
    def expected(scheme: str, host: str, port: int | None) -> Endpoint:
        return Endpoint(host.lower(), port or (443 if scheme.lower() == "https" else 80))

    kube = "apiVersion: v1\nkind: Config\nclusters:\n" + "".join(
        f"- name: c{i}\n  cluster: {{server: '{_url(s, h, p, path)}'}}\n"
        for i, (s, h, p) in enumerate(servers)
    )
    scenario = ScenarioRequest(
        prompt="p",
        tools=("t",),
        mode="read-only",
        environment=AgentEnvironment(
            kubeconfig=kube,
            namespace="shop",
            tool_endpoints={
                f"t{i}": ToolEndpoint(url=_url(s, h, p, path), token="x") for i, (s, h, p) in enumerate(tools)
            },
        ),
    )
    assert set(endpoints_of(scenario)) == {expected(*entry) for entry in [*servers, *tools]}


@pytest.mark.parametrize(
    "url", ["file:///etc/passwd", "https://", "postgresql://db:5432/x", "http://h:99999/", "not a url"]
)
def test_what_is_not_an_http_endpoint_opens_nothing(url: str) -> None:
    assert url_endpoint(url) is None


def test_a_request_without_an_environment_names_no_endpoint() -> None:
    assert endpoints_of(None) == ()
    assert endpoints_of(ScenarioRequest(prompt="p", tools=("t",), mode="read-only")) == ()
    broken = request("https://x:1").model_copy(
        update={"environment": AgentEnvironment(kubeconfig="{not yaml", namespace="shop")}
    )
    assert endpoints_of(broken) == ()


@settings(max_examples=200, deadline=None)
@given(st.lists(st.ip_addresses().map(str), max_size=6))
def test_the_loopback_gets_every_non_loopback_address_as_a_host_route(addresses: list[str]) -> None:
    messages = netjail.netlink_messages(addresses)
    link, added = messages[0], messages[1:]
    assert struct.unpack_from("=H", link, 4)[0] == 16  # RTM_NEWLINK: lo up
    wanted = sorted({a for a in addresses if not ipaddress.ip_address(a).is_loopback})
    assert len(added) == len(wanted)
    for message, address in zip(added, wanted, strict=True):
        length, kind = struct.unpack_from("=IH", message)
        assert (length, kind) == (len(message), 20)  # RTM_NEWADDR
        family, prefix, _flags, _scope, index = struct.unpack_from("=BBBBI", message, 16)
        ip = ipaddress.ip_address(address)
        assert (family, prefix, index) == (
            socket.AF_INET if ip.version == 4 else socket.AF_INET6,
            ip.max_prefixlen,
            1,
        )
        assert ip.packed in message


def test_the_hosts_overlay_keeps_the_original_and_adds_each_name() -> None:
    text = netjail.hosts_overlay("127.0.0.1 localhost\n", {"relay.example": ["10.0.0.7", "fd00::7"]})
    assert text.splitlines()[0] == "127.0.0.1 localhost"
    assert "10.0.0.7 relay.example" in text.splitlines()
    assert "fd00::7 relay.example" in text.splitlines()


MOUNTINFO_V1 = (
    "30 25 0:26 / /sys/fs/cgroup rw - tmpfs tmpfs rw\n"
    "40 30 0:35 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids\n"
    "41 30 0:36 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw\n"
)


@pytest.mark.parametrize(
    ("mountinfo", "cgroups", "expected"),
    [
        (MOUNTINFO_V1, "8:pids:/\n0::/\n", "/sys/fs/cgroup/pids"),
        (MOUNTINFO_V1, "8:pids:/user.slice/x\n0::/\n", "/sys/fs/cgroup/pids/user.slice/x"),
        (
            "40 30 0:35 /docker/abc /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n",
            "8:pids:/docker/abc/run\n",
            "/sys/fs/cgroup/pids/run",
        ),
        ("41 30 0:36 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n", "0::/user.slice\n", "/sys/fs/cgroup"),
        ("25 1 0:1 / / rw - ext4 /dev/sda1 rw\n", "0::/\n", None),
    ],
)
def test_the_pids_controller_is_found_where_this_process_may_make_a_child(
    mountinfo: str, cgroups: str, expected: Any
) -> None:
    found = controller_directory(mountinfo, cgroups)
    assert (None if found is None else str(found)) == expected
