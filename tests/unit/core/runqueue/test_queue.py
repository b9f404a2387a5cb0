"""The run queue: bounded FIFO, rejections, and exactly one result per accepted run."""

from __future__ import annotations

import asyncio

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from daemon.core.runqueue import (
    Event,
    Rejected,
    Run,
    RunQueue,
    RunRequest,
    RunResult,
)
from daemon.wire.protocol import EVENT_OUTPUT, output_lines_event
from daemon.wire.reasons import REASON_CLOSED, REASON_FULL, REASON_SHUTDOWN_CANCEL


def _req(task: str = "default") -> RunRequest:
    return RunRequest(task=task)


async def test_fifo_order_and_capacity_counts_waiting_only() -> None:
    queue = RunQueue(capacity=2)
    first = queue.submit(_req("a"))
    taken = await queue.take()
    assert taken is first
    # The running one does not count: two more fit.
    second = queue.submit(_req("b"))
    third = queue.submit(_req("c"))
    with pytest.raises(Rejected) as excinfo:
        queue.submit(_req("d"))
    assert excinfo.value.reason == REASON_FULL
    assert [await queue.take(), await queue.take()] == [second, third]
    assert queue.statistics().rejected_full == 1


async def test_capacity_zero_runs_now_or_rejects() -> None:
    queue = RunQueue(capacity=0)
    assert queue.room() == 1
    run = queue.submit(_req())  # idle: it starts at once
    assert queue.room() == 0
    with pytest.raises(Rejected) as full:
        queue.submit(_req())
    assert full.value.reason == REASON_FULL
    assert await queue.take() is run
    with pytest.raises(Rejected):
        queue.submit(_req())  # busy
    run.finish(RunResult(ok=True))
    queue.release(run)
    assert queue.submit(_req()) is not None


async def test_closed_rejects_before_full() -> None:
    queue = RunQueue(capacity=0)
    waiting = queue.submit(_req())
    with pytest.raises(Rejected) as full:
        queue.submit(_req())
    assert full.value.reason == REASON_FULL
    queue.close()
    with pytest.raises(Rejected) as closed:
        queue.submit(_req())
    assert closed.value.reason == REASON_CLOSED
    assert await queue.take() is waiting  # a closed queue still drains what it accepted
    assert await queue.take() is None


async def test_take_waits_for_a_submission() -> None:
    queue = RunQueue(capacity=1)
    taker = asyncio.create_task(queue.take())
    await asyncio.sleep(0)
    assert not taker.done()
    run = queue.submit(_req())
    assert await taker is run
    assert queue.current is run


def test_take_waiting_takes_the_oldest_run_or_none_without_waiting() -> None:
    queue = RunQueue(capacity=4)
    assert queue.take_waiting() is None
    assert queue.current is None
    first = queue.submit(_req("a"))
    queue.submit(_req("b"))
    assert queue.take_waiting() is first
    assert queue.current is first
    assert queue.waiting_count() == 1


async def test_close_wakes_a_waiting_taker() -> None:
    queue = RunQueue(capacity=1)
    taker = asyncio.create_task(queue.take())
    await asyncio.sleep(0)
    queue.close()
    assert await taker is None


async def test_cancel_all_gives_each_waiting_run_the_shutdown_reason() -> None:
    queue = RunQueue(capacity=3)
    runs = [queue.submit(_req()) for _ in range(3)]
    queue.close()
    assert queue.cancel_all() == 3
    for run in runs:
        result = await run.wait()
        assert result.reason == REASON_SHUTDOWN_CANCEL
        assert result.cancelled
        assert not result.ok


async def test_events_in_order_and_exactly_one_done() -> None:
    queue = RunQueue(capacity=1)
    seen: list[str] = []

    def listener(_run: Run, event: Event) -> None:
        seen.append(event.kind)

    run = queue.submit(_req(), listener)
    taken = await queue.take()
    assert taken is run
    run.mark_started()
    assert run.finish(RunResult(ok=True)) is True
    assert run.finish(RunResult(ok=False, reason="late")) is False
    queue.release(run)
    assert seen == ["queued", "started", "done"]
    assert (await run.wait()).ok


async def test_cancel_waiting_unknown_id_is_none() -> None:
    queue = RunQueue(capacity=1)
    assert queue.cancel_waiting("nope") is None


async def test_is_pending_sees_waiting_and_running() -> None:
    queue = RunQueue(capacity=2)
    queue.submit(_req("a"))
    assert queue.is_pending("a")
    assert not queue.is_pending("b")
    run = await queue.take()
    assert run is not None
    assert queue.is_pending("a")
    run.finish(RunResult(ok=True))
    queue.release(run)
    assert not queue.is_pending("a")


ops = st.lists(
    st.one_of(
        st.just(("submit",)),
        st.just(("take",)),
        st.just(("close",)),
        st.tuples(st.just("cancel"), st.integers(0, 30)),
    ),
    max_size=60,
)


