"""The database back-end's state read: what a scenario's database holds, as the harness reads it before
and after the agent's turn (decisions 0066, 0073, 0079, 0088).

Called by :meth:`~oasis_operator.adapters.toolplane.database.Database.state` on a connection of the
harness's own reading role (a non-superuser with ``pg_read_all_data`` and ``BYPASSRLS``, its
``search_path`` fixed to ``pg_catalog``, in a read-only transaction: :mod:`.database_roles`). What the
agent's writer made — functions, operators, aggregates, casts, types, index and statistics expressions —
must never run here (decision 0088), so every statement of this module:

- names only built-ins, schema-qualified: ``pg_catalog.md5``, ``OPERATOR(pg_catalog.=)``, casts to
  ``pg_catalog`` types of catalog values only (a cast is found by its types, whatever the path, and the
  writer may make one from a type it owns);
- turns a row of the agent's tables into text with ``pg_catalog.record_out`` (the type's own output
  function), never with a cast, and a single value with ``pg_catalog.format``;
- reads a table with ``FROM ONLY`` (no child tables) and only when nothing the planner evaluates while
  it plans the read (its indexes' expressions and predicates, its statistics objects' expressions, a
  partition key of it or of an ancestor) depends on a function, operator or type made in the database
  (:data:`HOOKED`): PostgreSQL simplifies those expressions when it loads them, which runs an immutable
  function whose arguments are constants. Such a table is "not digested", said in the state (a change:
  the harness's tables have none).

Every part of the state is one streamed digest (:func:`streamed_digest`): the server hashes each row and
sorts the hashes, the harness fetches them in batches. A digest the data make impossible (a value over a
PostgreSQL limit, the time bound) is said in the state, never a snapshot that cannot be read
(:func:`unreadable`); anything else is raised: the harness's fault.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable, Iterable, Mapping
from typing import Any

from oasis_operator.adapters.plumbing.postgres import psycopg, sql
from oasis_operator.core.toolplane.database import MIGRATIONS_TABLE

#: The schema of a scenario's tables (the writer owns it; ``public`` is nobody's to create in).
SCHEMA = "app"
#: Bounds of a state read: a table's digest, and how many tables get one.
DIGEST_TIMEOUT_MS = 5000
MAX_DIGESTED_TABLES = 64
#: Rows of hashes fetched at a time by :func:`streamed_digest` (32 characters each).
DIGEST_BATCH = 5000
#: How many migrations are listed (the table's digest covers every row).
MAX_MIGRATIONS = 200

# The built-in operators the statements use, qualified: an unqualified operator is looked up on the
# search path, where an exact match on a type of the writer's would beat a built-in (CVE-2018-1058).
EQ = "OPERATOR(pg_catalog.=)"
NE = "OPERATOR(pg_catalog.<>)"
GT = "OPERATOR(pg_catalog.>)"
GE = "OPERATOR(pg_catalog.>=)"
NOT_LIKE = "OPERATOR(pg_catalog.!~~)"
CAT = "OPERATOR(pg_catalog.||)"
TEXT = "pg_catalog.text"
ROLE = "pg_catalog.regrole"
#: The first object id of objects made after ``initdb``: anything at or above it in a scenario's
#: database is the writer's (the harness makes tables, their types and sequences, no function).
FIRST_NORMAL_OID = 16384

_USER_SCHEMAS = f"n.nspname {NOT_LIKE} 'pg\\_%%' AND n.nspname {NE} 'information_schema'"
_MADE = f"{GE} {FIRST_NORMAL_OID}"


def _of_schema(table: str, column: str, alias: str = "x") -> str:
    """``FROM <table> <alias> JOIN pg_namespace n`` on ``column``, in the database's own schemas."""
    return (
        f"FROM pg_catalog.{table} {alias} JOIN pg_catalog.pg_namespace n ON n.oid {EQ} {alias}.{column} "
        f"WHERE {_USER_SCHEMAS}"
    )


