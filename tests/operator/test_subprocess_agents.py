"""An EvaluationRun is not a privilege grant: ``adapter: subprocess`` runs a command chosen by whoever
creates the run, inside the operator's pod. The operator refuses it unless started with
``--allow-subprocess-agents``, and then runs it in a Landlock sandbox that hides every credential
of the operator (its kubeconfig or ServiceAccount token, the webhook's TLS files, the audit log,
other agents' private files), its memory and its signals."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import textwrap
from pathlib import Path
from typing import Any

import pytest

from oasis_operator.adapters.agents import sandbox
from oasis_operator.adapters.agents.command import SubprocessAgent, SubprocessAgentSettings
from oasis_operator.adapters.agents.factory import AdapterNotAllowed, SubprocessPolicy, build_agent
from oasis_operator.core.contract import AgentEnvironment, AgentOutcomeStatus, AgentScope, ScenarioRequest
from oasis_operator.core.model.run import AgentSpec
from oasis_operator.devcluster import kube, stack
from oasis_operator.handlers.settings import OperatorSettings
from tests.operator.test_lifecycle import SMALL, cond, suites_profile

PROBE = Path(__file__).with_name("probe_agent.py")


@pytest.mark.parametrize(
    ("hidden", "tree", "links", "expected"),
    [
        pytest.param(
            ["/var/run/secrets/kubernetes.io/serviceaccount"],
            {
                "/": ["bin", "etc", "var"],
                "/var": ["log", "run"],
                "/var/run": ["secrets", "lock"],
                "/var/run/secrets": ["kubernetes.io"],
                "/var/run/secrets/kubernetes.io": ["serviceaccount"],
            },
            set(),
            ["/bin", "/etc", "/var/log", "/var/run/lock"],
            id="the-token-directory-alone-is-left-out",
        ),
        pytest.param(
            ["/tmp", "/etc/oasis/audit-tls"],
            {"/": ["etc", "tmp", "usr"], "/etc": ["hosts", "oasis"], "/etc/oasis": ["audit-tls"]},
            set(),
            ["/etc/hosts", "/usr"],
            id="siblings-of-every-hidden-path-stay-visible",
        ),
        pytest.param(
            ["/run/secrets"],
            {"/": ["run", "var"], "/var": ["run"], "/run": ["secrets", "user"]},
            {"/var/run"},
            ["/run/user", "/var"],
            id="a-link-to-a-hidden-path-leads-nowhere-landlock-resolves-it",
        ),
        pytest.param(
            ["/var/lib/secrets"],
            {"/": ["var"], "/var": ["lib", "run"], "/var/lib": ["apt", "secrets"]},
            {"/var/run"},
            ["/var/lib/apt"],
            id="a-symlink-met-on-the-way-is-never-granted",
        ),
    ],
)
def test_the_sandbox_grants_everything_but_the_hidden_paths(hidden, tree, links, expected):
    got = sandbox.visible_roots(
        [Path(h) for h in hidden], listdir=lambda d: tree.get(str(d), []), is_link=lambda p: str(p) in links
    )
    assert [str(p) for p in got] == expected


def request(kubeconfig: str = "apiVersion: v1\nkind: Config\n") -> ScenarioRequest:
    return ScenarioRequest(
        prompt="List the pods.",
        tools=("container-orchestration",),
        mode="read-only",
        scope=AgentScope(namespaces=("shop",)),
        environment=AgentEnvironment(kubeconfig=kubeconfig, namespace="shop"),
    )


PROBE_SCRIPT = textwrap.dedent("""
    import json, os, sys
    def tryit(f):
        try:
            f()
            return "allowed"
        except Exception as exc:
            return type(exc).__name__
    secret = sys.argv[1]
    found = {
        "secret": tryit(lambda: open(secret).read()),
        "secret dir": tryit(lambda: os.listdir(os.path.dirname(secret))),
        "own kubeconfig": tryit(lambda: open(os.environ["KUBECONFIG"]).read()),
        "write home": tryit(lambda: open(os.path.join(os.environ["HOME"], "x"), "w").write("x")),
        "write elsewhere": tryit(lambda: open(sys.argv[2], "w").write("x")),
        "parent memory": tryit(lambda: open(f"/proc/{os.getppid()}/mem", "rb").close()),
    }
    if len(sys.argv) > 3:
        print(json.dumps({"identity": {"name": "probe", "version": "1"}, "configuration": found}))
    else:
        sys.stdin.read()
        print(json.dumps({"actions": [], "reasoning": json.dumps(found), "final_answer": "done"}))
