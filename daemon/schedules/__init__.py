"""Schedules in their one text form (the README's **Schedules**), evaluated in an IANA zone.

Pure: no clock of its own, no asyncio, nothing of the rest of the daemon. Its names load on
first use (PEP 562), so that a cold ``trigger --timeout 5s`` does not pay for cronsim and the
zone database.
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


if not TYPE_CHECKING:  # type checkers see the imports above, and an unknown name stays an error

    def __getattr__(name: str) -> object:
        home = _HOMES.get(name)
        if home is None:
            raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
        import importlib

        value = getattr(importlib.import_module(f"{__name__}.{home}"), name)
        globals()[name] = value  # once loaded, an ordinary attribute
        return value
