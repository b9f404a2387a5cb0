"""RequestDeadlines: every connection still sending its request, under one timer."""

from __future__ import annotations

import asyncio
from dataclasses import dataclass, field
from typing import Any, cast

from hypothesis import given
from hypothesis import strategies as st

from daemon.server.deadlines import RequestDeadlines
from tests.support.timers import ManualTimers


@dataclass(eq=False)
class _Connection:
    name: str
    expired_at: list[float] = field(default_factory=list)
    clock: ManualTimers | None = None

    def request_expired(self) -> None:
        assert self.clock is not None
        self.expired_at.append(self.clock.now)


def _deadlines(clock: ManualTimers, deadline_s: float) -> RequestDeadlines:
    deadlines = RequestDeadlines(deadline_s)
    deadlines.loop = cast(asyncio.AbstractEventLoop, clock)
    return deadlines


def test_only_requests_still_unfinished_at_their_deadline_expire() -> None:
    clock = ManualTimers()
    deadlines = _deadlines(clock, 10.0)
    first, second, third = (_Connection(name, clock=clock) for name in ("a", "b", "c"))
    for at, connection in ((0.0, first), (1.0, second), (2.0, third)):
        clock.advance(at)
        deadlines.watch(connection)
    assert len(clock.pending()) == 1  # one timer, however many are watched
    deadlines.forget(second)  # its request arrived
    clock.advance(9.5)
    assert (first.expired_at, second.expired_at, third.expired_at) == ([], [], [])
    clock.advance(10.0)
    assert first.expired_at == [10.0]
    clock.advance(20.0)
    assert (first.expired_at, second.expired_at, third.expired_at) == ([10.0], [], [12.0])
    assert clock.pending() == []  # nothing watched: no timer
    assert deadlines.watched() == 0


def test_close_stops_the_timer_and_tells_no_one() -> None:
    clock = ManualTimers()
    deadlines = _deadlines(clock, 1.0)
    connection = _Connection("a", clock=clock)
    deadlines.watch(connection)
    deadlines.close()
    clock.advance(5.0)
    assert connection.expired_at == []
    assert clock.pending() == []


def test_a_connection_accepted_after_the_timer_fired_gets_its_own_turn() -> None:
    clock = ManualTimers()
    deadlines = _deadlines(clock, 1.0)
    early, late = _Connection("early", clock=clock), _Connection("late", clock=clock)
    deadlines.watch(early)
    clock.advance(1.0)
    assert early.expired_at == [1.0]
    clock.advance(3.0)
    deadlines.watch(late)
    clock.advance(4.0)
    assert late.expired_at == [4.0]


_OPS = st.lists(
    st.one_of(
        st.tuples(st.just("watch"), st.integers(0, 9)),
        st.tuples(st.just("forget"), st.integers(0, 9)),
        st.tuples(st.just("advance"), st.floats(0.0, 3.0)),
    ),
    max_size=60,
)


@given(_OPS, st.floats(0.01, 2.0))
def test_each_watched_connection_expires_once_at_its_deadline(
    ops: list[tuple[str, Any]], deadline_s: float
) -> None:
    """A model: a connection watched and not forgotten expires exactly once, when the clock
    reaches its deadline (a millisecond early at most); a forgotten one does not; at most one
    timer is ever pending."""
    clock = ManualTimers()
    deadlines = _deadlines(clock, deadline_s)
    connections = [_Connection(str(n), clock=clock) for n in range(10)]
    due: dict[int, float] = {}  # the model: what is watched, and until when
    expirations = [0] * len(connections)  # how often each should have expired by now
    for op, arg in ops:
        if op == "watch" and arg not in due:
            deadlines.watch(connections[arg])
            due[arg] = clock.now + deadline_s
        elif op == "forget":
            deadlines.forget(connections[arg])
            due.pop(arg, None)
        elif op == "advance":
            target = clock.now + arg
            clock.advance(target)
            for n, when in list(due.items()):
                told = len(connections[n].expired_at) > expirations[n]
                if when <= target or (told and when <= target + 0.001):
                    assert told, f"{n} was due at {when}, the clock is at {target}"
                    assert when - 0.001 - 1e-9 <= connections[n].expired_at[-1] <= target
                    expirations[n] += 1
                    del due[n]
        assert len(clock.pending()) <= 1
        assert [len(c.expired_at) for c in connections] == expirations
