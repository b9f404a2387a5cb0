"""A handler awaited in the executor's own task, each of its steps in a context of its own.

A task per attempt cost a task and two loop turns, so the handler is awaited in place. Each step
still runs in a copy of the executor's ``contextvars`` context, so what one run sets never
reaches the next. A cancel of ``current_task()`` a handler leaves behind reaches whichever run
is running then (the README says so).
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
