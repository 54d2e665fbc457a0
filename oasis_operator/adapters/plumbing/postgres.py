"""psycopg, the PostgreSQL driver, which only the database back-end uses: the ``database`` extra
installs it (decision 0108). Every module that talks to PostgreSQL (the operator's adapter, the dev
cluster's server) imports it from here, so that without the extra the import fails with a
:class:`~.extras.MissingExtra` naming the extra; an operator without a database back-end never imports
this module."""

from __future__ import annotations

from oasis_operator.adapters.plumbing.extras import MissingExtra

try:
    import psycopg as psycopg
    from psycopg import sql as sql
    from psycopg.pq import ExecStatus as ExecStatus
except ImportError as exc:  # not installed, or installed without a libpq it can load
    raise MissingExtra("the database back-end", "psycopg", "database", exc) from None

__all__ = ["ExecStatus", "psycopg", "sql"]
