"""A schedule's next planned times (daemon/schedules/planned.py): the ticker's own instants, each
with its zone's wall time and what the 2026 offset changes of Berlin and Lord Howe did to it."""

from __future__ import annotations

import asyncio
from datetime import UTC, datetime, timedelta
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.core.runqueue import RunQueue
from daemon.core.ticker.clock import TickClock
from daemon.core.ticker.ticker import Ticker, TickPlan
from daemon.schedules import Schedule, parse_schedule
from daemon.schedules.planned import MAX_PLANNED, interval_times, planned_times

BERLIN = "Europe/Berlin"  # 03-29 01:00Z 02:00 -> 03:00; 10-25 01:00Z 03:00 -> 02:00
LORD_HOWE = "Australia/Lord_Howe"  # 04-04 15:00Z 02:00 -> 01:30; 10-03 15:30Z 02:00 -> 02:30
ZONES = ["UTC", BERLIN, LORD_HOWE, "America/New_York", "Pacific/Chatham", "America/Santiago"]


def z(month: int, day: int, hour: int, minute: int = 0) -> datetime:
    return datetime(2026, month, day, hour, minute, tzinfo=UTC)


def test_a_daily_time_in_the_berlin_gap_runs_at_its_end() -> None:
    times = planned_times(parse_schedule("daily 02:30", BERLIN), z(3, 27, 12), 3)
    assert [t.utc for t in times] == [z(3, 28, 1, 30), z(3, 29, 1), z(3, 30, 0, 30)]
    assert [t.local.isoformat() for t in times] == [
        "2026-03-28T02:30:00+01:00",
        "2026-03-29T03:00:00+02:00",
        "2026-03-30T02:30:00+02:00",
    ]
    assert times[0].dst is None
    assert times[2].dst is None
    mark = times[1].dst
    assert mark is not None
    assert (mark.kind, mark.wall, mark.fold_pass) == ("gap", "02:30", None)
    assert "02:30 did not exist" in mark.note
    assert "from 02:00 to 03:00" in mark.note


def test_a_daily_time_in_the_berlin_fold_runs_once_at_its_first_pass() -> None:
    times = planned_times(parse_schedule("daily 02:30", BERLIN), z(10, 24, 12), 2)
    assert [t.utc for t in times] == [z(10, 25, 0, 30), z(10, 26, 1, 30)]
    mark = times[0].dst
    assert mark is not None
    assert (mark.kind, mark.wall, mark.fold_pass) == ("fold", "02:30", "first")
    assert "runs once" in mark.note
    assert times[1].dst is None


def test_lord_howe_half_hour_gap_and_fold() -> None:
    spring = planned_times(parse_schedule("daily 02:00", LORD_HOWE), z(10, 3, 0), 2)
    assert spring[0].local.isoformat() == "2026-10-04T02:30:00+11:00"
    assert spring[0].dst is not None
    assert spring[0].dst.kind == "gap"
    assert "from 02:00 to 02:30" in spring[0].dst.note
    autumn = planned_times(parse_schedule("daily 01:45", LORD_HOWE), z(4, 4, 0), 2)
    assert autumn[0].local.isoformat() == "2026-04-05T01:45:00+11:00"
    assert autumn[0].dst is not None
    assert autumn[0].dst.fold_pass == "first"
    assert autumn[1].local.isoformat() == "2026-04-06T01:45:00+10:30"


def test_a_wildcard_job_runs_both_passes_of_a_fold_and_says_which() -> None:
    times = planned_times(parse_schedule("cron */30 * * * *", LORD_HOWE), z(4, 4, 14), 3)
    assert [t.local.isoformat() for t in times] == [
        "2026-04-05T01:30:00+11:00",
        "2026-04-05T01:30:00+10:30",
        "2026-04-05T02:00:00+10:30",
    ]
    passes = [None if t.dst is None else (t.dst.kind, t.dst.fold_pass) for t in times]
    assert passes == [("fold", "first"), ("fold", "second"), None]
    assert times[1].dst is not None
    assert "runs at both" in times[1].dst.note


def test_several_skipped_times_are_named_in_the_one_moved_slot() -> None:
    times = planned_times(parse_schedule("cron 0,30 2 * * *", BERLIN), z(3, 28, 12), 2)
    assert times[0].utc == z(3, 29, 1)
    assert times[0].dst is not None
    assert times[0].dst.wall == "02:00, 02:30"


