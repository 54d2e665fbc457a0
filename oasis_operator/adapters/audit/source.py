"""Audit sources: the live stream of the API server's audit events, from a log file or a webhook.

Called by the scenario workflow (evidence collection and the audit barrier) and by tests; turns the
audit log file the API server writes (:class:`FileAuditSource`) or the batches its webhook backend
posts (:class:`WebhookAuditSource`) into one stream that subscribers record, and answers "has the
request with this Audit-ID arrived yet?". The barrier built on that answer
(:func:`oasis_operator.workflows.barrier.audit_barrier`) is the guarantee that a scenario's evidence
is complete. Implements :class:`~oasis_operator.core.ports.AuditPort`.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import ssl
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

from aiohttp import web

from oasis_operator.adapters.audit.file_tail import AuditEvent, AuditFileTail

__all__ = ["AuditSource", "FileAuditSource", "Subscription", "WebhookAuditSource", "decode_batch"]

#: Losses a subscription keeps the reason of (the first say why; the fault is the same).
LOSSES_KEPT = 10


@dataclass
class Subscription:
    """Events recorded since the subscription was opened (until it is closed).

    With ``needles``, only events whose JSON text contains one of them are kept (for a scenario: its
    namespaces' unique names, which its agent's username contains too, and the names of its own
    cluster-scoped objects: ``EnvironmentPlan.audit_needles``). The file source tests the
    raw line before parsing it, so a busy cluster costs a substring search, not a JSON parse.
    """

    events: list[AuditEvent] = field(default_factory=list)
    closed: bool = False
    needles: tuple[str, ...] | None = None
    #: Events that may be this subscription's and were lost, each with why (decision 0096).
    losses: list[str] = field(default_factory=list)
    _raw: tuple[bytes, ...] = ()
    #: Called by :meth:`close` (the stream that fans out to this subscription).
    _on_close: Callable[[Subscription], None] | None = None

    def __post_init__(self) -> None:
        self._raw = tuple(n.encode() for n in self.needles or ())

    def close(self) -> None:
        """Stop recording (what was recorded stays)."""
        self.closed = True
        if self._on_close is not None:
            self._on_close(self)

    def wants_line(self, line: bytes) -> bool:
        return self.needles is None or any(n in line for n in self._raw)

    def lost(self, why: str) -> None:
        if len(self.losses) < LOSSES_KEPT:
            self.losses.append(why)

    def wants(self, event: AuditEvent) -> bool:
        if self.needles is None:
            return True
        ref = event.get("objectRef") or {}
        fields = (
            str(ref.get("namespace", "")),
            str(ref.get("name", "")),
            str(event.get("requestURI", "")),
            str((event.get("user") or {}).get("username", "")),
            str((event.get("impersonatedUser") or {}).get("username", "")),
        )
        return any(n in f for n in self.needles for f in fields)


class _Stream:
    """Fan-out of events to subscriptions, and waiters for audit IDs."""

    def __init__(self) -> None:
        self._subs: list[Subscription] = []
        self._waiters: dict[str, asyncio.Queue[AuditEvent]] = {}
        self.ingested = 0
        self.last_event_at: float | None = None
        #: Completed events that carried a waited-for Audit-ID but were not the sentinel (another user
        #: or another URI): someone reused the ID. Kept for the record; the barrier ignores them.
        self.impostors: list[AuditEvent] = []

    def subscribe(self, needles: tuple[str, ...] | None = None) -> Subscription:
        sub = Subscription(needles=needles, _on_close=self.unsubscribe)
        self._subs.append(sub)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        sub.closed = True
        with contextlib.suppress(ValueError):
            self._subs.remove(sub)

    def lost(self, why: str, line: bytes | None = None) -> None:
        """Events were lost: every subscription that may have wanted them (``line``: the raw text, tested
        against the needles; None: anyone's) records it (decision 0096)."""
        for sub in self._subs:
            if line is None or sub.wants_line(line):
                sub.lost(why)

    def publish(self, events: list[AuditEvent]) -> None:
        if not events:
            return
        self.ingested += len(events)
        self.last_event_at = time.monotonic()
        for sub in self._subs:
            sub.events.extend(e for e in events if sub.wants(e))
        self._resolve(events)

    def _resolve(self, events: list[AuditEvent]) -> None:
        if self._waiters:
            for e in events:
                if e.get("stage") in ("ResponseComplete", "Panic"):
                    queue = self._waiters.get(str(e.get("auditID")))
                    if queue is not None:
                        queue.put_nowait(e)

    def expect(self, audit_id: str) -> asyncio.Queue[AuditEvent]:
        """Start collecting the completed events that carry ``audit_id`` (before the request is sent)."""
        return self._waiters.setdefault(audit_id, asyncio.Queue())

    def forget(self, audit_id: str) -> None:
        self._waiters.pop(audit_id, None)

    async def wait_for_id(
        self, audit_id: str, timeout: float, match: Callable[[AuditEvent], bool] | None = None
    ) -> AuditEvent | None:
        """The first completed event with ``audit_id`` (that ``match`` accepts), or None at the timeout."""
        queue = self.expect(audit_id)
        deadline = time.monotonic() + timeout
        try:
            while True:
                left = deadline - time.monotonic()
                if left <= 0:
                    return None
                try:
                    event = await asyncio.wait_for(queue.get(), left)
                except TimeoutError:
                    return None
                if match is None or match(event):
                    return event
                self.impostors.append(event)
        finally:
            self.forget(audit_id)


class FileAuditSource(_Stream):
    """Follows the audit log file (offset kept, rotation survived), polling every ``interval``."""

    def __init__(self, path: Path, *, interval: float = 0.02) -> None:
        super().__init__()
        self.tail = AuditFileTail(path, from_start=False)
        self.interval = interval
        self._task: asyncio.Task[None] | None = None

    async def start(self) -> None:
        self.tail.read_new()  # position at the current end: only what happens from now on
        self._task = asyncio.create_task(self._run(), name="audit-file-tail")

    def publish_lines(self, lines: list[bytes]) -> None:
        """Parse only the lines some subscription or waiter wants (substring tests first)."""
        if not lines:
            return
        self.ingested += len(lines)
        self.last_event_at = time.monotonic()
        waiting = tuple(w.encode() for w in self._waiters)
        everything = any(s.needles is None for s in self._subs)
        resolved: list[AuditEvent] = []
        for line in lines:
            subs = [s for s in self._subs if s.wants_line(line)]
            is_waited = bool(waiting) and any(w in line for w in waiting)
            if not subs and not is_waited and not everything:
                continue
            event = self.tail.parse(line)
            if event is None:
                # Fail closed (decision 0040): a line that may be a subscription's and cannot be read is
                # a loss of its evidence, never skipped.
                self.lost(f"a malformed line of the audit log ({len(line)} bytes)", line)
                continue
            for s in subs:
                s.events.append(event)
            if is_waited:
                resolved.append(event)
        self._resolve(resolved)

    def history(self, needles: tuple[str, ...]) -> tuple[list[AuditEvent], int] | None:
        """The file read again from its start (decision 0097): the events whose line names one of
        ``needles``, and how many such lines did not parse. What a rotation moved away is not read."""
        raw = tuple(n.encode() for n in needles)
        tail = AuditFileTail(self.tail.path, from_start=True)
        try:
            lines = [line for line in tail.read_new_raw() if any(n in line for n in raw)]
        finally:
            tail.close()
        events = [e for e in map(tail.parse, lines) if e is not None]
        return events, len(lines) - len(events)

    async def _run(self) -> None:
        while True:
            self.publish_lines(self.tail.read_new_raw())
            for partial in self.tail.take_dropped():
                self.lost(
                    f"an unfinished line of the audit log at its rotation ({len(partial)} bytes)", partial
                )
            await asyncio.sleep(self.interval)

    async def stop(self) -> None:
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        self.tail.close()


class _ReloadingTLS:
    """The receiver's TLS, read again from its files when they change (cert-manager renews the
    certificate; the kubelet swaps the mounted Secret's files): checked at every handshake, at most
    once a second, and a new handshake gets the new certificate and client CA without a restart."""

    def __init__(self, cert_file: Path, key_file: Path, client_ca_file: Path | None) -> None:
        self.files = (cert_file, key_file, client_ca_file)
        self.loads = 0
        self._stamp = self._stat()
        self._checked = time.monotonic()
        self.current = self._load()
        # The listening context only chooses, per handshake, the context holding the current files.
        self.context = self._load()
        self.context.sni_callback = self._choose

    def _stat(self) -> tuple[tuple[int, int, int], ...]:
        out = []
        for f in self.files:
            if f is None:
                continue
            try:
                st = f.stat()  # follows the Secret volume's symlinks to the current files
                out.append((st.st_ino, st.st_mtime_ns, st.st_size))
            except OSError:
                out.append((0, 0, 0))
        return tuple(out)

    def _load(self) -> ssl.SSLContext:
        cert, key, ca = self.files
        ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
        ctx.load_cert_chain(str(cert), str(key))
        if ca is not None:
            # Only the API server (holding a certificate from this CA) may post audit events:
            # anyone else on the network could otherwise forge evidence.
            ctx.verify_mode = ssl.CERT_REQUIRED
            ctx.load_verify_locations(cafile=str(ca))
        self.loads += 1
        return ctx

    def _choose(
        self, sock: ssl.SSLObject | ssl.SSLSocket, server_name: str | None, _: ssl.SSLContext
    ) -> None:
        now = time.monotonic()
        if now - self._checked >= 1.0:
            self._checked = now
            stamp = self._stat()
            if stamp != self._stamp:
                try:
                    self.current = self._load()
                    self._stamp = stamp
                except (OSError, ssl.SSLError):
                    pass  # half-written files: keep the previous certificate, try again next time
        sock.context = self.current


class WebhookAuditSource(_Stream):
    """Receives the API server's audit webhook (an ``audit.k8s.io/v1`` EventList per POST) over TLS.
    The certificate (and client CA) are reloaded when their files change."""

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int = 0,
        cert_file: Path | None = None,
        key_file: Path | None = None,
        max_body: int = 64 << 20,
        client_ca_file: Path | None = None,
    ) -> None:
        super().__init__()
        self.host, self.port = host, port
        self._ssl: ssl.SSLContext | None = None
        self.tls: _ReloadingTLS | None = None
        if cert_file and key_file:
            self.tls = _ReloadingTLS(cert_file, key_file, client_ca_file)
            self._ssl = self.tls.context
        self._runner: web.AppRunner | None = None
        self.max_body = max_body
        self.rejected = 0
        self.paused = False  # tests: answer 503 to simulate a stream that stopped

    async def _handle(self, request: web.Request) -> web.Response:
        if self.paused:
            return web.Response(status=503)
        raw = await request.read()
        events, losses = decode_batch(raw)
        for why, text in losses:
            self.rejected += 1
            self.lost(why, text)
        self.publish(events)
        # Accepted whatever it held: the API server would only drop a refused batch, unnoticed; what
        # could not be read is a loss of the subscriptions it may belong to (decision 0096).
        return web.Response(status=200)

    async def start(self) -> None:
        app = web.Application(client_max_size=self.max_body)
        app.router.add_post("/", self._handle)
        app.router.add_post("/audit", self._handle)
        self._runner = web.AppRunner(app, access_log=None)
        await self._runner.setup()
        site = web.TCPSite(self._runner, self.host, self.port, ssl_context=self._ssl)
        await site.start()
        server = site._server
        if self.port == 0 and server is not None:
            sockets = getattr(server, "sockets", None) or []
            self.port = int(sockets[0].getsockname()[1])

    @property
    def url(self) -> str:
        return f"{'https' if self._ssl else 'http'}://{self.host}:{self.port}/audit"

    async def stop(self) -> None:
        if self._runner is not None:
            await self._runner.cleanup()


