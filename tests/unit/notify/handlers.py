"""Handlers the notifications' tests run."""

from __future__ import annotations

from typing import Any


async def fails(run: Any) -> None:
    raise RuntimeError("it failed")


async def works(run: Any) -> None:
    return None
