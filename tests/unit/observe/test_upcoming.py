"""The answer of ``next`` (daemon/observe/upcoming.py): each task's planned times from the
ticker's plans, DST marks beside them, an unknown task refused."""

from __future__ import annotations

from datetime import UTC, datetime

from daemon.core.tasks import Task, TaskRegistry
from daemon.core.ticker.ticker import TickPlan
from daemon.observe.upcoming import MAX_TIMES_PER_ANSWER, next_answer, next_due
from daemon.schedules import parse_schedule

NOW = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)


def _registry(*names: str) -> TaskRegistry:
    return TaskRegistry({name: Task(name, command=("true",)) for name in names})


PLANS = [
    TickPlan("report", schedule=parse_schedule("daily 02:30", "Europe/Berlin")),
    TickPlan("poll", interval_s=600.0, fire_on_start=True),
]


def test_every_task_is_listed_with_its_times_in_its_zone_and_utc() -> None:
    answer = next_answer(
        PLANS,
        _registry("report", "poll", "manual"),
        task="",
        count=2,
        now=NOW,
        jitter=0.1,
        source="file",
    )
    assert answer["ok"] is True
    assert answer["after"] == "2026-03-28T12:00:00Z"
    tasks = {task["task"]: task for task in answer["tasks"]}
    assert list(tasks) == ["manual", "poll", "report"]
    report = tasks["report"]
    assert (report["schedule"], report["tz"], report["kind"]) == (
        "daily 02:30",
        "Europe/Berlin",
        "schedule",
    )
    assert report["times"][0] == {
        "at": "2026-03-29T01:00:00Z",
        "local": "2026-03-29T03:00:00+02:00",
        "dst": {"kind": "gap", "wall": "02:30", "note": report["times"][0]["dst"]["note"]},
    }
    assert report["times"][1] == {
        "at": "2026-03-30T00:30:00Z",
        "local": "2026-03-30T02:30:00+02:00",
    }
    poll = tasks["poll"]
    assert [slot["at"] for slot in poll["times"]] == [
        "2026-03-28T12:00:00Z",
        "2026-03-28T12:10:00Z",
    ]
    assert "10%" in poll["note"]
    assert "started at 2026-03-28T12:00:00Z" in poll["note"]
    assert tasks["manual"] == {
        "task": "manual",
        "schedule": None,
        "tz": "UTC",
        "kind": "trigger",
        "times": [],
        "note": "no schedule: it runs when triggered",
    }


def test_a_running_daemon_answers_from_the_tick_its_ticker_planned() -> None:
    plan = TickPlan("poll", interval_s=600.0, fire_on_start=True)
    plan.next_fire_at = datetime(2026, 3, 28, 12, 7, tzinfo=UTC).timestamp()
    answer = next_answer(
        [plan], _registry("poll"), task="poll", count=2, now=NOW, jitter=0.0, source="daemon"
    )
    times = answer["tasks"][0]["times"]
    assert [slot["at"] for slot in times] == ["2026-03-28T12:07:00Z", "2026-03-28T12:17:00Z"]
    once = TickPlan("default", once=True)
    ran = next_answer(
        [once], _registry("default"), task="", count=3, now=NOW, jitter=0.0, source="daemon"
    )
    assert ran["tasks"][0]["times"] == []
    assert "ran once at start-up" in ran["tasks"][0]["note"]


def test_an_unknown_task_is_refused_naming_the_tasks_there_are() -> None:
    answer = next_answer(
        PLANS, _registry("report"), task="nope", count=1, now=NOW, jitter=0.1, source="daemon"
    )
    assert answer == {
        "event": "next",
        "ok": False,
        "reason": "unknown task 'nope': this container defines report",
        "code": "unknown_task",
    }


def test_next_due_is_the_first_planned_time() -> None:
    assert next_due(PLANS[0], NOW, "daemon") == datetime(2026, 3, 29, 1, tzinfo=UTC)
    assert next_due(None, NOW, "daemon") is None
    gone = TickPlan("once", schedule=parse_schedule("at 2026-01-01T00:00:00Z"))
    assert next_due(gone, NOW, "daemon") is None


def test_a_listing_of_many_tasks_gets_fewer_times_of_each() -> None:
    names = [f"t{index:03d}" for index in range(60)]
    plans = [TickPlan(name, schedule=parse_schedule("cron */5 * * * *")) for name in names]
    answer = next_answer(
        plans, _registry(*names), task="", count=100, now=NOW, jitter=0.1, source="daemon"
    )
    assert answer["count"] == MAX_TIMES_PER_ANSWER // 60
    assert sum(len(task["times"]) for task in answer["tasks"]) <= MAX_TIMES_PER_ANSWER
    one = next_answer(
        plans, _registry(*names), task="t001", count=100, now=NOW, jitter=0.1, source="daemon"
    )
    assert one["count"] == 100
    assert len(one["tasks"][0]["times"]) == 100
