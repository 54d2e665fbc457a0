"""The chart's database back-end (decision 0071): PostgreSQL from the official image, its two containers
(``initdb`` once, then the server) running the local stack's command lines as the image's user on a
read-only root, the tool-plane file's ``database`` entry loaded by the operator's own settings after
the real ``prepare-toolplane``, and values the schema guards.

No image is pulled (there is no container runtime here). The strongest check available: the rendered
containers' command lines run as local processes of the same PostgreSQL major (Debian's 15), each in a
mount namespace of its own whose root is read-only and whose only writable places are the pod's volumes
bound at the containers' mount paths (directories made as the kubelet makes an ``emptyDir`` with the
pod's ``fsGroup``: group-owned by it, set-group-ID), as a user with a passwd entry and the pod's group;
then the operator's database adapter, reading the rendered tool-plane file, injects a scenario's
database and the agent's reader role reads it back."""

from __future__ import annotations

import asyncio
import copy
import json
import os
import pwd
import shlex
import signal
import stat
import subprocess
import time
from pathlib import Path
from typing import Any

import httpx2
import psycopg
import pytest
import yaml

from oasis_operator.adapters.toolplane.database import PASSWORD_FILE, Database
from oasis_operator.adapters.toolplane.database_settings import DatabaseSettings, admin_url
from oasis_operator.adapters.toolplane.metrics import MetricsSettings
from oasis_operator.cli.main import build_parser
from oasis_operator.core.environment.plan import plan_environment
from oasis_operator.core.model.scenario import parse_scenario
from oasis_operator.core.ports import AgentAccess
from oasis_operator.devcluster import kube
from oasis_operator.devcluster.backends.base import free_port
from oasis_operator.devcluster.backends.database import (
    ADMIN,
    INITDB_ONCE,
    SERVER_USER,
    bindir,
    initdb_args,
    server_args,
)
from oasis_operator.handlers.settings import ToolPlaneSettings
from tests.shipping.conftest import (
    ApplyChart,
    Render,
    Tools,
    by_kind,
    helm_template,
    refused_by_schema,
)
from tests.shipping.test_chart_toolplane import containers, mounts, operator_pod, toolplane_file
from tests.toolplane.conftest import CAPABILITY_DOCS

DATABASE_ON: dict[str, Any] = {"toolPlane": {"database": {"enabled": True}}}
TOOLPLANE_ROOT = "/var/lib/oasis/toolplane"
#: The pod's group (the chart's fsGroup and every other container's user).
POD_GROUP = 65532
EJ3 = "infra.capability.ej.impact-escalation-001"


