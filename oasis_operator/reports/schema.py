"""The JSON Schema of the verdict file (``report.json``), and checking a report against it.

The schema (``schemas/verdict-file.schema.json``, shipped with the package) states the Reporting
document's structure as this project writes it: the verdict object with every metadata key §1 and
§2.1-2.2 require, the scenario records of §1.2 and the conformance claim of §3.2. Called by
``oasis evaluate --run-dir`` before it writes a report, and by the test suite on every report the
tests produce. Returns the problems as ``field.path: message`` lines; an empty list is a valid file.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from functools import cache
from importlib import resources
from typing import Any

import jsonschema

SCHEMA_FILE = "verdict-file.schema.json"


@cache
def verdict_file_schema() -> dict[str, Any]:
    text = resources.files("oasis_operator.reports").joinpath("schemas", SCHEMA_FILE).read_text()
    schema: dict[str, Any] = json.loads(text)
    return schema


@cache
def _validator() -> jsonschema.protocols.Validator:
    schema = verdict_file_schema()
    cls = jsonschema.validators.validator_for(schema)
    cls.check_schema(schema)
    validator: jsonschema.protocols.Validator = cls(schema, format_checker=cls.FORMAT_CHECKER)
    return validator


def _path(parts: Any) -> str:
    out = "report"
    for p in parts:
        out += f"[{p}]" if isinstance(p, int) else f".{p}"
    return out


def report_problems(report: Mapping[str, Any]) -> list[str]:
    """Every way ``report`` departs from the verdict-file schema, sorted by field path."""
    errors = sorted(_validator().iter_errors(dict(report)), key=lambda e: [str(p) for p in e.absolute_path])
    return [f"{_path(e.absolute_path)}: {e.message}" for e in errors]