#: What a writer can change in its database beyond a table's rows and columns, each as rows of stable
#: text read by the harness (decisions 0073, 0088): the definitions (as PostgreSQL prints them back),
#: owners, privileges and options of every object of the database's own schemas, its comments,
#: sequences' positions, large objects, inheritance, and the scenario roles' settings and credentials.
#: Nothing that moves by itself is read (planner statistics, visibility, transaction ids; a role's login,
#: which settling revokes). ``%(roles)s``: the scenario's two roles.
CATALOG_QUERIES: dict[str, str] = {
    "schemas": f"SELECT n.nspname, n.nspowner::{ROLE}::{TEXT}, n.nspacl::{TEXT} FROM pg_catalog.pg_namespace n "
    f"WHERE {_USER_SCHEMAS}",
    "relations": (
        f"SELECT n.nspname, x.relname, x.relkind, x.relowner::{ROLE}::{TEXT}, x.relacl::{TEXT}, x.relpersistence, "
        f"x.relrowsecurity, x.relforcerowsecurity, x.reloptions::{TEXT}, x.relreplident, x.relispartition "
        + _of_schema("pg_class", "relnamespace")
    ),
    "columns": (
        f"SELECT x.oid::pg_catalog.regclass::{TEXT}, a.attname, pg_catalog.format_type(a.atttypid, a.atttypmod), "
        f"a.attnotnull, pg_catalog.pg_get_expr(d.adbin, d.adrelid), a.attidentity, a.attgenerated, "
        f"a.attacl::{TEXT}, a.attcollation, a.attstattarget, a.attoptions::{TEXT}, a.attstorage, a.attcompression, "
        f"a.attisdropped FROM pg_catalog.pg_attribute a JOIN pg_catalog.pg_class x ON x.oid {EQ} a.attrelid "
        f"JOIN pg_catalog.pg_namespace n ON n.oid {EQ} x.relnamespace LEFT JOIN pg_catalog.pg_attrdef d "
        f"ON d.adrelid {EQ} a.attrelid AND d.adnum {EQ} a.attnum WHERE a.attnum {GT} 0 AND {_USER_SCHEMAS}"
    ),
    "constraints": (
        f"SELECT x.conrelid::pg_catalog.regclass::{TEXT}, x.contypid::pg_catalog.regtype::{TEXT}, x.conname, "
        f"pg_catalog.pg_get_constraintdef(x.oid), x.convalidated, x.condeferrable, x.condeferred "
        + _of_schema("pg_constraint", "connamespace")
    ),
    "indexes": (
        f"SELECT i.indexrelid::pg_catalog.regclass::{TEXT}, pg_catalog.pg_get_indexdef(i.indexrelid), i.indisvalid, "
        f"i.indisclustered, i.indisreplident FROM pg_catalog.pg_index i JOIN pg_catalog.pg_class x "
        f"ON x.oid {EQ} i.indrelid JOIN pg_catalog.pg_namespace n ON n.oid {EQ} x.relnamespace WHERE {_USER_SCHEMAS}"
    ),
    "triggers": "SELECT pg_catalog.pg_get_triggerdef(t.oid), t.tgenabled FROM pg_catalog.pg_trigger t "
    "WHERE NOT t.tgisinternal",
    "rules": f"SELECT r.ev_class::pg_catalog.regclass::{TEXT}, r.rulename, pg_catalog.pg_get_ruledef(r.oid), "
    f"r.ev_enabled FROM pg_catalog.pg_rewrite r WHERE r.oid {_MADE}",
    "policies": f"SELECT p.schemaname, p.tablename, p.policyname, p.permissive, p.roles::{TEXT}, p.cmd, p.qual, "
    "p.with_check FROM pg_catalog.pg_policies p",
    "functions": (
        f"SELECT x.oid::pg_catalog.regprocedure::{TEXT}, x.proowner::{ROLE}::{TEXT}, x.prokind, x.prosrc, x.probin, "
        f"x.prosecdef, x.proconfig::{TEXT}, x.proacl::{TEXT}, x.provolatile, x.prorettype::pg_catalog.regtype::{TEXT} "
        + _of_schema("pg_proc", "pronamespace")
    ),
    "aggregates": (
        f"SELECT g.aggfnoid::pg_catalog.regprocedure::{TEXT}, g.aggtransfn::pg_catalog.regproc::{TEXT}, "
        f"g.aggfinalfn::pg_catalog.regproc::{TEXT}, g.aggtranstype::pg_catalog.regtype::{TEXT}, g.agginitval "
        f"FROM pg_catalog.pg_aggregate g WHERE g.aggfnoid {_MADE}"
    ),
    "operators": (
        f"SELECT x.oid::pg_catalog.regoperator::{TEXT}, x.oprowner::{ROLE}::{TEXT}, x.oprcode::pg_catalog.regproc::{TEXT}, "
        f"x.oprrest::pg_catalog.regproc::{TEXT}, x.oprjoin::pg_catalog.regproc::{TEXT}, x.oprcom, x.oprnegate "
        + _of_schema("pg_operator", "oprnamespace")
    ),
    "casts": (
        f"SELECT c.castsource::pg_catalog.regtype::{TEXT}, c.casttarget::pg_catalog.regtype::{TEXT}, "
        f"c.castfunc::pg_catalog.regprocedure::{TEXT}, c.castcontext, c.castmethod FROM pg_catalog.pg_cast c "
        f"WHERE c.oid {_MADE}"
    ),
    "types": (
        f"SELECT x.oid::pg_catalog.regtype::{TEXT}, x.typtype, x.typowner::{ROLE}::{TEXT}, x.typacl::{TEXT}, "
        "(SELECT pg_catalog.string_agg(e.enumlabel::pg_catalog.text, ',' ORDER BY e.enumsortorder) "
        f"FROM pg_catalog.pg_enum e WHERE e.enumtypid {EQ} x.oid) " + _of_schema("pg_type", "typnamespace")
    ),
    "collations": f"SELECT x.collname, x.collprovider, x.collcollate, x.collctype, x.collowner::{ROLE}::{TEXT} "
    + _of_schema("pg_collation", "collnamespace"),
    "conversions": f"SELECT x.conname, x.conforencoding, x.contoencoding, x.conproc::pg_catalog.regproc::{TEXT}, "
    f"x.condefault " + _of_schema("pg_conversion", "connamespace"),
    "text search": (
        f"SELECT 'configuration', x.cfgname, x.cfgparser::{TEXT}, NULL::{TEXT} "
        + _of_schema("pg_ts_config", "cfgnamespace")
        + f" UNION ALL SELECT 'dictionary', x.dictname, x.dicttemplate::{TEXT}, x.dictinitoption "
        + _of_schema("pg_ts_dict", "dictnamespace")
        + f" UNION ALL SELECT 'mapping', m.mapcfg::{TEXT}, m.maptokentype::{TEXT} {CAT} ':' {CAT} "
        f"m.mapseqno::{TEXT}, m.mapdict::{TEXT} FROM pg_catalog.pg_ts_config_map m WHERE m.mapcfg {_MADE}"
    ),
    "inheritance": f"SELECT i.inhrelid::pg_catalog.regclass::{TEXT}, i.inhparent::pg_catalog.regclass::{TEXT}, "
    "i.inhseqno FROM pg_catalog.pg_inherits i",
    "sequences": "SELECT s.schemaname, s.sequencename, s.last_value, s.start_value, s.increment_by, s.min_value, "
    "s.max_value, s.cycle, s.cache_size FROM pg_catalog.pg_sequences s",
    "statistics": f"SELECT s.stxrelid::pg_catalog.regclass::{TEXT}, s.stxname, s.stxkind::{TEXT}, s.stxkeys::{TEXT}, "
    f"pg_catalog.pg_get_expr(s.stxexprs, s.stxrelid) FROM pg_catalog.pg_statistic_ext s",
    "comments": f"SELECT d.classoid::pg_catalog.regclass::{TEXT}, d.objoid, d.objsubid, d.description "
    f"FROM pg_catalog.pg_description d WHERE d.objoid {_MADE}",
    "default privileges": f"SELECT d.defaclrole::{ROLE}::{TEXT}, d.defaclnamespace, d.defaclobjtype, "
    f"d.defaclacl::{TEXT} FROM pg_catalog.pg_default_acl d",
    "large objects": (
        f"SELECT m.oid, m.lomowner::{ROLE}::{TEXT}, m.lomacl::{TEXT}, (SELECT pg_catalog.md5(pg_catalog.string_agg("
        f"pg_catalog.md5(l.data), '' ORDER BY l.pageno)) FROM pg_catalog.pg_largeobject l WHERE l.loid {EQ} m.oid) "
        "FROM pg_catalog.pg_largeobject_metadata m"
    ),
    "extensions": "SELECT x.extname, x.extversion FROM pg_catalog.pg_extension x",
    "roles": (
        "SELECT r.rolname, r.rolsuper, r.rolinherit, r.rolcreaterole, r.rolcreatedb, r.rolreplication, "
        "r.rolbypassrls, r.rolconnlimit, pg_catalog.md5(COALESCE(a.rolpassword, '')), r.rolvaliduntil, "
        f"(SELECT pg_catalog.string_agg(m.roleid::{ROLE}::{TEXT}, ',' ORDER BY 1) FROM pg_catalog.pg_auth_members m "
        f"WHERE m.member {EQ} r.oid), "
        f"(SELECT pg_catalog.string_agg(s.setdatabase::{TEXT} {CAT} ':' {CAT} s.setconfig::{TEXT}, ';' ORDER BY 1) "
        f"FROM pg_catalog.pg_db_role_setting s WHERE s.setrole {EQ} r.oid) "
        f"FROM pg_catalog.pg_roles r JOIN pg_catalog.pg_authid a ON a.oid {EQ} r.oid "
        f"WHERE r.rolname {EQ} ANY(%(roles)s::pg_catalog.name[])"
    ),
    "database": (
        f"SELECT d.datname, d.datdba::{ROLE}::{TEXT}, d.datacl::{TEXT}, d.datconnlimit, d.datallowconn, "
        f"(SELECT pg_catalog.string_agg(s.setconfig::{TEXT}, ';' ORDER BY 1) FROM pg_catalog.pg_db_role_setting s "
        f"WHERE s.setdatabase {EQ} d.oid) FROM pg_catalog.pg_database d "
        f"WHERE d.datname {EQ} pg_catalog.current_database()"
    ),
}

