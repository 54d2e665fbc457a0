"""Read YAML files into documents that remember where they came from.

Who calls it: ``oasis validate`` and ``oasis import`` (through :mod:`oasis_operator.loading.documents`).
What it turns into what: a file (or text) -> :class:`YamlDocument` values (source, 0-based document
index, plain data, and the line of any field path), or a :class:`LoadError` naming the file, the
document and the line of a syntax error or a duplicated mapping key (PyYAML would silently keep the
last one).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

from oasis_operator.core.model.errors import PathPart

#: Files larger than this are refused: scenarios are small, and input is untrusted.
MAX_FILE_BYTES = 4 * 1024 * 1024
#: A document may expand (aliases counted each time they are used) to at most this many nodes.
MAX_NODES = 200_000


class _TooLarge(Exception):
    pass


@dataclass(frozen=True)
class LoadError(Exception):
    source: str
    message: str
    document: int | None = None
    line: int | None = None

    def render(self) -> str:
        where = self.source + (f":{self.line}" if self.line is not None else "")
        if self.document is not None:
            where += f": document {self.document + 1}"
        return f"{where}: {self.message}"

    def __str__(self) -> str:
        return self.render()


@dataclass(frozen=True)
class YamlDocument:
    source: str
    index: int
    data: Any
    node: yaml.Node | None

    def line_of(self, path: Sequence[PathPart]) -> int | None:
        """1-based line of the deepest node along ``path`` that exists (the document start if none)."""
        node = self.node
        if node is None:
            return None
        line = node.start_mark.line + 1
        for part in path:
            nxt: yaml.Node | None = None
            if isinstance(node, yaml.MappingNode) and isinstance(part, str):
                for key, value in node.value:
                    if isinstance(key, yaml.ScalarNode) and key.value == part:
                        nxt = value
                        line = key.start_mark.line + 1
                        break
            elif (
                isinstance(node, yaml.SequenceNode) and isinstance(part, int) and 0 <= part < len(node.value)
            ):
                nxt = node.value[part]
                line = nxt.start_mark.line + 1
            if nxt is None:
                break
            node = nxt
        return line


def _duplicate_keys(
    node: yaml.Node, path: tuple[PathPart, ...] = (), budget: list[int] | None = None
) -> list[tuple[tuple[PathPart, ...], str, int]]:
    """Repeated keys of every mapping; also counts expanded nodes against :data:`MAX_NODES`."""
    budget = budget if budget is not None else [MAX_NODES]
    budget[0] -= 1
    if budget[0] < 0:
        raise _TooLarge
    found: list[tuple[tuple[PathPart, ...], str, int]] = []
    if isinstance(node, yaml.MappingNode):
        seen: set[str] = set()
        for key, value in node.value:
            if isinstance(key, yaml.ScalarNode):
                if key.value in seen:
                    found.append((path, key.value, key.start_mark.line + 1))
                seen.add(key.value)
                found += _duplicate_keys(value, (*path, key.value), budget)
    elif isinstance(node, yaml.SequenceNode):
        for i, item in enumerate(node.value):
            found += _duplicate_keys(item, (*path, i), budget)
    return found


def parse_yaml(text: str, source: str) -> list[YamlDocument]:
    """All documents of a YAML stream; empty documents are kept (as ``None``) so indices match."""
    loader = yaml.SafeLoader(text)
    docs: list[YamlDocument] = []
    try:
        while loader.check_node():
            node = loader.get_node()
            index = len(docs)
            if node is None:  # pragma: no cover - check_node() said there is one
                break
            for path, key, line in _duplicate_keys(node):
                where = ".".join(str(p) for p in path) or "<document>"
                raise LoadError(source, f"{where}: key {key!r} appears twice in one mapping", index, line)
            data = loader.construct_document(node)
            docs.append(YamlDocument(source, index, data, node))
    except yaml.MarkedYAMLError as exc:
        mark = exc.problem_mark or exc.context_mark
        problem = " ".join(p for p in (exc.context, exc.problem) if p)
        if exc.context_mark is not None and mark is not None and exc.context_mark.line != mark.line:
            problem += f" (the construct started on line {exc.context_mark.line + 1})"
        raise LoadError(
            source, f"YAML syntax error: {problem}", len(docs), mark.line + 1 if mark else None
        ) from None
    except yaml.YAMLError as exc:
        raise LoadError(source, f"YAML error: {exc}", len(docs)) from None
    except _TooLarge:
        raise LoadError(
            source, f"document expands to more than {MAX_NODES} nodes (aliases used many times?)", len(docs)
        ) from None
    except RecursionError:
        raise LoadError(source, "document is nested too deeply", len(docs)) from None
    finally:
        loader.dispose()
    return docs


def read_yaml_file(path: Path) -> list[YamlDocument]:
    try:
        size = path.stat().st_size
        if size > MAX_FILE_BYTES:
            raise LoadError(str(path), f"file too large ({size} bytes; at most {MAX_FILE_BYTES})")
        text = path.read_text(encoding="utf-8")
    except UnicodeDecodeError as exc:
        raise LoadError(str(path), f"not UTF-8 text ({exc.reason} at byte {exc.start})") from None
    except OSError as exc:
        raise LoadError(str(path), f"cannot read: {exc.strerror or exc}") from None
    return parse_yaml(text, str(path))


YAML_SUFFIXES = (".yaml", ".yml")


def yaml_files(paths: Sequence[Path]) -> list[Path]:
    """The YAML files named by ``paths`` (directories searched recursively, sorted), in order. Inside a
    directory, hidden files and directories (``.gitlab-ci.yml``, ``.github/``: the CI recipes of
    ``examples/ci/``) are not OASIS documents and are passed over, as ``.git/`` is; named, they are read."""
    out: list[Path] = []
    for path in paths:
        if path.is_dir():
            out += sorted(
                p
                for p in path.rglob("*")
                if p.suffix in YAML_SUFFIXES
                and p.is_file()
                and not any(part.startswith(".") for part in p.relative_to(path).parts)
            )
        else:
            out.append(path)
    return out
