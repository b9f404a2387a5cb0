"""The targets' lanes: one per target (the defaults' one for every task), each bounded, all
bounded together by dropping the longest's oldest, and forgotten once empty."""

from __future__ import annotations

from collections.abc import MutableMapping
from typing import Any

from daemon.core.tasks.notify_targets import TaskNotify
from daemon.notify.lanes import Lanes
from daemon.notify.notice import Notice
from daemon.taskfile import parse_tasks_toml

TASKS = """
[notify.webhook]
url = "http://shared.example/h"
[tasks.a]
command = "true"
[tasks.b]
command = "true"
[tasks.c]
command = "true"
[tasks.c.notify.webhook]
url = "http://own.example/h"
[tasks.c.notify.command]
command = ["true"]
on = ["success"]
"""


def _notifies() -> dict[str, TaskNotify]:
    tasks = parse_tasks_toml(TASKS)
    found = {name: task.notify for name, task in tasks.items()}
    assert all(notify is not None for notify in found.values())
    return {name: notify for name, notify in found.items() if notify is not None}


def _failure(task: str, notify: TaskNotify, number: int) -> Notice:
    return Notice(("failure",), task, notify, run_id=f"r-{number}")


async def test_the_defaults_are_one_lane_for_every_task_and_a_task_s_own_target_is_another() -> (
    None
):
    notify = _notifies()
    lanes = Lanes()
    for number, task in enumerate(("a", "b", "c")):
        lanes.put(_failure(task, notify[task], number))
    ready = lanes.ready()
    assert [(lane.kind, len(lane.outbox)) for lane in ready] == [("webhook", 2), ("webhook", 1)]
    assert lanes.ready() == []  # each lane has its sender now
    shared = ready[0]
    taken = [lanes.take(shared), lanes.take(shared)]
    assert [None if notice is None else notice.task for notice in taken] == ["a", "b"]
    assert lanes.take(shared) is None  # empty: its sender ends, the lane is forgotten
    lanes.put(_failure("a", notify["a"], 3))
    assert [lane.kind for lane in lanes.ready()] == ["webhook"]  # a new lane, a new sender
    assert len(lanes) == 2
    assert lanes.senders == 2
    assert not lanes.idle


async def test_a_notice_no_target_hears_is_queued_nowhere() -> None:
    notify = _notifies()
    lanes = Lanes()
    lanes.put(Notice(("start",), "c", notify["c"]))
    assert (len(lanes), lanes.ready(), lanes.idle) == (0, [], True)


async def test_a_full_lane_drops_its_oldest_and_all_together_drop_the_longest_s(
    logs: list[MutableMapping[str, Any]],
) -> None:
    notify = _notifies()
    lanes = Lanes(capacity=4, capacity_all=6)
    for number in range(6):
        lanes.put(_failure("a", notify["a"], number))  # the shared lane: 4, then full
    assert (len(lanes), lanes.dropped) == (4, 2)
    for number in range(6, 9):
        lanes.put(_failure("c", notify["c"], number))  # c's own: past 6 in all
    assert len(lanes) == 6
    assert lanes.dropped == 2 + 1
    shared, own = lanes.ready()
    assert (len(shared.outbox), len(own.outbox)) == (3, 3)
    first = lanes.take(shared)
    assert first is not None
    assert first.run_id == "r-3"  # r-0 and r-1 by the lane's bound, r-2 by all together
    assert lanes.drop_all() == 5
    assert (len(lanes), lanes.dropped) == (0, 3 + 5)
    dropped = [line for line in logs if line["event"] == "notify.dropped"]
    assert len(dropped) == 1  # one incident of the shared lane, logged once
    assert dropped[0]["kind"] == "webhook"


async def test_at_most_senders_max_lanes_send_at_once_the_others_in_turn() -> None:
    tasks = parse_tasks_toml(
        "".join(
            f'[tasks.t{n}]\ncommand = "true"\n[tasks.t{n}.notify.webhook]\n'
            f'url = "http://t{n}.example/h"\n'
            for n in range(3)
        )
    )
    lanes = Lanes(senders_max=2)
    notifies = []
    for n in range(3):
        notify = tasks[f"t{n}"].notify
        assert notify is not None
        notifies.append(notify)
        lanes.put(_failure(f"t{n}", notify, n))
    first, second = lanes.ready()
    assert [first.target, second.target] == [notifies[0].webhook, notifies[1].webhook]
    assert (lanes.ready(), lanes.senders) == ([], 2)  # t2 waits its turn
    taken = lanes.take(first)
    assert taken is not None
    assert taken.task == "t0"
    assert lanes.take(first) is None  # t0's lane is empty: its sender ends
    (third,) = lanes.ready()
    assert third.outbox.take() is not None  # t2's turn
    assert lanes.senders == 2
