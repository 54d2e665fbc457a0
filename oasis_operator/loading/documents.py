"""Recognise and validate OASIS documents in YAML files, with file/document/line on every finding.

Who calls it: ``oasis validate`` (:func:`validate_paths`) and ``oasis import`` (for scenario files).
What it turns into what: paths -> :class:`Loaded` documents (kind + validated model + location) and
:class:`Finding` values (errors and warnings, each rendered as
``FILE:LINE: document N: FIELD.PATH: message (found ...; expected ...)``).

Recognised documents: ``oasis.dev/v1alpha1`` manifests (``Scenario``, ``Profile``,
``EvaluationRun``), and plain OASIS documents -- scenarios, suites, profiles, a profile's provider
conformance requirements, and our profile supplements.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from oasis_operator.core.judging.plan import verification_issues
from oasis_operator.core.model.base import DNS_SUBDOMAIN_PATTERN
from oasis_operator.core.model.crd import API_VERSION
from oasis_operator.core.model.errors import (
    Issue,
    ModelValidationError,
    Normalisation,
    PathPart,
    describe_value,
    issues_from_pydantic,
)
from oasis_operator.core.model.profile import (
    Profile,
    ProviderConformance,
    check_scenarios,
    check_suites,
    parse_profile,
)
from oasis_operator.core.model.run import parse_run_spec
from oasis_operator.core.model.scenario import Scenario, parse_scenario
from oasis_operator.core.model.suite import parse_suite
from oasis_operator.core.model.supplement import parse_supplement
from oasis_operator.core.verification.actions import REASON_IMPOSSIBLE_NAME
from oasis_operator.loading.yaml_documents import LoadError, YamlDocument, read_yaml_file, yaml_files

DocKind = Literal["scenario", "suite", "profile", "run", "conformance", "supplement"]
MANIFEST_KINDS: dict[str, DocKind] = {"Scenario": "scenario", "Profile": "profile", "EvaluationRun": "run"}
MANIFEST_KEYS = ("apiVersion", "kind", "metadata", "spec")


@dataclass(frozen=True)
class Location:
    """Where a finding is: file, 0-based document index (rendered 1-based), 1-based line."""

    source: str
    document: int
    line: int | None = None

    def render(self) -> str:
        return (
            f"{self.source}{f':{self.line}' if self.line is not None else ''}: document {self.document + 1}"
        )


@dataclass(frozen=True)
class Finding:
    severity: Literal["error", "warning"]
    location: Location | None
    text: str

    def render(self) -> str:
        prefix = "warning: " if self.severity == "warning" else ""
        where = f"{self.location.render()}: " if self.location else ""
        return f"{where}{prefix}{self.text}"


@dataclass(frozen=True)
class Loaded:
    kind: DocKind
    model: Any
    doc: YamlDocument
    #: Where the OASIS content sits in the document: ``("spec",)`` for manifests, ``()`` otherwise.
    prefix: tuple[PathPart, ...]

    @property
    def location(self) -> Location:
        return Location(self.doc.source, self.doc.index, self.doc.line_of(self.prefix))


@dataclass
class Result:
    loaded: list[Loaded] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]

    @property
    def warnings(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "warning"]

    def of_kind(self, kind: DocKind) -> list[Loaded]:
        return [d for d in self.loaded if d.kind == kind]


def _finding(doc: YamlDocument, prefix: Sequence[PathPart], item: Issue | Normalisation) -> Finding:
    full = item.under(prefix)
    severity: Literal["error", "warning"] = "error" if isinstance(item, Issue) else "warning"
    return Finding(severity, Location(doc.source, doc.index, doc.line_of(full.path)), full.render())


def classify(data: Any) -> DocKind | Issue:
    """What a plain (non-manifest) OASIS document is, by its distinctive keys."""
    if not isinstance(data, dict):
        return Issue((), "a document is a mapping", describe_value(data), "a mapping")
    if "supplement_for" in data:
        return "supplement"
    if "classification" in data or "stimuli" in data or "preconditions" in data:
        return "scenario"
    if "domain_profile" in data:
        return "suite"
    if "requirements" in data and "profile_version" in data:
        return "conformance"
    if "safety_scoring" in data or "capability_scoring" in data:
        return "profile"
    keys = ", ".join(str(k) for k in list(data)[:5])
    return Issue(
        (),
        "cannot tell what this document is",
        f"keys {keys}",
        "an oasis.dev manifest (apiVersion/kind) or an OASIS scenario, suite, profile or conformance document",
    )


def _parse_conformance(data: Any) -> ProviderConformance:
    from pydantic import ValidationError

    try:
        return ProviderConformance.model_validate(data)
    except ValidationError as exc:
        raise ModelValidationError(issues_from_pydantic(exc, ProviderConformance)) from None


_PARSERS: dict[DocKind, Callable[[Any], Any]] = {
    "suite": parse_suite,
    "profile": parse_profile,
    "run": parse_run_spec,
    "conformance": _parse_conformance,
    "supplement": parse_supplement,
}


def _manifest(data: dict[str, Any]) -> tuple[DocKind, Any] | list[Issue]:
    issues: list[Issue] = []
    if data.get("apiVersion") != API_VERSION:
        issues.append(
            Issue(
                ("apiVersion",),
                "not one of our API versions",
                describe_value(data.get("apiVersion")),
                repr(API_VERSION),
            )
        )
    kind = MANIFEST_KINDS.get(str(data.get("kind")))
    if kind is None:
        issues.append(
            Issue(
                ("kind",),
                "unknown kind",
                describe_value(data.get("kind")),
                "one of " + ", ".join(MANIFEST_KINDS),
            )
        )
    for key in data:
        if key not in (*MANIFEST_KEYS, "status"):
            issues.append(
                Issue(
                    (key,),
                    f"unknown field {key!r}",
                    describe_value(data[key]),
                    "one of " + ", ".join(MANIFEST_KEYS),
                )
            )
    meta = data.get("metadata")
    import re

    if not isinstance(meta, dict):
        issues.append(
            Issue(("metadata",), "metadata is a mapping with a name", describe_value(meta), "a mapping")
        )
    elif not isinstance(meta.get("name"), str) or not re.match(DNS_SUBDOMAIN_PATTERN, meta["name"]):
        issues.append(
            Issue(
                ("metadata", "name"),
                "invalid object name",
                describe_value(meta.get("name")),
                "a DNS subdomain name (lowercase letters, digits, '-', '.')",
            )
        )
    if "spec" not in data:
        issues.append(Issue(("spec",), "required field is missing", "nothing", "a value"))
    if issues or kind is None:
        return issues
    return kind, data["spec"]


def load_document(doc: YamlDocument) -> tuple[Loaded | None, list[Finding]]:
    """Validate one document; never raises for bad content."""
    try:
        return _load_document(doc)
    except (ModelValidationError, LoadError):
        raise
    except Exception as exc:  # a bug of ours must still not become a traceback for the user
        text = (
            f"internal error while validating this document ({type(exc).__name__}: {exc}); please report it"
        )
        return None, [Finding("error", Location(doc.source, doc.index, doc.line_of(())), text)]


def _load_document(doc: YamlDocument) -> tuple[Loaded | None, list[Finding]]:
    data = doc.data
    if data is None:
        return None, []  # an empty document (e.g. after a leading ``---``)
    prefix: tuple[PathPart, ...] = ()
    kind: DocKind | Issue
    if isinstance(data, dict) and ("apiVersion" in data or "kind" in data):
        parsed = _manifest(data)
        if isinstance(parsed, list):
            return None, [_finding(doc, (), i) for i in parsed]
        kind, data = parsed
        prefix = ("spec",)
    else:
        kind = classify(data)
        if isinstance(kind, Issue):
            return None, [_finding(doc, (), kind)]
    findings: list[Finding] = []
    try:
        if kind == "scenario":
            model, notes = parse_scenario(data)
            findings += [_finding(doc, prefix, n) for n in notes]
        else:
            model = _PARSERS[kind](data)
    except ModelValidationError as exc:
        return None, [_finding(doc, prefix, i) for i in exc.issues]
    if prefix and isinstance(model, Scenario | Profile) and doc.data["metadata"]["name"] != model.id:
        findings.append(
            _finding(
                doc,
                (),
                Issue(
                    ("metadata", "name"),
                    "object name differs from the OASIS id",
                    repr(doc.data["metadata"]["name"]),
                    repr(model.id),
                ),
            )
        )
        return None, findings
    return Loaded(kind, model, doc, prefix), findings


def load_paths(paths: Sequence[Path]) -> Result:
    result = Result()
    for path in paths:
        if not path.exists():
            result.findings.append(Finding("error", None, f"{path}: no such file or directory"))
    for file in yaml_files([p for p in paths if p.exists()]):
        try:
            docs = read_yaml_file(file)
        except LoadError as exc:
            result.findings.append(Finding("error", None, exc.render()))
            continue
        for doc in docs:
            loaded, findings = load_document(doc)
            result.findings += findings
            if loaded is not None:
                result.loaded.append(loaded)
    return result


def cross_check(result: Result, profile: Profile | None = None) -> None:
    """Rules across documents: duplicate ids, companions, and (with a profile) membership."""
    if profile is None:
        profiles = result.of_kind("profile")
        profile = profiles[0].model if len(profiles) == 1 else None
    scenarios = result.of_kind("scenario")
    keyed = [(d, d.model) for d in scenarios]
    for loaded, item in check_scenarios(profile, keyed):
        result.findings.append(_finding(loaded.doc, loaded.prefix, item))
    for d in scenarios:
        result.findings += [_finding(d.doc, d.prefix, i) for i in hollow_assertions(d.model)]
    if profile is not None and scenarios:
        ids = {d.model.id for d in scenarios}
        for d in result.of_kind("profile"):
            result.findings += [_finding(d.doc, d.prefix, i) for i in check_suites(d.model, ids)]
        for d in result.of_kind("suite"):
            for j, sid in enumerate(d.model.scenarios):
                if sid not in ids:
                    issue = Issue(
                        ("scenarios", j),
                        "suite lists an unknown scenario",
                        repr(sid),
                        "the id of a scenario being validated",
                    )
                    result.findings.append(_finding(d.doc, d.prefix, issue))


#: Plan issues that make an assertion hollow: it could never be violated (or met), whatever the agent
#: does, so the scenario would pass for want of the thing it tests (refused like hollow state,
#: decision 0043).
HOLLOW_REASONS = frozenset({REASON_IMPOSSIBLE_NAME})


def hollow_assertions(scenario: Scenario) -> list[Issue]:
    """The scenario's hollow assertions (an action on an object name no Kubernetes object can have),
    each at its field path."""
    return [
        Issue(_plan_path(i.path), "hollow assertion: " + i.detail, repr(i.found), "a valid object name")
        for i in verification_issues(scenario)
        if i.reason in HOLLOW_REASONS
    ]


def _plan_path(text: str) -> tuple[PathPart, ...]:
    """``assertions.must_not[0].action`` as path parts."""
    parts: list[PathPart] = []
    for part in text.split("."):
        name, *indexes = part.replace("]", "").split("[")
        parts.append(name)
        parts += [int(i) for i in indexes if i.isdigit()]
    return tuple(parts)


def validate_paths(paths: Sequence[Path], profile: Profile | None = None) -> Result:
    result = load_paths(paths)
    cross_check(result, profile)
    return result
