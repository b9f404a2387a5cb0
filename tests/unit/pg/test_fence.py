"""Lease fencing's rule and timers (daemon/pg/fence.py), on a recorded loop: no real time."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field

from hypothesis import given
from hypothesis import strategies as st

from daemon.pg.fence import (
    MIN_LEASE_S,
    LeaseFence,
    fencing_problem,
    graces_s,
    lead_s,
    renew_every_s,
    safety_s,
)
from tests.support.timers import ManualTimers


def _fence(
    lease_s: float = 60.0, grace_s: float = 5.0
) -> tuple[LeaseFence[str], ManualTimers, list[str]]:
    loop, fenced = ManualTimers(now=100.0), list[str]()
    fence: LeaseFence[str] = LeaseFence(
        lease_s,
        grace_s,
        fenced.append,
        loop=loop,  # type: ignore[arg-type]
    )
    return fence, loop, fenced


def test_the_fence_is_set_a_grace_and_a_margin_before_the_lease_ends() -> None:
    fence, loop, fenced = _fence(lease_s=60.0, grace_s=5.0)
    fence.renewed(7, "run 7", sent_at=100.0)
    (timer,) = loop.pending()
    assert timer.when == 100.0 + 60.0 - (5.0 + safety_s(60.0))
    timer.callback(*timer.args)
    assert fenced == ["run 7"]


def test_a_renewal_moves_the_fence_and_forgetting_drops_it() -> None:
    fence, loop, fenced = _fence()
    fence.renewed(7, "run 7", sent_at=100.0)
    fence.renewed(7, "run 7", sent_at=112.0)
    (timer,) = loop.pending()
    assert timer.when == 112.0 + 60.0 - lead_s(60.0, 5.0)
    fence.forget(7)
    assert not loop.pending()
    fence.renewed(8, "run 8", sent_at=100.0)
    fence.close()
    assert not loop.pending()
    assert fenced == []


def test_settings_that_break_the_rule_are_refused_naming_the_grace() -> None:
    graces = graces_s(5.0, {"report": 40.0, "quick": None})
    assert graces == {"RUNBROKER_GRACE": 5.0, "task report": 40.0}
    problem = fencing_problem(60.0, graces)
    assert problem is not None
    assert "task report" in problem
    assert "half of RUNBROKER_LEASE" in problem
    assert fencing_problem(60.0, graces_s(5.0, {"report": 30.0})) is None
    short = fencing_problem(2.0, graces_s(0.5, {}))
    assert short is not None
    assert "RUNBROKER_LEASE" in short


@given(
    lease_s=st.floats(min_value=MIN_LEASE_S, max_value=86_400.0),
    grace_share=st.floats(min_value=0.0, max_value=0.5),
)
def test_a_replica_that_renews_on_time_never_reaches_its_fence(
    lease_s: float, grace_share: float
) -> None:
    grace_s = lease_s * grace_share
    assert fencing_problem(lease_s, graces_s(grace_s, {})) is None
    # Renewals are sent every fifth of the lease after the previous one ends, and each may
    # take up to that long: the fence, measured from the last sent, must lie beyond both.
    assert 2 * renew_every_s(lease_s) <= lease_s - lead_s(lease_s, grace_s)
    # A cut-off replica's kill (grace included) lands the safety margin before the lease ends.
    kill_at = lease_s - lead_s(lease_s, grace_s) + grace_s
    assert kill_at <= lease_s - safety_s(lease_s) + lease_s * 1e-12  # float rounding


async def test_on_the_real_loop_the_fence_fires_once_at_its_time() -> None:
    fired = asyncio.Event()
    loop = asyncio.get_running_loop()
    fence: LeaseFence[str] = LeaseFence(3.0, 0.0, lambda _held: fired.set())
    # sent long enough ago that the fence is already due: it fires on the next loop turn
    fence.renewed(1, "run 1", sent_at=loop.time() - 3.0)
    await asyncio.wait_for(fired.wait(), timeout=5)


def test_widening_moves_the_timers_already_set_earlier() -> None:
    fence, loop, fenced = _fence(lease_s=60.0, grace_s=5.0)
    fence.renewed(1, "early", sent_at=100.0)  # claimed before a reload raised the grace
    fence.renewed(2, "late", sent_at=130.0)
    old_at = sorted(t.when for t in loop.pending())
    fence.widen(20.0)
    grown_s = lead_s(60.0, 20.0) - lead_s(60.0, 5.0)
    moved = sorted(t.when for t in loop.pending())
    assert moved == [old_at[0] - grown_s, old_at[1] - grown_s]
    assert moved[0] + lead_s(60.0, 20.0) == 100.0 + 60.0  # the new grace ends in time
    fence.widen(10.0)  # narrower: nothing moves
    assert sorted(t.when for t in loop.pending()) == moved
    loop.advance(moved[0])
    assert fenced == ["early"]
    loop.advance(moved[1])
    assert fenced == ["early", "late"]


def test_the_runs_of_one_claim_share_one_timer_until_each_is_forgotten() -> None:
    fence, loop, fenced = _fence(lease_s=60.0, grace_s=5.0)
    for run_id in (1, 2, 3):
        fence.renewed(run_id, f"run {run_id}", sent_at=100.0)
    (timer,) = loop.pending()
    fence.forget(2)  # settled: the others stay fenced by the same timer
    fence.renewed(3, "run 3", sent_at=112.0)  # renewed: moved on to a timer of its own
    assert sorted(t.when for t in loop.pending()) == [timer.when, timer.when + 12.0]
    loop.advance(timer.when)
    assert fenced == ["run 1"]
    fence.forget(1)  # already fenced: nothing left to forget
    fence.forget(3)
    assert not loop.pending()
    loop.advance(timer.when + 20.0)
    assert fenced == ["run 1"]


async def test_a_widened_fence_already_past_fires_at_once() -> None:
    fired = asyncio.Event()
    fence: LeaseFence[str] = LeaseFence(20.0, 0.0, lambda _held: fired.set())
    sent_at = fence.now() - 10.0  # renewed 10 s ago: the old fence is ~9 s ahead
    fence.renewed(1, "held", sent_at)
    fence.widen(10.0)  # the new fence, sent + 20 - 11, is already past
    async with asyncio.timeout(2):
        await fired.wait()


@dataclass
class _Backstop:
    """The watchdog's side, recorded: (run id, deadline) told, run ids forgotten."""

    deadlines: list[tuple[str, float]] = field(default_factory=list)
    forgotten: list[str] = field(default_factory=list)

    def deadline(self, key: str, at_s: float) -> None:
        self.deadlines.append((key, at_s))

    def forget(self, key: str) -> None:
        self.forgotten.append(key)


