"""``reload --dry-run`` (daemon/broker/reload/dry_run.py): the plan of a reload, each task's
next time before and after, and nothing changed."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime
from pathlib import Path

import pytest

from daemon.broker.app import Broker
from daemon.broker.reload.dry_run import dry_run_answer
from daemon.broker.reload.waking import reload_forever
from daemon.wire.protocol import ReloadRequest
from tests.support.looping import looping
from tests.unit.broker.reload.conftest import MakeBroker, replace_file
from tests.unit.tasks_toml import tasks_toml

TASKS = {
    "keep": {"command": ["true"], "schedule": "daily 02:30", "tz": "Europe/Berlin"},
    "gone": {"command": ["true"], "schedule": "cron 0 * * * *"},
    "edit": {"command": ["true"], "schedule": "daily 04:00"},
    "words": {"command": ["true"], "schedule": "daily 05:00"},
}
# The reload's file, said as its changes: one task gone, one new, one moved, one changed in
# other words than its time.
NEW_TASKS = {
    "keep": TASKS["keep"],
    "edit": {**TASKS["edit"], "schedule": "daily 06:00"},
    "words": {**TASKS["words"], "command": ["echo", "changed, but not its time"]},
    "fresh": {"command": ["true"], "interval": "1h"},
}
NOW = datetime(2026, 3, 28, 12, 0, tzinfo=UTC)


@pytest.fixture
def tasks_file(tmp_path: Path) -> Path:
    """This module's tasks file, in place of the reload tests' own."""
    path = tmp_path / "tasks.toml"
    path.write_text(tasks_toml(TASKS))
    return path


@pytest.fixture
def broker(make_broker: MakeBroker) -> Broker:
    return make_broker()


async def test_the_plan_says_what_changes_and_how_the_next_times_move(broker: Broker) -> None:
    assert broker.reloader.path is not None
    broker.reloader.path.write_text(tasks_toml(NEW_TASKS))
    before = dict(broker.tasks.tasks)
    answer = await dry_run_answer(broker.reloader, NOW)
    assert answer["ok"] is True
    assert answer["dry_run"] is True
    assert (answer["added"], answer["removed"], answer["changed"], answer["unchanged"]) == (
        ["fresh"],
        ["gone"],
        ["edit", "words"],
        ["keep"],
    )
    moves = {move["task"]: move for move in answer["moves"]}
    assert moves["fresh"]["before"] is None
    assert moves["fresh"]["after"] == "2026-03-28T13:00:00Z"  # from the reload, no start tick
    assert (moves["gone"]["before"], moves["gone"]["after"]) == ("2026-03-28T13:00:00Z", None)
    assert (moves["edit"]["before"], moves["edit"]["after"]) == (
        "2026-03-29T04:00:00Z",
        "2026-03-29T06:00:00Z",
    )
    assert moves["edit"]["schedule_after"] == "daily 06:00 (UTC)"
    assert moves["words"]["before"] == moves["words"]["after"] == "2026-03-29T05:00:00Z"
    assert "keep" not in moves
    # nothing changed: the old tasks, the old plans, no reload recorded
    assert broker.tasks.tasks == before
    assert sorted(plan.task for plan in broker.ticker.plans) == ["edit", "gone", "keep", "words"]
    assert broker.reloader.last is None


async def test_a_file_a_reload_would_refuse_is_said_and_nothing_changes(broker: Broker) -> None:
    assert broker.reloader.path is not None
    broker.reloader.path.write_text('[tasks.bad]\ncommand = ["true"]\nschedule = "daily 25:00"\n')
    answer = await dry_run_answer(broker.reloader, NOW)
    assert answer["ok"] is False
    assert answer["dry_run"] is True
    assert answer["code"] == "reload_refused"
    assert "tasks.bad: invalid schedule 'daily 25:00'" in answer["reason"]
    assert str(broker.reloader.path) in answer["reason"]
    assert broker.reloader.last is None
    assert broker.reloader.health_warnings() == []
    broker.reloader.path.unlink()
    assert "does not exist" in (await dry_run_answer(broker.reloader, NOW))["reason"]


async def test_the_broker_answers_the_dry_run_op(broker: Broker) -> None:
    later = broker.control(ReloadRequest(dry_run=True))
    assert isinstance(later, asyncio.Future)  # the reload loop answers it, off the event loop
    async with looping(reload_forever(broker.reloader, asyncio.Event())), asyncio.timeout(10):
        answer = await later
    assert answer["ok"] is True
    assert answer["dry_run"] is True
    assert answer["unchanged"] == ["edit", "gone", "keep", "words"]
    assert answer["moves"] == []


async def test_a_candidate_file_is_planned_against_the_running_tasks(
    broker: Broker, tasks_file: Path
) -> None:
    """``--file``: the candidate's bytes, sent by the client; the tasks file is not read."""
    replace_file(tasks_file, "[tasks.broken\n")  # not what the dry run reads
    before = dict(broker.tasks.tasks)
    candidate = ("/elsewhere/new.toml", tasks_toml(NEW_TASKS).encode())
    answer = await dry_run_answer(broker.reloader, NOW, candidate)
    assert answer["ok"] is True, answer
    assert (answer["added"], answer["removed"]) == (["fresh"], ["gone"])
    assert {move["task"] for move in answer["moves"]} == {"fresh", "gone", "edit", "words"}
    assert broker.tasks.tasks == before
    assert broker.reloader.last is None


@pytest.mark.parametrize(
    ("content", "said"),
    [
        (b"[tasks.bad]\ncommand = ['true']\nschedule = 'daily 25:00'\n", "invalid schedule"),
        (b"x" * (1024 * 1024 + 1), "larger than 1024 KiB, the most a tasks file may hold"),
        (b"\xff\xfe", "not valid UTF-8"),
    ],
)
async def test_a_bad_candidate_is_said_naming_it_and_nothing_changes(
    broker: Broker, content: bytes, said: str
) -> None:
    before = dict(broker.tasks.tasks)
    answer = await dry_run_answer(broker.reloader, NOW, ("new.toml", content))
    assert answer["ok"] is False
    assert answer["reason"].startswith("tasks file new.toml")
    assert said in answer["reason"]
    assert str(broker.reloader.path) not in answer["reason"]
    assert broker.tasks.tasks == before
    assert broker.reloader.last is None
    assert broker.reloader.health_warnings() == []
