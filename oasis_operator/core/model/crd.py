"""Generate our CustomResourceDefinitions from the pydantic models (one source of truth).

Who calls it: ``python -m oasis_operator.crdgen`` (writes ``crds/*.yaml``) and the test that fails
when ``crds/`` is stale. What it turns into what: model classes -> CRD dicts. Pure.

The pydantic JSON schema is rewritten into a Kubernetes *structural* schema:

* ``$ref`` inlined, ``null`` alternatives dropped (optional fields are simply not required),
  titles and defaults dropped (the operator applies defaults through the models, so the API server
  never rewrites what a user applied);
* a union of object types becomes one object with the union of the properties (a discriminated
  union such as a stimulus or a scoring block); the per-variant rules are CEL validations that the
  models declare next to themselves (``json_schema_extra={"x-kubernetes-validations": ...}``);
* a union of scalar types becomes a field of any JSON value (``x-kubernetes-preserve-unknown-fields``),
  ``int | "all"`` becomes ``x-kubernetes-int-or-string``;
* a model that keeps unknown keys (profile-defined content) keeps them in the CRD too;
* constraints on map keys (``propertyNames``) become CEL rules;
* enum strings get a ``maxLength`` so CEL cost estimates stay small;
* descriptions come from the models' field docstrings (``use_attribute_docstrings``) or, for a field
  without one, from its model's class docstring; Sphinx markup is turned into plain text, since
  ``kubectl explain`` prints it verbatim.

The EvaluationRun's status is typed from :class:`~oasis_operator.core.run_status.RunStatus` the same way
(only the profile-defined maps inside it stay open); Profile and Scenario have the shared
``observedGeneration`` and ``conditions``.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel

from oasis_operator.core.model.profile import Profile
from oasis_operator.core.model.run import EvaluationRunSpec
from oasis_operator.core.model.scenario import Scenario
from oasis_operator.core.run_status import RunStatus, initial_status

GROUP = "oasis.dev"
VERSION = "v1alpha1"
API_VERSION = f"{GROUP}/{VERSION}"
CATEGORIES = ["oasis"]
VALIDATIONS = "x-kubernetes-validations"
PRESERVE = "x-kubernetes-preserve-unknown-fields"

_KEEP = {
    "description",
    "pattern",
    "minLength",
    "maxLength",
    "minItems",
    "maxItems",
    "minProperties",
    "maxProperties",
    "minimum",
    "maximum",
    "enum",
    "format",
    VALIDATIONS,
}


@dataclass(frozen=True)
class CrdKind:
    kind: str
    plural: str
    short_names: list[str]
    spec_model: type[BaseModel]
    printer_columns: list[dict[str, Any]]
    #: The model the controller writes the status from; none: only the shared fields.
    status_model: type[BaseModel] | None = None
    spec_description: str = ""
    kind_description: str = ""
    status_description: str = "What the controller observed; written only by the operator."
    #: What the status reads as before a controller wrote one (the API server defaults it on read).
    status_default: dict[str, Any] | None = None


def _json_type(value: Any) -> str:
    if isinstance(value, bool):
        return "boolean"
    if isinstance(value, int):
        return "integer"
    if isinstance(value, float):
        return "number"
    return "string"


_ROLE = re.compile(r":[a-z]+:`~?(?:[\w.]*\.)?([^`<]+?)`")


def plain(text: str) -> str:
    """A docstring as ``kubectl explain`` should print it: no Sphinx roles or double backticks, one
    paragraph per blank line, no hard line breaks inside one."""
    text = _ROLE.sub(r"\1", text).replace("``", "")
    paragraphs = [" ".join(p.split()) for p in re.split(r"\n\s*\n", text.strip())]
    return "\n\n".join(p for p in paragraphs if p)


class _Converter:
    def __init__(self, defs: dict[str, Any]) -> None:
        self.defs = defs

    def resolve(self, node: dict[str, Any]) -> dict[str, Any]:
        while "$ref" in node:
            target = self.defs[node["$ref"].rsplit("/", 1)[-1]]
            extra = {k: v for k, v in node.items() if k != "$ref"}
            node = {**target, **extra}
        return node

    def convert(self, node: dict[str, Any]) -> dict[str, Any]:
        node = self.resolve(node)
        for junctor in ("anyOf", "oneOf"):
            if junctor in node:
                return self._union(node, node[junctor])
        if "allOf" in node and len(node["allOf"]) == 1:
            merged = {**self.resolve(node["allOf"][0]), **{k: v for k, v in node.items() if k != "allOf"}}
            return self.convert(merged)
        out: dict[str, Any] = {k: v for k, v in node.items() if k in _KEEP}
        if "description" in out:
            out["description"] = plain(out["description"])
        if "const" in node:
            out["enum"] = [node["const"]]
        kind = node.get("type")
        if kind is None and "enum" in out:
            kind = _json_type(out["enum"][0])
        if kind is None:
            # Any JSON value.
            out[PRESERVE] = True
            return out
        out["type"] = kind
        self._typed(node, kind, out)
        return out

    def _typed(self, node: dict[str, Any], kind: str, out: dict[str, Any]) -> None:
        """What a node of JSON type ``kind`` adds: an enum's length bound, an object's properties, an
        array's items, exclusive bounds in the OpenAPI v3.0 form."""
        if kind == "string" and "enum" in out and "maxLength" not in out:
            out["maxLength"] = max(len(str(v)) for v in out["enum"])
        if kind == "object":
            self._object(node, out)
        elif kind == "array":
            out["items"] = self.convert(node.get("items", {}))
        if "exclusiveMinimum" in node:
            out["minimum"], out["exclusiveMinimum"] = node["exclusiveMinimum"], True
        if "exclusiveMaximum" in node:
            out["maximum"], out["exclusiveMaximum"] = node["exclusiveMaximum"], True

    def _object(self, node: dict[str, Any], out: dict[str, Any]) -> None:
        props = node.get("properties")
        extra = node.get("additionalProperties")
        if props:
            out["properties"] = {name: self.convert(sub) for name, sub in props.items()}
            if node.get("required"):
                out["required"] = list(node["required"])
            if extra is True or (isinstance(extra, dict) and not extra):
                out[PRESERVE] = True
        elif isinstance(extra, dict) and extra:
            values = self.convert(extra)
            if "type" in values or "x-kubernetes-int-or-string" in values:
                out["additionalProperties"] = values
            else:
                # A map of arbitrary JSON values: CEL cannot type such a map, so keep it as an open object.
                out[PRESERVE] = True
        elif extra is not False:
            out[PRESERVE] = True
        names = self.resolve(node.get("propertyNames", {}))
        if "enum" in names and "additionalProperties" in out:
            # A map with a closed key set is an object with those (optional) properties.
            value = out.pop("additionalProperties")
            out["properties"] = {
                str(key): {**value, "description": value.get("description") or f"The value for key {key}."}
                for key in names["enum"]
            }
        # Other key constraints (patterns) stay with the models: CEL over map keys of unbounded
        # length is too expensive for the API server's cost budget.

    def _union(self, node: dict[str, Any], members: list[dict[str, Any]]) -> dict[str, Any]:
        outer = {k: v for k, v in node.items() if k in _KEEP}
        if "description" in outer:
            outer["description"] = plain(outer["description"])
        resolved = [self.resolve(m) for m in members if self.resolve(m).get("type") != "null"]
        if len(resolved) == 1:
            inner = self.convert(resolved[0])
            inner.update({k: v for k, v in outer.items() if k != VALIDATIONS})
            if VALIDATIONS in outer:
                inner[VALIDATIONS] = inner.get(VALIDATIONS, []) + outer[VALIDATIONS]
            return inner
        converted = [self.convert(m) for m in resolved]
        types = {c.get("type") for c in converted}
        if types == {"object"}:
            return {**self._merge_objects(converted), **outer}
        if types == {"integer", "string"}:
            return {"x-kubernetes-int-or-string": True, **outer}
        return {PRESERVE: True, **outer}

    @staticmethod
    def _merge_objects(objects: list[dict[str, Any]]) -> dict[str, Any]:
        props: dict[str, Any] = {}
        for obj in objects:
            for name, sub in obj.get("properties", {}).items():
                if name in props and props[name] != sub:
                    if "enum" in props[name] and "enum" in sub:
                        merged = dict(props[name])
                        merged["enum"] = props[name]["enum"] + [
                            v for v in sub["enum"] if v not in props[name]["enum"]
                        ]
                        merged["maxLength"] = max(len(str(v)) for v in merged["enum"])
                        props[name] = merged
                        continue
                    raise ValueError(f"cannot merge union members: property {name!r} differs")
                props[name] = sub
        required = set.intersection(*(set(o.get("required", [])) for o in objects))
        out: dict[str, Any] = {"type": "object", "properties": props}
        if required:
            out["required"] = sorted(required)
        if any(o.get(PRESERVE) for o in objects):
            out[PRESERVE] = True
        rules: list[dict[str, Any]] = []
        for obj in objects:
            for rule in obj.get(VALIDATIONS, []):
                if rule not in rules:
                    rules.append(rule)
        if rules:
            out[VALIDATIONS] = rules
        return out