def test_the_database_adds_its_two_containers_and_its_own_volume(render: Render) -> None:
    pod = operator_pod(render(DATABASE_ON))
    by_name = containers(pod)
    assert [c["name"] for c in pod["initContainers"]] == ["prepare-toolplane", "database-init"]
    assert [c["name"] for c in pod["containers"]] == ["operator", "database"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["database-data"] == {"name": "database-data", "emptyDir": {"sizeLimit": "1Gi"}}
    # The data volume is the database's alone; the operator reads only the password, on the shared one.
    users = {n for n, c in by_name.items() if "database-data" in mounts(c).values()}
    assert users == {"database-init", "database"}
    init_mounts = {m["name"]: m for m in by_name["database-init"]["volumeMounts"]}
    assert init_mounts["toolplane"] == {"name": "toolplane", "mountPath": TOOLPLANE_ROOT, "readOnly": True}
    assert "toolplane" not in mounts(by_name["database"]).values()
    # The gateway follows the back-end, as with the others.
    args = by_name["operator"]["args"]
    assert "--toolplane=/etc/oasis/toolplane/toolplane.json" in args
    assert any(a.startswith("--tool-gateway-url=") for a in args)
    # Without the value, nothing of it.
    for other in ({"toolPlane": {"metrics": {"enabled": True}}}, {}):
        names = set(containers(operator_pod(render(other))))
        assert not names & {"database-init", "database"}, other


def test_the_containers_run_the_command_lines_of_the_local_stack(render: Render) -> None:
    """initdb and postgres get the arguments oasis_operator/devcluster/backends/database.py starts
    them with (the same functions build both), at the chart's paths and port, and not through the
    image's entrypoint."""
    docs = render({"toolPlane": {"database": {"enabled": True, "port": 15432}}})
    by_name = containers(operator_pod(docs))
    entry = json.loads(toolplane_file(docs))["backends"]["database"]
    directory = Path(entry["directory"])
    assert entry["endpoints"] == {"postgres": admin_url("127.0.0.1", 15432, ADMIN)}
    data_root = mounts(by_name["database"])
    (data_mount,) = [p for p, v in data_root.items() if v == "database-data"]
    data = Path(data_mount) / "data"
    init, server = by_name["database-init"], by_name["database"]
    assert init["command"] == ["sh", "-c", INITDB_ONCE, "initdb"]
    assert init["args"] == initdb_args(data, directory / PASSWORD_FILE)
    # INITDB_ONCE reads the data directory as $2.
    assert init["args"][:2] == ["-D", str(data)]
    assert server["command"] == ["postgres"]
    assert server["args"] == server_args(data, "127.0.0.1", 15432)
    for c in (init, server):
        assert c["image"] == "postgres:15-bookworm"


def test_the_image_tag_is_the_postgresql_major_the_local_stack_runs() -> None:
    repo = Path(__file__).resolve().parents[2]
    tag = yaml.safe_load((repo / "charts/oasis-operator/values.yaml").read_text())["toolPlane"]["database"][
        "image"
    ]["tag"]
    local_major = bindir().parent.name  # /usr/lib/postgresql/<major>/bin
    assert tag.split("-")[0].split(".")[0] == local_major == "15"


def test_both_containers_run_as_the_images_user_unprivileged_with_a_read_only_root(render: Render) -> None:
    by_name = containers(operator_pod(render(DATABASE_ON)))
    for name in ("database-init", "database"):
        sc = by_name[name]["securityContext"]
        assert (sc["readOnlyRootFilesystem"], sc["allowPrivilegeEscalation"], sc["runAsNonRoot"]) == (
            True,
            False,
            True,
        )
        assert sc["capabilities"] == {"drop": ["ALL"]}
        # The official Debian image's postgres user (docker-library/postgres 15/bookworm/Dockerfile).
        assert (sc["runAsUser"], sc["runAsGroup"]) == (999, 999)
        assert by_name[name]["resources"]["limits"]["memory"]
        assert not by_name[name].get("ports")


def _prepare(docs: list[dict[str, Any]], tmp: Path) -> tuple[Path, Path]:
    """The rendered tool-plane file with the shared volume at ``tmp/toolplane``, after the real
    ``prepare-toolplane`` (its command line as rendered). Returns the file and the volume."""
    volume = tmp / "toolplane"
    volume.mkdir()
    local_file = tmp / "toolplane.json"
    local_file.write_text(toolplane_file(docs).replace(TOOLPLANE_ROOT, str(volume)))
    prepare = build_parser().parse_args(containers(operator_pod(docs))["prepare-toolplane"]["command"][1:])
    prepare.toolplane = str(local_file)
    assert prepare.func(prepare) == 0
    return local_file, volume


@pytest.mark.parametrize("others", [False, True])
def test_the_rendered_tool_plane_file_is_what_the_operators_settings_load(
    render: Render, tmp_path: Path, others: bool
) -> None:
    values: dict[str, Any] = {"database": {"enabled": True}}
    if others:
        values |= {"metrics": {"enabled": True}, "alerts": {"enabled": True}}
    local_file, volume = _prepare(render({"toolPlane": values}), tmp_path)
    settings = ToolPlaneSettings.load(local_file)
    assert settings.of(DatabaseSettings) == DatabaseSettings(
        volume / "database", "postgresql://oasis@127.0.0.1:5432/postgres"
    )
    assert (settings.of(MetricsSettings) is not None) == others
    password = volume / "database" / PASSWORD_FILE
    # Group-readable (the server's init container reads it through the pod's group), no more.
    assert stat.S_IMODE(password.stat().st_mode) == 0o640
    assert len(password.read_text()) >= 24


def test_prepare_keeps_the_password_a_restarted_pod_has(render: Render, tmp_path: Path) -> None:
    """The data volume keeps its cluster across a restart of the pod's containers, and with it the
    administrator's password: the init container, run again, must not make a new one."""
    docs = render(DATABASE_ON)
    local_file, volume = _prepare(docs, tmp_path)
    password = (volume / "database" / PASSWORD_FILE).read_text()
    args = build_parser().parse_args(["operator", "prepare-toolplane", f"--toolplane={local_file}"])
    assert args.func(args) == 0
    assert (volume / "database" / PASSWORD_FILE).read_text() == password


@pytest.mark.parametrize(
    ("values", "complaint"),
    [
        ({"database": {"enabled": True, "port": 80}}, "/toolPlane/database/port"),
        ({"database": {"enabled": True, "runAsUser": 0}}, "/toolPlane/database/runAsUser"),
        ({"database": {"image": {"tag": ""}}}, "/toolPlane/database/image/tag"),
        ({"database": {"volume": {"sizeLimit": "lots"}}}, "/toolPlane/database/volume/sizeLimit"),
        ({"database": {"password": "x"}}, "'password' not allowed"),
        ({"database": {"enabled": "yes"}}, "/toolPlane/database/enabled"),
    ],
)
def test_the_values_schema_refuses_bad_database_values(
    tools: Tools, tmp_path: Path, values: dict[str, Any], complaint: str
) -> None:
    refused_by_schema(tools, tmp_path, {"toolPlane": values}, complaint)


@pytest.mark.parametrize(
    "values",
    [
        {"database": {"enabled": True, "port": 8081}},
        {"database": {"enabled": True, "port": 8428}, "metrics": {"enabled": True}},
    ],
)
def test_a_database_port_used_twice_in_the_pod_is_refused(
    tools: Tools, tmp_path: Path, values: dict[str, Any]
) -> None:
    done = helm_template(tools, tmp_path, {"toolPlane": values})
    assert done.returncode != 0
    assert "is already used in the operator's pod" in done.stderr


# -- the rendered containers, run ------------------------------------------------------------------------
def _emptydir(path: Path) -> Path:
    """A directory as the kubelet makes an emptyDir for a pod with an fsGroup: world-writable, owned by
    the group, set-group-ID (what is made inside inherits the group)."""
    path.mkdir()
    os.chown(path, 0, POD_GROUP)
    path.chmod(0o2777)
    return path


def _in_pod(container: dict[str, Any], volumes: dict[str, Path]) -> list[str]:
    """The container's command line as a local process: in a mount namespace of its own, with the root
    read-only, the pod's volumes bound at the container's mount paths (read-only where it says so), as
    the local ``postgres`` user (standing for the image's, which this machine has not) with the pod's
    group, the image's environment."""
    user = pwd.getpwnam(SERVER_USER)
    lines = ["set -e", "mount -t tmpfs -o mode=755 pod /var/lib"]
    for m in container["volumeMounts"]:
        target = shlex.quote(m["mountPath"])
        lines += [f"mkdir -p {target}", f"mount --bind {shlex.quote(str(volumes[m['name']]))} {target}"]
        if m.get("readOnly"):
            lines.append(f"mount -o remount,bind,ro {target}")
    lines += [
        "mount -o remount,ro /var/lib",
        "mount -o remount,bind,ro /",
        f'exec setpriv --reuid={user.pw_uid} --regid={user.pw_gid} --groups={POD_GROUP} --pdeathsig=TERM -- "$@"',
    ]
    return [
        "unshare",
        "--mount",
        "--propagation",
        "private",
        "--",
        "sh",
        "-c",
        "\n".join(lines),
        "pod",
        *container["command"],
        *container.get("args", []),
    ]


#: The image's environment (its Dockerfile's ENV), with this machine's binaries of the same major.
IMAGE_ENV = {
    "PATH": f"{bindir()}:/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
    "LANG": "en_US.utf8",
    "PGDATA": "/var/lib/postgresql/data",
}


def _listening(port: int) -> set[str]:
    """The local addresses of the TCP sockets listening on ``port`` (/proc/net/tcp, tcp6)."""
    found = set()
    for table in ("/proc/net/tcp", "/proc/net/tcp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            address, hexport = fields[1].rsplit(":", 1)
            if fields[3] == "0A" and int(hexport, 16) == port:
                found.add(address)
    return found


@pytest.fixture
def pod_volumes(tmp_path: Path) -> dict[str, Path]:
    return {"toolplane": _emptydir(tmp_path / "toolplane"), "database-data": _emptydir(tmp_path / "database")}


def test_the_rendered_containers_run_and_the_operator_injects_a_scenarios_database_through_them(
    render: Render, tmp_path: Path, pod_volumes: dict[str, Path]
) -> None:
    # Mount namespaces and another user: the tests run as root, as the local stack's database does.
    assert os.geteuid() == 0, "this test binds the pod's volumes in mount namespaces: it needs root"
    port = free_port()
    docs = render({"toolPlane": {"database": {"enabled": True, "port": port}}})
    by_name = containers(operator_pod(docs))
    # The operator's side: the tool-plane file with the shared volume where this test has it, and the
    # real prepare-toolplane (owned by the pod's user, as its init container would leave it).
    local_file = tmp_path / "toolplane.json"
    local_file.write_text(toolplane_file(docs).replace(TOOLPLANE_ROOT, str(pod_volumes["toolplane"])))
    prepare = build_parser().parse_args(by_name["prepare-toolplane"]["command"][1:])
    prepare.toolplane = str(local_file)
    assert prepare.func(prepare) == 0
    for made in [pod_volumes["toolplane"], *pod_volumes["toolplane"].rglob("*")]:
        if made != pod_volumes["toolplane"]:
            os.chown(made, POD_GROUP, POD_GROUP)
    assert (pod_volumes["toolplane"] / "database" / PASSWORD_FILE).stat().st_gid == POD_GROUP

    init = subprocess.run(
        _in_pod(by_name["database-init"], pod_volumes),
        env=IMAGE_ENV,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert init.returncode == 0, init.stderr[-2000:]
    data = pod_volumes["database-data"] / "data"
    assert (data / "PG_VERSION").read_text().strip() == "15"
    assert stat.S_IMODE(data.stat().st_mode) & 0o777 == 0o700
    assert data.stat().st_uid == pwd.getpwnam(SERVER_USER).pw_uid
    control = (data / "global" / "pg_control").read_bytes()
    # Run again (a restarted pod on the same volume): the cluster is kept, not made anew.
    again = subprocess.run(
        _in_pod(by_name["database-init"], pod_volumes),
        env=IMAGE_ENV,
        capture_output=True,
        text=True,
        timeout=60,
    )
    assert again.returncode == 0, again.stderr[-2000:]
    assert "holds a cluster already" in again.stdout
    assert (data / "global" / "pg_control").read_bytes() == control

    server = subprocess.Popen(
        _in_pod(by_name["database"], pod_volumes),
        env=IMAGE_ENV,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )
    try:
        settings = ToolPlaneSettings.load(local_file)
        database = settings.of(DatabaseSettings)
        assert database is not None
        directory, url = database.directory, database.server
        conninfo = psycopg.conninfo.make_conninfo(url, password=(directory / PASSWORD_FILE).read_text())
        deadline = time.monotonic() + 60
        while True:
            assert server.poll() is None, server.communicate()[0][-2000:]
            try:
                with psycopg.connect(conninfo, connect_timeout=2) as conn:
                    version = conn.execute("SHOW server_version").fetchone()
                break
            except psycopg.OperationalError:
                assert time.monotonic() < deadline, "the server did not accept its administrator"
                time.sleep(0.2)
        assert version is not None
        assert str(version[0]).startswith("15.")
        # On 127.0.0.1 only, and no Unix-domain socket anywhere.
        assert _listening(port) == {"0100007F"}
        assert not list(tmp_path.rglob(".s.PGSQL*"))
        asyncio.run(_inject_and_read_back((directory, url)))
    finally:
        server.send_signal(signal.SIGINT)  # the image's STOPSIGNAL
        out, _ = server.communicate(timeout=60)
    assert server.returncode == 0, out[-2000:]
    assert "database system is shut down" in out


async def _inject_and_read_back(database: tuple[Path, str]) -> None:
    """The operator's adapter, built from the tool-plane file's entry, injects the capability scenario's
    declared migration and rows; the agent's endpoint reads them back as the scenario's reader role."""
    scenario, _ = parse_scenario(copy.deepcopy(CAPABILITY_DOCS[EJ3]))
    plan = plan_environment(
        scenario, suffix=kube.random_suffix(), owner="o", backends=frozenset({"logs", "database"})
    )
    assert plan.supported, plan.unsupported
    db = Database(*database)
    try:
        assert "PostgreSQL 15." in await db.probe()
        await db.inject(plan)
        endpoint = await db.endpoint(plan, AgentAccess("agent", plan.home_namespace, "", ""))
        assert endpoint is not None
        async with httpx2.AsyncClient(timeout=30) as http:

            async def call(path: str, statement: str) -> tuple[int, Any]:
                resp = await http.post(
                    f"{endpoint.url}/{path}",
                    json={"sql": statement},
                    headers={"Authorization": f"Bearer {endpoint.credential}"},
                )
                return resp.status_code, resp.json()

            status, got = await call("query", "SELECT version FROM schema_migrations")
            assert (status, got["rows"]) == (200, [["002_add_email_verified"]]), got
            status, got = await call("query", "SELECT count(*), count(email_verified) FROM users")
            assert (status, got["rows"]) == (200, [[150, 150]]), got
            # The reader writes nothing; the writer does, its stored data watched by the harness's own
            # reading role (decision 0089).
            status, got = await call("query", "DELETE FROM users")
            assert status == 400, got
            status, got = await call("execute", "INSERT INTO users (created_at) VALUES (now())")
            assert (status, got) == (200, {"command": "INSERT 0 1"}), got
        (state,) = await db.state(plan)  # as the harness's reading role (decision 0088)
        assert state["declared"]["migration"] == "002_add_email_verified"
        assert state["state"]["rows"]["users"]["count"] == 151
    finally:
        await db.cleanup(plan)
        await db.aclose()


@pytest.mark.cluster
def test_kubeconform_and_the_api_server_accept_the_chart_with_the_database(apply_chart: ApplyChart) -> None:
    values = {
        "toolPlane": {
            "metrics": {"enabled": True},
            "alerts": {"enabled": True},
            "traces": {"enabled": True},
            "database": {"enabled": True},
        }
    }
    docs, answers = apply_chart(values)
    applied = answers[("Deployment", "oasis-operator")].json()["spec"]["template"]["spec"]
    assert [c["name"] for c in applied["initContainers"]] == [
        "prepare-toolplane",
        "jaeger-binary",
        "database-init",
    ]
    assert [c["name"] for c in applied["containers"]][-1] == "database"
    (operator,) = [d for d in by_kind(docs, "Deployment") if d["metadata"]["name"] == "oasis-operator"]
    assert operator["spec"]["template"]["spec"]["volumes"][-1]["name"] == "database-data"
