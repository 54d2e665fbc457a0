"""The CRDs in crds/ are what the models generate, and they are structural Kubernetes schemas."""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest

from oasis_operator.core.model.crd import all_crds
from oasis_operator.core.run_status import initial_status
from oasis_operator.crdgen import DEFAULT_DIR, rendered, stale_files

from .conftest import REPO


def test_crds_directory_is_current() -> None:
    assert DEFAULT_DIR == REPO / "crds"
    stale = stale_files(DEFAULT_DIR)
    assert stale == [], f"regenerate with `python -m oasis_operator.crdgen`: {stale}"


def test_stale_check_notices_an_edited_and_a_stray_file(tmp_path: Any) -> None:
    for name, text in rendered().items():
        (tmp_path / name).write_text(text)
    assert stale_files(tmp_path) == []
    (tmp_path / "scenarios.oasis.dev.yaml").write_text(
        rendered()["scenarios.oasis.dev.yaml"].replace("oscn", "scn")
    )
    (tmp_path / "old.oasis.dev.yaml").write_text("{}")
    assert stale_files(tmp_path) == ["old.oasis.dev.yaml", "scenarios.oasis.dev.yaml"]


def _nodes(schema: dict[str, Any], path: str = "") -> Iterator[tuple[str, dict[str, Any]]]:
    yield path, schema
    for name, sub in schema.get("properties", {}).items():
        yield from _nodes(sub, f"{path}.{name}")
    if isinstance(schema.get("items"), dict):
        yield from _nodes(schema["items"], f"{path}[]")
    if isinstance(schema.get("additionalProperties"), dict):
        yield from _nodes(schema["additionalProperties"], f"{path}{{}}")


@pytest.mark.parametrize("name", sorted(all_crds()))
def test_schema_is_structural(name: str) -> None:
    crd = all_crds()[name]
    version = crd["spec"]["versions"][0]
    for path, node in _nodes(version["schema"]["openAPIV3Schema"]):
        for junctor in ("$ref", "anyOf", "oneOf", "allOf"):
            assert junctor not in node, path
        assert (
            "type" in node
            or node.get("x-kubernetes-preserve-unknown-fields")
            or node.get("x-kubernetes-int-or-string")
        ), f"{path} has no type"
        assert not ("properties" in node and "additionalProperties" in node), path
        # One default only: a run's status before the operator wrote one reads as in progress
        # (Reconciling=True), so kstatus-based gates never see a fresh run as Current.
        if path == ".status" and name.startswith("evaluationruns."):
            assert node["default"] == initial_status()
        else:
            assert "default" not in node, path
        assert "title" not in node, path


@pytest.mark.parametrize("name", sorted(all_crds()))
def test_crd_metadata(name: str) -> None:
    crd = all_crds()[name]
    spec = crd["spec"]
    assert spec["group"] == "oasis.dev"
    assert spec["scope"] == "Namespaced"
    assert spec["names"]["categories"] == ["oasis"]
    assert spec["names"]["shortNames"]
    version = spec["versions"][0]
    assert version["name"] == "v1alpha1"
    assert version["subresources"] == {"status": {}}
    assert any(c["jsonPath"] == ".metadata.creationTimestamp" for c in version["additionalPrinterColumns"])
    assert "status" in version["schema"]["openAPIV3Schema"]["properties"]


def _rules(name: str) -> list[str]:
    found: list[str] = []

    def walk(node: Any) -> None:
        if isinstance(node, dict):
            found.extend(r["rule"] for r in node.get("x-kubernetes-validations", []))
            for value in node.values():
                walk(value)
        elif isinstance(node, list):
            for value in node:
                walk(value)

    walk(all_crds()[name])
    return found


def test_cel_rules_guard_real_mistakes() -> None:
    scenario = "\n".join(_rules("scenarios.oasis.dev.yaml"))
    assert "self.classification == 'safety'" in scenario
    assert "has(self.type) != has(self.archetype_template)" in scenario
    assert "has(self.behavior) || has(self.action)" in scenario
    run = "\n".join(_rules("evaluationruns.oasis.dev.yaml"))
    assert "self.profileRef == oldSelf.profileRef" in run
    assert "oldSelf.shutdown" in run
    assert "has(self.selector) || has(self.suite)" in run


def test_closed_key_maps_become_objects() -> None:
    spec = all_crds()["scenarios.oasis.dev.yaml"]["spec"]["versions"][0]["schema"]["openAPIV3Schema"][
        "properties"
    ]["spec"]
    dims = spec["properties"]["scoring"]["properties"]["dimensions"]
    assert set(dims["properties"]) == {"task_completion", "reliability", "reasoning", "auditability"}


def _undocumented(schema: dict[str, Any]) -> list[str]:
    """Paths of the schema's fields (properties, at any depth, and the root) that ``kubectl explain``
    would show without a description. List items and map values are not fields of their own; metadata
    is the API server's ObjectMeta, which it documents itself (a CRD may give it nothing but its type)."""
    return [
        path or "."
        for path, node in _nodes(schema)
        if path != ".metadata"
        and not path.endswith(("[]", "{}"))
        and not str(node.get("description", "")).strip()
    ]


@pytest.mark.parametrize("name", sorted(all_crds()))
def test_every_field_spec_and_status_has_a_description(name: str) -> None:
    schema = all_crds()[name]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    assert _undocumented(schema) == []


@pytest.mark.parametrize("name", sorted(all_crds()))
def test_descriptions_are_plain_text(name: str) -> None:
    # kubectl explain prints descriptions verbatim: no Sphinx roles, no RST double backticks.
    schema = all_crds()[name]["spec"]["versions"][0]["schema"]["openAPIV3Schema"]
    for path, node in _nodes(schema):
        text = str(node.get("description", ""))
        for markup in ("``", ":class:", ":func:", ":data:", ":mod:"):
            assert markup not in text, (path, text)


def test_a_description_walk_finds_an_undocumented_field() -> None:
    schema = {
        "description": "x",
        "properties": {"a": {"description": "a"}, "b": {"items": {"properties": {"c": {}}}}},
    }
    assert _undocumented(schema) == [".b", ".b[].c"]


def test_run_status_is_typed_and_closed() -> None:
    crd = all_crds()["evaluationruns.oasis.dev.yaml"]
    status = crd["spec"]["versions"][0]["schema"]["openAPIV3Schema"]["properties"]["status"]
    assert "x-kubernetes-preserve-unknown-fields" not in status
    for field in ("phase", "verdict", "summary", "scenarios", "report", "preflight", "agent", "capability"):
        assert field in status["properties"], field
    assert status["properties"]["report"]["properties"]["incomplete"]["type"] == "boolean"
    assert status["properties"]["agent"]["properties"]["name"]["type"] == "string"
    assert status["properties"]["summary"]["additionalProperties"]["type"] == "integer"


def test_run_printer_columns_name_the_agent_and_an_incomplete_report() -> None:
    crd = all_crds()["evaluationruns.oasis.dev.yaml"]
    columns = {c["name"]: c for c in crd["spec"]["versions"][0]["additionalPrinterColumns"]}
    assert columns["Agent"]["jsonPath"] == ".status.agent.name"
    assert columns["Incomplete"] == {
        "name": "Incomplete",
        "type": "boolean",
        "jsonPath": ".status.report.incomplete",
    }
    assert "priority" not in columns["Agent"]
