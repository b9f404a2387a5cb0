"""The daemon's event loop (uvloop), run until the broker's main coroutine ends.

A ``SystemExit`` or ``KeyboardInterrupt`` a handler leaves behind (``loop.call_later(1,
sys.exit)``) would end PID 1 with no drain. Nothing of the daemon raises either, so one that
comes out of the loop is logged (``broker.stray_exit``) and the same loop runs on.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Callable, Coroutine
from typing import Any, TypeVar

from daemon.log.logs import get_logger

log = get_logger("runbroker.loop")

T = TypeVar("T")


def run_loop(main: Coroutine[Any, Any, T], new_loop: Callable[[], asyncio.AbstractEventLoop]) -> T:
    """Run ``main`` to its end on a loop of its own (``new_loop``), then close the loop."""
    loop = new_loop()
    try:
        task = loop.create_task(main)
        while True:
            try:
                return loop.run_until_complete(task)
            except (SystemExit, KeyboardInterrupt) as exc:
                if task.done() and not task.cancelled() and task.exception() is exc:
                    raise  # the main coroutine's own: not a leftover
                log.error(
                    "broker.stray_exit",
                    error_type=type(exc).__name__,
                    error=str(exc)[:200],
                    exc_info=exc,
                    action="ignored: a handler's leftover callback or task raised it",
                )
                if task.done():
                    return task.result()
    finally:
        _close(loop)


def _close(loop: asyncio.AbstractEventLoop) -> None:
    """What ``asyncio.run`` does at the end: the tasks left cancelled and awaited, async
    generators and the default executor shut down, the loop closed. A leftover's stray exit
    during it is not worth a traceback at exit."""
    try:
        with contextlib.suppress(SystemExit, KeyboardInterrupt):
            left = asyncio.all_tasks(loop)
            for task in left:
                task.cancel()
            if left:
                loop.run_until_complete(asyncio.gather(*left, return_exceptions=True))
            loop.run_until_complete(loop.shutdown_asyncgens())
            loop.run_until_complete(loop.shutdown_default_executor())
    finally:
        loop.close()
