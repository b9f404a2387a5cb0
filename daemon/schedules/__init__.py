"""Schedules in their one text form (the README's **Schedules**), evaluated in an IANA zone.

``every DUR`` | ``daily HH:MM`` | ``weekly DAY HH:MM`` | ``cron EXPR`` | ``at RFC3339``.
``next_after`` takes and returns aware UTC datetimes; ``planned_times`` lists the next ones, each
with what DST did to it (``planned``, ``dst``). Each form is a module of this package
(``every``, ``daily`` for daily and weekly, ``cron``, ``at``; how cron schedules cross DST
changes is said in ``cron``); ``parse_schedule`` (``parse``) reads the keyword and hands over.
Schedule math is pure: no clock of its own (the caller says when), no asyncio, nothing from the
rest of the daemon; the zone database is all it reads.

Importing the package loads none of them: the names below are loaded on first use (PEP 562).
A cold ``runbroker trigger --timeout 5s`` reads one duration (``daemon.schedules.duration``)
and must not pay for cronsim and the zone database on the way.
"""

TYPE_CHECKING = False  # typing itself costs a cold client several milliseconds
if TYPE_CHECKING:
    from daemon.schedules.at import AtSchedule
    from daemon.schedules.base import Schedule
    from daemon.schedules.cron import CronSchedule
    from daemon.schedules.dst import DstMark
    from daemon.schedules.every import EverySchedule
    from daemon.schedules.parse import parse_schedule
    from daemon.schedules.planned import PlannedTime, planned_times

__all__ = [
    "AtSchedule",
    "CronSchedule",
    "DstMark",
    "EverySchedule",
    "PlannedTime",
    "Schedule",
    "parse_schedule",
    "planned_times",
]

_HOMES = {
    "AtSchedule": "at",
    "CronSchedule": "cron",
    "DstMark": "dst",
    "EverySchedule": "every",
    "PlannedTime": "planned",
    "Schedule": "base",
    "parse_schedule": "parse",
    "planned_times": "planned",
}


if not TYPE_CHECKING:  # type checkers see the imports above; an unknown name stays an error

    def __getattr__(name: str) -> object:
        home = _HOMES.get(name)
        if home is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        import importlib

        value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
        globals()[name] = value  # once loaded, an ordinary attribute
        return value
