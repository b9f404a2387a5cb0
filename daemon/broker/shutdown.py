"""The broker's ordered shutdown, held to ``RUNBROKER_SHUTDOWN_TIMEOUT`` end to end.

Pending notifications get ``NOTIFY_DRAIN_MAX_S`` at most once the runs are drained. The last
``reserve_s`` of the budget is kept for a run that would not stop, the socket and the exit, so
a handler that ignores cancellation still cannot hold the exit past the budget.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import time
from collections.abc import Awaitable, Callable

from daemon.core.executor import Executor
from daemon.core.process import ChildSupervisor
from daemon.core.runqueue import RunQueue
from daemon.exits import EXIT_FATAL, EXIT_OK
from daemon.log.logs import get_logger
from daemon.server.server import SocketServer
from daemon.wire.reasons import REASON_SHUTDOWN_CANCEL

log = get_logger("runbroker.app")

RESERVE_MAX_S = 0.5  # the end of the budget kept for a stuck run, the socket and the exit
GRACE_MARGIN_S = 0.5  # a SIGKILLed job ends, and its result is told, within this
SOCKET_CLOSE_MAX_S = 1.0  # clients still reading their last lines, at most
NOTIFY_DRAIN_MAX_S = 3.0  # pending notifications, once the runs are drained, at most


def reserve_s(budget_s: float) -> float:
    """The end of the budget kept after the drain (a quarter of a short budget)."""
    return min(RESERVE_MAX_S, budget_s / 4)


def grace_cap_s(budget_s: float) -> float:
    """The longest grace the running job gets: it is SIGKILLed in time for the drain."""
    return max(0.0, budget_s - reserve_s(budget_s) - GRACE_MARGIN_S)


async def shutdown(
    budget_s: float,
    *,
    server: SocketServer,
    queue: RunQueue,
    executor: Executor,
    children: ChildSupervisor,
    executor_task: asyncio.Task[None],
    others: list[asyncio.Task[None]],
    close_more: Callable[[], Awaitable[None]] | None = None,
    stop_producers: Callable[[], None] = lambda: None,
    notify_drain: Callable[[float], Awaitable[None]] | None = None,
) -> int:
    """Drain within ``budget_s`` and return the exit code, or end the process for a run stuck
    past the budget.

    ``others`` are awaited with the executor (the database runner). ``stop_producers`` stops the
    ticker and the runner's claims."""
    deadline = time.monotonic() + budget_s
    log.info("broker.stopping", shutdown_timeout_s=budget_s)
    # The socket keeps answering while the run drains: a closed queue tells new triggers
    # "scheduler is shutting down" (exit 75), and status/health still answer.
    server.begin_drain()
    queue.close()
    stop_producers()
    cancelled = queue.cancel_all(REASON_SHUTDOWN_CANCEL)
    running = executor.shutdown_running(grace_cap_s(budget_s))
    log.info("broker.draining", cancelled_queued=cancelled, running=running)
    drain_ends = deadline - reserve_s(budget_s)
    waiting = [executor_task, *others]
    _done, pending = await asyncio.wait(waiting, timeout=max(0.0, drain_ends - time.monotonic()))
    clean = not pending
    stuck = False
    if pending:
        log.error("broker.shutdown_timeout", pending=len(pending))
        children.kill_all()
        for task in pending:
            task.cancel()
        # Half of what is left for the cancelled tasks, the rest for the socket and the exit.
        await asyncio.wait(pending, timeout=max(0.0, (deadline - time.monotonic()) / 2))
        if any(not task.done() for task in pending):
            # A handler swallows CancelledError: the process must still end, as `docker stop`
            # expects, once the run has its one result and its client the line telling it.
            log.error("broker.stuck", pending=sum(not task.done() for task in pending))
            executor.abandon_running()
            stuck = True
    if notify_drain is not None and not stuck:  # the last runs' notices, within the budget
        await notify_drain(min(NOTIFY_DRAIN_MAX_S, _left(deadline) - reserve_s(budget_s)))
    # Clients still reading their last lines get a second at most, within the budget.
    await server.close(timeout_s=min(SOCKET_CLOSE_MAX_S, _left(deadline)))
    if stuck:
        os._exit(EXIT_FATAL)
    if close_more is not None:
        with contextlib.suppress(TimeoutError):
            async with asyncio.timeout(_left(deadline)):
                await close_more()
    children.reap_orphans()
    log.info("broker.stopped", clean=clean)
    return EXIT_OK if clean else EXIT_FATAL


def _left(deadline: float) -> float:
    """What is left of the budget, at least a few milliseconds for a last write."""
    return max(0.01, deadline - time.monotonic())