@settings(max_examples=200, deadline=None)
@given(capacity=st.integers(0, 5), script=ops)
def test_model_every_accepted_run_gets_one_result_in_fifo_order(
    capacity: int, script: list[tuple[object, ...]]
) -> None:
    """A model check: the queue agrees with a plain list, and nothing is lost or doubled."""

    async def scenario() -> None:
        queue = RunQueue(capacity)
        model: list[Run] = []
        accepted: list[Run] = []
        closed = False
        for op in script:
            if op[0] == "submit":
                try:
                    run = queue.submit(_req())
                except Rejected as exc:
                    assert exc.reason == (REASON_CLOSED if closed else REASON_FULL)
                    assert closed or (len(model) >= capacity and model)
                else:
                    # Between ops nothing runs: an empty queue is idle and always takes one.
                    assert not closed
                    assert len(model) < capacity or not model
                    model.append(run)
                    accepted.append(run)
            elif op[0] == "take" and model:
                taken = await queue.take()
                assert taken is model.pop(0)
                taken.mark_started()
                taken.finish(RunResult(ok=True))
                queue.release(taken)
            elif op[0] == "close":
                queue.close()
                closed = True
            elif op[0] == "cancel" and accepted:
                index = int(op[1]) % len(accepted)  # type: ignore[call-overload]
                target = accepted[index]
                cancelled = queue.cancel_waiting(target.id)
                assert (cancelled is not None) == (target in model)
                if cancelled is not None:
                    model.remove(target)
            assert queue.statistics().waiting == len(model)
        queue.close()
        queue.cancel_all()
        assert await queue.take() is None
        for run in accepted:
            assert run.result is not None

    asyncio.run(scenario())


async def test_a_listener_that_raises_is_dropped_and_the_run_still_finishes() -> None:
    queue = RunQueue(capacity=1)
    seen: list[str] = []

    def broken(_run: Run, event: Event) -> None:
        raise UnicodeEncodeError("utf-8", "\udc80", 0, 1, "surrogates not allowed")

    def good(_run: Run, event: Event) -> None:
        seen.append(event.kind)

    run = queue.submit(_req(), broken)
    run.subscribe(good)
    run.mark_started()
    assert run.finish(RunResult(ok=True)) is True
    assert seen == ["started", "done"]
    assert (await run.wait()).ok


async def test_the_watcher_hears_started_and_done_once_beside_the_listeners() -> None:
    queue = RunQueue(capacity=1)
    heard: list[tuple[str, str]] = []
    seen: list[str] = []

    def watcher(run: Run, kind: str) -> None:
        heard.append((kind, run.state))

    run = queue.submit(_req(), lambda _run, event: seen.append(event.kind), watcher)
    run.mark_started()
    assert run.finish(RunResult(ok=True)) is True
    assert run.finish(RunResult(ok=False, reason="late")) is False
    assert heard == [("started", "running"), ("done", "done")]
    assert seen == ["queued", "started", "done"]


async def test_a_watcher_that_raises_is_dropped_and_the_run_still_finishes() -> None:
    queue = RunQueue(capacity=1)
    heard: list[str] = []

    def broken(_run: Run, kind: str) -> None:
        heard.append(kind)
        raise RuntimeError("boom")

    run = queue.submit(_req(), watcher=broken)
    run.mark_started()
    assert run.finish(RunResult(ok=True)) is True
    assert heard == ["started"]  # dropped at its first failure
    assert (await run.wait()).ok


async def test_a_run_nobody_listens_to_builds_no_events(monkeypatch: pytest.MonkeyPatch) -> None:
    import daemon.core.runqueue.run as run_module  # where a run builds its events

    def no_event(*_args: object, **_kwargs: object) -> None:
        raise AssertionError("an Event was built")

    monkeypatch.setattr(run_module, "Event", no_event)
    queue = RunQueue(capacity=1)
    run = queue.submit(_req(), watcher=lambda _run, _kind: None)
    run.mark_started()
    run.emit_fields(EVENT_OUTPUT, output_lines_event(run.id, "stdout", ["x"]))
    assert run.finish(RunResult(ok=True)) is True


async def test_a_run_waited_for_before_and_after_its_result() -> None:
    queue = RunQueue(capacity=1)
    early = queue.submit(_req())
    waiter = asyncio.create_task(early.wait())
    await asyncio.sleep(0)
    assert early.finish(RunResult(ok=True, reason="first")) is True
    assert (await waiter).reason == "first"
    assert (await early.wait()).reason == "first"  # after its result: no waiting at all


async def test_a_subscriber_that_raises_never_reaches_the_submitter_or_the_executor() -> None:
    queue = RunQueue(capacity=4)
    finished: list[str] = []

    def broken(_run: Run) -> None:
        raise RuntimeError("a subscriber's bug")

    queue.on_submit(broken)
    queue.on_finish(broken)
    queue.on_finish(lambda run: finished.append(run.id))
    first = queue.submit(_req())  # submit: told, and the run is accepted all the same
    waiting = queue.submit(_req())
    assert await queue.take() is first
    first.finish(RunResult(ok=True))
    queue.release(first)  # release: the executor's call
    assert queue.cancel_waiting(waiting.id) is waiting  # cancel_waiting: a control op's call
    assert finished == [first.id, waiting.id]
    assert queue.current is None
    assert queue.statistics().finished == 2