def structural_schema(model: type[BaseModel]) -> dict[str, Any]:
    """The structural OpenAPI v3 schema of a model, as a CRD embeds it."""
    raw = model.model_json_schema(by_alias=True, mode="validation")
    return _Converter(raw.get("$defs", {})).convert({k: v for k, v in raw.items() if k != "$defs"})


_OBSERVED_GENERATION = {
    "type": "integer",
    "format": "int64",
    "minimum": 0,
    "description": "The metadata.generation of the spec the controller last acted on.",
}

_CONDITIONS = {
    "type": "array",
    "description": (
        "The object's state as Kubernetes conditions (one per type), as kubectl wait, kstatus, "
        "Argo CD and Flux read them."
    ),
    "x-kubernetes-list-type": "map",
    "x-kubernetes-list-map-keys": ["type"],
    "items": {
        "type": "object",
        "description": "One aspect of the object's state.",
        "required": ["type", "status"],
        "properties": {
            "type": {
                "type": "string",
                "maxLength": 316,
                "description": "The condition's name, such as Ready, Completed, Succeeded, Reconciling or Stalled.",
            },
            "status": {
                "type": "string",
                "enum": ["True", "False", "Unknown"],
                "description": "Whether the condition holds: True, False or Unknown.",
            },
            "reason": {
                "type": "string",
                "maxLength": 1024,
                "description": "A CamelCase word for why the condition has its status.",
            },
            "message": {
                "type": "string",
                "maxLength": 32768,
                "description": "A human-readable explanation of the condition's status.",
            },
            "lastTransitionTime": {
                "type": "string",
                "format": "date-time",
                "description": "When the status last changed (not when it was last written).",
            },
            "observedGeneration": {**_OBSERVED_GENERATION},
        },
    },
}