def test_a_one_shot_wall_time_in_a_gap_or_fold() -> None:
    gap = planned_times(parse_schedule("at 2026-03-29T02:30", BERLIN), z(1, 1, 0), 5)
    assert [t.utc for t in gap] == [z(3, 29, 1)]
    assert gap[0].dst is not None
    assert gap[0].dst.kind == "gap"
    fold = planned_times(parse_schedule("at 2026-10-25T02:30", BERLIN), z(1, 1, 0), 5)
    assert fold[0].dst is not None
    assert fold[0].dst.kind == "fold"
    exact = planned_times(parse_schedule("at 2026-10-25T02:30:00+01:00", BERLIN), z(1, 1, 0), 5)
    assert exact[0].dst is None  # an offset was given: no wall time to move
    assert planned_times(parse_schedule("at 2026-01-01T00:00Z"), z(1, 1, 0), 5) == []


def test_elapsed_time_is_never_marked() -> None:
    times = planned_times(parse_schedule("every 1h", BERLIN), z(3, 29, 0), 3)
    assert [t.utc for t in times] == [z(3, 29, 1), z(3, 29, 2), z(3, 29, 3)]
    assert [t.local.hour for t in times] == [3, 4, 5]
    assert all(t.dst is None for t in times)


def test_a_listing_is_bounded() -> None:
    assert len(planned_times(parse_schedule("every 1s"), z(1, 1, 0), 10**6)) == MAX_PLANNED
    assert planned_times(parse_schedule("every 1s"), z(1, 1, 0), 0) == []


def test_interval_times_follow_the_grid_from_the_next_tick() -> None:
    times = interval_times(z(5, 1, 0), 90.0, 3)
    assert [t.utc for t in times] == [
        z(5, 1, 0),
        z(5, 1, 0, 1) + timedelta(seconds=30),
        z(5, 1, 0, 3),
    ]
    assert all(t.dst is None for t in times)
    assert len(interval_times(datetime.max.replace(tzinfo=UTC), 3600.0, 3)) == 1


@pytest.mark.parametrize("tz", ["Pacific/Kiritimati", "America/Santiago", "Europe/Berlin"])
@pytest.mark.parametrize("spec", ["every 1h", "daily 23:59", "cron */30 * * * *"])
@pytest.mark.parametrize("year", [1, 9999])
def test_a_listing_ends_quietly_at_the_edges_of_time(spec: str, tz: str, year: int) -> None:
    after = datetime(year, 1, 1, tzinfo=UTC) if year == 1 else datetime(year, 12, 31, tzinfo=UTC)
    times = planned_times(parse_schedule(spec, tz), after, 50)
    assert all(t.utc > after for t in times)
    assert len(times) < 50 or year == 1


def test_a_naive_instant_is_refused() -> None:
    with pytest.raises(ValueError, match="naive"):
        planned_times(parse_schedule("daily 02:30", BERLIN), datetime(2026, 1, 1), 1)


# -- the ticker agrees --------------------------------------------------------------------------
class _RecordingTicker(Ticker):
    """Records the clock at each fire instead of queueing a run; stops after ``limit``."""

    def __init__(self, plan: TickPlan, clock: list[datetime], limit: int) -> None:
        ticks = TickClock(sleep=self._advance, now=lambda: clock[0])
        super().__init__(RunQueue(1), [plan], jitter=0.0, clock=ticks)
        self.wall = clock
        self.limit = limit
        self.times: list[datetime] = []
        self.done = asyncio.Event()

    async def _advance(self, seconds: float) -> None:
        self.wall[0] += timedelta(seconds=seconds)
        await asyncio.sleep(0)

    def fire(self, plan: TickPlan, planned_at: float | None = None, note: str = "") -> bool:
        self.times.append(self.wall[0])
        if len(self.times) >= self.limit:
            self.done.set()
        return True


def _ticker_times(schedule: Schedule, start: datetime, count: int) -> list[datetime]:
    async def run() -> list[datetime]:
        ticker = _RecordingTicker(TickPlan("task", schedule=schedule), [start], count)
        loop = asyncio.create_task(ticker.run())
        waiter = asyncio.create_task(ticker.done.wait())
        async with asyncio.timeout(10):
            await asyncio.wait([loop, waiter], return_when=asyncio.FIRST_COMPLETED)
        loop.cancel()
        waiter.cancel()
        await asyncio.gather(loop, waiter, return_exceptions=True)
        return ticker.times[:count]  # it may fire again before this task runs

    return asyncio.run(run())


