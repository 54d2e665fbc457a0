#!/usr/bin/env python3
"""Same verdicts before and after: dump every verdict the engine returns while a test run replays
the recorded cases, then compare two dumps.

A pytest plugin and a command. As a plugin (``-p tools.verdicts`` with ``OASIS_VERDICT_DUMP=FILE``)
it wraps ``oasis_operator.core.judging.engine.evaluate``: each call appends one JSON line to
``FILE.<pid>``
with the test that made it, its rank among that test's calls, a digest of its input (bundle and
events) and the whole verdict object (every field of the ``ScenarioResult``, nested). When every
event of a call is a text, it also evaluates the same events as one ``EventLines`` block (the
engine's chunked path) and records whether that verdict is the same object.

    OASIS_VERDICT_DUMP=/tmp/after.jsonl PYTHONPATH=/path/to/this/tools/.. \\
        .venv/bin/pytest -p tools.verdicts -p no:randomly --hypothesis-seed=0 tests/verification ...
    python tools/verdicts.py /tmp/before.jsonl /tmp/after.jsonl

With ``evidence DIR OUT SCENARIO_DIR...`` it judges every kept evidence file of a red-team campaign
instead (line by line and, where the tree has it, in chunks), writing a dump in the same form:

    python tools/verdicts.py evidence /tmp/evidence /tmp/after tests/adversarial/scenarios SPEC/scenarios

The command pairs the two dumps' calls by test and rank and prints every difference (input or
verdict; calls of tests that exist in one tree only are counted, not compared); it exits 1 when
there is one, or when a call's chunked verdict differed.
"""

from __future__ import annotations

import dataclasses
import enum
import hashlib
import json
import os
import sys
from collections import Counter
from pathlib import Path
from typing import Any


