"""The database back-end: a PostgreSQL server from the distribution's packages (Debian's
``postgresql``, installed by ``tools/install-tools.sh``), listening on 127.0.0.1 only, on a free port
(decision 0066).

Called by :mod:`oasis_operator.devcluster.backends`. ``initdb`` makes a fresh cluster with an
administrator ``oasis`` whose random password is written to ``<back-end directory>/admin-password``
(0600); the operator's adapter (``adapters/toolplane/database.py``) reads it and makes one database
and two roles per scenario. PostgreSQL refuses to run as root: when we are root, the server runs as
the ``postgres`` user the package creates (``setpriv``), and its data directory is a directory of
that user under ``/tmp/oasis-postgres`` (the run's state directory may not be traversable by it; a
run's directory whose state directory is gone or whose server has stopped is removed at the next
start), linked from the back-end's directory as ``data``. Durability is off (``fsync``): a
scenario's database lives for the scenario. No Unix-domain socket: every client (the operator's
adapter, the agent's endpoint) connects over TCP on 127.0.0.1.

The arguments of ``initdb`` and ``postgres`` are built by :func:`initdb_args` and :func:`server_args`,
which the Helm chart's containers use too (decision 0071; ``tests/shipping/test_chart_database.py``
compares them).
"""

from __future__ import annotations

import glob
import os
import pwd
import secrets
import shutil
import subprocess
import tempfile
import time
from pathlib import Path

from oasis_operator.adapters.plumbing.extras import MissingExtra
from oasis_operator.core.toolplane.database import PASSWORD_FILE
from oasis_operator.devcluster.backends.base import Backend, BackendContext, free_port
from oasis_operator.devcluster.errors import SetupError

#: The administrator initdb makes.
ADMIN = "oasis"
#: Where the server binaries are looked for (Debian: /usr/lib/postgresql/<major>/bin); the
#: environment variable overrides.
BINDIR_ENV = "OASIS_POSTGRES_BINDIR"
#: Where a root run keeps its data directories (owned by the ``postgres`` user).
ROOT_DATA = Path(tempfile.gettempdir()) / "oasis-postgres"
SERVER_USER = "postgres"
#: Server settings of every start: durability off (a scenario's database lives for the scenario), a
#: small shared memory, no prepared transactions (0 is PostgreSQL 15's default, pinned: a transaction
#: prepared by an agent's role would outlive its session and hold its locks; decision 0076), and a
#: checkpoint every 128 MB of log (the default, 1 GB, is the chart's whole data volume: decision 0089).
SERVER_SETTINGS = (
    "fsync=off",
    "synchronous_commit=off",
    "full_page_writes=off",
    "shared_buffers=16MB",
    "max_connections=100",
    "max_prepared_transactions=0",
    "min_wal_size=32MB",
    "max_wal_size=128MB",
)


# -- the command lines, shared with the Helm chart ----------------------------------------------------
# The chart (charts/oasis-operator/templates/_backend-database.tpl, decision 0071) runs the same two
# programs from the upstream image; tests/shipping/test_chart_database.py checks that its arguments
# are these.
def initdb_args(data: Path, pwfile: Path) -> list[str]:
    """``initdb``: a new cluster in ``data`` (made 0700) with the administrator ``ADMIN`` whose password
    is the first line of ``pwfile``, SCRAM authentication, UTF-8."""
    return [
        "-D",
        str(data),
        "-U",
        ADMIN,
        "--auth=scram-sha-256",
        f"--pwfile={pwfile}",
        "-E",
        "UTF8",
        "--locale=C.UTF-8",
        "--no-sync",
    ]


def server_args(data: Path, host: str, port: int) -> list[str]:
    """``postgres`` over the cluster in ``data``, listening on ``host``:``port`` only (TCP), with no
    Unix-domain socket (``-k ''``: no directory to write it into)."""
    argv = ["-D", str(data), "-h", host, "-p", str(port), "-k", ""]
    for setting in SERVER_SETTINGS:
        argv += ["-c", setting]
    return argv


#: How the chart's init container runs ``initdb`` (``sh -c INITDB_ONCE initdb <initdb_args>``, so
#: ``$2`` is the data directory): only when the directory holds no cluster yet, so a pod whose
#: containers restart on the same volume keeps its cluster and its administrator's password. The
#: test is the image entrypoint's own (a non-empty ``PG_VERSION``).
INITDB_ONCE = (
    'if [ -s "$2/PG_VERSION" ]; then echo "$2 holds a cluster already"; exit 0; fi; exec initdb "$@"'
)


