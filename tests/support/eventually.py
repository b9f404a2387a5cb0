"""Waiting for what nothing announces: the one bounded poll of every test tier.

``eventually`` (blocking) and ``eventually_async`` (inside a test's event loop, which it leaves
free between looks) call ``probe`` until ``until(value)`` holds for what it returned (by
default: until the value is true) and return that value. There is always a deadline; when it
has passed, the ``AssertionError`` names what was awaited and the last value the probe gave, so
a failure shows where the wait stood, not only that it timed out. The probe runs at least once,
even when the deadline is already past. An exception from the probe is not retried: it fails
the wait at once (a probe that expects errors catches them and returns them as its value).
"""

from __future__ import annotations

import asyncio
import inspect
import time
from collections.abc import Awaitable, Callable
from typing import Any, Final, TypeVar, overload

__all__ = ["EVERY_S", "TIMEOUT_S", "eventually", "eventually_async"]

T = TypeVar("T")

TIMEOUT_S: Final = 30.0
"""The deadline unless a wait names its own: long enough for a loaded two-core machine."""
EVERY_S: Final = 0.05
"""The pause between two looks unless a wait names its own."""


def _timed_out(what: str, timeout_s: float, last: object) -> AssertionError:
    return AssertionError(
        f"timed out after {timeout_s:g} s waiting for {what}; last seen: {last!r}"
    )


def eventually(
    probe: Callable[[], T],
    what: str,
    *,
    until: Callable[[T], bool] = bool,
    timeout_s: float = TIMEOUT_S,
    every_s: float = EVERY_S,
) -> T:
    """The first value of ``probe()`` that ``until`` accepts; ``what`` says what it waits for."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if until(value):
            return value
        if time.monotonic() > deadline:
            raise _timed_out(what, timeout_s, value)
        time.sleep(every_s)


@overload
async def eventually_async(
    probe: Callable[[], Awaitable[T]],
    what: str,
    *,
    until: Callable[[T], bool] = ...,
    timeout_s: float = ...,
    every_s: float = ...,
) -> T: ...


@overload
async def eventually_async(
    probe: Callable[[], T],
    what: str,
    *,
    until: Callable[[T], bool] = ...,
    timeout_s: float = ...,
    every_s: float = ...,
) -> T: ...


async def eventually_async(
    probe: Callable[[], Any],
    what: str,
    *,
    until: Callable[[Any], bool] = bool,
    timeout_s: float = TIMEOUT_S,
    every_s: float = EVERY_S,
) -> Any:
    """As ``eventually``, sleeping with ``asyncio.sleep``; ``probe`` may be a coroutine function
    (or return an awaitable), whose result is the value."""
    deadline = time.monotonic() + timeout_s
    while True:
        value = probe()
        if inspect.isawaitable(value):
            value = await value
        if until(value):
            return value
        if time.monotonic() > deadline:
            raise _timed_out(what, timeout_s, value)
        await asyncio.sleep(every_s)
