"""Assemble a :class:`Profile` and its scenarios from a profile directory laid out as the spec's.

Who calls it: ``oasis import profile DIR`` and the tests of the official profile. What it turns into
what: a directory (``profile.md`` and the other markdown documents with their machine-readable
blocks, ``scenarios/**/*.yaml``, ``provider-conformance-requirements.yaml``) plus our supplement
(data the profile gives only as prose, transcribed by us) -> an :class:`ImportedProfile`: the
validated profile, its validated scenarios, where every profile field came from, and findings.

What is read from the profile itself:

* metadata (id, name, version, description, domain, core dependency) from the bullet list of
  ``profile.md``;
* every fenced ``yaml`` block in the directory's markdown whose single top-level key is a
  profile field (``capability_scoring``, ``safety_scoring``, ``profile_validation``,
  ``agent_configuration_schema``, ...);
* behaviour identifiers: the ``### `identifier` `` headings of ``behavior-definitions.md``;
* interface types: the rows of the functional-type and context-tag tables of ``interface-types.md``;
* provider conformance: ``provider-conformance-requirements.yaml``.

Everything else comes from the supplement, and is labelled so.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import yaml

from oasis_operator.core.model.errors import ModelValidationError
from oasis_operator.core.model.manifest import profile_manifest, scenario_manifest
from oasis_operator.core.model.profile import Profile, parse_profile
from oasis_operator.core.model.supplement import ProfileSupplement
from oasis_operator.loading.documents import Finding, Loaded, Result, cross_check, load_paths
from oasis_operator.loading.yaml_documents import LoadError, read_yaml_file

#: Where the Profile manifest says where each of its fields came from (JSON: field -> source).
PROVENANCE_ANNOTATION = "oasis.dev/provenance"
#: Where our transcriptions are, as package data (``oasis_operator/loading/supplements/``): an installed
#: wheel carries them, and nothing is read from a checkout (decision 0108).
SUPPLEMENTS = "supplements"

_META = {
    "id": r"\*\*Profile identifier:\*\*\s*`([^`]+)`",
    "name": r"\*\*Profile name:\*\*\s*(.+)",
    "version": r"\*\*Version:\*\*\s*(\S+)",
    "description": r"\*\*Description:\*\*\s*(.+)",
    "domain": r"\*\*Domain:\*\*\s*(.+)",
    "core_dependency": r"\*\*OASIS Core Dependency:\*\*\s*(.+)",
}
_FENCE = re.compile(r"^```ya?ml[ \t]*\n(.*?)^```", re.DOTALL | re.MULTILINE)
_BEHAVIOR_HEADING = re.compile(r"^###\s+`([a-z][a-z0-9_]*)`\s*$", re.MULTILINE)
_TABLE_ROW = re.compile(r"^\|\s*`([^`]+)`\s*\|\s*([^|]+?)\s*\|", re.MULTILINE)


@dataclass
class ImportedProfile:
    directory: Path
    profile: Profile | None
    scenarios: list[Loaded] = field(default_factory=list)
    provenance: dict[str, str] = field(default_factory=dict)
    findings: list[Finding] = field(default_factory=list)

    @property
    def errors(self) -> list[Finding]:
        return [f for f in self.findings if f.severity == "error"]


def _section(text: str, heading_start: str) -> str:
    """The text of the ``## `` section whose heading starts with ``heading_start``."""
    match = re.search(rf"^## {re.escape(heading_start)}.*?$(.*?)(?=^## |\Z)", text, re.DOTALL | re.MULTILINE)
    return match.group(1) if match else ""


def extract_metadata(profile_md: str) -> dict[str, str]:
    out: dict[str, str] = {}
    for key, pattern in _META.items():
        match = re.search(pattern, profile_md)
        if match:
            value = match.group(1).strip()
            if key == "core_dependency":
                value = value.replace("≥", ">=").replace(" ", "")
            out[key] = value
    return out


def extract_yaml_blocks(markdown: str, wanted: set[str]) -> dict[str, Any]:
    """Fenced YAML blocks whose only top-level key is one of ``wanted``."""
    out: dict[str, Any] = {}
    for match in _FENCE.finditer(markdown):
        try:
            data = yaml.safe_load(match.group(1))
        except yaml.YAMLError:
            continue
        if isinstance(data, dict) and len(data) == 1:
            key = next(iter(data))
            if key in wanted and key not in out:
                out[key] = data[key]
    return out


def extract_behaviors(markdown: str) -> list[str]:
    return list(dict.fromkeys(_BEHAVIOR_HEADING.findall(markdown)))


def extract_interface_types(markdown: str) -> dict[str, Any] | None:
    functional = [
        {"id": i, "description": d} for i, d in _TABLE_ROW.findall(_section(markdown, "2. Functional types"))
    ]
    tags = [
        {"id": i, "description": d}
        for i, d in _TABLE_ROW.findall(_section(markdown, "3. Infrastructure context tags"))
    ]
    if not functional:
        return None
    return {"functional": functional, "context_tags": tags}


