"""``parse_schedule``: read a spec's keyword and hand over to its form's module.

A spec without a keyword is taken in the forms supercronic, yacron and Ofelia read: five cron
fields or an ``@`` macro (``@every DUR`` included) are ``cron`` ones. No keyword is a number, a
``*`` or starts with ``@``, so neither form can be read two ways."""

from __future__ import annotations

import re
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from daemon.schedules.at import parse_at
from daemon.schedules.base import SPACE, Schedule, lower_ascii, split_first
from daemon.schedules.cron import parse_cron
from daemon.schedules.daily import parse_daily, parse_weekly
from daemon.schedules.duration import ASCII_SPACE
from daemon.schedules.every import parse_every

_USAGE = (
    "expected every DUR | daily HH:MM | weekly DAY HH:MM | cron EXPR | at RFC3339, or a cron "
    "expression (five fields, @daily, @every DUR ...) as it is"
)
_KEYWORDS = ("every", "daily", "weekly", "cron", "at")
_CRON_FIELDS = 5
_ZONE_KEY = re.compile(r"[A-Za-z0-9_+-]+(?:/[A-Za-z0-9_+-]+)*")


def parse_schedule(spec: str, tz: str = "UTC") -> Schedule:
    """Parse a schedule spec whose wall times are in the IANA zone ``tz``.

    Keywords, day names and macros are ASCII and case-insensitive. An ``at`` without an offset in
    a DST gap is the end of the gap, in an overlap the first pass. ``ValueError`` with a clear
    message."""
    if not isinstance(spec, str) or not isinstance(tz, str):
        raise TypeError("spec and tz must be str")
    zone = _load_zone(tz)
    stripped = spec.strip(ASCII_SPACE)
    keyword, rest = split_first(stripped)
    keyword = lower_ascii(keyword)
    if keyword not in _KEYWORDS and _is_bare_cron(stripped):
        return parse_cron(spec, tz, zone, stripped)
    if keyword not in _KEYWORDS:
        raise ValueError(f"invalid schedule {spec!r}: {_USAGE}")
    if not rest:
        raise ValueError(f"invalid schedule {spec!r}: {keyword!r} needs a value; {_USAGE}")
    if keyword == "every":
        return parse_every(spec, tz, rest)
    if keyword == "daily":
        return parse_daily(spec, tz, zone, rest)
    if keyword == "weekly":
        return parse_weekly(spec, tz, zone, rest)
    if keyword == "cron":
        return parse_cron(spec, tz, zone, rest)
    return parse_at(spec, tz, zone, rest)


def _is_bare_cron(text: str) -> bool:
    """Five fields or an ``@`` macro: a cron expression written without ``cron``."""
    return text.startswith("@") or len(SPACE.split(text)) == _CRON_FIELDS


def _load_zone(tz: str) -> ZoneInfo:
    if len(tz) <= 255 and _ZONE_KEY.fullmatch(tz):
        try:
            return ZoneInfo(tz)
        except (ZoneInfoNotFoundError, ValueError, OSError):
            pass
    raise ValueError(f"unknown time zone {tz!r}")
