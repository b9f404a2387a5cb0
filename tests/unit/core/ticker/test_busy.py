"""A task's ``on_busy`` (daemon/core/ticker/busy.py): ``coalesce`` joins only a queued run of
the same request (task, args, env); a request that asks for something else is queued as a run of
its own."""

from __future__ import annotations

from collections.abc import Mapping

from daemon.core.runqueue import Event, Run, RunQueue, RunRequest
from daemon.core.ticker.busy import BusyPolicy


def _request(args: tuple[str, ...] = (), env: Mapping[str, str] | None = None) -> RunRequest:
    return RunRequest(task="c", args=args, env=dict(env or {}))


async def _busy_with_one_running() -> tuple[RunQueue, BusyPolicy]:
    """A queue whose executor holds a run of ``c`` (taken, not finished)."""
    queue = RunQueue(8)
    queue.submit(_request(("running",)))
    running = await queue.take()
    assert running is not None
    return queue, BusyPolicy(queue, lambda _run_id, _reason: "")


async def test_coalesce_joins_the_queued_run_of_the_same_request() -> None:
    queue, busy = await _busy_with_one_running()
    heard: list[str] = []

    def listener(_run: Run, event: Event) -> None:
        heard.append(event.kind)

    first = busy.submit(_request(("A",), {"K": "1"}), "coalesce")
    joined = busy.submit(_request(("A",), {"K": "1"}), "coalesce", listener)
    assert not first.joined
    assert joined.joined
    assert joined.run is first.run
    assert heard == ["queued"]
    assert queue.waiting_count() == 1


async def test_coalesce_queues_a_request_with_other_args() -> None:
    queue, busy = await _busy_with_one_running()
    with_a = busy.submit(_request(("A",)), "coalesce")
    with_b = busy.submit(_request(("B",)), "coalesce")
    assert not with_b.joined
    assert with_b.run is not with_a.run
    assert [run.request.args for run in queue.waiting()] == [("A",), ("B",)]
    again_b = busy.submit(_request(("B",)), "coalesce")  # joins B's run, not A's
    assert again_b.joined
    assert again_b.run is with_b.run


async def test_coalesce_queues_a_request_with_another_env() -> None:
    queue, busy = await _busy_with_one_running()
    busy.submit(_request(env={"K": "1"}), "coalesce")
    other = busy.submit(_request(env={"K": "2"}), "coalesce")
    bare = busy.submit(_request(), "coalesce")
    assert not other.joined
    assert not bare.joined
    assert [dict(run.request.env) for run in queue.waiting()] == [{"K": "1"}, {"K": "2"}, {}]
