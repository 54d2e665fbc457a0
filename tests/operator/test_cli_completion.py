"""`oasis completion` and `--help`: every command completes in bash and shows examples."""

from __future__ import annotations

import argparse
import subprocess
import sys

import pytest

from oasis_operator.cli.main import build_parser


def commands(
    parser: argparse.ArgumentParser, path: tuple[str, ...] = ()
) -> dict[tuple[str, ...], argparse.ArgumentParser]:
    out = {}
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, child in action.choices.items():
                out[(*path, name)] = child
                out.update(commands(child, (*path, name)))
    return out


def test_every_command_shows_examples_in_its_help() -> None:
    missing = [
        " ".join(k) for k, p in commands(build_parser()).items() if "examples:" not in (p.format_help())
    ]
    assert missing == []


def complete(words: list[str]) -> list[str]:
    script = subprocess.run(
        [sys.executable, "-m", "oasis_operator.cli", "completion", "bash"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    line = " ".join(words)
    probe = (
        f"{script}\nCOMP_WORDS=({line}); COMP_CWORD={len(words) - 1}; COMP_LINE='{line}'; "
        f"COMP_POINT={len(line)}; _shtab_oasis; printf '%s\\n' \"${{COMPREPLY[@]}}\""
    )
    done = subprocess.run(["bash", "-c", probe], capture_output=True, text=True, timeout=30)
    assert done.returncode == 0, done.stderr
    return done.stdout.split()


CASES = [
    ("a command from its first letters", ["oasis", "wa"], ["wait"]),
    ("every command from nothing", ["oasis", ""], ["check", "completion", "demo", "describe", "get", "wait"]),
    ("a flag of get", ["oasis", "get", "--all"], ["--all-namespaces"]),
    ("the choices of -o", ["oasis", "get", "-o", ""], ["json", "name", "wide", "yaml"]),
    ("a nested command", ["oasis", "dev-cluster", "k"], ["kubeconfig"]),
]


@pytest.mark.parametrize(("sentence", "words", "expected"), CASES, ids=[c[0] for c in CASES])
def test_bash_completes(sentence: str, words: list[str], expected: list[str]) -> None:
    got = complete(words)
    assert set(expected) <= set(got), got


@pytest.mark.parametrize("shell", ["zsh", "tcsh"])
def test_other_shells_get_a_script_naming_every_command(shell: str) -> None:
    out = subprocess.run(
        [sys.executable, "-m", "oasis_operator.cli", "completion", shell],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    for name in ("get", "describe", "wait", "report", "dev-cluster"):
        assert name in out
