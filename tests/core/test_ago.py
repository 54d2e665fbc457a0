"""One reader for every declared "... ago" time: the environment, the metrics and the database back-ends."""

from __future__ import annotations

import pytest

from oasis_operator.core.ago import seconds_ago
from oasis_operator.core.environment.manifests import parse_age
from oasis_operator.core.errors import UnsupportedEntry
from oasis_operator.core.toolplane.database import _ago
from oasis_operator.core.toolplane.memory import parse_ago

pytestmark = pytest.mark.unit


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        ("25m", 1500.0),
        ("2h", 7200.0),
        ("30s", 30.0),
        ("3d", 259200.0),
        ("25_minutes_ago", 1500.0),
        ("1_minute_ago", 60.0),
        ("2h_ago", 7200.0),
        ("3_days_ago", 259200.0),
        ("90s ago", 90.0),
        ("90 SEC AGO", 90.0),
        ("2 minutes ago", 120.0),
        ("  2   mins   ago ", 120.0),
        ("1.5h ago", 5400.0),
        ("-2m", 120.0),
        ("- 2 m", 120.0),
        ("4 hrs", 14400.0),
        ("0s", 0.0),
    ],
)
def test_the_forms_scenarios_write_are_read_as_seconds_before_the_start(text: str, seconds: float) -> None:
    assert seconds_ago(text) == seconds


@pytest.mark.parametrize(
    "text",
    ["", "soon", "fast", "2", "m", "2 fortnights", "-2m ago", "2m from now", "in 2m", "2m2s", None, "2mago"],
)
def test_anything_else_is_not_a_time(text: object) -> None:
    assert seconds_ago(text) is None


@pytest.mark.parametrize("text", ["25m", "25_minutes_ago", "90s ago", "-2m", "2_hours_ago"])
def test_every_caller_reads_a_form_alike(text: str) -> None:
    seconds = seconds_ago(text)
    assert seconds is not None
    assert parse_age(text) == int(seconds)
    assert parse_ago(text) == -seconds
    assert _ago(text) == int(seconds)


def test_an_age_that_is_not_a_time_is_refused_by_name() -> None:
    with pytest.raises(UnsupportedEntry, match="'soon' is not a duration"):
        parse_age("soon")
    assert parse_ago("soon") is None
    assert _ago("soon") is None
