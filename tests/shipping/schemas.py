"""JSON schemas for kubeconform, written locally: no download from the internet.

Used by ``tests/shipping/test_chart.py``. It turns the API server's OpenAPI v3 documents (one per
group-version, fetched from ``/openapi/v3`` of the embedded control plane) and our CRDs (``crds/``)
into one standalone JSON schema per kind, at ``<dir>/<group>/<kind>_<version>.json`` (``v1`` stands
for the core group), the layout :data:`SCHEMA_LOCATION` tells kubeconform.

The schemas are made strict on the way: an object schema with named properties and no rule for other
keys gets ``additionalProperties: false`` (unless it preserves unknown fields), so a misspelt field is
an error; property names starting with ``$`` move to ``patternProperties``; OpenAPI's ``nullable`` and ``x-kubernetes-int-or-string`` become JSON-schema types.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping
from pathlib import Path
from typing import Any

import httpx2
import yaml

#: kubeconform's -schema-location template for the files written here ({dir} is filled in by callers).
SCHEMA_LOCATION = "{dir}/{{{{ .Group }}}}/{{{{ .ResourceKind }}}}_{{{{ .ResourceAPIVersion }}}}.json"
REF_PREFIX = "#/components/schemas/"


#: Keywords whose value is a map of name -> schema, and keywords whose value is a schema or a list of them.
_SCHEMA_MAPS = ("properties", "patternProperties", "definitions")
_SUBSCHEMAS = ("items", "additionalProperties", "additionalItems", "not", "allOf", "anyOf", "oneOf")


def strict(node: Any) -> Any:
    """A copy of an OpenAPI schema node with the strictness rules of the module docstring."""
    if not isinstance(node, dict):
        return node
    out: dict[str, Any] = {}
    for key, value in node.items():
        if key in ("description", "example"):
            continue
        if key in _SCHEMA_MAPS and isinstance(value, dict):
            out[key] = {name: strict(sub) for name, sub in value.items()}
        elif key in _SUBSCHEMAS:
            out[key] = [strict(v) for v in value] if isinstance(value, list) else strict(value)
        else:
            out[key] = value
    if out.pop("x-kubernetes-int-or-string", False):
        out["type"] = ["integer", "string"]
    if out.pop("nullable", False) and isinstance(out.get("type"), str):
        out["type"] = [out["type"], "null"]
    props = out.get("properties")
    if isinstance(props, dict) and any(k.startswith("$") for k in props):
        # JSONSchemaProps has properties named "$ref" and "$schema", which a JSON-schema compiler
        # takes for references; the same rule as a pattern keeps them allowed and checked.
        patterns = out.setdefault("patternProperties", {})
        for name in [k for k in props if k.startswith("$")]:
            patterns["^" + re.escape(name) + "$"] = props.pop(name)
    if (
        "properties" in out
        and "additionalProperties" not in out
        and not out.get("x-kubernetes-preserve-unknown-fields")
    ):
        out["additionalProperties"] = False
    return out


def _refs(node: Any) -> Iterable[str]:
    if isinstance(node, dict):
        ref = node.get("$ref")
        if isinstance(ref, str) and ref.startswith(REF_PREFIX):
            yield ref[len(REF_PREFIX) :]
        for value in node.values():
            yield from _refs(value)
    elif isinstance(node, list):
        for value in node:
            yield from _refs(value)


def standalone(root: str, components: Mapping[str, Any]) -> dict[str, Any]:
    """The schema ``root`` with every component it reaches, strict, in one document."""
    seen: set[str] = set()
    todo = [root]
    while todo:
        name = todo.pop()
        if name in seen:
            continue
        seen.add(name)
        todo.extend(_refs(components[name]))
    return {
        "$ref": REF_PREFIX + root,
        "components": {"schemas": {name: strict(components[name]) for name in sorted(seen)}},
    }


def _write(directory: Path, group: str, kind: str, version: str, schema: Mapping[str, Any]) -> Path:
    path = directory / (group or "v1") / f"{kind.lower()}_{version}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(schema, sort_keys=True), encoding="utf-8")
    return path


def write_api_schemas(http: httpx2.Client, directory: Path, kinds: set[tuple[str, str, str]]) -> list[Path]:
    """Schemas of the built-in ``(group, version, kind)`` triples asked for, from the API server."""
    index = http.get("/openapi/v3")
    index.raise_for_status()
    paths = index.json()["paths"]
    written: list[Path] = []
    for group, version, kind in sorted(kinds):
        gv_path = f"api/{version}" if not group else f"apis/{group}/{version}"
        if gv_path not in paths:
            continue  # not served by this API server (a CRD kind, or another project's)
        resp = http.get(f"/openapi/v3/{gv_path}")
        resp.raise_for_status()
        components = resp.json()["components"]["schemas"]
        for name, schema in components.items():
            gvks = schema.get("x-kubernetes-group-version-kind") or []
            if {"group": group, "version": version, "kind": kind} in gvks:
                written.append(_write(directory, group, kind, version, standalone(name, components)))
                break
    return written


def write_crd_schemas(crd_files: Iterable[Path], directory: Path) -> list[Path]:
    """Schemas of every served version of our CRDs."""
    written: list[Path] = []
    for path in crd_files:
        crd = yaml.safe_load(path.read_text(encoding="utf-8"))
        spec = crd["spec"]
        for version in spec["versions"]:
            if not version.get("served", True):
                continue
            schema = strict(version["schema"]["openAPIV3Schema"])
            props = schema.setdefault("properties", {})
            props.setdefault("apiVersion", {"type": "string"})
            props.setdefault("kind", {"type": "string"})
            props["metadata"] = {"type": "object"}  # checked by the API server, not by the CRD schema
            written.append(_write(directory, spec["group"], spec["names"]["kind"], version["name"], schema))
    return written