def bindir() -> Path:
    """The directory of ``initdb`` and ``postgres`` (the newest major version installed)."""
    if os.environ.get(BINDIR_ENV):
        found = Path(os.environ[BINDIR_ENV])
    else:
        found = None
        candidates = sorted(glob.glob("/usr/lib/postgresql/*/bin"), key=lambda p: int(Path(p).parent.name))
        if candidates:
            found = Path(candidates[-1])
    if found is None or not (found / "postgres").is_file() or not (found / "initdb").is_file():
        raise SetupError(
            "no PostgreSQL server found (looked in /usr/lib/postgresql/*/bin and $"
            f"{BINDIR_ENV}); install Debian's 'postgresql' package (tools/install-tools.sh does)"
        )
    return found


def _as_server_user() -> list[str]:
    """The command prefix that runs a program as the server's user (nothing when we are not root)."""
    if os.geteuid() != 0:
        return []
    try:
        pwd.getpwnam(SERVER_USER)
    except KeyError:
        raise SetupError(
            f"running as root, and there is no {SERVER_USER!r} user to run PostgreSQL as (the 'postgresql' "
            "package creates it)"
        ) from None
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        raise SetupError("running as root, and setpriv (util-linux) is missing to drop to the postgres user")
    # The parent-death signal is cleared when the user changes: set it again after the change.
    return [setpriv, f"--reuid={SERVER_USER}", f"--regid={SERVER_USER}", "--init-groups", "--pdeathsig=TERM"]


def _over(run: Path) -> bool:
    """Whether a root run's data directory is no one's any more: its state directory is gone, or it has
    no running server (``postmaster.pid`` absent, as a clean stop leaves it, or naming no live process)
    and was not made in the last two minutes (a start under way elsewhere is younger)."""
    try:
        if not Path((run / "owner").read_text().strip()).exists():
            return True
    except OSError:
        pass
    try:
        pid = int((run / "data" / "postmaster.pid").read_text().split("\n", 1)[0])
        os.kill(pid, 0)
        return False
    except PermissionError:  # a live process of another user
        return False
    except (OSError, ValueError):  # no pid file, an unreadable one, or a dead process
        try:
            return time.time() - run.stat().st_mtime > 120
        except OSError:
            return False


def _data_parent(directory: Path) -> Path:
    """Where the data directory goes."""
    if os.geteuid() != 0:
        parent = directory / "pg"
        shutil.rmtree(parent, ignore_errors=True)
        parent.mkdir(mode=0o700)
        return parent
    user = pwd.getpwnam(SERVER_USER)
    ROOT_DATA.mkdir(mode=0o755, exist_ok=True)
    for old in ROOT_DATA.iterdir():
        if _over(old):
            shutil.rmtree(old, ignore_errors=True)
    parent = Path(tempfile.mkdtemp(prefix="run-", dir=ROOT_DATA))
    (parent / "owner").write_text(str(directory))
    os.chown(parent, user.pw_uid, user.pw_gid)
    link = directory / "data"
    link.unlink(missing_ok=True)
    link.symlink_to(parent)
    return parent


class DatabaseBackend(Backend):
    name = "database"

    def __init__(self) -> None:
        super().__init__()
        self.url = ""

    def start(self, ctx: BackendContext) -> None:
        try:  # psycopg (the `database` extra) checks the server's readiness: missing, nothing starts
            from oasis_operator.adapters.plumbing.postgres import psycopg
        except MissingExtra as exc:
            raise SetupError(str(exc)) from None
        d = ctx.directory(self.name)
        bins = bindir()
        prefix = _as_server_user()
        parent = _data_parent(d)
        password = secrets.token_urlsafe(24)
        (d / PASSWORD_FILE).write_text(password)
        (d / PASSWORD_FILE).chmod(0o600)
        pwfile = parent / "pwfile"
        pwfile.write_text(password)
        if prefix:
            user = pwd.getpwnam(SERVER_USER)
            os.chown(pwfile, user.pw_uid, user.pw_gid)
        pwfile.chmod(0o600)
        t0 = time.monotonic()
        init = subprocess.run(
            [*prefix, str(bins / "initdb"), *initdb_args(parent / "data", pwfile)],
            capture_output=True,
            text=True,
            check=False,
        )
        pwfile.unlink()
        self.timings["initdb"] = time.monotonic() - t0
        if init.returncode != 0:
            raise SetupError(f"initdb failed ({init.returncode}): {(init.stderr or init.stdout)[-800:]}")
        port = free_port()
        self.url = f"postgresql://{ADMIN}@127.0.0.1:{port}/postgres"
        conninfo = f"host=127.0.0.1 port={port} user={ADMIN} dbname=postgres password={password}"

        def ready() -> bool:
            with psycopg.connect(conninfo, connect_timeout=2) as conn:
                conn.execute("SELECT 1")
            return True

        argv = [*prefix, str(bins / "postgres"), *server_args(parent / "data", "127.0.0.1", port)]
        self._run(ctx, "postgres", argv, ready, "PostgreSQL to accept its administrator")

    def endpoints(self) -> dict[str, str]:
        return {"postgres": self.url}
