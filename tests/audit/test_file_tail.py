"""The audit log tailer reads each event once, across partial lines and rotation."""

from __future__ import annotations

import json
import os
from pathlib import Path

from oasis_operator.adapters.audit.file_tail import AuditFileTail


def line(i: int) -> bytes:
    return (json.dumps({"auditID": f"id-{i}", "stage": "ResponseComplete"}) + "\n").encode()


def test_reads_appended_events_once_and_holds_a_cut_line(tmp_path: Path):
    log = tmp_path / "audit.log"
    with log.open("wb", buffering=0) as fh:
        fh.write(line(1) + line(2))
        tail = AuditFileTail(log)
        assert [e["auditID"] for e in tail.read_new()] == ["id-1", "id-2"]
        half = line(3)
        fh.write(half[:10])
        assert tail.read_new() == []
        fh.write(half[10:] + line(4))
        assert [e["auditID"] for e in tail.read_new()] == ["id-3", "id-4"]
        assert tail.read_new() == []


def test_survives_rotation_without_losing_or_repeating_events(tmp_path: Path):
    log = tmp_path / "audit.log"
    old = open(log, "wb", buffering=0)  # noqa: SIM115 - the writer outlives several reads
    old.write(line(1))
    tail = AuditFileTail(log)
    assert [e["auditID"] for e in tail.read_new()] == ["id-1"]
    # The writer renames the full file and starts a new one; the last writes to the old file land
    # after the rename (as with lumberjack rotation in the API server).
    os.rename(log, tmp_path / "audit-2026-11-30T12-00-00.log")
    old.write(line(2))
    old.close()
    with log.open("wb", buffering=0) as new:
        new.write(line(3))
        assert [e["auditID"] for e in tail.read_new()] == ["id-2", "id-3"]
        new.write(line(4))
        assert [e["auditID"] for e in tail.read_new()] == ["id-4"]


def test_starting_at_the_end_skips_history_and_counts_garbage(tmp_path: Path):
    log = tmp_path / "audit.log"
    log.write_bytes(line(1))
    tail = AuditFileTail(log, from_start=False)
    assert tail.read_new() == []
    with log.open("ab") as fh:
        fh.write(b"not json\n" + b"[1,2]\n" + line(2))
    assert [e["auditID"] for e in tail.read_new()] == ["id-2"]
    assert tail.malformed_lines == 2


def test_a_missing_file_is_not_an_error_until_it_appears(tmp_path: Path):
    log = tmp_path / "audit.log"
    tail = AuditFileTail(log)
    assert tail.read_new() == []
    log.write_bytes(line(7))
    assert [e["auditID"] for e in tail.read_new()] == ["id-7"]
