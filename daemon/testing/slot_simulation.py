"""See what the daemon does with each scheduled slot of a task over a stretch of virtual time:
``await simulate_slots(tasks_toml, "nightly", start=..., until=..., run_s=...)``.

The daemon's own ``Ticker``, ``TickSlots``, ``BusyPolicy``, ``SlotRecord``, state directory and
catch-up decide every outcome on a ``ManualClock`` (``VirtualTime``: no real sleep); only the
jobs are virtual (``VirtualExecutor``: each run lasts ``run_s``). A down-time is a clean stop
(``docker stop``) and a start on the same state directory, a temporary one of the simulation's.
"""

from __future__ import annotations

import random
import tempfile
from collections.abc import Iterable, Mapping
from datetime import datetime, timedelta
from pathlib import Path

from daemon.broker.ticking import task_tick_plan
from daemon.core.tasks import Task
from daemon.core.ticker.ticker import TickPlan
from daemon.taskfile.loading import parse_tasks_toml
from daemon.testing.clock import ManualClock
from daemon.testing.daemon_life import DaemonLife, Recorder
from daemon.testing.logs import plain_tracebacks
from daemon.testing.slot_results import NextPlanned, SlotSimulation, Trigger, TriggerAnswer
from daemon.testing.virtual_runs import RunDuration
from daemon.testing.virtual_time import VirtualTime

QUEUE_CAPACITY = 16  # RUNBROKER_QUEUE_CAPACITY's default

TasksSource = str | Task | Mapping[str, Task]
DownTime = tuple[datetime, datetime]


def _tasks(source: TasksSource) -> dict[str, Task]:
    if isinstance(source, str):
        return parse_tasks_toml(source, "tasks_toml")
    if isinstance(source, Task):
        return {source.name: source}
    return dict(source)


def _ticks(task: Task) -> bool:
    return task.schedule is not None or task.interval_s is not None


def _plans(tasks: Mapping[str, Task], ticking: list[str], fire_on_start: bool) -> list[TickPlan]:
    """Fresh plans (a plan keeps its loop's state) of the ticking tasks, as the daemon's."""
    plans = []
    for name in ticking:
        plan, _warnings = task_tick_plan(tasks[name], fire_on_start=fire_on_start)
        if plan is not None:
            plans.append(plan)
    return plans


def _next_planned(tasks: Mapping[str, Task]) -> NextPlanned:
    def following(task: str, at: datetime) -> datetime | None:
        definition = tasks[task]
        schedule = definition.schedule
        if schedule is not None:
            return schedule.next_after(at)
        return at + timedelta(seconds=definition.interval_s or 0.0)

    return following


def _lives(start: datetime, until: datetime, down: Iterable[DownTime]) -> list[DownTime]:
    """The stretches the daemon runs: from ``start`` to ``until`` less the down-times."""
    lives: list[DownTime] = []
    begin = start
    for stop, restart in sorted(down):
        if not begin <= stop < restart <= until:
            raise ValueError(
                f"down-time {stop.isoformat()}..{restart.isoformat()} must lie within"
                f" {start.isoformat()}..{until.isoformat()}, after the one before, and end"
                " after it starts"
            )
        lives.append((begin, stop))
        begin = restart
    lives.append((begin, until))
    return lives


async def simulate_slots(
    tasks: TasksSource,
    task: str | None = None,
    *,
    start: datetime,
    until: datetime,
    run_s: RunDuration = 0.0,
    triggers: Iterable[Trigger | datetime] = (),
    down: Iterable[DownTime] = (),
    fire_on_start: bool = True,
    with_state_dir: bool = True,
    queue_capacity: int = QUEUE_CAPACITY,
    jitter: float = 0.0,
    seed: int = 0,
) -> SlotSimulation:
    """The outcome of every slot of ``task`` (None: of every ticking task) planned from
    ``start`` to ``until`` (aware datetimes), as the daemon would settle them. A ``task``
    without ``interval`` or ``schedule`` has no slots: its triggers can still be seen.

    ``tasks``: a tasks file's TOML text, a ``Task`` or tasks by name. ``run_s``: how long each
    run lasts (seconds, a ``timedelta``, or a callable given each ``RunStart``). ``triggers``:
    times (or ``Trigger``s, of any task) at which ``runbroker trigger`` is called. ``down``:
    ``(stop, restart)`` pairs, a clean stop and a start with the state directory
    (``with_state_dir=False``: without one). ``fire_on_start``, ``queue_capacity`` and ``jitter``
    are ``RUNBROKER_FIRE_ON_START``, ``RUNBROKER_QUEUE_CAPACITY`` and ``RUNBROKER_JITTER`` (0
    here: the same times every run; ``seed`` picks the jitter). After ``until`` time goes on
    without triggers until the runs queued by then have ended, so that each slot planned by
    then has its outcome; nothing planned later is reported."""
    if until < start:
        raise ValueError("until is before start")
    known = _tasks(tasks)
    if task is not None and task not in known:
        raise ValueError(f"no task {task!r} in the tasks ({', '.join(sorted(known))})")
    if task is None:
        ticking = sorted(name for name, one in known.items() if _ticks(one))
    else:
        ticking = [task] if _ticks(known[task]) else []
    asked = sorted(
        (Trigger(t) if isinstance(t, datetime) else t for t in triggers), key=lambda t: t.at
    )
    asked = [Trigger(t.at, t.task or task) for t in asked]
    if asked and not start <= asked[0].at <= asked[-1].at <= until:
        raise ValueError("a trigger is outside start..until")
    for trigger in asked:
        if (trigger.task or task) not in known:
            raise ValueError(f"a trigger at {trigger.at.isoformat()} names no known task")
    lives = _lives(start, until, down)
    plain_tracebacks()
    clock = ManualClock(start)
    time_ = VirtualTime(clock)
    recorder = Recorder(clock, until)
    with tempfile.TemporaryDirectory(prefix="runbroker-simulation-") as directory:
        for index, (begin, end) in enumerate(lives):
            clock.set(begin)
            for trigger in [t for t in asked if t.at < begin]:
                asked.remove(trigger)
                recorder.triggers.append(TriggerAnswer(trigger.at, trigger.task or "", "down"))
            life = DaemonLife(
                known,
                _plans(known, ticking, fire_on_start),
                time_,
                recorder,
                run_s=run_s,
                queue_capacity=queue_capacity,
                state_path=Path(directory) if with_state_dir else None,
                jitter=jitter,
                rng=random.Random(seed * 1000 + index),
            )
            await life.start()
            while asked and asked[0].at <= end:
                trigger = asked.pop(0)
                await time_.advance_to(trigger.at)
                life.trigger(trigger.task or "")
            await time_.advance_to(end)
            if index == len(lives) - 1:
                await life.drain()
            await life.stop()
    return recorder.simulation(_next_planned(known))
