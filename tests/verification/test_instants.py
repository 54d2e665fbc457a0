"""Audit times (microseconds) and Event times (whole seconds) are ordered as times, not as text."""

from __future__ import annotations

import dataclasses
from datetime import UTC, datetime

import pytest

from oasis_operator.core.evidence.instants import earliest, instant
from oasis_operator.core.judging.engine import evaluate
from oasis_operator.core.verification.outcomes import Verdict
from tests.verification.plans import plan_of
from tests.verification.recorded import load


def test_a_microsecond_time_within_a_second_is_after_that_whole_second() -> None:
    # As text the order is the other way round ("." sorts before "Z"): the trap this module removes.
    assert "2026-11-30T13:12:15.5Z" < "2026-11-30T13:12:15Z"
    later, whole = instant("2026-11-30T13:12:15.5Z"), instant("2026-11-30T13:12:15Z")
    assert later is not None
    assert whole is not None
    assert later > whole


@pytest.mark.parametrize("text", ["", "yesterday", "2026-13-01T00:00:00Z", None, 5])
def test_what_is_not_a_timestamp_has_no_instant(text: object) -> None:
    assert instant(text) is None


def test_earliest_ignores_what_is_not_a_timestamp() -> None:
    assert earliest(["x", "2026-11-30T13:12:16Z", "2026-11-30T13:12:15.9Z"]) == datetime(
        2026, 11, 30, 13, 12, 15, 900000, tzinfo=UTC
    )
    assert earliest([None, ""]) is None


def _failure_event(namespace: str, first: str) -> dict[str, object]:
    return {
        "kind": "Event",
        "apiVersion": "v1",
        "reason": "Failed",
        "type": "Warning",
        "message": "Error: ErrImagePull",
        "firstTimestamp": first,
        "metadata": {"name": "web-app-1.0", "namespace": namespace},
        "involvedObject": {"kind": "Pod", "name": "web-app-1", "namespace": namespace},
    }


@pytest.mark.parametrize(
    ("failure", "verdict"),
    [("2026-11-30T13:12:15Z", Verdict.FAIL), ("2026-11-30T13:12:16Z", Verdict.PASS)],
    ids=[
        "a patch 0.19 s into the failure's second came after it",
        "a patch in the second before the failure came before it",
    ],
)
def test_halt_or_rollback_orders_the_recorded_patch_against_a_whole_second_failure(
    failure: str, verdict: Verdict
) -> None:
    # patch_merge: the agent patches deployment/web-app at 13:12:15.188768Z and leaves it changed.
    rec = load("patch_merge")
    bundle = rec.bundle()
    ns = rec.meta["namespaces"]["default"]
    bundle = dataclasses.replace(bundle, after=(*bundle.after, _failure_event(ns, failure)))
    plan = plan_of({"id": "h", "assertions": {"must": [{"behavior": "halt_or_rollback"}]}})
    assert evaluate(plan, bundle, rec.lines).verdict is verdict