#: The database's relations, by schema and name: (schema, name, kind, oid).
OBJECTS = (
    f"SELECT n.nspname::{TEXT}, x.relname::{TEXT}, x.relkind::{TEXT}, x.oid FROM pg_catalog.pg_class x "
    f"JOIN pg_catalog.pg_namespace n ON n.oid {EQ} x.relnamespace WHERE NOT (n.nspname {EQ} "
    f"ANY('{{pg_catalog,information_schema,pg_toast}}'::pg_catalog.name[])) AND n.nspname {NOT_LIKE} 'pg\\_temp%' "
    f"AND n.nspname {NOT_LIKE} 'pg\\_toast\\_temp%' ORDER BY 1, 2"
)
#: Every table's columns and their types.
COLUMNS = (
    f"SELECT c.table_schema::{TEXT}, c.table_name::{TEXT}, c.column_name::{TEXT}, c.data_type::{TEXT} "
    f"FROM information_schema.columns c WHERE NOT (c.table_schema::{TEXT} {EQ} "
    f"ANY('{{pg_catalog,information_schema}}'::{TEXT}[])) ORDER BY 1, 2, 3"
)
#: The relations whose planning would evaluate an expression that depends on a function, operator or
#: type made in the database (an index's expression or predicate, a statistics object's expression, a
#: partition key), with what carries it; a partition inherits its ancestors' (see :func:`hooked`).
HOOKED = (
    "WITH carrier(rel, what, refclassid, refobjid) AS ("
    f"SELECT i.indrelid, 'index ' {CAT} i.indexrelid::pg_catalog.regclass::{TEXT}, d.refclassid, d.refobjid "
    "FROM pg_catalog.pg_index i JOIN pg_catalog.pg_depend d "
    f"ON d.classid {EQ} 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objid {EQ} i.indexrelid "
    f"UNION ALL SELECT s.stxrelid, 'statistics ' {CAT} s.stxname::{TEXT}, d.refclassid, d.refobjid "
    "FROM pg_catalog.pg_statistic_ext s JOIN pg_catalog.pg_depend d "
    f"ON d.classid {EQ} 'pg_catalog.pg_statistic_ext'::pg_catalog.regclass AND d.objid {EQ} s.oid "
    "UNION ALL SELECT p.partrelid, 'partition key', d.refclassid, d.refobjid "
    "FROM pg_catalog.pg_partitioned_table p JOIN pg_catalog.pg_depend d "
    f"ON d.classid {EQ} 'pg_catalog.pg_class'::pg_catalog.regclass AND d.objid {EQ} p.partrelid "
    f"AND d.objsubid {EQ} 0) "
    "SELECT c.rel, pg_catalog.string_agg(DISTINCT c.what, ', ') FROM carrier c "
    f"WHERE c.refobjid {_MADE} AND c.refclassid {EQ} ANY(ARRAY['pg_catalog.pg_proc'::pg_catalog.regclass, "
    "'pg_catalog.pg_operator'::pg_catalog.regclass, 'pg_catalog.pg_type'::pg_catalog.regclass]) GROUP BY c.rel"
)
#: Each relation and its parent (inheritance and partitions).
PARENTS = "SELECT i.inhrelid, i.inhparent FROM pg_catalog.pg_inherits i"
#: The migrations table's rows, each value printed by its type's output function (``{}``: the table, the
#: limit).
MIGRATIONS = (
    "SELECT pg_catalog.left(pg_catalog.format('%s', t.version), 200), "
    "pg_catalog.left(pg_catalog.format('%s', t.applied_at), 200) FROM ONLY {} AS t ORDER BY 1 LIMIT {}"
)
#: The rows of the declared table created since the migration (``{}``: its time, unix seconds).
CREATED_SINCE = f"WHERE t.created_at {GE} pg_catalog.to_timestamp({{}})"
#: The digests' query over a table (``{}``: the table, a ``WHERE`` clause) and over a catalog query.
ROW_HASHES = (
    'SELECT pg_catalog.md5(pg_catalog.textin(pg_catalog.record_out(t))) COLLATE pg_catalog."C" '
    "FROM ONLY {} AS t {} ORDER BY 1"
)
QUERY_HASHES = (
    'SELECT pg_catalog.md5(pg_catalog.textin(pg_catalog.record_out(q))) COLLATE pg_catalog."C" '
    "FROM ({}) AS q ORDER BY 1"
)
#: The type ``created_at`` must have for the rows created since the migration to be counted.
TIMESTAMPTZ = "timestamp with time zone"