_fields = st.one_of(
    st.builds("{} {} * * *".format, st.integers(0, 59), st.integers(0, 23)),
    st.builds("{} */{} * * *".format, st.integers(0, 59), st.integers(1, 6)),
    st.builds("*/{} * * * *".format, st.sampled_from([15, 20, 30])),
    st.builds("{} {} * * {}".format, st.integers(0, 59), st.integers(0, 4), st.integers(0, 6)),
)
SPECS = st.one_of(
    st.builds("daily {:02d}:{:02d}".format, st.integers(0, 23), st.integers(0, 59)),
    st.builds("weekly sun {:02d}:{:02d}".format, st.integers(0, 4), st.integers(0, 59)),
    st.builds("cron {}".format, _fields),
    st.builds("every {}m".format, st.integers(1, 600)),
)
# The 2026 changes of the zones above (UTC): the instants are drawn mostly just before one.
CHANGES = [
    z(3, 29, 1),  # Berlin
    z(10, 25, 1),
    z(4, 4, 15),  # Lord Howe
    z(10, 3, 15, 30),
    z(3, 8, 7),  # New York
    z(11, 1, 6),
    z(4, 4, 14),  # Chatham
    z(9, 26, 14),
]
INSTANTS = st.one_of(
    st.datetimes(
        min_value=datetime(2026, 1, 1), max_value=datetime(2026, 12, 31), timezones=st.just(UTC)
    ),
    st.builds(
        lambda change, before_s: change - timedelta(seconds=before_s),
        st.sampled_from(CHANGES),
        st.integers(0, 3 * 86400),
    ),
)


@settings(max_examples=40, deadline=None)
@given(spec=SPECS, tz=st.sampled_from(ZONES), start=INSTANTS, count=st.integers(1, 6))
def test_the_ticker_fires_at_the_planned_times(
    spec: str, tz: str, start: datetime, count: int
) -> None:
    schedule = parse_schedule(spec, tz)
    planned = planned_times(schedule, start, count)
    assert [t.utc for t in planned] == _ticker_times(schedule, start, count)


@settings(max_examples=200, deadline=None)
@given(spec=SPECS, tz=st.sampled_from(ZONES), start=INSTANTS)
def test_every_mark_says_what_the_zone_did(spec: str, tz: str, start: datetime) -> None:
    zone = ZoneInfo(tz)
    for t in planned_times(parse_schedule(spec, tz), start, 8):
        # PEP 495: a time in a fold never equals one of another zone, so compare in UTC
        assert t.local.astimezone(UTC) == t.utc
        assert t.local.tzinfo is zone
        assert t.utc.tzinfo is UTC
        if t.dst is None:
            continue
        wall = t.local.replace(tzinfo=None)
        if t.dst.kind == "fold":
            twice = wall.replace(tzinfo=zone, fold=1).astimezone(UTC)
            assert twice != wall.replace(tzinfo=zone, fold=0).astimezone(UTC)
            assert t.dst.fold_pass == ("second" if t.local.fold else "first")
        else:  # a moved slot sits right at the change, and the wall time it names was skipped
            before = (t.utc - timedelta(seconds=1)).astimezone(zone).utcoffset()
            assert before is not None
            assert before < (t.local.utcoffset() or before)
            assert t.dst.wall.split(", ")[0] < f"{wall:%H:%M}" or wall.hour == 0


@settings(max_examples=200, deadline=None)
@given(
    hour=st.integers(0, 23),
    minute=st.sampled_from([0, 15, 30, 45, 59]),
    tz=st.sampled_from(ZONES),
    start=INSTANTS,
)
def test_a_daily_time_run_off_its_wall_time_is_always_marked_moved(
    hour: int, minute: int, tz: str, start: datetime
) -> None:
    wall = f"{hour:02d}:{minute:02d}"
    for t in planned_times(parse_schedule(f"daily {wall}", tz), start, 4):
        moved = f"{t.local:%H:%M}" != wall
        assert (t.dst is not None and t.dst.kind == "gap") == moved
        if moved:
            assert t.dst is not None
            assert t.dst.wall == wall
        elif t.dst is not None:  # a fold: the first pass only
            assert (t.dst.kind, t.dst.fold_pass, t.local.fold) == ("fold", "first", 0)


def test_the_package_offers_the_listing() -> None:
    import daemon.schedules as schedules

    assert schedules.planned_times is planned_times
    assert schedules.PlannedTime.__module__ == "daemon.schedules.planned"
    assert schedules.DstMark.__module__ == "daemon.schedules.dst"
