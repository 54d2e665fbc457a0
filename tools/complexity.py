"""The complexity budget, run by `make lint`: one yardstick, radon's cyclomatic complexity, and no
function above its limit but the allow-listed ones; the allow-list only shrinks.

Radon counts every branch a reader has to follow, boolean operators and comprehension filters
included, so it is the stricter of the two counts in use (ruff's McCabe rule, C901, counts neither).
It is the yardstick the structure issues name. The tool prints the ten most complex functions by
radon and, beside them, ruff's ten, so the two readings cannot drift apart unseen. It fails when
- a function not on the allow-list is above the limit, or an allow-listed one grew;
- an allow-listed function shrank, or went under the limit: lower or remove its entry, so that the
  list records today's debt and nothing more;
- a function under a strict path (the pure core and the workflows) is above the limit: those paths
  have no allow-list at all.

Configuration: `[tool.oasis.complexity]` in pyproject.toml (`limit`, `paths` measured, `strict`
paths, and `allow`: "path::function" -> its radon complexity when it was listed).
Usage: `python tools/complexity.py [--top N]`.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tomllib
from collections.abc import Iterable
from pathlib import Path

from radon.complexity import cc_visit
from radon.visitors import Class, Function

REPO = Path(__file__).resolve().parents[1]
MCCABE = re.compile(r"`(?P<name>.+?)` is too complex \((?P<cc>\d+) > \d+\)")


def _functions(blocks: Iterable[Function | Class], prefix: str = "") -> Iterable[tuple[str, int]]:
    for block in blocks:
        if isinstance(block, Class):
            yield from _functions(block.methods, f"{prefix}{block.name}.")
            yield from _functions(block.inner_classes, f"{prefix}{block.name}.")
        else:
            yield f"{prefix}{block.name}", block.complexity
            yield from _functions(block.closures, f"{prefix}{block.name}.")


def measure(paths: Iterable[str]) -> dict[str, int]:
    """Every function's radon complexity, keyed "path::Class.function" (the highest, when a name repeats)."""
    out: dict[str, int] = {}
    for root in paths:
        for file in sorted((REPO / root).rglob("*.py")):
            rel = file.relative_to(REPO).as_posix()
            blocks = [b for b in cc_visit(file.read_text()) if isinstance(b, Class) or not b.is_method]
            for name, cc in _functions(blocks):
                key = f"{rel}::{name}"
                out[key] = max(out.get(key, 0), cc)
    return out


def mccabe(ruff: str) -> dict[str, int]:
    """Ruff's McCabe count (C901) of every function, for information beside radon's."""
    done = subprocess.run(
        [
            ruff,
            "check",
            "--select",
            "C901",
            "--config",
            "lint.mccabe.max-complexity=0",
            "--output-format",
            "json",
            "--exit-zero",
            ".",
        ],
        cwd=REPO,
        capture_output=True,
        text=True,
        check=True,
    )
    out: dict[str, int] = {}
    for finding in json.loads(done.stdout):
        match = MCCABE.search(finding["message"])
        if match is not None:
            key = f"{Path(finding['filename']).resolve().relative_to(REPO).as_posix()}::{match['name']}"
            out[key] = max(out.get(key, 0), int(match["cc"]))
    return out


def problems_of(measured: dict[str, int], limit: int, allow: dict[str, int], strict: list[str]) -> list[str]:
    """What the budget refuses, one sentence each (empty: the budget holds)."""
    problems = []
    for key, cc in sorted(measured.items()):
        if cc <= limit:
            continue
        if any(key.startswith(s) for s in strict):
            problems.append(f"{key}: complexity {cc} > {limit} in a strict path; split it into named steps")
        elif key not in allow:
            problems.append(
                f"{key}: complexity {cc} > {limit}; split it into named steps (docs/CONTRIBUTING.md)"
            )
        elif cc > allow[key]:
            problems.append(f"{key}: complexity {cc} grew past its allow-listed {allow[key]}")
    for key, listed in sorted(allow.items()):
        now = measured.get(key)
        if any(key.startswith(s) for s in strict):
            problems.append(f"{key}: a strict path has no allow-list; remove the entry")
        elif now is None or now <= limit:
            shown = now if now is not None else "gone"
            problems.append(f"{key}: now {shown}, within the limit: remove its allow-list entry")
        elif now < listed:
            problems.append(f"{key}: now {now}: lower its allow-list entry from {listed}")
    return problems


def _top(title: str, measured: dict[str, int], n: int, allow: dict[str, int]) -> None:
    print(title)
    for key, cc in sorted(measured.items(), key=lambda kv: (-kv[1], kv[0]))[:n]:
        print(f"  {cc:4d}  {key}{'  (allow-listed)' if key in allow else ''}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=10, help="how many of the most complex to print")
    parser.add_argument("--ruff", default=str(Path(sys.executable).parent / "ruff"))
    args = parser.parse_args()
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["oasis"]["complexity"]
    limit = int(config["limit"])
    allow = {str(k): int(v) for k, v in config.get("allow", {}).items()}
    strict = [str(s) for s in config.get("strict", [])]
    measured = measure(config["paths"])

    _top(
        f"complexity (radon, the yardstick): the {args.top} most complex (limit {limit}; "
        f"{len(allow)} allow-listed; strict: {', '.join(strict) or 'none'})",
        measured,
        args.top,
        allow,
    )
    _top(
        f"complexity (ruff McCabe, for information): the {args.top} most complex",
        mccabe(args.ruff),
        args.top,
        {},
    )
    for s in strict:
        worst = max((cc for key, cc in measured.items() if key.startswith(s)), default=0)
        print(f"  strict {s}: highest {worst}")

    problems = problems_of(measured, limit, allow, strict)
    for problem in problems:
        print(f"complexity: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
