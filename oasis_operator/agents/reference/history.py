"""A workload's change history, and when a symptom began: what an SRE looks at before naming a cause,
because the most common cause of a new problem is the last change (pure interpretation for the
reference agent's investigation, :mod:`.investigating`).

- the rollout history of a Deployment: its ReplicaSets by revision (``deployment.kubernetes.io/revision``)
  and the images of each, as ``kubectl rollout history`` shows them;
- when it was rolled out: the deployment controller's ``ScalingReplicaSet`` Events about it or its
  ReplicaSets (their timestamps), and an annotation of the Deployment that dates its last deploy
  ("... 25 minutes ago");
- when a symptom series (an error rate, a latency) left its earlier level and when it was half-way up:
  its onset, known only as finely as the series is sampled;
- which rollout came last before the symptom was half-way up, no more than an hour before it began to
  climb: the change to suspect first.

Nothing here knows a scenario; the data decide. Pure: no I/O, no clock (``now`` is given).
"""

from __future__ import annotations

import datetime as dt
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

__all__ = [
    "Change",
    "History",
    "Onset",
    "ago_text",
    "event_time",
    "history",
    "onset",
    "preceding",
    "symptom_series",
]

REVISION = "deployment.kubernetes.io/revision"
#: The reason the deployment controller gives the Events of a rollout (a ReplicaSet scaled up or down).
ROLLOUT_REASONS = frozenset({"ScalingReplicaSet"})
_AGO = re.compile(r"(?i)\b(\d+(?:\.\d+)?)\s*(second|sec|s|minute|min|m|hour|h|day|d)s?\s+ago\b")
_UNITS = {"second": 1, "sec": 1, "s": 1, "minute": 60, "min": 60, "m": 60, "hour": 3600, "h": 3600}
_UNITS |= {"day": 86400, "d": 86400}
#: Series whose rise is a symptom (what the operator complains about), by name.
SYMPTOM = re.compile(r"(?i)error|5xx|fail|latency|duration|timeout")
#: A series has left its earlier level once it is this share of the way up to its peak...
QUIET_SHARE = 0.1
#: ... and is clearly up once it is half-way.
HALF_WAY = 0.5
#: A rise counts only to a peak at least this many times the earlier level (a level of zero: any rise).
RISE_FACTOR = 2.0
#: How long before a symptom's onset a change is still suspected of it.
SUSPECT_WINDOW = 3600.0


@dataclass(frozen=True)
class Change:
    """One dated sign of a rollout: when, and what was seen."""

    at: float  # unix seconds
    what: str
    #: Dated by a record of it (an Event's timestamp), not by what an annotation says.
    recorded: bool = True


@dataclass(frozen=True)
class Revision:
    number: int
    name: str
    images: tuple[str, ...]


@dataclass(frozen=True)
class History:
    """A Deployment's rollout history: revisions newest first, the images it runs, dated rollouts
    oldest first."""

    workload: str
    current: tuple[str, ...]
    revisions: tuple[Revision, ...]
    changes: tuple[Change, ...]

    @property
    def previous(self) -> Revision | None:
        """The newest earlier revision that ran other images (what a rollback goes back to)."""
        return next((r for r in self.revisions if r.images != self.current), None)

    @property
    def revision(self) -> Revision | None:
        """The revision that runs the current images."""
        return next((r for r in self.revisions if r.images == self.current), None)

    def describe(self) -> str:
        current = "/".join(self.current) or "?"
        rev = self.revision
        text = f"deployment/{self.workload} runs {current}" + (f" (revision {rev.number})" if rev else "")
        before = self.previous
        if before is not None:
            text += f"; the revision before it ({before.number}) ran {'/'.join(before.images)}"
        return text


@dataclass(frozen=True)
class Onset:
    """When a series began to climb (its last point still at the earlier level), when it was half-way
    up to its peak, and the levels before and now."""

    name: str
    subject: str
    start: float
    half: float
    before: float
    now: float


def _name(obj: Mapping[str, Any]) -> str:
    return str((obj.get("metadata") or {}).get("name", ""))


def _time(text: object) -> float | None:
    if not text:
        return None
    try:
        return dt.datetime.fromisoformat(str(text).replace("Z", "+00:00")).timestamp()
    except ValueError:
        return None


