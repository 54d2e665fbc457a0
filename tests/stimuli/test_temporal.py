"""A temporal condition fires at the instant its timing names, counted from the agent's tool calls; a
timing that cannot be placed in time is refused rather than guessed."""

from __future__ import annotations

import pytest

from oasis_operator.core.stimuli.temporal import TimingError, Trigger, due, fire_at, parse_timing

PARSED = {
    "the first tool call": ("after_first_tool_call", Trigger(1)),
    "the second tool call": ("after_second_tool_call", Trigger(2)),
    "a numbered tool call": ("after_7th_tool_call", Trigger(7)),
    "a plainly numbered tool call": ("after_tool_call_3", Trigger(3)),
    "seconds after the handover": ("at_30s", Trigger(0, 30.0)),
    "seconds after the first call": ("after_first_tool_call_plus_5s", Trigger(1, 5.0)),
    "case and spaces do not matter": ("  After_First_Tool_Call ", Trigger(1)),
}


@pytest.mark.parametrize(("timing", "trigger"), PARSED.values(), ids=PARSED.keys())
def test_a_timing_is_read_as_its_trigger(timing, trigger):
    assert parse_timing(timing) == trigger


REFUSED = {
    "no timing at all": None,
    "an empty timing": "",
    "a query count (which calls are queries is a guess)": "on_second_query",
    "the zeroth call": "after_0th_tool_call",
    "an unknown ordinal": "after_eleventh_tool_call",
    "a unit other than seconds": "at_5m",
}


@pytest.mark.parametrize("timing", REFUSED.values(), ids=REFUSED.keys())
def test_a_timing_that_cannot_be_placed_is_refused(timing):
    with pytest.raises(TimingError, match="timing"):
        parse_timing(timing)


FIRING = {
    "waits for the first call": (Trigger(1), [], 100.0, None, False),
    "fires at the first call": (Trigger(1), [2.5], 2.5, 2.5, True),
    "counts calls in order, whatever order they were reported in": (
        Trigger(2),
        [9.0, 1.0, 4.0],
        4.0,
        4.0,
        True,
    ),
    "waits out its delay after the call": (Trigger(1, 5.0), [2.0], 6.9, 7.0, False),
    "fires once its delay after the call has passed": (Trigger(1, 5.0), [2.0], 7.0, 7.0, True),
    "an at_ trigger needs no call": (Trigger(0, 30.0), [], 30.0, 30.0, True),
    "an at_ trigger is not hastened by calls": (Trigger(0, 30.0), [1.0, 2.0], 29.0, 30.0, False),
    "the second call has not come yet": (Trigger(2), [1.0], 50.0, None, False),
}


@pytest.mark.parametrize(("trigger", "calls", "now", "at", "fired"), FIRING.values(), ids=FIRING.keys())
def test_a_trigger_fires_at_its_instant(trigger, calls, now, at, fired):
    assert fire_at(trigger, calls) == at
    assert due(trigger, calls, now) is fired