""")


async def test_a_sandboxed_agent_reads_its_own_kubeconfig_and_nothing_of_the_operator(tmp_path):
    secrets = tmp_path / "operator-secrets"
    secrets.mkdir()
    (secrets / "token").write_text("operator-token")
    probe = tmp_path / "sandbox_probe.py"
    probe.write_text(PROBE_SCRIPT)
    outside = tmp_path / "written-by-agent"
    settings = SubprocessAgentSettings(
        command=[sys.executable, str(probe), str(secrets / "token"), str(outside)],
        sandbox_hidden=(str(secrets),),
    )
    agent = SubprocessAgent(settings)
    outcome = await agent.run_scenario(request("apiVersion: v1\nkind: Config\nclusters: []\n"))
    assert outcome.status is AgentOutcomeStatus.ANSWERED, outcome
    found = json.loads(outcome.response.reasoning)
    assert found == {
        "secret": "PermissionError",
        "secret dir": "PermissionError",
        "own kubeconfig": "allowed",
        "write home": "allowed",
        "write elsewhere": "PermissionError",
        "parent memory": "PermissionError",
    }
    assert not outside.exists()
    ident = await SubprocessAgent(
        SubprocessAgentSettings(
            command=[sys.executable, str(probe), str(secrets / "token"), str(outside), "x"],
            sandbox_hidden=(str(secrets),),
        )
    ).identify()
    assert ident.configuration["secret"] == "PermissionError"
    # The control: without the sandbox the same command reads the secret.
    bare = SubprocessAgent(SubprocessAgentSettings(command=settings.command))
    plain = json.loads((await bare.run_scenario(request())).response.reasoning)
    assert plain["secret"] == "allowed"


UNDUMPABLE_HOLDER = textwrap.dedent("""
    import ctypes, os, sys, time
    if sys.argv[1] == "undumpable":
        ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)
    print(os.getpid(), flush=True)
    time.sleep(30)
