"""The text of every statement the harness runs on the database server after the agent's turn names only
built-ins, schema-qualified (decision 0088): each function, operator, cast, collation and relation is
``pg_catalog``'s or ``information_schema``'s, or a table of the scenario passed in as an identifier.

The harness's sessions also have ``pg_catalog`` alone on their path, so an unqualified name would still
resolve to a built-in; this test keeps the second fence standing (a path widened by mistake, the
CVE-2018-1058 shape: an exact match on the writer's type beats a built-in reached by a coercion).
``tests/toolplane/test_database_trojans.py`` plants overloads of every name found here and checks that
none runs."""

from __future__ import annotations

import re

import pytest

from oasis_operator.adapters.toolplane import database_roles, database_sql, database_state

#: Every statement of the harness after the turn, by what it is for.
STATEMENTS: dict[str, str] = {
    **{f"catalog: {name}": query for name, query in database_state.CATALOG_QUERIES.items()},
    "objects": database_state.OBJECTS,
    "columns": database_state.COLUMNS,
    "hooked": database_state.HOOKED,
    "parents": database_state.PARENTS,
    "migrations": database_state.MIGRATIONS,
    "created since": database_state.CREATED_SINCE,
    "row hashes": database_state.ROW_HASHES,
    "query hashes": database_state.QUERY_HASHES,
    "sizes": database_sql.SIZES,
    "role exists": database_roles.ROLE_EXISTS,
    "end sessions": database_roles.END_SESSIONS,
}
QUALIFIERS = {"pg_catalog", "information_schema"}
#: Words a parenthesis follows that call nothing: SQL's own syntax, and the one common table expression.
SYNTAX = {"any", "coalesce", "operator", "from", "not", "in", "as", "carrier", "and", "or"}
#: What stands for a table the harness names as an identifier (``{}``), or a subquery.
COMPOSED = {"{}", "("}


def _bare(text: str) -> str:
    """``text`` without its string literals, qualified operators and placeholders."""
    text = re.sub(r"'(?:[^']|'')*'", "''", text)
    text = re.sub(r"OPERATOR\(pg_catalog\.[^)\s]+\)", " op ", text)
    return re.sub(r"%\(\w+\)s|%s|\{\}|\{\{|\}\}", " x ", text)


@pytest.mark.parametrize("name", sorted(STATEMENTS))
def test_every_name_the_harness_calls_is_a_qualified_built_in(name: str) -> None:
    text = STATEMENTS[name]
    bare = _bare(text)
    found = []
    for qualifier, word in re.findall(r"(?:\b(\w+)\s*\.\s*)?\b(\w+)\s*\(", bare):
        if (qualifier and qualifier not in QUALIFIERS) or (not qualifier and word.lower() not in SYNTAX):
            found.append(f"function {qualifier + '.' if qualifier else ''}{word}")
    if leftover := re.findall(r"[=<>!~|+\-*/%^&#@]+", bare.replace("::", " ")):
        found.append(f"operators {leftover}")
    found += [f"cast to {t}" for t in re.findall(r"::\s*(\w+)\b(?!\s*\.)", bare)]
    found += [f"cast to {q}.*" for q in re.findall(r"::\s*(\w+)\s*\.", bare) if q not in QUALIFIERS]
    found += [
        f"collation {c}" for c in re.findall(r"COLLATE\s+(\S+)", bare) if not c.startswith("pg_catalog.")
    ]
    for target in re.findall(r"\b(?:FROM|JOIN)\s+(?:ONLY\s+)?(\(|\{\}|[\w.]+)", text):
        if target not in COMPOSED and target.split(".")[0] not in QUALIFIERS and target != "carrier":
            found.append(f"relation {target}")
    assert found == [], text


def test_the_harness_sessions_fix_their_path_and_read_only() -> None:
    session = database_roles.SESSION.split()
    assert "search_path=pg_catalog" in session
    assert "row_security=off" in session
