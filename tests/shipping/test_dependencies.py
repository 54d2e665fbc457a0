"""The dependencies as a packager sees them (issue 17): a plain install pulls one HTTP client stack and
cryptography only through the MCP SDK (decision 0112), every runtime dependency stops before its next major version, and the lock CI
and the image install from covers every dependency at a version pyproject.toml allows."""

from __future__ import annotations

import subprocess
import sys
from importlib import metadata

from packaging.requirements import Requirement
from packaging.utils import canonicalize_name

from tests.shipping.conftest import REPO

PACKAGE = "oasis-operator"
LOCK = REPO / ".ci" / "constraints.txt"


def closure(extras: frozenset[str] = frozenset()) -> dict[str, str]:
    """Every distribution a ``pip install oasis-operator[extras]`` pulls, with its installed version:
    the requirements of the installed distributions, followed with their markers evaluated."""
    found: dict[str, str] = {}
    todo: list[tuple[str, frozenset[str]]] = [(PACKAGE, extras)]
    seen: set[tuple[str, frozenset[str]]] = set()
    while todo:
        name, wanted = todo.pop()
        if (name, wanted) in seen:
            continue
        seen.add((name, wanted))
        dist = metadata.distribution(name)
        found[canonicalize_name(name)] = dist.version
        for text in dist.requires or []:
            req = Requirement(text)
            environments = [{"extra": e} for e in wanted] or [{"extra": ""}]
            if req.marker is None or any(req.marker.evaluate(env) for env in environments):
                todo.append((canonicalize_name(req.name), frozenset(req.extras)))
    return found


def test_a_plain_install_pulls_one_http_client_stack_and_makes_no_keys_with_its_key_library() -> None:
    runtime = closure()
    assert "lightkube" in runtime
    assert "kopf" in runtime
    clients = {"httpx", "httpx2", "requests", "urllib3"} & set(runtime)
    assert clients == {"httpx2"}, clients  # lightkube's own; aiohttp is kopf's and our servers'
    assert not {"httpcore"} & set(runtime)
    # cryptography arrives with the MCP SDK's pyjwt[crypto] (its OAuth, unused here; decision 0112), never
    # used to make keys: only the embedded control plane makes them (the devcluster extra).
    assert {"cryptography", "pyjwt", "mcp"} <= set(runtime)


def test_the_postgres_driver_comes_with_the_database_extra_which_the_test_extra_includes() -> None:
    assert not {"psycopg", "psycopg-binary"} & set(closure())  # 9 MB of libpq, for one back-end
    assert {"psycopg", "psycopg-binary"} <= set(closure(frozenset({"database"})))
    assert {"psycopg", "psycopg-binary"} <= set(closure(frozenset({"test"})))  # `make install`'s


def test_every_runtime_dependency_stops_before_its_next_major_version() -> None:
    unbounded = [
        r
        for r in (Requirement(t) for t in metadata.requires(PACKAGE) or [])
        if r.marker is None and not any(s.operator in ("<", "<=", "==", "~=") for s in r.specifier)
    ]
    assert unbounded == []


def test_the_lock_covers_every_dependency_at_a_version_pyproject_allows() -> None:
    pins: dict[str, str] = {}
    for line in LOCK.read_text().splitlines():
        line = line.split("#")[0].strip()
        if line:
            name, _, version = line.partition("==")
            assert version, f"{LOCK}: {line!r} is not a pin (name==version)"
            pins[canonicalize_name(name)] = version
    installed = closure(frozenset({"test", "devcluster"}))
    installed.pop(canonicalize_name(PACKAGE))
    assert sorted(set(installed) - set(pins)) == [], "run `make lock`: dependencies missing from the lock"
    # What is installed is what the lock says (make install uses it as constraints).
    assert {n: v for n, v in installed.items() if pins[n] != v} == {}
    for text in metadata.requires(PACKAGE) or []:
        req = Requirement(text)
        name = canonicalize_name(req.name)
        if name in pins:
            assert req.specifier.contains(pins[name], prereleases=True), (text, pins[name])


def test_without_the_devcluster_extra_the_cli_works_and_the_dev_cluster_says_what_to_install() -> None:
    script = (
        "import sys; sys.modules['cryptography'] = None\n"
        "from oasis_operator.cli.main import main\n"
        "try:\n    main(['operator', 'run', '--help'])\nexcept SystemExit as e:\n    assert e.code == 0, e.code\n"
        "import datetime, pathlib, tempfile\n"
        "from oasis_operator.devcluster.certs import generate_pki\n"
        "from oasis_operator.devcluster.errors import SetupError\n"
        "try:\n    generate_pki(pathlib.Path(tempfile.mkdtemp()), datetime.datetime.now(datetime.UTC))\n"
        "except SetupError as e:\n    print('SETUP-ERROR', e)\n"
    )
    done = subprocess.run(
        [sys.executable, "-c", script], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    assert "usage:" in done.stdout
    assert "SETUP-ERROR" in done.stdout
    assert "pip install 'oasis-operator[devcluster]'" in done.stdout


#: Run without psycopg: the operator's modules import, a tool-plane file naming the database back-end
#: is refused naming the extra, and so are the adapter's import and the dev cluster's server.
WITHOUT_PSYCOPG = """
import json, pathlib, sys, tempfile
sys.modules["psycopg"] = None
import oasis_operator.handlers.operator
from oasis_operator.adapters.plumbing.extras import MissingExtra
from oasis_operator.adapters.toolplane import FACTORIES
from oasis_operator.devcluster.backends import BACKENDS
from oasis_operator.devcluster.errors import SetupError
from oasis_operator.handlers.settings import SettingsError, ToolPlaneSettings
assert "database" in FACTORIES and "database" in BACKENDS
d = pathlib.Path(tempfile.mkdtemp())
(d / "admin-password").write_text("x")
f = d / "toolplane.json"
entry = {"endpoints": {"postgres": "postgresql://oasis@127.0.0.1:6/postgres"}, "directory": str(d)}
f.write_text(json.dumps({"backends": {"database": entry}}))
try:
    ToolPlaneSettings.load(f)
except SettingsError as e:
    print("SETTINGS-ERROR", e)
try:
    import oasis_operator.adapters.toolplane.database
except MissingExtra as e:
    print("IMPORT-ERROR", e)
try:
    BACKENDS["database"]().start(None)
except SetupError as e:
    print("SETUP-ERROR", e)
"""


def test_without_the_database_extra_the_operator_runs_and_the_database_back_end_names_the_extra() -> None:
    done = subprocess.run(
        [sys.executable, "-c", WITHOUT_PSYCOPG], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr[-2000:]
    lines = done.stdout.splitlines()
    assert [line.split()[0] for line in lines] == ["SETTINGS-ERROR", "IMPORT-ERROR", "SETUP-ERROR"], lines
    assert "backends.database: the database back-end needs psycopg" in lines[0]
    for line in lines:
        assert "install the 'database' extra: pip install 'oasis-operator[database]'" in line, line
