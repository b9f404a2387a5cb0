"""``jobs list`` and ``jobs history``, every column, against real rows in every state: made by
``jobs add``, the runner's own claim, start and finish statements, and rows written by hand
with times out of Python's range. Human tables and ``--json`` alike."""

from __future__ import annotations

import asyncio
import json
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import asyncpg
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.pg.admin.commands import main
from daemon.pg.admin.view import job_dict, jobs_table, run_dict, runs_table
from daemon.pg.plan import plan_claim, plan_finish
from daemon.pg.store.base import Claimed, ClaimPlan, DueJob, Started, WriteBatch
from daemon.pg.store.postgres import PostgresStore
from tests.integration.conftest import printed
from tests.integration.jobrows import add, success

T = datetime(2026, 7, 1, 10, 0, tzinfo=UTC)  # every due row's occurrence, the latest passed
YEARLY = "cron 0 10 1 7 *"  # its next is 2027-07-01T10:00:00Z: nothing missed, nothing coalesced


def cells(out: str) -> dict[str, dict[str, str]]:
    """A table printed by ``jobs list`` or ``jobs history`` as {first cell: {header: cell}}:
    cells are apart by two spaces or more, and hold no two spaces in a row themselves (the
    last, when empty, is left off by the table's trimmed lines)."""
    header, *rows = out.rstrip("\n").splitlines()
    names = re.split(r"\s{2,}", header)
    table = {}
    for line in rows:
        values = re.split(r"\s{2,}", line)
        values += [""] * (len(names) - len(values))
        table[values[0]] = dict(zip(names, values, strict=True))
    return table


def as_is(job: DueJob, now: datetime) -> ClaimPlan:
    """The runner's planner."""
    return plan_claim(job, now, default_max_attempts=3, misfire_grace_s=60.0)


def failure(c: Claimed, at: datetime) -> Any:
    return plan_finish(
        c,
        ok=False,
        cancelled=False,
        error="exit status 3",
        output=None,
        started_at=at,
        finished_at=at + timedelta(seconds=2),
        default_max_attempts=3,
        backoff_base_s=60.0,
    )


async def made_by_the_runner(store: PostgresStore) -> None:
    """Jobs in every state the runner leaves them in, through its own statements."""
    names = ("running", "queued", "succeeded", "failed", "retrying", "one-shot")
    for name in names:
        kw: dict[str, Any] = {"next_run_at": T, "schedule": YEARLY}
        if name == "failed":
            kw["max_attempts"] = 1
        if name == "one-shot":
            kw["schedule"] = "at 2026-07-01T10:00:00Z"
        await add(store, name, **kw)
    claimed = {
        c.job.name: c for c in await store.claim("r1", 10, 3600.0, as_is, misfire_grace_s=60.0)
    }
    assert set(claimed) == set(names)
    started = T + timedelta(seconds=1)
    finished = T + timedelta(seconds=3)
    await store.write(
        "r1",
        WriteBatch(
            starts=[Started(claimed["running"].run_id, started)],
            finishes=[
                success(claimed["succeeded"], started, finished_at=finished),
                success(claimed["one-shot"], started, finished_at=finished),
                failure(claimed["failed"], started),
                failure(claimed["retrying"], started),
            ],
        ),
    )


async def written_by_hand(store: PostgresStore, sql: asyncpg.Connection) -> None:
    """Rows out of the range of Python's datetime, and near its ends in a zone, as a person
    could write them."""
    await add(store, "far-tokyo", tz="Asia/Tokyo", next_run_at=T)
    await add(store, "infinite", next_run_at=T)
    await add(store, "bc-ny", tz="America/New_York", next_run_at=T, enabled=False)
    await add(store, "retry-ends", next_run_at=T)
    await sql.execute(
        """
        UPDATE scheduled_jobs SET next_run_at = '9999-12-31 20:00:00+00',
            last_run_at = '0001-01-01 02:00:00+00', last_status = 'succeeded'
        WHERE name = 'far-tokyo';
        UPDATE scheduled_jobs SET next_run_at = 'infinity', last_run_at = '-infinity'
        WHERE name = 'infinite';
        UPDATE scheduled_jobs SET next_run_at = '4713-01-01 00:00:00+00 BC',
            last_run_at = '0001-01-01 02:00:00+00' WHERE name = 'bc-ny';
        UPDATE scheduled_jobs SET next_run_at = '20000-01-01 00:00:00+00',
            scheduled_for = '-infinity', attempt = 2, last_status = 'failed'
        WHERE name = 'retry-ends';
        INSERT INTO job_runs (job_id, scheduled_for, attempt, status, claimed_at, started_at,
                              finished_at, error)
        SELECT id, '-infinity', 1, 'failed', 'infinity', '-infinity', '2026-07-01 10:00:05+00',
               'by hand' FROM scheduled_jobs WHERE name = 'far-tokyo';
        INSERT INTO job_runs (job_id, scheduled_for, attempt, status, claimed_at, started_at,
                              finished_at, error, occurrences)
        SELECT id, '2026-07-01 07:00:00+00', 0, 'coalesced', '2026-07-01 10:00:00+00', NULL,
               '2026-07-01 10:00:00+00', '3 occurrences run once', 3
        FROM scheduled_jobs WHERE name = 'infinite';
        """
    )


