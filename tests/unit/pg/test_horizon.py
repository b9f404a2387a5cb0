"""How many runs a replica holds: what its executor can start within the horizon."""

from __future__ import annotations

from daemon.pg.horizon import HORIZON_S, RunHorizon


def test_unmeasured_runs_hold_one_to_start_and_one_next() -> None:
    assert RunHorizon().window(cap=20) == 2


def test_long_runs_hold_one_and_quick_runs_a_whole_batch() -> None:
    slow = RunHorizon()
    for _ in range(20):
        slow.observe(5.0)
    assert slow.window(cap=20) == 1
    quick = RunHorizon()
    for _ in range(40):
        quick.observe(0.002)
    assert quick.window(cap=20) == 20
    assert quick.window(cap=5) == 5


def test_runs_of_a_tenth_of_the_horizon_hold_about_ten_more() -> None:
    horizon = RunHorizon()
    for _ in range(60):
        horizon.observe(HORIZON_S / 10)
    assert 10 <= horizon.window(cap=100) <= 11


def test_a_nonsense_duration_is_ignored() -> None:
    horizon = RunHorizon()
    horizon.observe(float("nan"))
    horizon.observe(-1.0)
    assert horizon.window(cap=20) == 2