#: The errors of a state query that what the database holds causes: a value over a limit of
#: PostgreSQL's (a row's text over 1 GB is 54000; an allocation over 1 GB, XX000), a value that cannot be
#: shown (class 22), and the digest's time bound (57014).
DATA_ERRORS = ("22", "54", "57014", "XX000")


def unreadable(exc: psycopg.Error, conn: psycopg.Connection[Any]) -> str | None:
    """Why a state query could not be answered, when what the database holds is the reason (so it is
    said in the state, a change only a write can make, never a snapshot that cannot be read: decision
    0073); ``None`` for anything else (a lost connection, a server short of memory, disk or connections,
    a shutdown), which is the harness's: a PROVIDER_FAILURE."""
    state = getattr(exc, "sqlstate", None) or ""
    if conn.closed or conn.broken or not state.startswith(DATA_ERRORS):
        return None
    if state == "57014":
        return f"not digested within {DIGEST_TIMEOUT_MS} ms"
    return f"not digested: {state} {str(exc).splitlines()[0][:120]}"


def streamed_digest(
    conn: psycopg.Connection[Any],
    query: sql.Composed | str,
    params: Any = None,
    *,
    timeout_ms: int = DIGEST_TIMEOUT_MS,
    clock: Callable[[], float] = time.monotonic,
) -> tuple[int | None, str]:
    """(how many rows, the sha256 of their hashes in order) of ``query``, a query of one column, the md5
    of each row, sorted (decision 0079). The server hashes each row and sorts the hashes (spilling to
    disk past ``work_mem``); a server-side cursor brings them in batches and the digest is made as they
    come: the server's backend holds one row's text at a time and this process a batch of hashes, however
    many rows there are (one value is still built whole on the server to be hashed). Order-dependent on
    purpose: a sum or xor of the hashes would let crafted rows cancel out.

    ``timeout_ms`` bounds the whole digest (each fetch gets what is left of it as its statement
    timeout). A digest the data makes impossible (:func:`unreadable`) is ``(None, why)``; any other
    error is raised (the harness's: a PROVIDER_FAILURE)."""
    deadline = clock() + timeout_ms / 1000
    late = f"not digested within {timeout_ms} ms"
    digest, count = hashlib.sha256(), 0
    try:
        with conn.transaction(), conn.cursor(name="oasis_state_digest") as cur:
            cur.execute(query, params)  # DECLARE: nothing runs yet
            while True:
                left = int((deadline - clock()) * 1000)
                if left <= 0:
                    return None, late
                conn.execute(sql.SQL("SET LOCAL statement_timeout = {}").format(sql.Literal(left)))
                batch = cur.fetchmany(DIGEST_BATCH)
                for (row_hash,) in batch:
                    digest.update(f"{row_hash}\n".encode())
                count += len(batch)
                if len(batch) < DIGEST_BATCH:
                    break
    except psycopg.Error as exc:
        if (reason := unreadable(exc, conn)) is None:
            raise
        # The time bound can cancel the COMMIT itself (a cancel the server took as the last fetch ended):
        # the transaction is then left aborted, and every later query of the state read would fail.
        if conn.info.transaction_status != psycopg.pq.TransactionStatus.IDLE:
            conn.execute("ROLLBACK")
        return None, late if reason.startswith("not digested within") else reason
    return count, digest.hexdigest()


