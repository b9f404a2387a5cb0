"""``every DUR``: a fixed elapsed time between runs, whatever the clock on the wall says."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime, timedelta

from daemon.schedules.base import Schedule, as_utc
from daemon.schedules.duration import DurationError, format_duration, parse_duration
from daemon.schedules.occurrences import Span, Walk, grid_between, step_grid


def every_text(interval_s: float) -> str:
    """The one text form of a fixed interval (the README, **Schedules**): ``every 1h30m``."""
    return f"every {format_duration(interval_s)}"


@dataclass(frozen=True)
class EverySchedule(Schedule):
    """Fixed elapsed time: the next run is ``interval_s`` seconds after ``t``."""

    interval_s: float

    def next_after(self, t: datetime) -> datetime | None:
        try:
            return as_utc(t) + timedelta(seconds=self.interval_s)
        except OverflowError:
            return None

    def describe(self) -> str:
        return every_text(self.interval_s)

    def walk_through(self, first: datetime, until: datetime, /) -> Walk:
        """The walk from ``first`` through ``until``, by arithmetic (``occurrences.Stepped``)."""
        return step_grid(timedelta(seconds=self.interval_s), first, until)

    def grid_between(self, anchor_s: float, after_s: float, until_s: float, /) -> Span:
        """The slots of the grid from ``anchor_s`` in a stretch, by arithmetic."""
        return grid_between(anchor_s, self.interval_s, after_s, until_s)


def every_schedule(interval_s: float) -> EverySchedule:
    """The schedule of an interval ticker: its ticks are ``every``'s steps, in UTC."""
    text = every_text(interval_s)
    return EverySchedule(text, "UTC", text, interval_s)


def parse_every(spec: str, tz: str, duration_text: str) -> EverySchedule:
    try:
        interval_s = parse_duration(duration_text)
    except DurationError as err:
        raise ValueError(f"invalid schedule {spec!r}: {err}") from None
    if timedelta(seconds=interval_s) < timedelta(microseconds=1):
        raise ValueError(
            f"invalid schedule {spec!r}: 'every' needs a positive duration (at least 1us)"
        )
    return EverySchedule(spec, tz, every_text(interval_s), interval_s)