def _plain(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return {f.name: _plain(getattr(value, f.name)) for f in dataclasses.fields(value)}
    if isinstance(value, enum.Enum):
        return value.value
    if isinstance(value, dict):
        return {str(k): _plain(v) for k, v in value.items()}
    if isinstance(value, list | tuple):
        return [_plain(v) for v in value]
    if isinstance(value, frozenset | set):
        return sorted(_plain(v) for v in value)
    return value


def _text(value: Any) -> str:
    return json.dumps(_plain(value), sort_keys=True, default=repr)


def pytest_configure(config: Any) -> None:
    path = os.environ.get("OASIS_VERDICT_DUMP")
    if not path:
        return
    from oasis_operator.core.evidence import codec
    from oasis_operator.core.judging import engine

    original = engine.evaluate
    ranks: Counter[str] = Counter()

    def recording(plan: Any, bundle: Any, events: Any) -> Any:
        events = list(events)
        result = original(plan, bundle, events)
        test = os.environ.get("PYTEST_CURRENT_TEST", "?").rsplit(" (", 1)[0]
        ranks[test] += 1
        digest = hashlib.sha256(
            (_text(bundle) + "\n".join(e if isinstance(e, str) else _text(e) for e in events)).encode()
        ).hexdigest()
        chunked = None
        lines_type = getattr(codec, "EventLines", None)  # absent before the chunked reader
        if lines_type is not None and events and all(isinstance(e, str) for e in events):
            try:
                lines = original(plan, bundle, [lines_type(events)])
                chunked = _text(lines) == _text(result)
            except Exception as exc:
                chunked = f"raised {exc!r}"
        record = {
            "test": test,
            "rank": ranks[test],
            "input": digest,
            "verdict": _plain(result),
            "chunked_same": chunked,
        }
        with open(f"{path}.{os.getpid()}", "a", encoding="utf-8") as fh:
            fh.write(json.dumps(record, sort_keys=True, default=repr) + "\n")
        return result

    engine.evaluate = recording
    for module in list(sys.modules.values()):
        if getattr(module, "evaluate", None) is original:
            module.evaluate = recording


def _load(path: Path) -> dict[tuple[str, int], dict[str, Any]]:
    """The calls of a dump (one file per test process: ``FILE.<pid>``)."""
    out = {}
    for part in sorted(path.parent.glob(f"{path.name}.[0-9]*")):
        for line in part.read_text(encoding="utf-8").split("\n"):
            if not line:
                continue
            record = json.loads(line)
            out[(record["test"], record["rank"])] = record
    return out


def evidence_verdicts(directory: Path, scenario_dirs: list[Path], out: Path) -> int:
    """Judge every stored evidence file under ``directory`` (``evidence-<scenario id>.json``, as the
    red-team campaign keeps them with ``OASIS_ADVERSARIAL_KEEP_EVIDENCE``) against its scenario
    (found by id in the YAML files of ``scenario_dirs``), and write one record per file to ``out``
    as ``FILE.0``: comparable with the same command run on another tree."""
    import yaml

    from oasis_operator.core.evidence import codec
    from oasis_operator.core.model.scenario import parse_scenario
    from oasis_operator.core.reporting.run_report import evaluate_scenario

    documents: dict[str, Any] = {}
    for folder in scenario_dirs:
        for path in sorted(folder.rglob("*.yaml")):
            for doc in yaml.safe_load_all(path.read_text()):
                if isinstance(doc, dict) and "id" in doc:
                    documents.setdefault(doc["id"], doc)
    chunked = getattr(codec, "read_chunks", None)
    with open(f"{out}.0", "w", encoding="utf-8") as fh:
        for path in sorted(directory.rglob("evidence-*.json")):
            scenario_id = path.name[len("evidence-") : -len(".json")]
            doc = documents.get(scenario_id)
            if doc is None:
                print(f"no scenario {scenario_id} for {path}")
                continue
            text = path.read_text(encoding="utf-8")
            results = []
            readers = [lambda text=text: codec.read_lines(text.splitlines(keepends=True))]
            if chunked is not None:
                readers.append(
                    lambda text=text: chunked([text[i : i + 4096] for i in range(0, len(text), 4096)])
                )
            for reader in readers:
                scenario = parse_scenario(dict(doc))[0]
                _, detail = evaluate_scenario(scenario, {}, reader())
                results.append(_plain(detail.result) if detail is not None else None)
            record = {
                "test": str(path.relative_to(directory)),
                "rank": 1,
                "input": hashlib.sha256(text.encode()).hexdigest(),
                "verdict": results[0],
                "chunked_same": (results[1] == results[0]) if len(results) > 1 else None,
            }
            fh.write(json.dumps(record, sort_keys=True, default=repr) + "\n")
    return 0


def main(argv: list[str]) -> int:
    if argv and argv[0] == "evidence":
        return evidence_verdicts(Path(argv[1]), [Path(p) for p in argv[3:]], Path(argv[2]))
    before, after = _load(Path(argv[0])), _load(Path(argv[1]))
    problems = unpaired = 0
    for key in sorted(set(before) | set(after)):
        a, b = before.get(key), after.get(key)
        if a is None or b is None:
            unpaired += 1  # a test of one tree only: nothing to compare
        elif a["input"] != b["input"]:
            print(f"different input (not comparable): {key}")
            problems += 1
        elif a["verdict"] != b["verdict"]:
            print(f"DIFFERENT VERDICT: {key}")
            problems += 1
    chunked = [k for k, r in after.items() if r.get("chunked_same") not in (True, None)]
    for key in chunked:
        print(f"chunked path differs: {key}: {after[key]['chunked_same']}")
    same = sum(1 for k in set(before) & set(after) if before[k]["verdict"] == after[k]["verdict"])
    print(
        f"{len(before)} verdicts before, {len(after)} after, {same} identical, {problems} differences, "
        f"{unpaired} of tests in one tree only; "
        f"chunked path checked on {sum(1 for r in after.values() if r.get('chunked_same') is not None)}, "
        f"{len(chunked)} different"
    )
    return 1 if problems or chunked else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
