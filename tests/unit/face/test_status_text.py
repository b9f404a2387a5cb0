"""``runbroker status`` for people, from a fixed answer and a fixed clock."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from daemon.core.runqueue import RunQueue
from daemon.face.status_text import _DATABASE_KNOWN, human_duration, human_time, render_status
from daemon.observe.status import _iso
from daemon.pg.runner import PgRunner
from daemon.pg.store.memory import MemoryStore
from tests.support.pgfakes import make_settings

NOW = datetime(2026, 12, 1, 16, 20, 0, tzinfo=UTC).timestamp()

ANSWER: dict[str, Any] = {
    "event": "status",
    "ok": True,
    "pid": 1,
    "uptime_s": 7384.512,
    "queue": {
        "capacity": 16,
        "waiting": 1,
        "accepted": 12,
        "rejected_full": 2,
        "rejected_closed": 0,
        "finished": 10,
        "closed": False,
    },
    "current": {"id": "r1-11", "task": "report", "trigger": "external", "elapsed_ms": 64_000},
    "waiting": [{"id": "r1-12", "task": "default", "trigger": "tick", "position": 1}],
    "recent": [
        {
            "id": "r1-10",
            "task": "report",
            "trigger": "external",
            "ok": False,
            "reason": "exit status 3",
            "exit_code": 3,
            "duration_ms": 4200,
            "finished_at": "2026-12-01T16:19:30+00:00",
        },
        {
            "id": "r1-9",
            "task": "default",
            "trigger": "tick",
            "ok": True,
            "reason": "",
            "exit_code": 0,
            "duration_ms": 12,
            "finished_at": "2026-11-30T23:59:59+00:00",
        },
    ],
    "ticks": [
        {
            "task": "default",
            "schedule": "every 1h",
            "tz": None,
            "next_at": "2026-12-01T16:50:00+00:00",
            "last_at": "2026-12-01T15:50:00+00:00",
        },
        {
            "task": "nightly",
            "schedule": "cron 30 2 * * *",
            "tz": "Europe/Berlin",
            "next_at": "2026-12-02T01:30:00+00:00",
            "last_at": None,
        },
    ],
    "database": {
        "up": True,
        "down_for_s": None,
        "listening": True,
        "owner": "host:1:abc",
        "claiming": True,
        "paused": False,
        "enabled": True,
        "held_runs": 1,
        "unwritten_results": 0,
        "claims_total": 40,
        "lease_reclaims_total": 2,
        "occurrences_missed_total": 3,
        "occurrences_coalesced_total": 0,
        "schedule_lag_s": 0.125,
    },
}


def test_the_report_is_tables_with_human_times() -> None:
    assert render_status(ANSWER, now=NOW).splitlines() == [
        "runbroker: pid 1, up 2h03m (since 2026-12-01 14:16:55Z)",
        "queue: 1 of 16 waiting; 12 accepted, 10 finished, 2 rejected (full), "
        "0 rejected (shutting down)",
        "running: r1-11 report (external) for 1m04s",
        "waiting:",
        "  #  ID     TASK     TRIGGER",
        "  1  r1-12  default  tick",
        "ticks:",
        "  TASK     SCHEDULE                         NEXT                             LAST",
        "  default  every 1h                         16:50:00Z (in 30m00s)            "
        "15:50:00Z (30m00s ago)",
        "  nightly  cron 30 2 * * * (Europe/Berlin)  2026-12-02 01:30:00Z (in 9h10m)  -",
        "recent:",
        "  FINISHED                           RESULT  ID     TASK     TRIGGER   DURATION  REASON",
        "  16:19:30Z (30.0s ago)              FAILED  r1-10  report   external  4.2s      "
        "exit status 3",
        "  2026-11-30 23:59:59Z (16h20m ago)  ok      r1-9   default  tick      12ms",
        "database: up, listening, claiming; replica host:1:abc",
        "  claims 40, lease reclaims 2, held runs 1, unwritten results 0, schedule lag 125ms",
        "  occurrences passed over: 3 missed, 0 coalesced",
    ]


def test_a_database_that_is_down_paused_and_a_newer_daemons_fields() -> None:
    database = {
        **ANSWER["database"],
        "up": False,
        "down_for_s": 95.0,
        "paused": True,
        "claiming": False,
        "broken_jobs": 1,
    }
    text = render_status({**ANSWER, "database": database}, now=NOW)
    assert "database: DOWN for 1m35s, paused (scheduler.paused), not claiming;" in text
    assert "  broken_jobs: 1" in text
    assert "{" not in text


def test_a_database_that_is_down_is_not_claiming_whatever_the_flag() -> None:
    database = {**ANSWER["database"], "up": False, "down_for_s": 5.0, "claiming": True}
    text = render_status({**ANSWER, "database": database}, now=NOW)
    assert "database: DOWN for 5.0s, not claiming; replica host:1:abc" in text
    assert ", claiming" not in text


def test_unusable_jobs_are_lines_in_words_and_unknown_fields_json() -> None:
    unusable = [{"job": "nightly", "error": "unknown time zone 'Mars/Base'"}]
    database = {**ANSWER["database"], "unusable_jobs": unusable, "newer": {"a": [1, None]}}
    lines = render_status({**ANSWER, "database": database}, now=NOW).splitlines()
    assert lines[-2:] == [
        "  job nightly cannot run: unknown time zone 'Mars/Base'",
        '  newer: {"a": [1, null]}',
    ]
    quiet = render_status({**ANSWER, "database": {**database, "unusable_jobs": []}}, now=NOW)
    assert "unusable" not in quiet


def test_times_in_the_answer_keep_their_milliseconds_for_ago() -> None:
    finished_at = _iso(NOW - 0.1)
    assert finished_at == "2026-12-01T16:19:59.900+00:00"
    assert human_time(finished_at, NOW) == "16:19:59Z (100ms ago)"


def test_an_idle_daemon_without_database() -> None:
    answer = {**ANSWER, "current": None, "waiting": [], "recent": [], "ticks": []}
    answer["database"] = None
    assert render_status(answer, now=NOW).splitlines() == [
        "runbroker: pid 1, up 2h03m (since 2026-12-01 14:16:55Z)",
        "queue: 1 of 16 waiting; 12 accepted, 10 finished, 2 rejected (full), "
        "0 rejected (shutting down)",
        "running: nothing",
    ]


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0.0123, "12ms"),
        (4.24, "4.2s"),
        (59.94, "59.9s"),
        (185, "3m05s"),
        (7384.5, "2h03m"),
        (4 * 86400 + 7 * 3600 + 50, "4d07h"),
        (-3, "0ms"),
    ],
)
def test_human_durations(seconds: float, text: str) -> None:
    assert human_duration(seconds) == text


def test_human_times() -> None:
    assert human_time(None, NOW) == "-"
    assert human_time("2026-12-01T16:20:05+00:00", NOW) == "16:20:05Z (in 5.0s)"
    assert human_time("2026-12-01T17:20:00+01:00", NOW) == "16:20:00Z (in 0ms)"
    assert human_time("not a time", NOW) == "not a time"


@pytest.mark.parametrize(
    ("mode", "said"),
    [
        ("pid1", "reaping orphans as PID 1"),
        ("subreaper", "reaping the jobs' orphans as their child subreaper (not PID 1)"),
        ("none", "NOT reaping orphans (not PID 1, and PR_SET_CHILD_SUBREAPER was refused)"),
    ],
)
def test_the_first_line_says_how_orphans_are_reaped(mode: str, said: str) -> None:
    first = render_status({**ANSWER, "reaper": mode}, now=NOW).splitlines()[0]
    assert first == f"runbroker: pid 1, up 2h03m (since 2026-12-01 14:16:55Z), {said}"


def test_the_database_fields_it_renders_are_the_runners() -> None:
    """The fields ``_database_lines`` renders restate keys of ``PgRunner.status()`` (the source);
    any other key is shown as it is, so a renamed one would silently fall out of the report."""
    runner = PgRunner(
        store=MemoryStore(), queue=RunQueue(1), settings=make_settings(), known_tasks=set()
    )
    assert set(_DATABASE_KNOWN) <= set(runner.status())


def test_the_output_journal_line() -> None:
    journal = {
        "bytes": 3 * 1024 * 1024 + 100_000,
        "runs": 4,
        "run_bytes_max": 1024 * 1024,
        "history_runs_max": 32,
        "history_bytes_max": 16 * 1024 * 1024,
    }
    answer = {**ANSWER, "current": None, "waiting": [], "recent": [], "ticks": []}
    answer.update(database=None, journal=journal)
    assert render_status(answer, now=NOW).splitlines()[3] == (
        "output kept: 3.1 MiB of 4 runs (at most 1 MiB a run, 16 MiB for the last 32 finished)"
    )
