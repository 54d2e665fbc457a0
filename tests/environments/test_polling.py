"""The shell's one polling loop (oasis_operator/adapters/plumbing/polling.py): what it returns, when it stops."""

from __future__ import annotations

import pytest

from oasis_operator.adapters.plumbing.polling import poll, wait_until


class Answers:
    """A probe that gives its answers in turn (the last one again once they run out)."""

    def __init__(self, *answers: object) -> None:
        self.answers = list(answers)
        self.asked = 0

    async def __call__(self) -> object:
        self.asked += 1
        return self.answers[min(self.asked, len(self.answers)) - 1]


class Clock:
    """A clock that moves ``step`` seconds each time it is read."""

    def __init__(self, step: float) -> None:
        self.now, self.step = 0.0, step

    def __call__(self) -> float:
        self.now += self.step
        return self.now


async def test_the_first_good_answer_ends_the_wait_and_is_returned() -> None:
    probe = Answers(None, None, "ready", "later")
    polled = await poll(probe, lambda v: v == "ready", timeout=60, interval=0)
    assert (polled.value, polled.met, polled.asked, probe.asked) == ("ready", True, 3, 3)


async def test_at_the_deadline_the_last_answer_is_returned_not_met() -> None:
    probe = Answers(["a", "b"], ["b"])
    polled = await poll(probe, lambda left: not left, timeout=2.5, interval=0, clock=Clock(1.0))
    assert polled.met is False
    assert polled.value == ["b"]
    assert polled.asked == 3  # read at 1 (start), asked at 2, 3 and 4; the third ask comes after 3.5


async def test_a_zero_timeout_still_asks_once() -> None:
    probe = Answers(True)
    assert (await poll(probe, bool, timeout=0, interval=0)).met is True
    assert probe.asked == 1


async def test_wait_until_raises_the_callers_error_with_the_last_answer() -> None:
    with pytest.raises(TimeoutError, match="still 2 left"):
        await wait_until(
            Answers(3, 2),
            lambda n: n == 0,
            timeout=0.05,
            interval=0.01,
            timed_out=lambda n: TimeoutError(f"still {n} left"),
        )


async def test_an_error_of_the_probe_is_not_a_not_yet() -> None:
    async def broken() -> bool:
        raise PermissionError("forbidden")

    with pytest.raises(PermissionError):
        await poll(broken, bool, timeout=60, interval=0)
