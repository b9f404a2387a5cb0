"""``runbroker jobs ...`` and ``runbroker migrate``: scheduled jobs in PostgreSQL.

Exit 1 when it could not be done (no such job, job busy, database away), 2 for a usage error
or bad input, which writes nothing.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import sys
from collections.abc import Callable, Coroutine, Sequence
from typing import Any

from daemon.exits import EXIT_FAILED, EXIT_OK, EXIT_USAGE
from daemon.pg.admin.args import (
    UsageError,
    check_history,
    check_interval_floor,
    check_runner_wide,
    checked_add,
    jobs_parser,
    migrate_parser,
    parse_dependency,
    parse_payload,
    schedule_spec,
)
from daemon.pg.admin.times import local_time
from daemon.pg.admin.view import (
    DISABLED_LINE,
    job_dict,
    jobs_table,
    pause_text,
    run_dict,
    runs_table,
    schedule_text,
    scheduler_dict,
    scheduler_lines,
)
from daemon.pg.plan import plan_first_run, rfc3339_utc
from daemon.pg.store.admin_records import JobError, JobExists, JobInvalid, NewJob
from daemon.pg.store.base import StoreSchemaMissing, StoreUnavailable
from daemon.pg.store.migrate import as_tuples, load_migrations
from daemon.pg.store.postgres import PostgresStore
from daemon.schedules import parse_schedule
from daemon.settings import SettingsError, load_settings

# A command an operator waits for: room for the resolver's retries (glibc asks again after 5 s,
# so one lost DNS packet would otherwise fail the command) and a busy server's accept.
CONNECT_TIMEOUT_S = 15.0
PROG = "runbroker jobs"


async def _add(store: PostgresStore, args: argparse.Namespace) -> dict[str, Any]:
    name = checked_add(args)
    payload = parse_payload(args.payload)
    deps = tuple(parse_dependency(d, name) for d in args.depends_on)
    spec = schedule_spec(args)
    now = None
    starts_now = args.at is not None and args.at.strip().lower() == "now"
    if starts_now:
        now = await store.admin.db_now()
        spec = f"at {rfc3339_utc(now)}"
    try:
        schedule = parse_schedule(spec, args.tz)
    except ValueError as err:
        raise UsageError(str(err)) from None
    check_interval_floor(schedule)
    if now is None:
        now = await store.admin.db_now()
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
    info = await store.admin.add_job(job)
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
        jobs = await store.admin.list_jobs()
        flags = await store.scheduler_flags()
        if not args.json:
            print("\n".join([jobs_table(jobs), *scheduler_lines(flags)]))
        return {"jobs": [job_dict(j) for j in jobs], "scheduler": scheduler_dict(flags)}
    if command in ("pause", "resume"):
        return await _pause(store, args)
    if command == "history":
        check_history(args)
        runs = await store.admin.history(args.name, args.limit)
        if not args.json:
            print(runs_table(runs))
        return {"runs": [run_dict(r) for r in runs]}
    if command == "remove":
        await store.admin.remove_job(args.name)
        if not args.json:
            print(f"removed job {args.name}")
        return {"ok": True, "removed": args.name}
    if command in ("enable", "disable"):
        info = await store.admin.set_enabled(args.name, command == "enable")
        if not args.json:
            print(f"{command}d job {info.name}")
        return job_dict(info)
    info = await store.admin.run_now(args.name)  # run-now
    if not args.json:
        print(f"job {info.name} is due now")
    return job_dict(info)


async def _pause(store: PostgresStore, args: argparse.Namespace) -> dict[str, Any]:
    """``jobs pause`` and ``jobs resume``: ``scheduler.paused`` written, idempotently."""
    check_runner_wide(args)
    paused = args.command == "pause"
    changed = await store.admin.set_paused(paused)
    flags = await store.scheduler_flags()
    if not args.json:
        print(pause_text(paused, changed))
        if not flags.enabled:  # the other switch still stops every claim: say so
            print(f"{PROG}: warning: {DISABLED_LINE}", file=sys.stderr)
    return {"ok": True, "changed": changed, "scheduler": scheduler_dict(flags)}


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
    except (UsageError, JobInvalid, JobExists) as err:  # every refusal of the input: 2
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
    return _run(argv, jobs_parser(), _command)


async def _migrate(store: PostgresStore, args: argparse.Namespace) -> dict[str, Any]:
    migrations = load_migrations()
    applied = await store.migrator.migrate(as_tuples(migrations))
    if not args.json:
        if applied:
            print("applied " + ", ".join(applied))
        else:
            print(f"database is up to date (version {migrations[-1].version:04d})")
    return {"ok": True, "applied": applied, "version": migrations[-1].version}


def migrate_main(argv: Sequence[str]) -> int:
    """``runbroker migrate [--json]``."""
    return _run(argv, migrate_parser(), _migrate)
