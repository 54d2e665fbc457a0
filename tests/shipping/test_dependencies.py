"""The dependencies as a packager sees them (issue 17): a plain install pulls one HTTP client stack and
no key-making library, every runtime dependency stops before its next major version, and the lock CI
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


def test_a_plain_install_pulls_one_http_client_stack_and_no_key_material_library() -> None:
    runtime = closure()
    assert "lightkube" in runtime
    assert "kopf" in runtime
    clients = {"httpx", "httpx2", "requests", "urllib3"} & set(runtime)
    assert clients == {"httpx2"}, clients  # lightkube's own; aiohttp is kopf's and our servers'
    assert not {"httpcore"} & set(runtime)
    assert "cryptography" not in runtime  # only the embedded control plane makes keys: the devcluster extra


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
