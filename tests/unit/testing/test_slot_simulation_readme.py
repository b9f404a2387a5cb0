"""docs/testing.md's example of ``simulate_slots``, kept word for word (tests/static checks)."""

from datetime import UTC, datetime, timedelta

from daemon.testing import simulate_slots

TASKS = """
[tasks.nightly]
command = ["/app/nightly.sh"]
schedule = "daily 02:30"
tz = "Europe/Berlin"
on_busy = "queue"
start_deadline = "15m"
"""


async def test_nightly_misses_its_slot_behind_itself_and_catches_up_after_a_deploy() -> None:
    start = datetime(2026, 3, 26, 12, tzinfo=UTC)
    simulation = await simulate_slots(
        TASKS,
        "nightly",
        start=start,
        until=start + timedelta(days=7),
        run_s=lambda run: timedelta(hours=25 if run.index == 1 else 1),
        down=[(datetime(2026, 3, 29, 12, tzinfo=UTC), datetime(2026, 4, 1, 0, 40, tzinfo=UTC))],
    )
    assert simulation.outcomes() == [
        (datetime(2026, 3, 27, 1, 30, tzinfo=UTC), "ran"),  # 25 hours long
        (datetime(2026, 3, 28, 1, 30, tzinfo=UTC), "missed"),  # queued past its start_deadline
        (datetime(2026, 3, 29, 1, 0, tzinfo=UTC), "ran"),  # 03:00 CEST: 02:30 did not exist
        (datetime(2026, 3, 30, 0, 30, tzinfo=UTC), "missed"),  # and the 31st: down, too late
        (datetime(2026, 4, 1, 0, 30, tzinfo=UTC), "caught_up"),  # 10 minutes late: within it
        (datetime(2026, 4, 2, 0, 30, tzinfo=UTC), "ran"),
    ]
    assert simulation.slot_at(datetime(2026, 3, 29, 1, 0, tzinfo=UTC)).note.startswith("DST gap")
    caught_up = simulation.slot_at(datetime(2026, 4, 1, 0, 30, tzinfo=UTC))
    assert simulation.run(caught_up.run_id).started_at == datetime(2026, 4, 1, 0, 40, tzinfo=UTC)