def test_the_backstop_holds_each_run_in_the_queue_to_its_lease_less_the_margin() -> None:
    """A stalled daemon fires no timer: its watchdog kills the run's group at the last
    renewal's ``sent + LEASE - margin``, later than the fence's own SIGTERM by the grace."""
    fence, _loop, _fenced = _fence(lease_s=60.0, grace_s=5.0)
    backstop = _Backstop()
    fence.backstop = backstop
    fence.renewed(7, "held", sent_at=100.0)
    assert backstop.deadlines == []  # claimed, not yet a run: nothing to kill
    fence.submitted(7, "r-1")
    fence.renewed(7, "held", sent_at=112.0)
    margin_s = safety_s(60.0)
    assert backstop.deadlines == [("r-1", 160.0 - margin_s), ("r-1", 172.0 - margin_s)]
    fence.forget(7)  # fenced: told to stop, still guarded until its record is handed on
    assert backstop.forgotten == []
    fence.settled(7)
    assert backstop.forgotten == ["r-1"]


async def test_a_run_that_fails_to_stop_leaves_the_others_of_its_time_fenced() -> None:
    fenced: list[str] = []
    errors: list[dict[str, object]] = []
    both = asyncio.Event()
    loop = asyncio.get_running_loop()
    loop.set_exception_handler(lambda _loop, context: errors.append(context))

    def stop(held: str) -> None:
        fenced.append(held)
        if len(fenced) == 2:
            both.set()
        if held == "run 1":
            raise RuntimeError("cannot stop")

    fence: LeaseFence[str] = LeaseFence(3.0, 0.0, stop)
    sent_at = loop.time() - 3.0  # already due: fired on the next loop turn
    fence.renewed(1, "run 1", sent_at)
    fence.renewed(2, "run 2", sent_at)
    try:
        await asyncio.wait_for(both.wait(), timeout=2)
    finally:
        loop.set_exception_handler(None)
    assert fenced == ["run 1", "run 2"]
    assert len(errors) == 1