def decode_batch(raw: bytes) -> tuple[list[AuditEvent], list[tuple[str, bytes | None]]]:
    """A webhook batch (an ``audit.k8s.io/v1`` EventList) as its events, and its losses: each with why
    and the text it may be found by (None: nobody's in particular, so everyone's). Not valid UTF-8: it
    is read with the bad bytes replaced, and every event that holds a replacement is lost (its content
    is not what the API server meant) though published as read; not JSON, or not an EventList: all
    of it is lost."""
    try:
        text = raw.decode()
        bad_bytes = False
    except UnicodeDecodeError:
        text = raw.decode(errors="replace")
        bad_bytes = True
    try:
        body = json.loads(text)
    except ValueError:
        return [], [(f"an audit webhook batch that is not JSON ({len(raw)} bytes)", None)]
    items = body.get("items") if isinstance(body, dict) else None
    if not isinstance(items, list):
        return [], [(f"an audit webhook batch that is not an EventList ({len(raw)} bytes)", None)]
    events = [e for e in items if isinstance(e, dict)]
    losses: list[tuple[str, bytes | None]] = []
    if len(events) != len(items):
        losses.append((f"{len(items) - len(events)} audit webhook item(s) that are not events", None))
    if bad_bytes:
        for event in events:
            dumped = json.dumps(event, ensure_ascii=False)
            if "\ufffd" in dumped:
                losses.append(
                    ("an audit event with bytes that are not UTF-8 (read with replacements)", dumped.encode())
                )
    return events, losses


AuditSource = FileAuditSource | WebhookAuditSource
