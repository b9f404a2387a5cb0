"""A handler awaited in the executor's own task, each of its steps in a context of its own.

A task of its own per attempt costs a task, a loop turn to start it and another to hear its
end; awaited in place, a handler that returns without waiting on anything costs neither. What
the task also gave is kept:

- every step of the handler runs in a copy of the executor's context (``contextvars``), so
  what one run sets in its context variables never reaches the next run or the executor;
- cancellation, timeouts and everything the handler waits on reach it as they would in a
  task: the futures it yields are yielded on, unchanged, to the executor's task;
- a cancel of "its" task that a handler asks for once its attempt has ended (a timer it left
  behind, a task it started) is refused, as a finished task refuses one: it never reaches a
  later run. Each attempt's context carries a mark of the attempt, and what the loop calls
  from that context (timers, callbacks, the tasks it creates) runs in a copy of it.
"""

from __future__ import annotations

import asyncio
import contextvars
import types
from collections.abc import Awaitable, Coroutine, Generator
from typing import Any, TypeVar

__all__ = ["RunsTask", "attempt_context", "awaited_in", "end_attempt"]

T = TypeVar("T")

# The attempt whose context the code runs in (None: the executor's, or nobody's).
_ATTEMPT: contextvars.ContextVar[object | None] = contextvars.ContextVar(
    "runbroker_attempt", default=None
)


class RunsTask(asyncio.Task[None]):
    """The task the executor's runs execute in, one attempt after another."""

    __slots__ = ("attempt",)

    def __init__(self, coro: Coroutine[Any, Any, None], loop: asyncio.AbstractEventLoop) -> None:
        super().__init__(coro, loop=loop)
        self.attempt: object | None = None  # the running attempt's mark

    def cancel(self, msg: Any | None = None) -> bool:
        """Refused when asked from the context of an attempt that is no longer running."""
        asked_by = _ATTEMPT.get()
        if asked_by is not None and asked_by is not self.attempt:
            return False
        return super().cancel(msg)

    def cancel_by_executor(self, msg: Any | None = None) -> bool:
        """The executor's own cancel (a cancel request, the shutdown), whatever context it is
        asked from."""
        return super().cancel(msg)


def attempt_context() -> contextvars.Context:
    """A copy of the current context for a new attempt, marked as the running attempt of the
    current task when that is a ``RunsTask``."""
    mark = object()
    task = asyncio.current_task()
    if isinstance(task, RunsTask):
        task.attempt = mark
    context = contextvars.copy_context()
    context.run(_ATTEMPT.set, mark)
    return context


def end_attempt() -> None:
    """The current task's running attempt has ended: a cancel asked from its context is
    refused from now on."""
    task = asyncio.current_task()
    if isinstance(task, RunsTask):
        task.attempt = None


@types.coroutine
def _stepped(awaitable: Awaitable[T], context: contextvars.Context) -> Generator[Any, Any, T]:
    steps = awaitable.__await__()
    value: Any = None
    error: BaseException | None = None
    while True:
        try:
            if error is None:
                waited_on = context.run(steps.send, value)
            else:
                waited_on = context.run(steps.throw, error)
        except StopIteration as stop:
            result: T = stop.value
            return result
        try:
            value = yield waited_on
            error = None
        except BaseException as exc:  # a cancellation, or the close of this generator
            value, error = None, exc


def awaited_in(awaitable: Awaitable[T], context: contextvars.Context) -> Awaitable[T]:
    """``awaitable`` to await in place, each of its steps in ``context``."""
    return _stepped(awaitable, context)