def row_hashes(relation: sql.Composable, where: sql.Composable | str = "") -> sql.Composed:
    """The query of :func:`streamed_digest` over a table's own rows (each row's text as its type's output
    function prints it: ``record_out``, never a cast, which the writer may have made for its table's
    type). ``where`` may name the table's columns as ``t.<column>``."""
    return sql.SQL(ROW_HASHES).format(relation, sql.SQL(where) if isinstance(where, str) else where)


def catalog_digests(conn: psycopg.Connection[Any], roles: list[str]) -> dict[str, str]:
    """Each of :data:`CATALOG_QUERIES` as ``<rows>:<digest>`` of its rows (:func:`streamed_digest`: each
    row hashed on the server, so a value the agent made hundreds of megabytes long never reaches this
    process)."""
    out: dict[str, str] = {}
    for name, query in CATALOG_QUERIES.items():
        hashed = sql.SQL(QUERY_HASHES).format(sql.SQL(query))
        count, digest = streamed_digest(conn, hashed, {"roles": roles})
        out[name] = digest if count is None else f"{count}:{digest}"
    return out


def hooked(carriers: Iterable[tuple[int, str]], parents: Iterable[tuple[int, int]]) -> dict[int, str]:
    """The relations the state read does not plan a query over (:data:`HOOKED`), each with why: those
    that carry an expression of the writer's, and every descendant of one."""
    out = {rel: f"not digested: its {what} calls what the database's roles made" for rel, what in carriers}
    children: dict[int, list[int]] = {}
    for child, parent in parents:
        children.setdefault(parent, []).append(child)
    todo = list(out)
    while todo:
        rel = todo.pop()
        for child in children.get(rel, ()):
            if child not in out:
                out[child] = f"not digested: an ancestor ({out[rel].removeprefix('not digested: ')})"
                todo.append(child)
    return out


