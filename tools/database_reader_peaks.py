#!/usr/bin/env python3
"""Peak memory and temporary files of the database back-end's reader for bad reads (decision 0076).

Starts a PostgreSQL as the local stack does (``DatabaseBackend``), and runs each read of ``READS`` in a
read-only transaction with the endpoint's 5 s statement timeout, as two roles: *before*, a login role
with no settings in a database where ``PUBLIC`` keeps ``set_config`` and PL/pgSQL (what the adapter made
before decision 0076), and *after*, the reader of a scenario the adapter injects. Prints, for each: the
time, the backend's peak resident memory (``VmHWM`` of ``/proc/<pid>/status``: run as root or as the
server's user), the peak of the server's temporary files (``pg_ls_tmpdir()`` polled every 50 ms) and
the answer (rows or SQLSTATE).

Usage:  .venv/bin/python tools/database_reader_peaks.py
"""

from __future__ import annotations

import secrets
import sys
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

import psycopg

REPO = Path(__file__).resolve().parents[1]
if str(REPO) not in sys.path:
    sys.path.append(str(REPO))

from oasis_operator.adapters.toolplane.database import Database  # noqa: E402
from oasis_operator.core.toolplane.database import PlannedDatabase, plan_database  # noqa: E402
from oasis_operator.devcluster.backends.base import BackendContext  # noqa: E402
from oasis_operator.devcluster.backends.database import DatabaseBackend  # noqa: E402
from oasis_operator.devcluster.processes import Supervisor  # noqa: E402

SORT = "SELECT count(*) FROM (SELECT g FROM generate_series(1, 20000000) g ORDER BY g DESC) s"
READS = {
    "sort of 20 M rows": SORT,
    "hash aggregate of 20 M groups": (
        "SELECT count(*) FROM (SELECT g, count(*) FROM generate_series(1, 20000000) g GROUP BY g) s"
    ),
    "set_config work_mem 1GB + the sort": f"SELECT set_config('work_mem', '1GB', true), ({SORT})",
    "DO: SET LOCAL work_mem 1GB + the sort": f"DO $$BEGIN SET LOCAL work_mem = '1GB'; PERFORM ({SORT}); END$$",
    "string_agg of 3000 strings of 1 MB": (
        "SELECT length(string_agg(repeat('x', 1000000), '')) FROM generate_series(1, 3000)"
    ),
}


def peak_rss_kb(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1])
    return -1


def measure(admin: psycopg.Connection[Any], dsn: str, statement: str) -> str:
    conn = psycopg.connect(dsn, autocommit=True, options="-c statement_timeout=5000")
    row = conn.execute("SELECT pg_backend_pid()").fetchone()
    assert row is not None
    pid, peak, stop = int(row[0]), [0], threading.Event()

    def poll() -> None:
        while not stop.is_set():
            size = admin.execute("SELECT coalesce(sum(size), 0) FROM pg_ls_tmpdir()").fetchone()
            peak[0] = max(peak[0], int(size[0]) if size else 0)
            time.sleep(0.05)

    poller = threading.Thread(target=poll)
    poller.start()
    started = time.monotonic()
    conn.execute("BEGIN READ ONLY")
    try:
        cur = conn.execute(statement.encode())
        answer = str(cur.fetchall()[:1]) if cur.description else "ok"
    except psycopg.Error as exc:
        answer = f"{exc.sqlstate} {str(exc).splitlines()[0][:60]}"
    took = time.monotonic() - started
    rss = peak_rss_kb(pid)
    stop.set()
    poller.join()
    conn.close()
    return f"{took:5.2f} s  peak RSS {rss // 1024:5d} MiB  peak temp {peak[0] // 2**20:4d} MiB  {answer}"


def main() -> None:
    workdir = Path(tempfile.mkdtemp(prefix="oasis-db-peaks-"))

    class View:
        pass

    view: Any = View()
    view.workdir = workdir
    sup = Supervisor(workdir / "logs")
    backend = DatabaseBackend()
    backend.start(BackendContext(view, sup, None))  # type: ignore[arg-type]
    try:
        db = Database(workdir / "backends" / "database", backend.endpoints()["postgres"])
        planned = plan_database(
            {
                "resource": "database-migration/user-service",
                "last_migration": "002_add_email_verified",
                "applied": "30_minutes_ago",
                "records_created_since": 150,
            },
            "user-service",
        )
        assert isinstance(planned, PlannedDatabase)
        db._inject("after", planned)
        after = db._scenarios["after"]
        password = secrets.token_urlsafe(16)
        with db._admin() as admin:
            admin.execute(f"CREATE ROLE before_reader LOGIN PASSWORD '{password}'".encode())
            admin.execute("CREATE DATABASE before")
            roles = {
                "before": db._conninfo("before_reader", password, "before"),
                "after": db._conninfo(*after.reader, after.database),
            }
            for name, statement in READS.items():
                for who, dsn in roles.items():
                    print(f"{name:38s} {who:6s} {measure(admin, dsn, statement)}", flush=True)
    finally:
        sup.stop_all()


if __name__ == "__main__":
    main()
