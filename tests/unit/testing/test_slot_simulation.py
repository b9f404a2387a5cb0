"""``simulate_slots`` from a user's side: each policy of a tasks file seen as the outcomes of
its slots (start deadlines, ``on_busy`` for ticks and triggers, the catch-up after a
down-time, DST notes), on virtual time."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from daemon.core.tasks import Task
from daemon.schedules import parse_schedule
from daemon.testing import RunStart, SettledSlot, Trigger, simulate_slots

T0 = datetime(2026, 6, 1, tzinfo=UTC)
DAY = timedelta(days=1)


def _at(minutes: float) -> datetime:
    return T0 + timedelta(minutes=minutes)


def _report(on_busy: str) -> str:
    return f"""
[tasks.report]
command = ["/app/report.sh"]
schedule = "cron */10 * * * *"
on_busy = "{on_busy}"
"""


async def test_a_long_job_makes_the_next_slots_miss_their_start_deadline() -> None:
    tasks = """
[tasks.report]
command = ["/app/report.sh"]
schedule = "cron 0 * * * *"
start_deadline = "10m"

[tasks.backup]
command = ["/app/backup.sh"]
"""

    def run_s(run: RunStart) -> float:
        return 2 * 3600.0 if run.task == "backup" else 300.0

    simulation = await simulate_slots(
        tasks,
        "report",
        start=_at(30),
        until=_at(210),
        run_s=run_s,
        triggers=[Trigger(_at(50), "backup")],
    )
    assert simulation.outcomes() == [(_at(60), "missed"), (_at(120), "missed"), (_at(180), "ran")]
    missed = simulation.slots[0]
    assert missed.reason == "still queued 600s after its planned time (its start deadline)"
    assert simulation.run(missed.run_id).started_at is None  # it left the queue unstarted
    (backup,) = [run for run in simulation.runs if run.task == "backup"]
    assert (backup.trigger, backup.started_at, backup.ended_at) == ("external", _at(50), _at(170))


@pytest.mark.parametrize(
    ("on_busy", "expected"),
    [
        ("skip", ["ran", "skipped", "skipped", "ran"]),
        ("queue", ["ran", "ran", "ran", "ran"]),
        ("coalesce", ["ran", "ran", "coalesced", "ran"]),
        ("replace", ["ran", "ran", "ran", "ran"]),
    ],
)
async def test_each_on_busy_of_a_tick_behind_its_own_long_run(
    on_busy: str, expected: list[str]
) -> None:
    simulation = await simulate_slots(
        _report(on_busy), "report", start=T0, until=_at(40), run_s=25 * 60
    )
    times = [_at(minutes) for minutes in (10, 20, 30, 40)]
    assert simulation.outcomes() == list(zip(times, expected, strict=True))
    if on_busy == "replace":  # each run is cancelled by the next slot's
        assert [simulation.slot_at(at).result for at in times] == ["cancelled"] * 4
        assert (
            simulation.slot_at(_at(10)).reason == "cancelled: replaced by a newer run of its task"
        )
    if on_busy == "coalesce":
        joined = simulation.slot_at(_at(30))
        assert joined.reason == "joined the task's queued run"
        assert joined.run_id == simulation.slot_at(_at(20)).run_id


@pytest.mark.parametrize(
    ("on_busy", "answers", "results"),
    [
        (None, ["queued", "queued", "queued"], ["succeeded"] * 3),
        ("queue", ["queued", "queued", "queued"], ["succeeded"] * 3),
        ("skip", ["queued", "skipped", "skipped"], ["succeeded"]),
        ("coalesce", ["queued", "queued", "joined"], ["succeeded"] * 2),
        ("replace", ["queued", "replaced", "replaced"], ["cancelled", "cancelled", "succeeded"]),
    ],
)
async def test_each_on_busy_of_a_trigger(
    on_busy: str | None, answers: list[str], results: list[str]
) -> None:
    tasks = '[tasks.sync]\ncommand = ["/app/sync.sh"]\n'
    if on_busy is not None:
        tasks += f'on_busy = "{on_busy}"\n'
    simulation = await simulate_slots(
        tasks, "sync", start=T0, until=_at(40), run_s=600, triggers=[_at(0), _at(1), _at(2)]
    )
    assert [answer.answer for answer in simulation.triggers] == answers
    assert [run.result for run in simulation.runs] == results
    assert simulation.slots == []  # a task without a schedule has no slots
    if on_busy == "skip":
        assert simulation.triggers[1].reason.startswith("skipped: task 'sync' already has a run")
    if on_busy == "coalesce":  # the third joined the second, which waited behind the first
        assert simulation.triggers[2].run_id == simulation.triggers[1].run_id


NIGHTLY = '[tasks.nightly]\ncommand = ["/app/nightly.sh"]\nschedule = "daily 02:30"\n'
DOWN = (T0 + DAY + timedelta(hours=2), T0 + 4 * DAY + timedelta(hours=12))  # 2 June to 5 June


@pytest.mark.parametrize(
    ("options", "expected"),
    [
        ("", [("coalesced", 3, "covered by the catch-up run at start"), ("caught_up", 1, "")]),
        (
            'catchup_window = "30h"',
            [
                ("missed", 3, "the daemon was down; older than its catchup_window of 108000s"),
                ("caught_up", 1, ""),
            ],
        ),
        (
            'catchup_window = "96h"',
            [("coalesced", 3, "covered by the catch-up run at start"), ("caught_up", 1, "")],
        ),
        ('misfire = "skip"', [("missed", 4, "the daemon was down (misfire: skip)")]),
        (
            'misfire = "skip"\ncatchup_window = "30h"',
            [("missed", 4, "the daemon was down (misfire: skip)")],
        ),
    ],
)
async def test_the_catch_up_of_a_down_time(
    options: str, expected: list[tuple[str, int, str]]
) -> None:
    simulation = await simulate_slots(
        NIGHTLY + options, "nightly", start=T0, until=T0 + 5 * DAY, run_s=600, down=[DOWN]
    )
    first, *rest = sorted(simulation.slots, key=lambda slot: slot.planned_at)
    assert (first.planned_at, first.outcome) == (T0 + timedelta(hours=2, minutes=30), "ran")
    assert [(slot.outcome, slot.count, slot.reason) for slot in rest] == expected
    times = [at for at, _slot in simulation.each_planned_time()]
    assert times == [T0 + day * DAY + timedelta(hours=2, minutes=30) for day in range(5)]
    caught_up = [slot for slot in rest if slot.outcome == "caught_up"]
    for slot in caught_up:  # the newest slot of the gap, run at the restart
        assert slot.planned_at == T0 + 4 * DAY + timedelta(hours=2, minutes=30)
        assert simulation.run(slot.run_id).started_at == DOWN[1]
    assert len(simulation.runs) == 1 + len(caught_up)


async def test_without_a_state_directory_a_down_time_is_recorded_nowhere() -> None:
    simulation = await simulate_slots(
        NIGHTLY,
        "nightly",
        start=T0,
        until=T0 + 5 * DAY,
        run_s=600,
        down=[DOWN],
        with_state_dir=False,
    )
    assert simulation.outcomes() == [(T0 + timedelta(hours=2, minutes=30), "ran")]
    assert simulation.totals()["missed"] == 0


async def test_a_trigger_while_the_daemon_is_down_is_answered_down() -> None:
    simulation = await simulate_slots(
        NIGHTLY, "nightly", start=T0, until=T0 + 5 * DAY, down=[DOWN], triggers=[T0 + 2 * DAY]
    )
    assert [(t.at, t.answer) for t in simulation.triggers] == [(T0 + 2 * DAY, "down")]


BERLIN = NIGHTLY + 'tz = "Europe/Berlin"\n'


async def test_the_dst_gap_and_fold_of_2026_are_noted_on_their_slots() -> None:
    spring = await simulate_slots(
        BERLIN,
        "nightly",
        start=datetime(2026, 3, 28, tzinfo=UTC),
        until=datetime(2026, 3, 30, tzinfo=UTC),
        run_s=60,
    )
    gap: SettledSlot = spring.slots[1]
    assert (gap.planned_at, gap.outcome) == (datetime(2026, 3, 29, 1, 0, tzinfo=UTC), "ran")
    assert gap.note == (
        "DST gap: 02:30 did not exist (clocks went forward from 02:00 to 03:00); runs at 03:00,"
        " the end of the gap"
    )
    autumn = await simulate_slots(
        BERLIN,
        "nightly",
        start=datetime(2026, 10, 24, 12, tzinfo=UTC),
        until=datetime(2026, 10, 26, tzinfo=UTC),
        run_s=60,
    )
    (fold,) = autumn.slots  # 02:30 came twice: one slot, at its first pass
    assert fold.planned_at == datetime(2026, 10, 25, 0, 30, tzinfo=UTC)
    assert (
        fold.note
        == "DST fold: 02:30 happened twice (clocks went back); runs once, at its first pass"
    )


async def test_a_parsed_task_an_interval_and_the_totals() -> None:
    task = Task("sync", command=("/app/sync.sh",), interval_s=900.0, on_busy="skip")
    simulation = await simulate_slots(task, start=T0, until=_at(60), run_s=timedelta(minutes=20))
    assert simulation.outcomes("sync") == [
        (_at(0), "ran"),  # RUNBROKER_FIRE_ON_START
        (_at(15), "skipped"),
        (_at(30), "ran"),
        (_at(45), "skipped"),
        (_at(60), "ran"),
    ]
    assert simulation.totals() == {
        "ran": 3,
        "skipped": 2,
        "coalesced": 0,
        "missed": 0,
        "caught_up": 0,
    }
    scheduled = Task("sync", command=("x",), schedule=parse_schedule("every 15m"))
    later = await simulate_slots(scheduled, "sync", start=T0, until=_at(30), fire_on_start=False)
    assert [at for at, _slot in later.each_planned_time()] == [_at(15), _at(30)]


async def test_a_run_past_its_timeout_ends_timed_out() -> None:
    tasks = NIGHTLY + 'timeout = "5m"\n'
    simulation = await simulate_slots(tasks, "nightly", start=T0, until=T0 + DAY, run_s=3600)
    (slot,) = simulation.slots
    assert (slot.result, slot.reason) == ("timed_out", "timed out after 300s")
    assert simulation.run(slot.run_id).ended_at == T0 + timedelta(hours=2, minutes=35)


@pytest.mark.parametrize(
    ("kwargs", "message"),
    [
        ({"task": "nope"}, "no task 'nope'"),
        ({"until": T0 - DAY}, "until is before start"),
        ({"down": [(T0 + 2 * DAY, T0 + DAY)]}, "down-time"),
        ({"triggers": [T0 + 9 * DAY]}, "outside start..until"),
    ],
)
async def test_what_cannot_be_simulated_is_refused(kwargs: dict[str, object], message: str) -> None:
    arguments: dict[str, object] = {"task": "nightly", "start": T0, "until": T0 + 3 * DAY}
    arguments.update(kwargs)
    with pytest.raises(ValueError, match=message):
        await simulate_slots(NIGHTLY, **arguments)  # type: ignore[arg-type]


async def test_a_run_length_that_raises_ends_the_simulation_with_its_error() -> None:
    def run_s(run: RunStart) -> float:
        raise ZeroDivisionError("no length")

    with pytest.raises(ZeroDivisionError, match="no length"):
        await simulate_slots(NIGHTLY, "nightly", start=T0, until=T0 + DAY, run_s=run_s)
