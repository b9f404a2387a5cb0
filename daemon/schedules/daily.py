"""``daily HH:MM`` and ``weekly DAY HH:MM``: a wall time each day or each week in the schedule's
zone, run as the cron expressions they are (DST as ``daemon.schedules.cron`` says)."""

from __future__ import annotations

import re
from zoneinfo import ZoneInfo

from daemon.schedules.base import lower_ascii, split_first
from daemon.schedules.cron import CronSchedule, cron_schedule

_TIME_OF_DAY = re.compile(r"([0-9]{1,2}):([0-9]{2})")
_DAYS = ("monday", "tuesday", "wednesday", "thursday", "friday", "saturday", "sunday")


def parse_daily(spec: str, tz: str, zone: ZoneInfo, rest: str) -> CronSchedule:
    hour, minute = _time_of_day(spec, rest)
    text = f"daily {hour:02d}:{minute:02d}"
    return cron_schedule(spec, tz, zone, f"{minute} {hour} * * *", text)


def parse_weekly(spec: str, tz: str, zone: ZoneInfo, rest: str) -> CronSchedule:
    day_name, time_text = split_first(rest)
    day_index = _day_index(spec, day_name)
    hour, minute = _time_of_day(spec, time_text)
    text = f"weekly {_DAYS[day_index][:3]} {hour:02d}:{minute:02d}"
    return cron_schedule(spec, tz, zone, f"{minute} {hour} * * {(day_index + 1) % 7}", text)


def _time_of_day(spec: str, text: str) -> tuple[int, int]:
    match = _TIME_OF_DAY.fullmatch(text)
    if match is None or int(match[1]) > 23 or int(match[2]) > 59:
        raise ValueError(f"invalid schedule {spec!r}: time of day must be HH:MM (00:00-23:59)")
    return int(match[1]), int(match[2])


def _day_index(spec: str, name: str) -> int:
    """Monday is 0. Accepts ``mon`` .. ``sun`` and full English names, ASCII any case."""
    lowered = lower_ascii(name)
    for index, day in enumerate(_DAYS):
        if lowered in (day, day[:3]):
            return index
    raise ValueError(f"invalid schedule {spec!r}: day must be one of mon, tue, ..., sun")
