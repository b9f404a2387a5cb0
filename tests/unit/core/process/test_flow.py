"""A run's output flow (daemon/core/process/flow.py): readers hold it back, the child's pipes
pause while any does, a reader that holds it too long is let go, and a trim keeps what a
holding follower has not read."""

from __future__ import annotations

import asyncio

from daemon.core.journal import FollowerHold, RunLog
from daemon.core.process.flow import OutputFlow
from daemon.core.runqueue import Run, RunRequest


class Pipes:
    """What the flow pauses and resumes: the child's pipes, as a record of calls."""

    def __init__(self) -> None:
        self.calls: list[str] = []

    def pause(self) -> None:
        self.calls.append("pause")

    def resume(self) -> None:
        self.calls.append("resume")


def _flow_of_a_child(hold_max_s: float) -> tuple[OutputFlow, Pipes]:
    """A run's output flow connected to its child's pipes, recorded."""
    flow, pipes = OutputFlow(hold_max_s=hold_max_s), Pipes()
    flow.connect(pipes.pause, pipes.resume)
    return flow, pipes


async def test_the_pipes_pause_while_any_reader_holds_and_resume_when_none_does() -> None:
    flow, pipes = _flow_of_a_child(60)

    def first() -> None: ...
    def second() -> None: ...

    assert flow.hold(first)
    assert flow.hold(second)
    assert flow.hold(first)  # again: still one hold
    assert pipes.calls == ["pause"]
    flow.release(first)
    assert pipes.calls == ["pause"]  # the second still holds
    flow.release(second)
    assert pipes.calls == ["pause", "resume"]
    flow.release(second)  # not holding: nothing
    assert pipes.calls == ["pause", "resume"]
    assert not flow.held


async def test_a_reader_that_holds_too_long_is_let_go_and_the_pipes_resume() -> None:
    flow, pipes = _flow_of_a_child(0.01)
    let_go = asyncio.Event()
    assert flow.hold(let_go.set)
    async with asyncio.timeout(10):
        await let_go.wait()
    assert pipes.calls == ["pause", "resume"]
    assert not flow.held


async def test_a_reader_that_raises_when_let_go_never_reaches_the_loop() -> None:
    flow, pipes = _flow_of_a_child(0.01)
    called = asyncio.Event()

    def broken() -> None:
        called.set()
        raise RuntimeError("reader bug")

    assert flow.hold(broken)
    async with asyncio.timeout(10):
        await called.wait()
    assert pipes.calls == ["pause", "resume"]


async def test_nothing_is_held_without_a_child_or_when_holding_is_off() -> None:
    def reader() -> None: ...

    assert not OutputFlow(hold_max_s=5).hold(reader)  # no child connected
    off, pipes = OutputFlow(hold_max_s=0), Pipes()
    off.connect(pipes.pause, pipes.resume)
    assert not off.hold(reader)
    assert pipes.calls == []


async def test_a_hold_made_before_the_child_pauses_it_at_once_and_ends_with_it() -> None:
    flow, _pipes = _flow_of_a_child(60)

    def reader() -> None: ...

    assert flow.hold(reader)
    flow.disconnect()  # the child is gone: its holds with it, its timers cancelled
    assert not flow.held
    later = Pipes()
    flow.connect(later.pause, later.resume)
    assert later.calls == []


async def test_a_trim_keeps_what_a_follower_has_not_read_while_it_holds_the_run_back() -> None:
    log = RunLog(Run(RunRequest(task="chatty")), bytes_max=640 * 1024)
    flow, pipes = _flow_of_a_child(60)
    log.flow = flow
    reader = FollowerHold()  # at line 0
    log.follow(lambda: None, reader)
    read = ["x" * 100] * 1000  # what one read of the pipe gives
    for _ in range(6):
        log.add_lines("stdout", read)
    assert log.first_seq == 0, "the follower's unread lines are kept"
    assert reader.holding is flow
    assert pipes.calls == ["pause"]
    assert log.bytes < log.bytes_max + 2 * 160_000  # past the bound by what was read
    reader.seq = log.end_seq  # it has read them all
    reader.caught_up()
    assert pipes.calls == ["pause", "resume"]
    log.add_lines("stdout", read)
    assert log.first_seq > 0  # trimmed again, down to the bound
    assert log.bytes <= log.bytes_max
    assert reader.holding is None


async def test_a_follower_let_go_or_unable_to_hold_loses_lines_and_the_bound_holds() -> None:
    log = RunLog(Run(RunRequest(task="chatty")), bytes_max=640 * 1024)
    flow, pipes = _flow_of_a_child(60)
    log.flow = flow
    reader = FollowerHold()
    log.follow(lambda: None, reader)
    read = ["x" * 100] * 1000
    for _ in range(6):
        log.add_lines("stdout", read)
    assert reader.holding is flow
    flow.disconnect()  # as the flow does when it lets a reader go for holding too long
    reader._let_go()
    log.add_lines("stdout", read)
    assert log.first_seq > 0  # it lost lines: counted by its reader, as before
    assert log.bytes <= log.bytes_max
    assert not reader.take(flow)  # let go: no hold until it has caught up
    off = RunLog(Run(RunRequest(task="chatty")), bytes_max=640 * 1024)
    off.flow = OutputFlow(hold_max_s=0)  # RUNBROKER_OUTPUT_HOLD=0: nothing is ever held
    off.flow.connect(pipes.pause, pipes.resume)
    off.follow(lambda: None, FollowerHold())
    for _ in range(7):
        off.add_lines("stdout", read)
    assert off.first_seq > 0
    assert off.bytes <= off.bytes_max