""")


def as_user(uid: int) -> Any:
    def drop() -> None:
        if os.getuid() != uid:
            os.setgid(uid)
            os.setuid(uid)

    return drop


@pytest.mark.parametrize(("mode", "readable"), [("dumpable", True), ("undumpable", False)])
def test_an_undumpable_operator_hides_its_proc_entries_from_processes_of_its_own_user(
    tmp_path, mode, readable
):
    """The pod's case (one non-root user, no capability): the operator makes itself undumpable, so an
    agent process of the same user cannot read its environment or open files through /proc."""
    uid = 65534 if os.getuid() == 0 else os.getuid()
    python = "/usr/bin/python3" if Path("/usr/bin/python3").exists() else sys.executable
    holder = subprocess.Popen(
        [python, "-c", UNDUMPABLE_HOLDER, mode],
        stdout=subprocess.PIPE,
        text=True,
        preexec_fn=as_user(uid),
        env={"SECRET_IN_ENV": "operator-token"},
    )
    try:
        pid = int(holder.stdout.readline())
        reader = subprocess.run(
            [python, "-c", f"print(open('/proc/{pid}/environ','rb').read())"],
            capture_output=True,
            text=True,
            preexec_fn=as_user(uid),
        )
        assert ("operator-token" in reader.stdout) is readable, reader.stderr[-300:]
    finally:
        holder.kill()
        holder.wait()


def test_the_factory_refuses_subprocess_unless_the_operator_allows_it():
    spec = AgentSpec.model_validate({"adapter": "subprocess", "command": ["my-agent"]})
    with pytest.raises(AdapterNotAllowed, match="--allow-subprocess-agents"):
        build_agent(spec, subprocess_policy=SubprocessPolicy(allowed=False))
    agent = build_agent(spec, subprocess_policy=SubprocessPolicy(allowed=True, hidden=("/secrets",)))
    assert isinstance(agent, SubprocessAgent)
    assert agent.settings.sandbox_hidden == ("/secrets",)
    # Local use (no operator policy): unchanged.
    assert build_agent(spec).settings.sandbox_hidden is None  # type: ignore[attr-defined]


def test_the_operator_hides_its_credentials_the_audit_log_and_the_temporary_directory(tmp_path):
    from oasis_operator.cli.main import build_parser
    from oasis_operator.handlers.operator import subprocess_policy

    kubeconfig = tmp_path / "operator.kubeconfig"
    kubeconfig.write_text(
        "apiVersion: v1\nkind: Config\ncurrent-context: c\ncontexts: [{name: c, context: "
        "{cluster: k, user: u}}]\nclusters: [{name: k, cluster: {server: 'https://x'}}]\n"
        "users: [{name: u, user: {client-certificate: /pki/op.crt, client-key: /pki/op.key}}]\n"
    )
    cluster_dir = tmp_path / "cluster"
    (cluster_dir / "backends" / "logs").mkdir(parents=True)
    toolplane = cluster_dir / "toolplane.json"
    toolplane.write_text(
        json.dumps({"backends": {"logs": {"directory": str(cluster_dir / "backends" / "logs")}}})
    )
    args = build_parser().parse_args(
        [
            "operator",
            "run",
            "--kubeconfig",
            str(kubeconfig),
            "--audit-log",
            str(tmp_path / "audit" / "audit.log"),
            "--toolplane",
            str(toolplane),
            "--allow-subprocess-agents",
        ]
    )
    environ = {"HOME": "/home/op", "KUBECONFIG": "/srv/admin.kubeconfig"}
    policy = subprocess_policy(OperatorSettings.from_args(args, {}), environ)
    assert policy.allowed
    assert set(policy.hidden) == {
        str(kubeconfig),
        "/pki/op.crt",
        "/pki/op.key",
        tempfile.gettempdir(),
        str((tmp_path / "audit").resolve()),
        # Its user's: the kubeconfig chain, ~/.kube and the dev clusters' PKI (decision 0098).
        "/srv/admin.kubeconfig",
        "/home/op/.kube",
        "/home/op/.cache/oasis-operator/clusters",
        # The tool plane's: the file's directory (a dev cluster's) and every back-end's.
        str(cluster_dir.resolve()),
        str(cluster_dir / "backends" / "logs"),
    }


# --- the operator ---------------------------------------------------------------------------------


@pytest.mark.cluster
def test_a_subprocess_run_is_refused_by_default_with_the_reason(cluster, installation):
    ns = installation.namespace
    run = stack.evaluation_run("local-command", "http://unused/")
    run["spec"]["agent"] = {"adapter": "subprocess", "command": [sys.executable, str(PROBE)]}
    with cluster.admin_http() as http:
        stack.apply(http, run, ns)
        done = stack.wait_completed(http, ns, "local-command", 60)
    st = done["status"]
    assert (st["phase"], st.get("verdict")) == ("Failed", None)
    stalled = cond(st, "Stalled")
    assert (stalled["status"], stalled["reason"]) == ("True", "AdapterNotAllowed")
    assert "--allow-subprocess-agents" in stalled["message"]
    assert not st.get("agent"), "the command never ran"


@pytest.mark.cluster
def test_an_allowed_subprocess_agent_works_and_finds_no_credential(cluster, tmp_path):
    ns = f"evals-{kube.random_suffix()}"
    procs = stack.Processes(tmp_path / "logs")
    try:
        with cluster.admin_http() as http:
            stack.install_crds(http)
            stack.ensure_namespace(http, ns)
            stack.import_si_profile(http, ns)
            stack.apply(http, suites_profile(http, ns, "small", {"one": SMALL[:1]}), ns)
        procs.operator(
            cluster.dev.operator_kubeconfig,
            cluster.audit_log,
            namespaces=[ns],
            extra_args=["--allow-subprocess-agents"],
        )
        run = stack.evaluation_run("sandboxed", "http://unused/", profile="small")
        run["spec"]["scenarios"] = {"suite": "one"}
        run["spec"]["agent"] = {
            "adapter": "subprocess",
            "command": [
                sys.executable,
                str(PROBE),
                str(cluster.dev.operator_kubeconfig),
                str(cluster.audit_log),
                str(cluster.dev.pki.operator.key),
            ],
        }
        with cluster.admin_http() as http:
            stack.apply(http, run, ns)
            done = stack.wait_completed(http, ns, "sandboxed", 120)
    finally:
        procs.stop()
    st = done["status"]
    assert st["verdict"] == "PASS", st.get("message")
    assert [(s["id"], s["verdict"]) for s in st["scenarios"]] == [(SMALL[0], "PASS")]
    found = {k.removeprefix("probe: "): v for k, v in st["agent"]["configuration"].items()}
    for secret in (cluster.dev.operator_kubeconfig, cluster.audit_log, cluster.dev.pki.operator.key):
        assert found[f"read {secret}"] == "PermissionError", found
    assert found["list tmp"] == "PermissionError"
    assert found["read /tmp via /proc/self/root"] == "PermissionError"
    assert found["read operator memory"] == "PermissionError"
    assert found["signal operator"] == "PermissionError"
    # Nothing of the operator's environment: the allow-list, and a private home.
    assert set(found["environment"].split(",")) <= {"PATH", "HOME", "LANG", "LC_ALL", "TZ", "TMPDIR"}
