"""The property ``simulate_slots`` shows a user: every planned time of a task gets exactly one
outcome, over random policies, run durations and down-times (with a state directory none is
left out once the task has had a slot; without one, none is counted twice)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from daemon.core.ticker.busy import ON_BUSY
from daemon.core.ticker.slots import OUTCOMES
from daemon.schedules import parse_schedule
from daemon.testing import RunStart, simulate_slots

START = datetime(2026, 3, 27, 22, 0, tzinfo=UTC)  # Europe/Berlin springs forward on the 29th
UNTIL = START + timedelta(days=2)

TIMINGS = [
    'schedule = "cron */30 * * * *"',
    'schedule = "daily 02:30"\ntz = "Europe/Berlin"',
    'schedule = "cron 0 2,3 * * *"\ntz = "Europe/Berlin"',
    'interval = "45m"',
]


def _tasks_toml(
    timing: str,
    on_busy: str | None,
    deadline: str | None,
    misfire: str,
    window: str | None,
) -> str:
    lines = ["[tasks.job]", 'command = ["/app/job.sh"]', timing, f'misfire = "{misfire}"']
    if on_busy is not None:
        lines.append(f'on_busy = "{on_busy}"')
    if deadline is not None:
        lines.append(f'start_deadline = "{deadline}"')
    if window is not None:
        lines.append(f'catchup_window = "{window}"')
    return "\n".join(lines) + "\n"


def _planned_times(timing: str) -> list[datetime]:
    """Every time the task's schedule or interval plans from START to UNTIL."""
    if timing.startswith("interval"):
        return [START + k * timedelta(minutes=45) for k in range(int(48 * 60 / 45) + 1)]
    spec = timing.split('"')[1]
    tz = timing.split('"')[3] if "tz" in timing else "UTC"
    schedule = parse_schedule(spec, tz)
    times = []
    at = schedule.next_after(START)
    while at is not None and at <= UNTIL:
        times.append(at)
        at = schedule.next_after(at)
    return times


down_times = st.lists(
    st.tuples(
        st.integers(min_value=10, max_value=46 * 60),  # minutes after START
        st.integers(min_value=1, max_value=20 * 60),  # how long down
    ),
    max_size=2,
)


@settings(max_examples=30, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    timing=st.sampled_from(TIMINGS),
    on_busy=st.sampled_from([None, *ON_BUSY]),
    deadline=st.sampled_from([None, "5m", "40m"]),
    misfire=st.sampled_from(["coalesce", "skip"]),
    window=st.sampled_from([None, "3h", "30h"]),
    durations_min=st.lists(st.sampled_from([0, 1, 10, 30, 50, 120, 300]), min_size=1, max_size=4),
    down=down_times,
    with_state_dir=st.booleans(),
)
async def test_every_planned_time_has_exactly_one_outcome(
    timing: str,
    on_busy: str | None,
    deadline: str | None,
    misfire: str,
    window: str | None,
    durations_min: list[int],
    down: list[tuple[int, int]],
    with_state_dir: bool,
) -> None:
    windows: list[tuple[datetime, datetime]] = []
    after = START
    for offset_min, length_min in sorted(down):
        stop = max(after, START + timedelta(minutes=offset_min))
        restart = min(stop + timedelta(minutes=length_min), UNTIL)
        if stop < restart:
            windows.append((stop, restart))
            after = restart

    def run_s(run: RunStart) -> float:
        return 60.0 * durations_min[(run.index - 1) % len(durations_min)]

    simulation = await simulate_slots(
        _tasks_toml(timing, on_busy, deadline, misfire, window),
        "job",
        start=START,
        until=UNTIL,
        run_s=run_s,
        down=windows,
        with_state_dir=with_state_dir,
    )
    times = [at for at, _slot in simulation.each_planned_time()]
    assert len(times) == len(set(times)), "a planned time has two outcomes"
    assert all(slot.outcome in OUTCOMES for slot in simulation.slots)
    assert sum(simulation.totals().values()) == len(times)
    planned = _planned_times(timing)
    if with_state_dir or not windows:  # none left out from the first slot on, none invented
        first = times[0] if times else UNTIL + timedelta(seconds=1)
        assert times == [at for at in planned if at >= first]
        if with_state_dir:  # the state holds the task from its first start: nothing lost since
            assert [at for at in planned if START < at < first] == []
    for slot in simulation.slots:
        if slot.outcome in ("ran", "caught_up"):
            run = simulation.run(slot.run_id)
            assert run.ended_at >= slot.planned_at
            if deadline is not None and run.started_at is not None:  # a run or a catch-up
                late = run.started_at - slot.planned_at
                assert late <= timedelta(minutes=int(deadline[:-1])), "started past its deadline"