_RUN_RULES = [
    {
        "rule": "self.profileRef == oldSelf.profileRef",
        "message": "profileRef is immutable; create a new EvaluationRun",
    },
    {
        "rule": "self.scenarios == oldSelf.scenarios",
        "message": "scenarios is immutable; create a new EvaluationRun",
    },
    {"rule": "self.agent == oldSelf.agent", "message": "agent is immutable; create a new EvaluationRun"},
    {"rule": "self.tier == oldSelf.tier", "message": "tier is immutable; create a new EvaluationRun"},
    {
        "rule": "!has(oldSelf.shutdown) || (has(self.shutdown) && (self.shutdown == oldSelf.shutdown || self.shutdown == 'Immediate'))",
        "message": "shutdown cannot be withdrawn; it can only be escalated from Graceful to Immediate",
    },
]

KINDS: tuple[CrdKind, ...] = (
    CrdKind(
        kind="Profile",
        plural="profiles",
        short_names=["oprof"],
        spec_model=Profile,
        kind_description="An OASIS domain profile imported into the cluster; EvaluationRuns reference it by name.",
        spec_description="An OASIS domain profile: categories, archetypes, scoring, tiers, agent configuration schema, provider conformance.",
        printer_columns=[
            {"name": "Profile", "type": "string", "jsonPath": ".spec.name"},
            {"name": "Version", "type": "string", "jsonPath": ".spec.version"},
            {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ],
    ),
    CrdKind(
        kind="Scenario",
        plural="scenarios",
        short_names=["oscn"],
        spec_model=Scenario,
        kind_description="One OASIS scenario of a profile; the operator validates it and reports the result as Ready.",
        spec_description="An OASIS scenario, field for field as the OASIS scenario schema defines it.",
        printer_columns=[
            {"name": "Classification", "type": "string", "jsonPath": ".spec.classification"},
            {"name": "Category", "type": "string", "jsonPath": ".spec.category"},
            {"name": "Archetype", "type": "string", "jsonPath": ".spec.archetype"},
            {"name": "Tier", "type": "integer", "jsonPath": ".spec.tier"},
            {"name": "Ready", "type": "string", "jsonPath": '.status.conditions[?(@.type=="Ready")].status'},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ],
    ),
    CrdKind(
        kind="EvaluationRun",
        plural="evaluationruns",
        short_names=["orun", "evalrun"],
        spec_model=EvaluationRunSpec,
        kind_description="An evaluation of one agent against a profile's scenarios, with its verdict in the status.",
        spec_description="One evaluation of one agent against the scenarios of one profile.",
        printer_columns=[
            {"name": "Verdict", "type": "string", "jsonPath": ".status.verdict"},
            {"name": "Phase", "type": "string", "jsonPath": ".status.phase"},
            {"name": "Agent", "type": "string", "jsonPath": ".status.agent.name"},
            {"name": "Passed", "type": "integer", "jsonPath": ".status.summary.passed"},
            {"name": "Failed", "type": "integer", "jsonPath": ".status.summary.failed"},
            {"name": "Total", "type": "integer", "jsonPath": ".status.summary.total"},
            {"name": "Incomplete", "type": "boolean", "jsonPath": ".status.report.incomplete"},
            {"name": "Profile", "type": "string", "jsonPath": ".spec.profileRef.name"},
            {"name": "Tier", "type": "integer", "jsonPath": ".spec.tier", "priority": 1},
            {"name": "Excluded", "type": "integer", "jsonPath": ".status.summary.excluded", "priority": 1},
            {"name": "Suspended", "type": "boolean", "jsonPath": ".spec.suspend", "priority": 1},
            {"name": "Message", "type": "string", "jsonPath": ".status.message", "priority": 1},
            {"name": "Age", "type": "date", "jsonPath": ".metadata.creationTimestamp"},
        ],
        status_model=RunStatus,
        status_description=(
            "The run's progress and result, written only by the operator: phase, verdict, per-scenario "
            "steps, counts, where the report is stored, and kstatus conditions."
        ),
        # A run nobody has looked at yet is in progress (kstatus: Reconciling=True), never Current.
        status_default=initial_status(),
    ),
)


def _closed(node: dict[str, Any]) -> dict[str, Any]:
    """``node`` with every object that has typed properties closed (unknown keys pruned by the API
    server); maps of profile-defined content stay open."""
    if "properties" in node:
        node.pop(PRESERVE, None)
        node["properties"] = {k: _closed(v) for k, v in node["properties"].items()}
    if isinstance(node.get("items"), dict):
        node["items"] = _closed(node["items"])
    return node


def _status_schema(kind: CrdKind) -> dict[str, Any]:
    # Status belongs to the controllers and is typed from the model they write it from.
    props: dict[str, Any] = {}
    if kind.status_model is not None:
        props = _closed(structural_schema(kind.status_model))["properties"]
    props.update({"observedGeneration": _OBSERVED_GENERATION, "conditions": _CONDITIONS})
    schema: dict[str, Any] = {
        "type": "object",
        "description": kind.status_description,
        "properties": props,
    }
    if kind.status_default is not None:
        schema["default"] = kind.status_default
    return schema


_API_VERSION_TEXT = "The versioned schema of this representation of an object (oasis.dev/v1alpha1)."
_KIND_TEXT = "The REST resource this object represents."


def crd_for(kind: CrdKind) -> dict[str, Any]:
    spec = structural_schema(kind.spec_model)
    spec["description"] = kind.spec_description
    if kind.kind == "EvaluationRun":
        spec[VALIDATIONS] = spec.get(VALIDATIONS, []) + _RUN_RULES
    return {
        "apiVersion": "apiextensions.k8s.io/v1",
        "kind": "CustomResourceDefinition",
        "metadata": {"name": f"{kind.plural}.{GROUP}"},
        "spec": {
            "group": GROUP,
            "names": {
                "kind": kind.kind,
                "listKind": f"{kind.kind}List",
                "plural": kind.plural,
                "singular": kind.kind.lower(),
                "shortNames": kind.short_names,
                "categories": CATEGORIES,
            },
            # See docs/decisions/0002-crd-scoping.md.
            "scope": "Namespaced",
            "versions": [
                {
                    "name": VERSION,
                    "served": True,
                    "storage": True,
                    "subresources": {"status": {}},
                    "additionalPrinterColumns": kind.printer_columns,
                    "schema": {
                        "openAPIV3Schema": {
                            "type": "object",
                            "description": kind.kind_description,
                            "required": ["spec"],
                            "properties": {
                                "apiVersion": {"type": "string", "description": _API_VERSION_TEXT},
                                "kind": {"type": "string", "description": _KIND_TEXT},
                                # Nothing but the type: the API server refuses more, and documents
                                # ObjectMeta itself.
                                "metadata": {"type": "object"},
                                "spec": spec,
                                "status": _status_schema(kind),
                            },
                        }
                    },
                }
            ],
        },
    }


def _unshared(node: Any) -> Any:
    """A deep copy without shared sub-objects (so YAML output has no anchors)."""
    if isinstance(node, dict):
        return {k: _unshared(v) for k, v in node.items()}
    if isinstance(node, list):
        return [_unshared(v) for v in node]
    return node


def all_crds() -> dict[str, dict[str, Any]]:
    """File name (``<plural>.<group>.yaml``) -> CRD, for every kind we define."""
    return {f"{k.plural}.{GROUP}.yaml": _unshared(crd_for(k)) for k in KINDS}
