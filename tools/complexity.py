"""The complexity budget, run by `make lint`: no function above the limit but the allow-listed ones,
and the allow-list only shrinks.

Measures every function with ruff's McCabe rule (C901, the same count as the `mccabe` plugin),
prints the ten most complex, and fails when
- a function not on the allow-list is above the limit, or an allow-listed one grew;
- an allow-listed function shrank, or went under the limit: lower or remove its entry, so that the
  list records today's debt and nothing more.

Configuration: `[tool.oasis.complexity]` in pyproject.toml (`limit`, and `allow`: "path::function" ->
its complexity when it was listed). Usage: `python tools/complexity.py [--top N]`.
"""

from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MESSAGE = re.compile(r"`(?P<name>.+?)` is too complex \((?P<cc>\d+) > \d+\)")


def measure(ruff: str) -> dict[str, int]:
    """Every function's complexity, keyed "path::function" (the highest, when a name repeats in a file)."""
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
        match = MESSAGE.search(finding["message"])
        if match is None:
            continue
        key = f"{Path(finding['filename']).resolve().relative_to(REPO)}::{match['name']}"
        out[key] = max(out.get(key, 0), int(match["cc"]))
    return out


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--top", type=int, default=10, help="how many of the most complex to print")
    parser.add_argument("--ruff", default=str(Path(sys.executable).parent / "ruff"))
    args = parser.parse_args()
    config = tomllib.loads((REPO / "pyproject.toml").read_text())["tool"]["oasis"]["complexity"]
    limit, allow = int(config["limit"]), {str(k): int(v) for k, v in config.get("allow", {}).items()}
    measured = measure(args.ruff)

    print(f"complexity: the {args.top} most complex functions (limit {limit}; {len(allow)} allow-listed)")
    for key, cc in sorted(measured.items(), key=lambda kv: (-kv[1], kv[0]))[: args.top]:
        print(f"  {cc:4d}  {key}{'  (allow-listed)' if key in allow else ''}")

    problems = []
    for key, cc in sorted(measured.items()):
        if cc <= limit:
            continue
        if key not in allow:
            problems.append(
                f"{key}: complexity {cc} > {limit}; split it into named steps (docs/CONTRIBUTING.md)"
            )
        elif cc > allow[key]:
            problems.append(f"{key}: complexity {cc} grew past its allow-listed {allow[key]}")
    for key, listed in sorted(allow.items()):
        now = measured.get(key)
        if now is None or now <= limit:
            problems.append(
                f"{key}: now {now if now is not None else 'gone'}, within the limit: remove its allow-list entry"
            )
        elif now < listed:
            problems.append(f"{key}: now {now}: lower its allow-list entry from {listed}")
    for problem in problems:
        print(f"complexity: {problem}", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
