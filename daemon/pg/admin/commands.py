"""``runbroker jobs ...`` and ``runbroker migrate``: scheduled jobs in PostgreSQL.

Exit codes: 0 done; 1 it could not be done (no such job, job busy, database unreachable or
not migrated); 2 usage error or bad input (schedule, zone, payload, a dependency on a job that
does not exist, a number out of range), in which case nothing is written. Every subcommand
takes ``--json``; without it the output is for people.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from daemon.pg.admin.view import (
    job_dict,
    jobs_table,
    local_time,
    run_dict,
    runs_table,
    schedule_text,
)
from daemon.pg.migrate import as_tuples, load_migrations
from daemon.pg.plan import plan_first_run, rfc3339_utc
from daemon.pg.store.admin_records import JobError, JobInvalid, NewJob
from daemon.pg.store.base import Dependency, StoreSchemaMissing, StoreUnavailable
from daemon.pg.store.postgres import PostgresStore
from daemon.schedules import parse_schedule
from daemon.settings import SettingsError, load_settings

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
MAX_PAYLOAD_DEPTH = 100  # arrays and objects nested in a payload
MAX_ATTEMPTS = 1000  # as RUNBROKER_RETRY_ATTEMPTS
MAX_HISTORY = 100_000
# A command an operator waits for: room for the resolver's retries (glibc asks again after 5 s,
# so one lost DNS packet would otherwise fail the command) and a busy server's accept.
CONNECT_TIMEOUT_S = 15.0


ADD_HELP = """\
Times are wall-clock times in --tz (across DST as cron does: a time in the spring gap runs
right after it, one in the autumn overlap runs once). The next run is computed from the
previous scheduled time. --cron also takes @every DUR.

examples:
  runbroker jobs add nightly-report --task report --daily 02:30 --tz Europe/Berlin
  runbroker jobs add sync --task sync --every 5m --payload '{"full": false}' --max-attempts 5
  runbroker jobs add weekly --task cleanup --weekly sun 04:00 --depends-on sync:skip
  runbroker jobs add quarter --task report --cron '0 6 1 */3 *'
  runbroker jobs add once --task migrate-data --at now
  runbroker jobs add later --task migrate-data --at 2027-01-01T08:00:00+01:00