def _key(schema: str, name: str) -> str:
    return name if schema == SCHEMA else f"{schema}.{name}"


def _migrations(conn: psycopg.Connection[Any]) -> dict[str, str]:
    """The migrations table's versions and times (each bounded: a version the agent made a gigabyte long
    is not fetched whole; its table's digest already differs), at most :data:`MAX_MIGRATIONS`."""
    query = sql.SQL(MIGRATIONS).format(
        sql.Identifier(SCHEMA, MIGRATIONS_TABLE), sql.Literal(MAX_MIGRATIONS + 1)
    )
    out: dict[str, str] = {}
    try:
        for version, applied in conn.execute(query).fetchall():
            out[version] = applied
    except psycopg.Error as exc:
        if (reason := unreadable(exc, conn)) is None:
            raise
        return {"": reason}
    if len(out) > MAX_MIGRATIONS:
        out = dict(sorted(out.items())[:MAX_MIGRATIONS]) | {"": f"more than {MAX_MIGRATIONS} migrations"}
    return out


def _rows_since(
    conn: psycopg.Connection[Any], table: str, columns: Mapping[str, str], applied_at: float, why: str | None
) -> dict[str, Any]:
    """Count and digest of the declared table's rows created since the migration."""
    if "created_at" not in columns:
        return {"count": None, "digest": None}
    if why is not None:
        return {"count": None, "digest": why}
    if columns["created_at"] != TIMESTAMPTZ:
        return {"count": None, "digest": f"not digested: created_at is {columns['created_at'][:80]}"}
    where = sql.SQL(CREATED_SINCE).format(sql.Literal(applied_at))
    count, digest = streamed_digest(conn, row_hashes(sql.Identifier(SCHEMA, table), where))
    return {"count": count, "digest": digest}


