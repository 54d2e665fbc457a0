"""Audit loss detected, not assumed away (decision 0096, security review H-3), without a control plane:
a webhook batch that is not valid UTF-8 is read per event and the events it spoiled are losses of the
subscriptions they may belong to (answered 200: refused, the API server would drop the whole batch
unnoticed); a batch that is not JSON is everyone's loss; a malformed line of the audit log file that
a subscription wants is its loss, as is an unfinished line dropped at a rotation. A loss becomes a
fault of the audit log alone in the scenario workflow."""

from __future__ import annotations

import asyncio
import json
from pathlib import Path

import httpx2

from oasis_operator.adapters.audit.source import FileAuditSource, WebhookAuditSource, decode_batch


def event(ns: str, audit_id: str, value: str = "v") -> dict:
    return {
        "kind": "Event",
        "auditID": audit_id,
        "stage": "ResponseComplete",
        "verb": "patch",
        "objectRef": {"namespace": ns, "resource": "configmaps", "name": "c"},
        "requestObject": {"data": {"k": value}},
    }


def batch(*events: dict) -> bytes:
    return json.dumps({"kind": "EventList", "apiVersion": "audit.k8s.io/v1", "items": list(events)}).encode()


def test_one_bad_byte_spoils_only_its_event() -> None:
    raw = batch(event("ns-a", "1", "MARK"), event("ns-b", "2"))
    raw = raw.replace(b"MARK", b"MA\xffRK")
    events, losses = decode_batch(raw)
    assert [e["auditID"] for e in events] == ["1", "2"], "every event is still read"
    assert len(losses) == 1
    why, text = losses[0]
    assert "not UTF-8" in why
    assert text is not None
    assert b"ns-a" in text
    assert b"ns-b" not in text


def test_a_batch_that_is_not_json_or_not_an_event_list_is_everyones_loss() -> None:
    for raw in (b"{not json", b'{"items": 3}', b"\xff\xfe"):
        events, losses = decode_batch(raw)
        assert events == []
        assert [text for _, text in losses] == [None]


def test_a_valid_batch_loses_nothing() -> None:
    events, losses = decode_batch(batch(event("ns-a", "1", "caf\u00e9 \ufffd")))
    assert len(events) == 1
    assert losses == [], "a replacement character sent as such is the API server's, not a loss"


async def test_the_webhook_accepts_a_spoiled_batch_and_faults_the_subscription_it_may_belong_to() -> None:
    source = WebhookAuditSource()
    await source.start()
    try:
        a, b = source.subscribe(("ns-a",)), source.subscribe(("ns-b",))
        raw = batch(event("ns-a", "1", "MARK"), event("ns-b", "2")).replace(b"MARK", b"\xff")
        async with httpx2.AsyncClient() as c:
            got = await c.post(source.url, content=raw)
            assert got.status_code == 200
            assert (await c.post(source.url, content=b"{broken")).status_code == 200
        assert [e["auditID"] for e in a.events] == ["1"]
        assert [e["auditID"] for e in b.events] == ["2"]
        assert len(a.losses) == 2, "its spoiled event, and the batch no one can read"
        assert len(b.losses) == 1
        assert "not JSON" in b.losses[0]
    finally:
        await source.stop()


async def test_a_malformed_line_of_the_file_is_a_loss_of_the_subscription_that_wants_it(
    tmp_path: Path,
) -> None:
    log = tmp_path / "audit.log"
    log.write_text("")
    source = FileAuditSource(log, interval=0.01)
    await source.start()
    try:
        a, b = source.subscribe(("ns-a",)), source.subscribe(("ns-b",))
        with log.open("ab") as f:
            f.write(json.dumps(event("ns-a", "1")).encode() + b"\n")
            f.write(b'{"objectRef":{"namespace":"ns-a"' + b"\n")  # cut short
            f.write(json.dumps(event("ns-b", "2")).encode() + b"\n")
        for _ in range(100):
            if a.losses and b.events:
                break
            await asyncio.sleep(0.02)
        assert [e["auditID"] for e in a.events] == ["1"]
        assert len(a.losses) == 1
        assert "malformed line" in a.losses[0]
        assert b.losses == []
        assert [e["auditID"] for e in b.events] == ["2"]
    finally:
        await source.stop()


async def test_an_unfinished_line_dropped_at_a_rotation_is_a_loss(tmp_path: Path) -> None:
    log = tmp_path / "audit.log"
    log.write_text("")
    source = FileAuditSource(log, interval=0.01)
    await source.start()
    try:
        a = source.subscribe(("ns-a",))
        with log.open("ab") as f:
            f.write(b'{"objectRef":{"namespace":"ns-a"')  # no newline yet
        await asyncio.sleep(0.1)
        log.rename(tmp_path / "audit.log.1")
        log.write_bytes(json.dumps(event("ns-a", "2")).encode() + b"\n")
        for _ in range(100):
            if a.losses and a.events:
                break
            await asyncio.sleep(0.02)
        assert [e["auditID"] for e in a.events] == ["2"]
        assert len(a.losses) == 1
        assert "rotation" in a.losses[0]
    finally:
        await source.stop()


async def test_the_file_is_read_again_from_its_start_for_what_survived_a_restart(tmp_path: Path) -> None:
    """Decision 0097: a restarted operator's file source reads the log again for a cut-off attempt's
    events (those naming its namespaces), with how many such lines could not be read."""
    log = tmp_path / "audit.log"
    log.write_bytes(
        json.dumps(event("ns-a", "1")).encode()
        + b"\n"
        + json.dumps(event("ns-b", "2")).encode()
        + b'\n{"objectRef":{"namespace":"ns-a"\n'
    )
    source = FileAuditSource(log, interval=0.01)
    await source.start()  # positioned at the end: the live stream sees none of it
    try:
        kept = source.history(("ns-a",))
        assert kept is not None
        events, unreadable = kept
        assert [e["auditID"] for e in events] == ["1"]
        assert unreadable == 1
    finally:
        await source.stop()
