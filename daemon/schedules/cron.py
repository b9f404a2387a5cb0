"""``cron EXPR``: five cron fields or an ``@`` macro, in an IANA zone.

They follow Debian cron across offset changes: a fixed-time job runs a skipped wall time once
right after the jump (``cronsim``), a wildcard job follows the clock as it is (``wallclock``,
since cronsim misses wall times next to 30-minute and midnight changes).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

from cronsim import CronSim, CronSimError

from daemon.schedules.base import SPACE, Schedule, as_utc, lower_ascii, split_first
from daemon.schedules.dst import DstMark, fold_mark, gap_before, gap_mark, is_repeated
from daemon.schedules.every import EverySchedule, parse_every
from daemon.schedules.wallclock import next_wildcard

_CRON_FIELD = re.compile(r"[0-9A-Za-z*/,#-]+")
_CRON_MACROS = {
    "@hourly": "0 * * * *",
    "@daily": "0 0 * * *",
    "@midnight": "0 0 * * *",
    "@weekly": "0 0 * * 0",
    "@monthly": "0 0 1 * *",
    "@yearly": "0 0 1 1 *",
    "@annually": "0 0 1 1 *",
}
_PROBE_FROM = datetime(2001, 1, 1, tzinfo=UTC)
_SECOND = timedelta(seconds=1)
_MAX_CANDIDATES = 10_000  # far more than the minutes in any DST overlap


@dataclass(frozen=True)
class CronSchedule(Schedule):
    """A five-field cron expression (also daily and weekly) in the zone ``tz``."""

    expr: str
    zone: ZoneInfo

    def next_after(self, t: datetime) -> datetime | None:
        after = as_utc(t)
        if _is_wildcard(self.expr):
            return next_wildcard(self.expr, self.zone, after)
        try:
            candidates = CronSim(self.expr, after.astimezone(self.zone))
            for _ in range(_MAX_CANDIDATES):
                # cronsim walks fixed times in wall-clock time, so a start inside the
                # second pass of an overlap yields first-pass times that lie before t.
                candidate: datetime = next(candidates).astimezone(UTC)
                if candidate > after:
                    return candidate
        except (StopIteration, OverflowError):
            return None
        raise RuntimeError(f"no occurrence of {self.expr!r} after {after.isoformat()}")

    def dst_mark(self, planned: datetime) -> DstMark | None:
        """A wall time the fields name but the clock skipped (a fixed-time job runs it at the
        end of the gap), or one the clock shows twice (run once, or at both passes)."""
        local = as_utc(planned).astimezone(self.zone)
        wall = local.replace(tzinfo=None)
        if _matches(self.expr, wall):
            if is_repeated(wall, self.zone):
                return fold_mark(local, runs_both=_is_wildcard(self.expr))
            return None
        jump = gap_before(planned, self.zone)
        skipped = []
        for match in CronSim(self.expr, wall - jump - _SECOND):
            if match >= wall:
                break
            skipped.append(match)
        return gap_mark(local, jump, skipped)

    def describe(self) -> str:
        try:
            summary = str(CronSim(self.expr, _PROBE_FROM).explain())
        except Exception:  # the explanation is a nicety: never fail for it
            summary = f"cron {self.expr}"
        return f"{summary} ({self.tz})"


def _matches(expr: str, wall: datetime) -> bool:
    """The naive ``wall`` is a time the five fields name."""
    return bool(next(CronSim(expr, wall - _SECOND)) == wall)


def _is_wildcard(expr: str) -> bool:
    """Debian cron's wildcard job: its minute or hour field starts with ``*``."""
    minute, hour = expr.split(maxsplit=2)[:2]
    return minute.startswith("*") or hour.startswith("*")


def parse_cron(spec: str, tz: str, zone: ZoneInfo, expr: str) -> CronSchedule | EverySchedule:
    """What follows ``cron``: five fields, a macro, or ``@every DUR`` (an interval)."""
    if expr.startswith("@"):
        macro, rest = split_first(expr)
        macro = lower_ascii(macro)
        if macro == "@every" and rest:
            return parse_every(spec, tz, rest)
        if macro in _CRON_MACROS and not rest:
            return cron_schedule(spec, tz, zone, _CRON_MACROS[macro], f"cron {macro}")
        raise ValueError(
            f"invalid cron expression {expr!r}: expected five fields or one of "
            "@hourly, @daily, @weekly, @monthly, @yearly, @every DUR"
        )
    fields = SPACE.split(expr)
    if len(fields) != 5:
        raise ValueError(
            f"invalid cron expression {expr!r}: expected five fields "
            f"(minute hour day-of-month month day-of-week), got {len(fields)}"
        )
    if not all(_CRON_FIELD.fullmatch(field) for field in fields):
        raise ValueError(f"invalid cron expression {expr!r}: unexpected character")
    canonical = " ".join(fields)
    return cron_schedule(spec, tz, zone, canonical, f"cron {canonical}")


def cron_schedule(spec: str, tz: str, zone: ZoneInfo, expr: str, text: str) -> CronSchedule:
    """The schedule of a five-field ``expr``, once cronsim accepts it and it can ever match."""
    try:
        next(CronSim(expr, _PROBE_FROM.astimezone(zone)))
    except CronSimError as err:
        raise ValueError(f"invalid cron expression {expr!r}: {str(err).lower()}") from None
    except StopIteration:
        raise ValueError(f"invalid cron expression {expr!r}: it never matches") from None
    return CronSchedule(spec, tz, text, expr, zone)
