"""The import contracts see the whole package: every module of `oasis_operator` is a node of the
graph `lint-imports` checks, and every directory holding modules is a regular package.

A directory without `__init__.py` is an implicit namespace package: Python imports it and mypy
checks it, but the graph behind the contracts skips it, and a cycle through it goes unseen (that
hid `core/capability/`, 5k lines, and a `verification <-> capability` cycle).
"""

from __future__ import annotations

import tomllib
from pathlib import Path

import grimp

REPO = Path(__file__).resolve().parents[2]
PACKAGE = REPO / "oasis_operator"


def _modules_on_disk() -> set[str]:
    out = set()
    for file in PACKAGE.rglob("*.py"):
        parts = file.relative_to(REPO).with_suffix("").parts
        if parts[-1] == "__init__":
            parts = parts[:-1]
        out.add(".".join(parts))
    return out


def test_every_directory_with_modules_is_a_regular_package() -> None:
    missing = sorted(
        d.relative_to(REPO).as_posix()
        for d in [PACKAGE, *(p for p in PACKAGE.rglob("*") if p.is_dir())]
        if d.name != "__pycache__" and any(d.glob("*.py")) and not (d / "__init__.py").exists()
    )
    assert missing == []


def test_the_contracts_graph_holds_every_module_of_the_file_tree() -> None:
    graph = grimp.build_graph("oasis_operator", cache_dir=None)
    on_disk = _modules_on_disk()
    assert len(on_disk) > 200
    assert on_disk - set(graph.modules) == set()


def test_the_core_has_a_layers_contract_naming_each_of_its_packages_and_modules() -> None:
    contracts = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["importlinter"]["contracts"]
    inner = [c for c in contracts if c.get("containers") == ["oasis_operator.core"]]
    assert len(inner) == 1
    assert inner[0]["type"] == "layers"
    assert inner[0].get("exhaustive") is True
    named = {name.strip() for layer in inner[0]["layers"] for name in layer.replace(":", "|").split("|")}
    children = {
        p.stem if p.is_file() else p.name
        for p in (PACKAGE / "core").iterdir()
        if (p.suffix == ".py" and p.stem != "__init__") or (p.is_dir() and (p / "__init__.py").exists())
    }
    assert named == children