def default_supplement(directory: Path) -> Path:
    """Our transcription for the profile directory ``directory``: the package's
    ``supplements/<directory name>.yaml`` (which need not exist: most profiles have none)."""
    found = resources.files(__package__).joinpath(SUPPLEMENTS, f"{directory.resolve().name}.yaml")
    return Path(str(found))  # a file on disk: pip installs a wheel unpacked


def _read_supplement(path: Path) -> tuple[ProfileSupplement | None, list[Finding]]:
    result = load_paths([path])
    sups = result.of_kind("supplement")
    if result.errors:
        return None, result.findings
    if len(sups) != 1:
        return None, [
            Finding("error", None, f"{path}: expected one profile supplement document, found {len(sups)}")
        ]
    model: ProfileSupplement = sups[0].model
    return model, result.findings


def import_profile(directory: Path, supplement_path: Path | None = None) -> ImportedProfile:
    out = ImportedProfile(directory, None)
    profile_md = directory / "profile.md"
    if not profile_md.is_file():
        out.findings.append(Finding("error", None, f"{directory}: not a profile directory (no profile.md)"))
        return out
    data: dict[str, Any] = {}
    meta = extract_metadata(profile_md.read_text(encoding="utf-8"))
    for key, value in meta.items():
        data[key] = value
        out.provenance[key] = f"{profile_md.name} (metadata)"
    wanted = set(Profile.model_fields) - set(meta)
    for md in sorted(directory.glob("*.md")):
        text = md.read_text(encoding="utf-8")
        for key, value in extract_yaml_blocks(text, wanted - set(data)).items():
            data[key] = value
            out.provenance[key] = f"{md.name} (yaml block {key})"
    behaviors_md = directory / "behavior-definitions.md"
    if behaviors_md.is_file() and "behaviors" not in data:
        found = extract_behaviors(behaviors_md.read_text(encoding="utf-8"))
        if found:
            data["behaviors"] = found
            out.provenance["behaviors"] = f"{behaviors_md.name} (### `identifier` headings)"
    interfaces_md = directory / "interface-types.md"
    if interfaces_md.is_file() and "interface_types" not in data:
        types = extract_interface_types(interfaces_md.read_text(encoding="utf-8"))
        if types:
            data["interface_types"] = types
            out.provenance["interface_types"] = f"{interfaces_md.name} (tables of sections 2 and 3)"
    conformance = directory / "provider-conformance-requirements.yaml"
    if conformance.is_file():
        try:
            docs = [d for d in read_yaml_file(conformance) if d.data is not None]
        except LoadError as exc:
            out.findings.append(Finding("error", None, exc.render()))
            docs = []
        if docs:
            data["provider_conformance"] = docs[0].data
            out.provenance["provider_conformance"] = conformance.name

    sup_path = supplement_path or default_supplement(directory)
    if sup_path.is_file():
        supplement, findings = _read_supplement(sup_path)
        out.findings += findings
        if supplement is not None:
            if supplement.supplement_for != data.get("id"):
                out.findings.append(
                    Finding(
                        "error",
                        None,
                        f"{sup_path}: supplement_for {supplement.supplement_for!r} does not match the profile id {data.get('id')!r}",
                    )
                )
            elif supplement.profile_version != data.get("version"):
                out.findings.append(
                    Finding(
                        "warning",
                        None,
                        f"{sup_path}: transcribed from profile version {supplement.profile_version}, importing {data.get('version')}",
                    )
                )
            for key, value in supplement.values.items():
                if key in data:
                    out.findings.append(
                        Finding(
                            "warning",
                            None,
                            f"{sup_path}: {key}: the profile itself provides this ({out.provenance[key]}); the transcription is ignored",
                        )
                    )
                    continue
                data[key] = value
                out.provenance[key] = f"{sup_path.name} (our transcription of {supplement.sources[key]})"
    elif supplement_path is not None:
        out.findings.append(Finding("error", None, f"{supplement_path}: no such file"))

    try:
        out.profile = parse_profile(data)
    except ModelValidationError as exc:
        for issue in exc.issues:
            source = out.provenance.get(str(issue.path[0]) if issue.path else "", "nowhere (missing)")
            out.findings.append(
                Finding("error", None, f"{directory} (profile, from {source}): {issue.render()}")
            )
        return out

    scenario_dir = directory / "scenarios"
    result: Result = load_paths([scenario_dir]) if scenario_dir.is_dir() else Result()
    for loaded in result.loaded:
        if loaded.kind != "scenario":
            out.findings.append(Finding("error", loaded.location, f"not a scenario but a {loaded.kind}"))
    result.loaded = [d for d in result.loaded if d.kind == "scenario"]
    cross_check(result, out.profile)
    out.findings += result.findings
    out.scenarios = result.loaded
    return out


def manifests(imported: ImportedProfile, namespace: str | None = None) -> list[dict[str, Any]]:
    """The Profile manifest (with its provenance annotation) followed by the Scenario manifests
    (``oasis import profile``, and the local stack's installation)."""
    profile = imported.profile
    assert isinstance(profile, Profile)
    pm = profile_manifest(profile, namespace)
    pm["metadata"]["annotations"] = {PROVENANCE_ANNOTATION: json.dumps(imported.provenance, sort_keys=True)}
    return [pm] + [scenario_manifest(s.model, profile.id, namespace) for s in imported.scenarios]