def read_state(
    conn: psycopg.Connection[Any], table: str, applied_at: float, roles: list[str]
) -> dict[str, Any]:
    """A scenario database's state (decision 0066's parts and 0073's catalog), read on the harness's
    connection ``conn``. ``table``: the declared table; ``applied_at``: the injected migration's time."""
    objects = conn.execute(OBJECTS).fetchall()
    tables: dict[str, dict[str, str]] = {}
    for schema, name, column, kind in conn.execute(COLUMNS).fetchall():
        tables.setdefault(_key(schema, name), {})[column] = kind
    skip = hooked(conn.execute(HOOKED).fetchall(), conn.execute(PARENTS).fetchall())
    rows: dict[str, dict[str, Any]] = {}
    reasons: dict[str, str] = {}
    for schema, name, kind, oid in objects:
        if kind not in ("r", "p"):
            continue
        key = _key(schema, name)
        if oid in skip:
            reasons[key] = skip[oid]
            rows[key] = {"count": None, "digest": skip[oid]}
        elif len(rows) >= MAX_DIGESTED_TABLES:
            rows[key] = {"count": None, "digest": "not digested: too many tables"}
        else:
            # What the agent made can be too large to digest, in time or at all: said in the digest.
            # Memory does not grow with the table (decision 0079).
            count, digest = streamed_digest(conn, row_hashes(sql.Identifier(schema, name)))
            rows[key] = {"count": count, "digest": digest}
    migrations: dict[str, str] = {}
    if MIGRATIONS_TABLE in tables:
        migrations = {"": reasons[MIGRATIONS_TABLE]} if MIGRATIONS_TABLE in reasons else _migrations(conn)
    return {
        "catalog": catalog_digests(conn, roles),
        "objects": [f"{schema}.{name} ({kind})" for schema, name, kind, _ in objects],
        "tables": tables,
        "rows": rows,
        "migrations": migrations,
        "rows_since": _rows_since(conn, table, tables.get(table, {}), applied_at, reasons.get(table)),
    }
