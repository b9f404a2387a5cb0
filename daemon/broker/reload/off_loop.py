"""A reload's checking work, done in a thread of its own while the event loop goes on.

Parsing and checking a tasks file at the size cap (about 18,000 tasks) takes seconds of pure
Python; in the loop's thread nothing would answer meanwhile (no ``health``, no lease renewal).
The thread is started for the one call and never joined: the loop waits for its result, never
for the thread itself, so a stopping daemon is not held by a check nobody wants any more.

The cyclic garbage collector is off while the work runs: the work makes hundreds of thousands
of objects, and a collection they set off would hold the GIL, so the loop too, for up to a few
hundred milliseconds (measured: 365 ms for one). What the work keeps is frozen by the caller
once it is in place (``no_collections`` around both, then ``keep_out_of_collections``), as
start-up freezes what it made.
"""

from __future__ import annotations

import _thread
import asyncio
import contextlib
import gc
from collections.abc import Callable, Iterator
from typing import TypeVar

T = TypeVar("T")


@contextlib.contextmanager
def no_collections() -> Iterator[None]:
    """No cyclic garbage collection within the block: around ``off_the_loop`` and what is done
    with its result, up to ``keep_out_of_collections``."""
    collecting = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if collecting:
            gc.enable()


def keep_out_of_collections() -> None:
    """What exists now is never walked by the cyclic collector again (``gc.freeze``): a
    reload's new tasks, which would otherwise fill the young generation at once."""
    gc.freeze()


async def off_the_loop(work: Callable[[], T]) -> T:
    """``work()``'s result (or what it raised, a ``BaseException`` as a ``RuntimeError``),
    computed in a thread of its own."""
    loop = asyncio.get_running_loop()
    done: asyncio.Future[T] = loop.create_future()

    def settle(result: T | None, error: BaseException | None) -> None:
        if done.done():  # the waiter was cancelled: nobody wants the result
            return
        if error is not None:
            done.set_exception(error)
        else:
            done.set_result(result)  # type: ignore[arg-type]  # None only with an error

    def run() -> None:
        result: T | None = None
        error: BaseException | None = None
        try:
            result = work()
        except Exception as exc:  # handed to the waiter
            error = exc
        except BaseException as exc:  # never out of the loop: PID 1 would end with it
            error = RuntimeError(f"{type(exc).__name__}: {exc}")
        with contextlib.suppress(RuntimeError):  # the loop closed meanwhile: the daemon stopped
            loop.call_soon_threadsafe(settle, result, error)

    # ``_thread``, not ``threading.Thread.start``, which waits for the new thread to run: 13 to
    # 40 ms of the loop's time on a loaded machine (measured).
    _thread.start_new_thread(run, ())
    return await done
