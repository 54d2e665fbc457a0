"""Reading a kube-apiserver JSON audit log as it grows.

Called by the audit source of the operator and by the test fixtures; turns the bytes appended to an
audit log file into parsed event dicts, one per complete line. It keeps its offset (never re-reads the
file), survives rotation (the API server renames the full file and starts a new one: the rest of the
old file is drained first), and tolerates a line cut in the middle by holding it until it is whole.
"""

from __future__ import annotations

import json
import os
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, BinaryIO

AuditEvent = dict[str, Any]

_CHUNK = 1 << 20


class AuditFileTail:
    """Incremental reader of one audit log path."""

    def __init__(self, path: Path, *, from_start: bool = True) -> None:
        self.path = Path(path)
        self._fh: BinaryIO | None = None
        self._inode: int | None = None
        self._partial = b""
        self._from_start = from_start
        self.malformed_lines = 0
        #: Unfinished lines dropped at a rotation, until :meth:`take_dropped` (decision 0096).
        self.dropped: list[bytes] = []
        self.bytes_read = 0

    def close(self) -> None:
        if self._fh is not None:
            self._fh.close()
            self._fh = None

    def _open(self, at_end: bool) -> bool:
        try:
            fh = self.path.open("rb")
        except FileNotFoundError:
            return False
        if at_end:
            fh.seek(0, os.SEEK_END)
        self._fh = fh
        self._inode = os.fstat(fh.fileno()).st_ino
        return True

    def _drain_raw(self) -> Iterator[bytes]:
        assert self._fh is not None
        while chunk := self._fh.read(_CHUNK):
            self.bytes_read += len(chunk)
            data = self._partial + chunk
            lines = data.split(b"\n")
            self._partial = lines.pop()
            for line in lines:
                if line.strip():
                    yield line

    def parse(self, line: bytes) -> AuditEvent | None:
        try:
            event = json.loads(line)
        except ValueError:
            self.malformed_lines += 1
            return None
        if isinstance(event, dict):
            return event
        self.malformed_lines += 1
        return None

    def _drain(self) -> Iterator[AuditEvent]:
        for line in self._drain_raw():
            event = self.parse(line)
            if event is not None:
                yield event

    def read_new_raw(self) -> list[bytes]:
        """Every complete line appended since the last call, unparsed (the caller filters first)."""
        out: list[bytes] = []
        if self._fh is None:
            if not self._open(at_end=not self._from_start):
                return out
            self._from_start = True
        out.extend(self._drain_raw())
        try:
            inode = self.path.stat().st_ino
        except FileNotFoundError:
            return out
        if inode != self._inode:
            if self._partial.strip():
                self.malformed_lines += 1
                self.dropped.append(self._partial)
            self._partial = b""
            self.close()
            if self._open(at_end=False):
                out.extend(self._drain_raw())
        return out

    def take_dropped(self) -> list[bytes]:
        """The unfinished lines dropped at rotations since the last call."""
        dropped, self.dropped = self.dropped, []
        return dropped

    def read_new(self) -> list[AuditEvent]:
        """Every complete event appended since the last call."""
        return [e for e in map(self.parse, self.read_new_raw()) if e is not None]

    def wait_for(
        self,
        predicate: Callable[[AuditEvent], bool],
        timeout: float,
        *,
        sink: list[AuditEvent] | None = None,
        interval: float = 0.02,
    ) -> AuditEvent | None:
        """Read until an event satisfies ``predicate`` or ``timeout`` passes. Every event read on the way
        is appended to ``sink`` when given. Returns the event, or ``None`` at the deadline."""
        deadline = time.monotonic() + timeout
        while True:
            for event in self.read_new():
                if sink is not None:
                    sink.append(event)
                if predicate(event):
                    return event
            if time.monotonic() >= deadline:
                return None
            time.sleep(interval)


def is_complete(event: AuditEvent, audit_id: str) -> bool:
    """Whether ``event`` is the final record of the request with ``audit_id``."""
    return event.get("auditID") == audit_id and event.get("stage") in ("ResponseComplete", "Panic")
