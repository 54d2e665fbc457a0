"""Every document of the malformed corpus gets a precise error: file, line, document, path, found, expected.

Each file in ``malformed/`` states what it expects in its header:

* ``# expect: TEXT`` -- an error whose rendering contains TEXT (one line per expected error);
* ``# at: TEXT`` -- the line the first expected error points at contains TEXT;
* ``# admission: TEXT`` -- the CRD schema rejects the document at admission too, with a message
  containing TEXT (checked against the API server in ``test_crds_on_apiserver.py``).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import pytest

from oasis_operator.cli.main import main
from oasis_operator.core.model.profile import Profile
from oasis_operator.loading.documents import validate_paths

from .conftest import EXAMPLES, MALFORMED


@dataclass(frozen=True)
class Case:
    path: Path
    expects: list[str]
    at: str | None
    admission: str | None


def load_cases() -> list[Case]:
    cases = []
    for path in sorted(MALFORMED.glob("*.yaml")):
        header = [line for line in path.read_text().splitlines() if line.startswith("# ")]

        def values(key: str, header: list[str] = header) -> list[str]:
            return [line.split(f"# {key}: ", 1)[1] for line in header if line.startswith(f"# {key}: ")]

        at, admission = values("at"), values("admission")
        cases.append(Case(path, values("expect"), at[0] if at else None, admission[0] if admission else None))
    return cases


CASES = load_cases()


def test_the_corpus_is_large_and_every_case_states_its_expectation() -> None:
    assert len(CASES) >= 30
    assert all(case.expects for case in CASES)


@pytest.mark.parametrize("case", CASES, ids=[c.path.stem for c in CASES])
def test_malformed_document_gets_a_precise_error(case: Case, example_profile: Profile) -> None:
    result = validate_paths([case.path], example_profile)
    errors = [f.render() for f in result.errors]
    assert errors, "no error reported"
    for expected in case.expects:
        assert any(expected in e for e in errors), f"{expected!r} not in {errors}"
    for rendered in errors:
        assert rendered.startswith(f"{case.path}:"), rendered
        assert ": document " in rendered, rendered
    if case.at is not None:
        first = next(f for f in result.errors if case.expects[0] in f.render())
        line = first.location.line if first.location else int(first.text.split(":")[1])
        assert line is not None
        text = case.path.read_text().splitlines()[line - 1]
        assert case.at in text, f"line {line} is {text!r}, expected it to contain {case.at!r}"


@pytest.mark.parametrize("case", CASES, ids=[c.path.stem for c in CASES])
def test_cli_reports_it_and_fails_without_a_traceback(case: Case, capsys: pytest.CaptureFixture[str]) -> None:
    code = main(
        ["validate", str(case.path), "--profile", str(EXAMPLES / "profiles" / "example-kubernetes-ops.yaml")]
    )
    out, err = capsys.readouterr()
    assert code == 1
    assert "Traceback" not in out + err
    assert case.expects[0] in err
    assert out.startswith("FAILED:")


def test_cli_accepts_the_examples(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["validate", str(EXAMPLES)]) == 0
    out, _ = capsys.readouterr()
    assert out.startswith("OK: read 1 profile, 2 runs, 5 scenarios, 1 suite; 0 error(s)")


def test_cli_names_a_missing_path(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    missing = tmp_path / "nope.yaml"
    assert main(["validate", str(missing)]) == 1
    _, err = capsys.readouterr()
    assert f"{missing}: no such file or directory" in err


def test_cli_rejects_binary_garbage(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    garbage = tmp_path / "garbage.yaml"
    garbage.write_bytes(b"\xff\xfe\x00binary")
    assert main(["validate", str(garbage)]) == 1
    _, err = capsys.readouterr()
    assert f"{garbage}: not UTF-8 text" in err