async def test_jobs_list_shows_every_state_as_it_is(
    cli_env: str, store: PostgresStore, sql: asyncpg.Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    assert await asyncio.to_thread(main, ["add", "new", "--task", "t", "--every", "1m"]) == 0
    await made_by_the_runner(store)
    await written_by_hand(store, sql)
    retry_at = await sql.fetchval("SELECT next_run_at FROM scheduled_jobs WHERE name = 'retrying'")
    new_at = await sql.fetchval("SELECT next_run_at FROM scheduled_jobs WHERE name = 'new'")
    table = cells(await printed(capsys, "list"))
    shown = {name: (r["STATE"], r["NEXT RUN"], r["LAST STATUS"]) for name, r in table.items()}
    utc = "%Y-%m-%d %H:%M:%SZ"
    assert shown == {
        "new": ("scheduled", new_at.strftime(utc), "-"),
        "running": ("running", "2026-07-01 10:00:00Z", "-"),  # the occurrence in flight
        "queued": ("running", "2026-07-01 10:00:00Z", "-"),
        "succeeded": ("scheduled", "2027-07-01 10:00:00Z", "succeeded"),
        "failed": ("scheduled", "2027-07-01 10:00:00Z", "failed"),
        "retrying": ("retrying", retry_at.strftime(utc), "failed (attempt 1)"),
        "one-shot": ("done", "-", "succeeded"),
        "far-tokyo": ("scheduled", "9999-12-31 20:00:00Z", "succeeded"),  # Tokyo's is past 9999
        "infinite": ("scheduled", "infinity", "-"),
        "bc-ny": ("disabled", "-infinity", "-"),
        "retry-ends": ("retrying", "infinity", "failed (attempt 2)"),
    }
    assert (table["new"]["TASK"], table["new"]["SCHEDULE"]) == ("t", "every 1m (UTC)")
    assert table["far-tokyo"]["SCHEDULE"] == "every 1h (Asia/Tokyo)"
    assert table["one-shot"]["SCHEDULE"] == "at 2026-07-01T10:00:00Z (UTC)"

    listed = json.loads(await printed(capsys, "list", "--json"))
    assert listed["scheduler"] == {"paused": False, "enabled": True, "claiming": True}
    jobs = {j["name"]: j for j in listed["jobs"]}
    new = jobs["new"]
    assert new == {
        "name": "new",
        "task": "t",
        "schedule": "every 1m",
        "tz": "UTC",
        "enabled": True,
        "state": "scheduled",
        "next_run_at": new["next_run_at"],
        "scheduled_for": None,
        "attempt": 0,
        "max_attempts": None,
        "misfire": "coalesce",
        "depends_on": [],
        "lease_owner": None,
        "last_run_at": None,
        "last_status": None,
        "last_error": None,
    }
    assert new["next_run_at"].startswith(new_at.strftime("%Y-%m-%dT%H:%M:%S"))

    def picked(name: str, *keys: str) -> tuple[Any, ...]:
        return tuple(jobs[name][k] for k in keys)

    keys = ("state", "next_run_at", "scheduled_for", "attempt", "lease_owner", "last_run_at")
    assert picked("running", *keys) == (
        "running", "2026-07-01T10:00:00Z", "2026-07-01T10:00:00Z", 1, "r1", None,
    )  # fmt: skip
    assert picked("succeeded", *keys, "last_status", "last_error") == (
        "scheduled", "2027-07-01T10:00:00Z", None, 0, None, "2026-07-01T10:00:03Z",
        "succeeded", None,
    )  # fmt: skip
    assert picked("failed", *keys, "last_status", "last_error", "max_attempts") == (
        "scheduled", "2027-07-01T10:00:00Z", None, 0, None, "2026-07-01T10:00:03Z",
        "failed", "exit status 3", 1,
    )  # fmt: skip
    assert picked("retrying", "state", "scheduled_for", "attempt", "last_status") == (
        "retrying", "2026-07-01T10:00:00Z", 1, "failed",
    )  # fmt: skip
    assert picked("one-shot", "state", "next_run_at", "scheduled_for", "last_run_at") == (
        "done", None, None, "2026-07-01T10:00:03Z",
    )  # fmt: skip
    assert picked("far-tokyo", "next_run_at", "last_run_at") == (
        "9999-12-31T20:00:00Z", "0001-01-01T02:00:00Z",
    )  # fmt: skip
    assert picked("infinite", "next_run_at", "last_run_at") == ("infinity", "-infinity")
    assert picked("bc-ny", "state", "next_run_at", "last_run_at") == (
        "disabled", "-infinity", "0001-01-01T02:00:00Z",
    )  # fmt: skip
    assert picked("retry-ends", "next_run_at", "scheduled_for") == ("infinity", "-infinity")


async def test_jobs_history_shows_every_run_as_it_is(
    cli_env: str, store: PostgresStore, sql: asyncpg.Connection, capsys: pytest.CaptureFixture[str]
) -> None:
    await made_by_the_runner(store)
    await written_by_hand(store, sql)
    by_job = {
        name: (r["STATUS"], r["ATTEMPT"], r["STARTED"], r["DURATION"], r["ERROR"])
        for r in cells(await printed(capsys, "history")).values()
        for name in [r["JOB"]]
    }
    assert by_job == {
        "running": ("running", "1", "2026-07-01 10:00:01Z", "-", ""),
        "queued": ("queued", "1", "-", "-", ""),  # never started
        "succeeded": ("succeeded", "1", "2026-07-01 10:00:01Z", "2000ms", ""),
        "one-shot": ("succeeded", "1", "2026-07-01 10:00:01Z", "2000ms", ""),
        "failed": ("failed", "1", "2026-07-01 10:00:01Z", "2000ms", "exit status 3"),
        "retrying": ("failed", "1", "2026-07-01 10:00:01Z", "2000ms", "exit status 3"),
        "far-tokyo": ("failed", "1", "-infinity", "-", "by hand"),
        "infinite": ("coalesced", "0", "-", "-", "3 occurrences run once"),
    }
    runs = {r["job"]: r for r in json.loads(await printed(capsys, "history", "--json"))["runs"]}
    times = ("scheduled_for", "claimed_at", "started_at", "finished_at", "duration_ms")

    def picked(name: str) -> tuple[Any, ...]:
        return tuple(runs[name][k] for k in times)

    assert picked("queued")[2:] == (None, None, None)
    assert picked("running")[2:] == ("2026-07-01T10:00:01Z", None, None)
    assert picked("succeeded")[2:] == ("2026-07-01T10:00:01Z", "2026-07-01T10:00:03Z", 2000)
    assert runs["succeeded"]["output"] == {"ok": 1}
    assert (runs["failed"]["status"], runs["failed"]["error"]) == ("failed", "exit status 3")
    assert picked("far-tokyo") == (
        "-infinity", "infinity", "-infinity", "2026-07-01T10:00:05Z", None,
    )  # fmt: skip
    assert picked("infinite") == (
        "2026-07-01T07:00:00Z", "2026-07-01T10:00:00Z", None, "2026-07-01T10:00:00Z", None,
    )  # fmt: skip
    assert (runs["infinite"]["attempt"], runs["infinite"]["occurrences"]) == (0, 3)
    for run in runs.values():
        assert run["scheduled_for"] is not None  # NOT NULL in the table: a time, or an end
        assert run["owner"] in ("r1", None)


# Any time a timestamptz column can hold, as a person would write it: the infinities, and
# dates from 4712 BC to the year 294275 at any offset PostgreSQL takes, the ends of Python's
# range (the years 1 and 9999) most often.
_YEARS = st.one_of(
    st.tuples(st.one_of(st.integers(1, 2), st.integers(9998, 10000), st.integers(1, 294275))),
    st.tuples(st.integers(1, 4712), st.just(" BC")),
)


def _written_time(year: tuple[int] | tuple[int, str], *fields: int | str) -> str:
    """``2026-07-01 10:00:00.000000+02:00``, with `` BC`` after it when the year says so."""
    text = "{:04d}-{:02d}-{:02d} {:02d}:{:02d}:{:02d}.{:06d}{}{:02d}:{:02d}"
    return text.format(year[0], *fields) + (year[1] if len(year) == 2 else "")


_WRITTEN = st.one_of(
    st.sampled_from(["infinity", "-infinity"]),
    st.builds(
        _written_time,
        _YEARS,
        st.integers(1, 12),
        st.integers(1, 28),
        st.integers(0, 23),
        st.integers(0, 59),
        st.integers(0, 59),
        st.integers(0, 999_999),
        st.sampled_from("+-"),
        st.integers(0, 15),
        st.integers(0, 59),
    ),
)
_ZONES = ["UTC", "Asia/Tokyo", "America/New_York", "Pacific/Kiritimati", "Etc/GMT+12", "No/Such"]


async def _expected(sql: asyncpg.Connection, written: str) -> datetime | str:
    """What PostgreSQL says the written time is: an end's name (the first and last instants
    of Python's range stand for the ends), or the instant in UTC."""
    row = await sql.fetchrow(
        "SELECT x <= '0001-01-01 00:00:00+00' AS before, x >= '9999-12-31 23:59:59.999999+00' AS"
        " after, to_char(x AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US') AS utc"
        " FROM (SELECT $1::text::timestamptz AS x) AS t",
        written,
    )
    if row["before"]:
        return "-infinity"
    if row["after"]:
        return "infinity"
    return datetime.fromisoformat(row["utc"]).replace(tzinfo=UTC)


def _check_shown(shown: str | None, table_cell: str, expected: datetime | str) -> None:
    if isinstance(expected, str):
        assert (shown, table_cell) == (expected, expected)
        return
    assert shown is not None
    assert datetime.fromisoformat(shown.replace("Z", "+00:00")) == expected.replace(
        microsecond=expected.microsecond // 1000 * 1000
    )
    if table_cell.endswith("Z"):
        table_cell = table_cell[:-1] + "+00:00"
    assert datetime.fromisoformat(table_cell) == expected.replace(microsecond=0)


async def test_any_time_written_by_hand_is_shown_as_an_end_or_as_itself(
    store: PostgresStore, sql: asyncpg.Connection
) -> None:
    await add(store, "hand", schedule=YEARLY, next_run_at=T)
    await sql.execute(
        "INSERT INTO job_runs (job_id, scheduled_for, attempt, status) "
        "SELECT id, now(), 1, 'failed' FROM scheduled_jobs"
    )
    loop = asyncio.get_running_loop()

    async def check(next_run: str, started: str, finished: str, tz: str) -> None:
        # the zone first: a zone changed alone makes the database reschedule the row
        await sql.execute("UPDATE scheduled_jobs SET time_zone = $1", tz)
        await sql.execute("UPDATE scheduled_jobs SET next_run_at = $1::text::timestamptz", next_run)
        await sql.execute(
            "UPDATE job_runs SET started_at = $1::text::timestamptz,"
            " finished_at = $2::text::timestamptz",
            started,
            finished,
        )
        (job,) = await store.admin.list_jobs()
        (run,) = await store.admin.history(None, 5)
        row = cells(jobs_table([job]))["hand"]
        _check_shown(job_dict(job)["next_run_at"], row["NEXT RUN"], await _expected(sql, next_run))
        shown = run_dict(run)
        started_at, finished_at = await _expected(sql, started), await _expected(sql, finished)
        started_cell = cells(runs_table([run]))[str(run.id)]["STARTED"]
        _check_shown(shown["started_at"], started_cell, started_at)
        assert shown["finished_at"] is not None
        if isinstance(started_at, str) or isinstance(finished_at, str):
            assert shown["duration_ms"] is None
        else:
            exact = (finished_at - started_at).total_seconds() * 1000
            assert shown["duration_ms"] == round(exact)

    @settings(max_examples=60, deadline=None, derandomize=True)
    @given(_WRITTEN, _WRITTEN, _WRITTEN, st.sampled_from(_ZONES))
    def prop(next_run: str, started: str, finished: str, tz: str) -> None:
        asyncio.run_coroutine_threadsafe(check(next_run, started, finished, tz), loop).result()

    await asyncio.to_thread(prop)
