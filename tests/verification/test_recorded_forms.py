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


def test_the_recorder_writes_the_form_the_loader_reads(tmp_path: Path) -> None:
    """tools/record_audit_fixtures.py's writer, over a stored case's own text: the loader reads back
    the same case, and no plain copy is left beside the compressed one."""
    from tests.verification.test_live_recording import recorder

    case = "scale"
    (tmp_path / f"{case}.meta.json").write_text("stale plain copy")
    for name in (f"{case}.jsonl", f"{case}.meta.json"):
        text = gzip.decompress((FIXTURES / f"{name}.gz").read_bytes()).decode()
        recorder().write_packed(tmp_path / name, text)
        assert gzip.decompress((tmp_path / f"{name}.gz").read_bytes()).decode() == text
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"{case}.jsonl.gz", f"{case}.meta.json.gz"]
    assert load_from(tmp_path, case) == load(case)
