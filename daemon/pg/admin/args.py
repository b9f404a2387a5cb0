"""The arguments of ``runbroker jobs`` and ``runbroker migrate``: parsers and input checks.

Everything here only reads the command line: a value it refuses raises ``UsageError`` (exit
2, nothing written) before the database is asked anything.
"""

from __future__ import annotations

import argparse
import json
from typing import Any

from daemon.pg.store.base import Dependency
from daemon.schedules import EverySchedule, Schedule
from daemon.schedules.interval import MIN_INTERVAL_S, format_duration

MAX_PAYLOAD_DEPTH = 100  # arrays and objects nested in a payload
MAX_ATTEMPTS = 1000  # as RUNBROKER_RETRY_ATTEMPTS
MAX_HISTORY = 100_000


ADD_HELP = """\
Times are wall-clock times in --tz (across DST as cron does: a time in the spring gap runs
right after it, one in the autumn overlap runs once). The next run is computed from the
previous scheduled time. --cron also takes @every DUR; --schedule takes any form of a tasks
file's schedule, a cron line or macro as it is included ('*/5 * * * *', '@every 5m', '@daily').

examples:
  runbroker jobs add nightly-report --task report --daily 02:30 --tz Europe/Berlin
  runbroker jobs add sync --task sync --every 5m --payload '{"full": false}' --max-attempts 5
  runbroker jobs add weekly --task cleanup --weekly sun 04:00 --depends-on sync:skip
  runbroker jobs add quarter --task report --cron '0 6 1 */3 *'
  runbroker jobs add tidy --task cleanup --schedule '*/5 * * * *'
  runbroker jobs add once --task migrate-data --at now
  runbroker jobs add later --task migrate-data --at 2027-01-01T08:00:00+01:00
"""


PAUSE_HELP = """\
Runner-wide: writes scheduler.paused in the table runbroker_settings, which every replica reads
at once (NOTIFY). While paused no replica claims a job; a run in progress finishes and records
its result (a retry it needs waits for the resume). Occurrences that fell due meanwhile are
misfires, as each job's --misfire says: coalesce runs the latest once, skip runs none of them
(one merely late, within a lease, still runs). Idempotent: pausing a paused runner changes
nothing. `jobs list` and `status` say when it is paused. To pause one job: `runbroker jobs
disable NAME` (and `enable NAME`).
"""


class UsageError(Exception):
    """Bad input: exit 2, nothing written."""


def jobs_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="runbroker jobs", description="Scheduled jobs.")
    subs = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")

    def sub(name: str, help_text: str) -> argparse.ArgumentParser:
        p = subs.add_parser(name, help=help_text, description=help_text)
        p.add_argument("--json", action="store_true", help="print JSON")
        return p

    add = sub("add", "add a scheduled job")
    add.epilog = ADD_HELP
    add.formatter_class = argparse.RawDescriptionHelpFormatter
    add.add_argument("name", help="the job's unique name (no spaces)")
    add.add_argument("--task", required=True, help="the task the job runs (the container's)")
    when = add.add_argument_group("schedule (exactly one)")
    once = when.add_mutually_exclusive_group(required=True)
    once.add_argument("--every", metavar="DUR", help="fixed elapsed time: 90s, 5m, 1h30m")
    once.add_argument("--daily", metavar="HH:MM", help="every day at HH:MM in --tz")
    once.add_argument(
        "--weekly", nargs=2, metavar=("DAY", "HH:MM"), help="DAY mon..sun at HH:MM in --tz"
    )
    once.add_argument(
        "--cron", metavar="EXPR", help="five fields, or @hourly @daily @weekly @monthly @yearly"
    )
    once.add_argument("--at", metavar="TIME|now", help="one-shot: RFC 3339 time, or now")
    once.add_argument(
        "--schedule", metavar="SPEC", help="any schedule: '*/5 * * * *', '@daily', 'daily 02:30'"
    )
    add.add_argument("--tz", default="UTC", metavar="ZONE", help="IANA zone (default UTC)")
    add.add_argument("--payload", metavar="JSON", help="JSON given to the run")
    add.add_argument(
        "--depends-on",
        action="append",
        default=[],
        metavar="NAME[:skip]",
        dest="depends_on",
        help="wait for that job's latest run; fail if it failed (:skip: run anyway)",
    )
    add.add_argument(
        "--max-attempts",
        type=int,
        metavar="N",
        dest="max_attempts",
        help="attempts in all (default RUNBROKER_RETRY_ATTEMPTS)",
    )
    add.add_argument(
        "--misfire",
        choices=("coalesce", "skip"),
        default="coalesce",
        help="occurrences missed while no daemon ran: run once (default) or not at all",
    )
    add.add_argument("--disabled", action="store_true", help="add it disabled")

    sub("list", "list jobs with their next run and last status")
    for name, text in (
        ("remove", "remove a job and its run history"),
        ("enable", "enable a job"),
        ("disable", "disable a job (a run in progress finishes)"),
        ("run-now", "run a job now (wakes every daemon)"),
    ):
        sub(name, text).add_argument("name")
    history = sub("history", "recent runs, newest first")
    history.add_argument("name", nargs="?")
    history.add_argument("--limit", type=int, default=20, metavar="N")
    for name, text in (
        ("pause", "stop every replica claiming jobs (a run in progress finishes)"),
        ("resume", "let every replica claim due jobs again"),
    ):
        switch = sub(name, text)
        switch.epilog = PAUSE_HELP
        switch.formatter_class = argparse.RawDescriptionHelpFormatter
        # A name is refused with a pointer to `disable`, not argparse's "unrecognized argument".
        switch.add_argument("name", nargs="?", help=argparse.SUPPRESS)
    return parser


