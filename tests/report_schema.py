"""Every verdict file the test session produces is checked against the verdict-file schema.

Two nets, installed by ``tests/conftest.py``:

- in this process, :func:`install` wraps ``render_json`` — the one function that turns a report into
  its stored JSON (the run workflow, ``oasis evaluate --run-dir``, ``oasis report``) — so a report
  that breaks the schema fails the test that produced it, where it was produced;
- the operator runs as a separate process in the cluster tests: :func:`sweep_cluster` reads back
  every ``report.json`` it stored on the session's control plane before the control plane stops.

Problems are also collected in :data:`PROBLEMS`; ``pytest_sessionfinish`` fails the session on any.
"""

from __future__ import annotations

import json
import sys
from collections import defaultdict
from collections.abc import Callable, Mapping
from typing import Any

import httpx2

from oasis_operator.core import stored_parts
from oasis_operator.core.reporting import verdict_object
from oasis_operator.reports.schema import report_problems

#: ``where: problems`` of every invalid report seen this session.
PROBLEMS: list[str] = []
#: How many reports were checked (each net), reported at the end of the session.
CHECKED: dict[str, int] = defaultdict(int)

_ORIGINAL: Callable[[Mapping[str, Any]], str] = verdict_object.render_json


def _validated_render_json(report: Mapping[str, Any]) -> str:
    CHECKED["rendered"] += 1
    problems = report_problems(report)
    if problems:
        PROBLEMS.append("rendered report: " + "; ".join(problems[:5]))
        raise AssertionError("the report breaks the verdict-file schema:\n" + "\n".join(problems[:20]))
    return _ORIGINAL(report)


def install() -> None:
    """Route every reference to ``render_json`` (already imported or imported later) through the check."""
    verdict_object.render_json = _validated_render_json  # type: ignore[assignment]
    for module in list(sys.modules.values()):
        if getattr(module, "render_json", None) is _ORIGINAL:
            module.render_json = _validated_render_json


def sweep_cluster(http: httpx2.Client) -> int:
    """Check every stored ``report.json`` on the control plane; returns how many were checked."""
    listed = http.get("/api/v1/configmaps", params={"labelSelector": "oasis.dev/part-of=report"})
    listed.raise_for_status()
    parts: dict[tuple[str, str, int], list[tuple[int, dict[str, Any]]]] = defaultdict(list)
    for cm in listed.json().get("items") or []:
        meta = cm.get("metadata") or {}
        notes = meta.get("annotations") or {}
        if notes.get("oasis.dev/key") != "report.json":
            continue
        index, _, total = str(notes.get("oasis.dev/part", "1/1")).partition("/")
        owner = (
            (meta.get("labels") or {}).get("oasis.dev/run", ""),
            meta.get("namespace", ""),
            int(total or 1),
        )
        parts[owner].append((int(index), cm))
    for (run, ns, total), chunks in sorted(parts.items()):
        if len(chunks) != total:  # its run was deleted and the collector is removing it
            continue
        try:
            report = json.loads(stored_parts.read([cm for _, cm in sorted(chunks, key=lambda c: c[0])]))
        except ValueError as exc:
            PROBLEMS.append(f"stored report of run {ns}/{run}: unreadable ({exc})")
            continue
        CHECKED["stored"] += 1
        problems = report_problems(report)
        if problems:
            PROBLEMS.append(f"stored report of run {ns}/{run}: " + "; ".join(problems[:5]))
    return len(parts)
