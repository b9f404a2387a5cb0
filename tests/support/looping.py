"""A loop a test runs in the background for one block: cancelled at the block's end, which
it must not have reached on its own, and an error it raised is not lost."""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Coroutine
from contextlib import asynccontextmanager
from typing import Any


@asynccontextmanager
async def looping(loop: Coroutine[Any, Any, Any]) -> AsyncIterator[asyncio.Task[Any]]:
    """Run ``loop`` (a coroutine that runs until cancelled) as a task during the block."""
    task = asyncio.create_task(loop)
    try:
        yield task
    finally:
        ended_by_itself = task.done() and not task.cancelled()
        task.cancel()
        with contextlib.suppress(asyncio.CancelledError):
            await task  # re-raises what the loop raised
        assert not ended_by_itself, "the loop ended before the block did"