def check_runner_wide(args: argparse.Namespace) -> None:
    """``jobs pause`` and ``jobs resume`` act on the whole runner; one job has ``disable``."""
    if args.name is not None:
        verb = "disable" if args.command == "pause" else "enable"
        raise UsageError(
            f"{args.command} takes no job name: it {args.command}s every replica's claims; "
            f"for one job use `runbroker jobs {verb} {args.name}`"
        )


def schedule_spec(args: argparse.Namespace) -> str:
    if args.every is not None:
        return f"every {args.every}"
    if args.daily is not None:
        return f"daily {args.daily}"
    if args.weekly is not None:
        return f"weekly {args.weekly[0]} {args.weekly[1]}"
    if args.cron is not None:
        return f"cron {args.cron}"
    if args.schedule is not None:
        return str(args.schedule)
    return f"at {args.at}"


def checked_add(args: argparse.Namespace) -> str:
    """``jobs add``'s name, task and attempts, checked. Returns the name as it is stored."""
    name: str = args.name.strip()
    if not name or any(c.isspace() for c in name) or len(name) > 200:
        raise UsageError(f"bad job name {args.name!r}: 1-200 characters, no spaces")
    if not args.task.strip():
        raise UsageError("--task must not be empty")
    if args.max_attempts is not None and not 1 <= args.max_attempts <= MAX_ATTEMPTS:
        raise UsageError(f"--max-attempts must be from 1 to {MAX_ATTEMPTS}")
    return name


def check_interval_floor(schedule: Schedule) -> None:
    """An ``every`` (or ``@every``) faster than the interval settings' floor is refused: such a
    job would only keep a replica busy claiming and recording runs."""
    if isinstance(schedule, EverySchedule) and schedule.interval_s < MIN_INTERVAL_S:
        raise UsageError(
            f"schedule {schedule.spec!r}: the interval must be at least "
            f"{format_duration(MIN_INTERVAL_S)}"
        )


def check_history(args: argparse.Namespace) -> None:
    if not 1 <= args.limit <= MAX_HISTORY:
        raise UsageError(f"--limit must be from 1 to {MAX_HISTORY}")


def _no_constant(name: str) -> Any:
    raise ValueError(f"{name} is not a JSON number")


def _payload_problem(value: Any) -> str | None:
    """What PostgreSQL's jsonb or the runner would refuse in a decoded payload, or None."""
    stack: list[tuple[Any, int]] = [(value, 1)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, str):
            if "\x00" in item:
                return "a string holds \\u0000, which PostgreSQL's jsonb cannot store"
        elif isinstance(item, float):
            if item != item or item in (float("inf"), float("-inf")):
                return f"the number {item} is out of range"
        elif isinstance(item, list | dict):
            if depth > MAX_PAYLOAD_DEPTH:
                return f"arrays and objects are nested deeper than {MAX_PAYLOAD_DEPTH} levels"
            if isinstance(item, dict):
                stack.extend((key, depth) for key in item)
                stack.extend((child, depth + 1) for child in item.values())
            else:
                stack.extend((child, depth + 1) for child in item)
    return None


def parse_payload(text: str | None) -> Any:
    """``--payload``: a JSON text PostgreSQL's jsonb and the runner both take, or ``{}``."""
    if text is None:
        return {}
    problem: str | None
    try:
        value = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        problem = f"arrays and objects are nested deeper than {MAX_PAYLOAD_DEPTH} levels"
    except ValueError as err:  # JSONDecodeError, NaN/Infinity, an integer of 4,300+ digits
        problem = f"not valid JSON: {str(err)[:200]}"
    else:
        problem = _payload_problem(value)
    if problem is not None:
        raise UsageError(f"--payload: {problem}")
    return value


def parse_dependency(text: str, own_name: str) -> Dependency:
    """One ``--depends-on NAME[:skip]``."""
    name, sep, policy = text.rpartition(":")
    if not sep:
        name, policy = text, "stop"
    if policy not in ("stop", "skip") or not name:
        raise UsageError(f"--depends-on {text!r}: expected NAME or NAME:skip")
    if name == own_name:
        raise UsageError(f"--depends-on {text!r}: a job cannot depend on itself")
    return Dependency(name, "skip" if policy == "skip" else "stop")


def migrate_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="runbroker migrate",
        description="Create or update the runbroker tables (safe to run from several replicas).",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    return parser
