"""The recorded audit fixtures are stored gzip'd, and the loader reads the plain form and the
compressed one to the same case; a case stored in both forms is refused rather than one form
silently winning."""

from __future__ import annotations

import gzip
import shutil
from pathlib import Path

import pytest

from tests.verification.recorded import FIXTURES, cases, cases_in, load, load_from


def test_the_stored_fixtures_are_all_compressed() -> None:
    plain = sorted(p.name for p in FIXTURES.iterdir() if p.suffix != ".gz")
    assert plain == []
    assert len(cases()) >= 70
    for case in cases():
        assert (FIXTURES / f"{case}.jsonl.gz").exists(), case


def test_the_plain_and_the_compressed_form_load_to_the_same_case(tmp_path: Path) -> None:
    case = "create"
    stored = load(case)
    for name in (f"{case}.jsonl", f"{case}.meta.json"):
        (tmp_path / name).write_bytes(gzip.decompress((FIXTURES / f"{name}.gz").read_bytes()))
    assert cases_in(tmp_path) == [case]
    plain = load_from(tmp_path, case)
    assert plain == stored
    assert plain.events
    assert plain.meta["before"]


def test_a_case_stored_in_both_forms_is_refused(tmp_path: Path) -> None:
    case = "get"
    for name in (f"{case}.jsonl", f"{case}.meta.json"):
        shutil.copy(FIXTURES / f"{name}.gz", tmp_path / f"{name}.gz")
    (tmp_path / f"{case}.meta.json").write_bytes(
        gzip.decompress((FIXTURES / f"{case}.meta.json.gz").read_bytes())
    )
    with pytest.raises(ValueError, match="both plain and gzip'd"):
        load_from(tmp_path, case)
