"""A handler awaited in the executor's own task, each of its steps in a context of its own.

A task of its own per attempt costs a task, a loop turn to start it and another to hear its
end; awaited in place, a handler that returns without waiting on anything costs neither. What
the task also gave is kept: every step of the handler runs in a copy of the executor's context
(``contextvars``), so what one run sets in its context variables never reaches the next run or
the executor. Cancellation, timeouts and everything the handler waits on reach it as they would
in a task: the futures it yields are yielded on, unchanged, to the executor's task. What the
task's identity gave is not kept: a cancel of ``current_task()`` a handler leaves for later
reaches whichever run is running then (the README says so); telling a cancel left behind from
one a long-lived helper makes for the current run would need a task per run.
"""

from __future__ import annotations

import contextvars
import types
from collections.abc import Awaitable, Generator
from typing import Any, TypeVar

__all__ = ["awaited_in"]

T = TypeVar("T")


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
    """``awaitable`` to await in place, each of its steps in ``context`` (a copy of the
    current one, made for it: the attempt logs its crash in it)."""
    return _stepped(awaitable, context)