"""


class UsageError(Exception):
    """Bad input: exit 2, nothing written."""


def _parser() -> argparse.ArgumentParser:
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
    return parser


def _schedule_spec(args: argparse.Namespace) -> str:
    if args.every is not None:
        return f"every {args.every}"
    if args.daily is not None:
        return f"daily {args.daily}"
    if args.weekly is not None:
        return f"weekly {args.weekly[0]} {args.weekly[1]}"
    if args.cron is not None:
        return f"cron {args.cron}"
    return f"at {args.at}"


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


def _payload(text: str | None) -> Any:
    if text is None:
        return {}
    problem: str | None
    try:
        payload = json.loads(text, parse_constant=_no_constant)
    except RecursionError:
        problem = f"arrays and objects are nested deeper than {MAX_PAYLOAD_DEPTH} levels"
    except ValueError as err:  # JSONDecodeError, NaN/Infinity, an integer of 4,300+ digits
        problem = f"not valid JSON: {str(err)[:200]}"
    else:
        problem = _payload_problem(payload)
    if problem is not None:
        raise UsageError(f"--payload: {problem}")
    return payload


def _dependency(text: str, own_name: str) -> Dependency:
    name, sep, policy = text.rpartition(":")
    if not sep:
        name, policy = text, "stop"
    if policy not in ("stop", "skip") or not name:
        raise UsageError(f"--depends-on {text!r}: expected NAME or NAME:skip")
    if name == own_name:
        raise UsageError(f"--depends-on {text!r}: a job cannot depend on itself")
    return Dependency(name, "skip" if policy == "skip" else "stop")


async def _add(store: PostgresStore, args: argparse.Namespace) -> dict[str, Any]:
    name = args.name.strip()
    if not name or any(c.isspace() for c in name) or len(name) > 200:
        raise UsageError(f"bad job name {args.name!r}: 1-200 characters, no spaces")
    if not args.task.strip():
        raise UsageError("--task must not be empty")
    if args.max_attempts is not None and not 1 <= args.max_attempts <= MAX_ATTEMPTS:
        raise UsageError(f"--max-attempts must be from 1 to {MAX_ATTEMPTS}")
    payload = _payload(args.payload)
    deps = tuple(_dependency(d, name) for d in args.depends_on)
    spec = _schedule_spec(args)
    now = None
    starts_now = args.at is not None and args.at.strip().lower() == "now"
    if starts_now:
        now = await store.db_now()
        spec = f"at {rfc3339_utc(now)}"
    try:
        schedule = parse_schedule(spec, args.tz)
    except ValueError as err:
        raise UsageError(str(err)) from None
    if now is None:
        now = await store.db_now()
    first, following = plan_first_run(schedule, now, starts_now=starts_now)
    if first is None and not starts_now:
        raise UsageError(f"schedule {spec!r} has no occurrence after now")
    job = NewJob(
        name=name,
        task=args.task.strip(),
        schedule=schedule.text,
        tz=args.tz,
        next_run_at=first,
        following_run_at=following,
        payload=payload,
        enabled=not args.disabled,
        max_attempts=args.max_attempts,
        misfire=args.misfire,
        depends_on=deps,
    )
    info = await store.add_job(job)
    if not args.json:
        when = "-" if first is None else f"{local_time(first, info.tz)} ({_when(first)})"
        print(f"added job {info.name}: {schedule_text(info)}, next run {when}")
    return job_dict(info)


def _when(t: Any) -> str:
    return rfc3339_utc(t) if t is not None else "-"


async def _command(store: PostgresStore, args: argparse.Namespace) -> dict[str, Any]:
    command = args.command
    if command == "add":
        return await _add(store, args)
    if command == "list":
        jobs = await store.list_jobs()
        if not args.json:
            print(jobs_table(jobs))
        return {"jobs": [job_dict(j) for j in jobs]}
    if command == "history":
        if not 1 <= args.limit <= MAX_HISTORY:
            raise UsageError(f"--limit must be from 1 to {MAX_HISTORY}")
        runs = await store.history(args.name, args.limit)
        if not args.json:
            print(runs_table(runs))
        return {"runs": [run_dict(r) for r in runs]}
    if command == "remove":
        await store.remove_job(args.name)
        if not args.json:
            print(f"removed job {args.name}")
        return {"ok": True, "removed": args.name}
    if command in ("enable", "disable"):
        info = await store.set_enabled(args.name, command == "enable")
        if not args.json:
            print(f"{command}d job {info.name}")
        return job_dict(info)
    info = await store.run_now(args.name)  # run-now
    if not args.json:
        print(f"job {info.name} is due now")
    return job_dict(info)


def _run(
    argv: Sequence[str],
    parser: argparse.ArgumentParser,
    body: Callable[[PostgresStore, argparse.Namespace], Coroutine[Any, Any, dict[str, Any]]],
) -> int:
    try:
        args = parser.parse_args(list(argv))
    except SystemExit as exc:  # argparse: --help (0) or a usage error (2)
        return int(exc.code or 0) if isinstance(exc.code, int) else EXIT_USAGE
    prog = parser.prog
    try:
        settings = load_settings()
    except SettingsError as err:
        print(f"{prog}: {err}", file=sys.stderr)
        return EXIT_USAGE
    dsn = settings.database_dsn()
    if not dsn:
        print(f"{prog}: RUNBROKER_DATABASE_URL is not set", file=sys.stderr)
        return EXIT_USAGE

    async def go() -> dict[str, Any]:
        store = PostgresStore(dsn, max_size=1, connect_timeout_s=CONNECT_TIMEOUT_S)
        try:
            return await body(store, args)
        finally:
            await store.close()

    code, error = EXIT_OK, ""
    try:
        result = asyncio.run(go())
    except (UsageError, JobInvalid) as err:
        code, error = EXIT_USAGE, str(err)
    except JobError as err:
        code, error = EXIT_FAILED, str(err)
    except StoreUnavailable as err:
        code, error = EXIT_FAILED, f"database unreachable: {err}"
    except StoreSchemaMissing as err:
        code, error = EXIT_FAILED, str(err)
    if code != EXIT_OK:
        print(f"{prog}: {error}", file=sys.stderr)
        result = {"ok": False, "error": error}
    if args.json:
        print(json.dumps(result, indent=2))
    return code


def main(argv: Sequence[str]) -> int:
    """``runbroker jobs ARGS``."""
    return _run(argv, _parser(), _command)


def _migrate_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="runbroker migrate",
        description="Create or update the runbroker tables (safe to run from several replicas).",
    )
    parser.add_argument("--json", action="store_true", help="print JSON")
    return parser


async def _migrate(store: PostgresStore, args: argparse.Namespace) -> dict[str, Any]:
    migrations = load_migrations()
    applied = await store.migrate(as_tuples(migrations))
    if not args.json:
        if applied:
            print("applied " + ", ".join(applied))
        else:
            print(f"database is up to date (version {migrations[-1].version:04d})")
    return {"ok": True, "applied": applied, "version": migrations[-1].version}


def migrate_main(argv: Sequence[str]) -> int:
    """``runbroker migrate [--json]``."""
    return _run(argv, _migrate_parser(), _migrate)