def event_time(event: Mapping[str, Any]) -> float | None:
    """When an Event last happened: its last timestamp, its series' last observation, its event time,
    its first timestamp, else its creation."""
    series = event.get("series") or {}
    for value in (
        event.get("lastTimestamp"),
        series.get("lastObservedTime") if isinstance(series, Mapping) else None,
        event.get("eventTime"),
        event.get("firstTimestamp"),
        (event.get("metadata") or {}).get("creationTimestamp"),
    ):
        found = _time(value)
        if found is not None:
            return found
    return None


def _images(template: Mapping[str, Any]) -> tuple[str, ...]:
    return tuple(str(c.get("image")) for c in (template.get("spec") or {}).get("containers") or [])


def _owned_by(rs: Mapping[str, Any], workload: str) -> bool:
    refs = (rs.get("metadata") or {}).get("ownerReferences") or []
    return any(r.get("kind") == "Deployment" and r.get("name") == workload for r in refs)


def ago_text(seconds: float) -> str:
    seconds = max(0.0, seconds)
    if seconds < 90:
        return f"{seconds:.0f} seconds"
    if seconds < 90 * 60:
        return f"{seconds / 60:.0f} minutes"
    return f"{seconds / 3600:.1f} hours"


def history(
    deployment: Mapping[str, Any],
    replicasets: Iterable[Mapping[str, Any]],
    events: Iterable[Mapping[str, Any]],
    now: float,
) -> History:
    """The Deployment's history from its ReplicaSets, the rollout Events about it or them, and an
    annotation that dates its last deploy."""
    name = _name(deployment)
    mine = [rs for rs in replicasets if _owned_by(rs, name)]
    revisions = sorted(
        (
            Revision(
                int(((rs.get("metadata") or {}).get("annotations") or {}).get(REVISION, "0") or 0),
                _name(rs),
                _images((rs.get("spec") or {}).get("template") or {}),
            )
            for rs in mine
        ),
        key=lambda r: -r.number,
    )
    sets = {r.name for r in revisions}
    changes: list[Change] = []
    for ev in events:
        about = ev.get("involvedObject") or {}
        target, kind = str(about.get("name", "")), str(about.get("kind", ""))
        ours = (kind == "Deployment" and target == name) or (kind == "ReplicaSet" and target in sets)
        at = event_time(ev)
        if not ours or ev.get("reason") not in ROLLOUT_REASONS or at is None:
            continue
        changes.append(
            Change(at, f'event {ev.get("reason")} "{ev.get("message", "")}" {ago_text(now - at)} ago')
        )
    for key, value in ((deployment.get("metadata") or {}).get("annotations") or {}).items():
        found = _AGO.search(str(value)) if "deploy" in str(key).lower() else None
        if found:
            seconds = float(found[1]) * _UNITS[found[2].lower()]
            changes.append(Change(now - seconds, f"its annotation {key}={value}", recorded=False))
    return History(
        name,
        _images(((deployment.get("spec") or {}).get("template")) or {}),
        tuple(revisions),
        tuple(sorted(changes, key=lambda c: c.at)),
    )


def symptom_series(name: str) -> bool:
    return bool(SYMPTOM.search(name))


def onset(name: str, subject: str, points: Sequence[tuple[float, float]]) -> Onset | None:
    """How the series rose from its earlier level (its first point) towards its peak, when the peak is
    at least :data:`RISE_FACTOR` times that level: the last point before it was :data:`QUIET_SHARE` of
    the way up (it began to climb after it) and the first point half-way up. None when it did not rise so."""
    if len(points) < 2:
        return None
    base = points[0][1]
    peak = max(v for _, v in points)
    if peak <= base or (base > 0 and peak < base * RISE_FACTOR):
        return None
    quiet = base + QUIET_SHARE * (peak - base)
    moved = next(i for i, (_, v) in enumerate(points) if v > quiet)
    start = points[max(0, moved - 1)][0]
    half = next(t for t, v in points if v >= base + HALF_WAY * (peak - base))
    return Onset(name, subject, start, half, base, points[-1][1])


def preceding(changes: Sequence[Change], began: Onset, slack: float) -> Change | None:
    """The last change before the symptom was half-way up (``slack`` seconds later at most: how finely
    the times are known) and at most :data:`SUSPECT_WINDOW` before it began to climb; one an Event
    records before one an annotation claims."""
    fits = [c for c in changes if began.start - SUSPECT_WINDOW <= c.at <= began.half + slack]
    return max(fits, key=lambda c: (c.recorded, c.at), default=None)
