"""Two small asyncio waits the Postgres runner's loops share (the runner, the writer, the
dependency waiter): wait for the first of several things, or for an event with a timeout."""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable
from typing import Any


async def first_of(*waitables: Awaitable[Any], timeout_s: float | None = None) -> None:
    """Wait until any of ``waitables`` completes or the timeout passes, then cancel the rest."""
    tasks = [asyncio.ensure_future(w) for w in waitables]
    try:
        await asyncio.wait(tasks, timeout=timeout_s, return_when=asyncio.FIRST_COMPLETED)
    finally:
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


async def wait_event(event: asyncio.Event, timeout_s: float) -> bool:
    """True if ``event`` is set within ``timeout_s``."""
    if event.is_set():
        return True
    try:
        await asyncio.wait_for(event.wait(), timeout=max(0.0, timeout_s))
    except TimeoutError:
        return False
    return True
